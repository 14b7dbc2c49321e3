/**
 * Expectations: the writes of each ModelServing key that succeeded but that the cache may not
 * show yet. The reconciler does not plan a key while it has any, so a lagging cache never makes
 * the plan repeat a write it already made (create a pod twice, delete a second pod for a budget
 * the first deletion already used, drain a pod again from a new start time).
 *
 * An expectation names one object and says what the cache must show for it: the object created
 * (by UID), gone or terminating, or carrying the patched fields. It is met when the cache shows
 * that, checked both on every watch event for the object (`observe`, which catches states the
 * cache moves through quickly) and against the cache itself when the key is next reconciled
 * (`pending`, which catches events delivered before the write's response). An object that no
 * longer is the one written (gone, another UID) meets every expectation but "created": there is
 * nothing left to wait for.
 *
 * An expectation not met within `timeoutMs` of clock time (default 30 s) is dropped with a
 * warning and the key is planned anyway: a write can be lost for good (a Timeout that was not
 * applied, a relist that skipped the object's short life), and a stuck key is worse than a plan
 * on a stale cache, whose own writes are still guarded by UID and resourceVersion preconditions.
 *
 * In memory only: a restarted controller starts with none, which is safe because pod names are
 * deterministic (a repeated create meets AlreadyExists) and deletes carry UID preconditions.
 */
import { getOrCreate } from "../core/maps.ts";
import type { Logger } from "./logger.ts";
import type { Clock, ClusterReader, KubeObject, ObjectRef, WatchEvent } from "./ports.ts";

export interface Expectation {
  readonly ref: ObjectRef;
  /** For logs: what the cache should show (`created uid …`, `deleted uid …`). */
  readonly description: string;
  /** True when `object` (the cached state of `ref`; undefined when absent) shows the write. */
  isMet(object: KubeObject | undefined): boolean;
  /** How long to wait for it, when not the Expectations' `timeoutMs` (a write that may not have been applied). */
  readonly timeoutMs?: number;
}

/** Met once the cache shows the object with `uid` (or showed it: a DELETED event of it counts). */
export function expectCreated(ref: ObjectRef, uid: string): Expectation {
  return { ref, description: `created with uid ${uid}`, isMet: (object) => object?.metadata.uid === uid };
}

/** After AlreadyExists: met once the cache shows any object under the name. */
export function expectExists(ref: ObjectRef): Expectation {
  return { ref, description: "exists", isMet: (object) => object !== undefined };
}

/** Met once the cache no longer shows the object with `uid` as live: gone, replaced or terminating. */
export function expectDeleted(ref: ObjectRef, uid: string | undefined): Expectation {
  return {
    ref,
    description: `deleted${uid === undefined ? "" : ` uid ${uid}`}`,
    isMet: (object) =>
      object === undefined || notTheOne(object, uid) || object.metadata.deletionTimestamp !== undefined,
  };
}

/**
 * Met once the cache shows the object with `uid` satisfying `shows` (the patched fields), or no
 * longer shows that object at all.
 */
export function expectPatched(
  ref: ObjectRef,
  uid: string | undefined,
  description: string,
  shows: (object: KubeObject) => boolean,
): Expectation {
  return { ref, description, isMet: (object) => object === undefined || notTheOne(object, uid) || shows(object) };
}

function notTheOne(object: KubeObject, uid: string | undefined): boolean {
  return uid !== undefined && object.metadata.uid !== uid;
}

export interface ExpectationsOptions {
  /** Clock time after which an unmet expectation is dropped. Default 30 000 ms. */
  timeoutMs?: number;
  /** Expectations held per key; beyond it the oldest is dropped (with a warning). Default 4 096. */
  maxPerKey?: number;
  logger: Logger;
}

interface Entry {
  readonly expectation: Expectation;
  readonly deadlineMs: number;
}

/** One key's expectations: in the order they were recorded, and by the name of the object each names. */
interface KeyEntries {
  readonly inOrder: Set<Entry>;
  /**
   * The same entries by their ref's name (in the order they were recorded): an event is matched
   * against those of its object only (`refersTo`). By the object's own name string, not a joined
   * kind/namespace/name key: no key string is built (and hashed) per event.
   */
  readonly byName: Map<string, Set<Entry>>;
}

/** Whether a key may be planned; when not, how long until the next expectation times out. */
export type ExpectationCheck =
  { readonly satisfied: true } | { readonly satisfied: false; readonly recheckAfterMs: number };

export class Expectations {
  readonly #clock: Clock;
  readonly #timeoutMs: number;
  readonly #maxPerKey: number;
  readonly #logger: Logger;
  readonly #byKey = new Map<string, KeyEntries>();

  constructor(clock: Clock, options: ExpectationsOptions) {
    this.#clock = clock;
    this.#timeoutMs = options.timeoutMs ?? 30_000;
    this.#maxPerKey = options.maxPerKey ?? 4_096;
    this.#logger = options.logger;
  }

  /** Records that `key` waits for the cache to show `expectation`. */
  expect(key: string, expectation: Expectation): void {
    const entries = getOrCreate(this.#byKey, key, (): KeyEntries => ({ inOrder: new Set(), byName: new Map() }));
    if (entries.inOrder.size >= this.#maxPerKey) {
      const dropped = entries.inOrder.values().next().value;
      if (dropped !== undefined) {
        removeEntry(entries, dropped);
        this.#warn(key, dropped.expectation, "too many expectations; dropped the oldest");
      }
    }
    const entry: Entry = { expectation, deadlineMs: this.#clock.nowMs() + (expectation.timeoutMs ?? this.#timeoutMs) };
    entries.inOrder.add(entry);
    getOrCreate(entries.byName, expectation.ref.name, () => new Set<Entry>()).add(entry);
  }

  /**
   * Meets `key`'s expectations that `event` shows. A DELETED event shows both the object's last
   * state (so a create is met even if the cache never holds it again) and its absence.
   */
  observe(key: string, event: WatchEvent): void {
    const entries = this.#byKey.get(key);
    if (entries === undefined) return;
    const { object } = event;
    const ofName = entries.byName.get(object.metadata.name);
    if (ofName === undefined) return;
    for (const entry of ofName) {
      const { expectation } = entry;
      if (!refersTo(expectation.ref, object)) continue;
      if (expectation.isMet(object) || (event.type === "DELETED" && expectation.isMet(undefined)))
        removeEntry(entries, entry);
    }
    if (entries.inOrder.size === 0) this.#byKey.delete(key);
  }

  /**
   * Drops `key`'s expectations that `reader` now shows or that timed out (with a warning), and
   * says whether any is left.
   */
  pending(key: string, reader: ClusterReader): ExpectationCheck {
    const entries = this.#byKey.get(key);
    if (entries === undefined) return { satisfied: true };
    const nowMs = this.#clock.nowMs();
    let nextDeadlineMs = Infinity;
    for (const entry of entries.inOrder) {
      const { ref } = entry.expectation;
      if (entry.expectation.isMet(reader.get(ref.kind, ref.namespace, ref.name))) {
        removeEntry(entries, entry);
      } else if (entry.deadlineMs > nowMs) {
        nextDeadlineMs = Math.min(nextDeadlineMs, entry.deadlineMs);
      } else {
        this.#warn(key, entry.expectation, "the cache did not show a write in time; planning anyway");
        removeEntry(entries, entry);
      }
    }
    if (entries.inOrder.size > 0) return { satisfied: false, recheckAfterMs: nextDeadlineMs - nowMs };
    this.#byKey.delete(key);
    return { satisfied: true };
  }

  /** Unmet expectations of `key`. */
  count(key: string): number {
    return this.#byKey.get(key)?.inOrder.size ?? 0;
  }

  /** Drops every expectation of `key` (its ModelServing is gone). */
  forget(key: string): void {
    this.#byKey.delete(key);
  }

  #warn(key: string, expectation: Expectation, message: string): void {
    const { ref } = expectation;
    this.#logger.warn({ key, kind: ref.kind, name: ref.name, expected: expectation.description }, message);
  }
}

/** Removes `entry` from both of `entries`' views. */
function removeEntry(entries: KeyEntries, entry: Entry): void {
  entries.inOrder.delete(entry);
  const { name } = entry.expectation.ref;
  const ofName = entries.byName.get(name);
  ofName?.delete(entry);
  if (ofName?.size === 0) entries.byName.delete(name);
}

/** True when `ref` names `object`: the same kind, namespace (absent, as for a cluster-scoped object, counts as "") and name. */
function refersTo(ref: ObjectRef, object: KubeObject): boolean {
  return (
    ref.name === object.metadata.name &&
    ref.kind === object.kind &&
    (ref.namespace ?? "") === (object.metadata.namespace ?? "")
  );
}
