/**
 * `EventRecorder`: the Recorder port as core/v1 Events, written through a ClusterWriter — the same
 * code on a real API server (KubeWriter) and in the simulator (SimClient). Repeats are folded the
 * way client-go's EventCorrelator folds them (docs/design/events.md):
 *
 * - **dedup**: the same (source, involved object, type, reason, message) within `windowMs` of its
 *   last occurrence increments `count` and moves `lastTimestamp` on the Event already written (a
 *   merge patch), instead of creating another;
 * - **aggregation**: of the different messages of one (source, involved object, type, reason)
 *   within `windowMs`, the first `maxSimilar - 1` get an Event each; the others are folded into one
 *   Event whose message is `(combined from similar events): <the latest message>`.
 *
 * Memory is bounded: both caches are LRUs of `maxKeys` entries. Fire-and-forget: `record` returns
 * at once; writes go out one at a time in order (a repeat's patch after the create it patches), at
 * most `maxQueued` waiting, beyond which records are dropped; a write that fails is dropped and
 * counted, and its cache entry forgotten, so the next repeat creates a fresh Event.
 */
import { rfc3339 } from "../core/drain.ts";
import type { Clock, ClusterWriter, EventRecord, KubeObject, Recorder } from "./ports.ts";
import { isApiError, KINDS } from "./ports.ts";

export interface EventRecorderOptions {
  readonly writer: Pick<ClusterWriter, "create" | "patch">;
  readonly clock: Clock;
  /** `source.component` and `reportingComponent` of every Event. */
  readonly component: string;
  /** `source.host` and `reportingInstance`: this process (its pod name); none when absent. */
  readonly instance?: string;
  /** How long a repeat or a similar event joins the earlier one. Default 600 000 (client-go's 10 min). */
  readonly windowMs?: number;
  /** Different messages per (object, type, reason) before they are combined. Default 10 (client-go's). */
  readonly maxSimilar?: number;
  /** Entries per cache. Default 4 096 (client-go's). */
  readonly maxKeys?: number;
  /** Writes waiting to be sent before records are dropped. Default 1 000 (client-go's queue). */
  readonly maxQueued?: number;
}

export const COMBINED_PREFIX = "(combined from similar events): ";

/** An Event written, as the dedup cache remembers it. */
interface Written {
  readonly namespace: string;
  readonly name: string;
  count: number;
  lastMs: number;
}

/** The different messages seen for one (object, type, reason), for aggregation. */
interface Similar {
  readonly messages: Set<string>;
  lastMs: number;
}

export class EventRecorder implements Recorder {
  readonly #options: EventRecorderOptions;
  readonly #written = new Map<string, Written>();
  readonly #similar = new Map<string, Similar>();
  #tail: Promise<void> = Promise.resolve();
  #queued = 0;
  #sequence = 0;
  #droppedCount = 0;

  constructor(options: EventRecorderOptions) {
    this.#options = options;
  }

  record(event: EventRecord): void {
    if (this.#queued >= (this.#options.maxQueued ?? 1_000)) {
      this.#droppedCount++;
      return;
    }
    const nowMs = this.#options.clock.nowMs();
    const { key, message } = this.#aggregate(event, nowMs);
    const previous = this.#written.get(key);
    if (previous !== undefined && nowMs - previous.lastMs <= this.#windowMs()) {
      previous.count++;
      previous.lastMs = nowMs;
      remember(this.#written, key, previous, this.#maxKeys());
      const patch = { count: previous.count, lastTimestamp: rfc3339(nowMs), message };
      this.#send(key, () =>
        this.#options.writer.patch({ kind: "Event", namespace: previous.namespace, name: previous.name }, patch),
      );
      return;
    }
    const object = this.#newEvent(event, message, nowMs);
    const { namespace = "default", name } = object.metadata;
    remember(this.#written, key, { namespace, name, count: 1, lastMs: nowMs }, this.#maxKeys());
    this.#send(key, () => this.#options.writer.create(object));
  }

  /** Records dropped: not written (a failed write) or not queued (too many waiting). */
  droppedCount(): number {
    return this.#droppedCount;
  }

  /** Resolves once every write queued so far has been answered. */
  flushed(): Promise<void> {
    return this.#tail;
  }

  /** The dedup key of `event` and the message to write, after aggregation of similar messages. */
  #aggregate(event: EventRecord, nowMs: number): { key: string; message: string } {
    const { regarding } = event;
    const similarKey = JSON.stringify([
      this.#options.component,
      this.#options.instance ?? "",
      regarding.kind,
      regarding.namespace ?? "",
      regarding.name,
      regarding.uid ?? "",
      event.type,
      event.reason,
    ]);
    let similar = this.#similar.get(similarKey);
    if (similar === undefined || nowMs - similar.lastMs > this.#windowMs())
      similar = { messages: new Set(), lastMs: nowMs };
    similar.lastMs = nowMs;
    remember(this.#similar, similarKey, similar, this.#maxKeys());
    // As client-go: the first maxSimilar - 1 messages get an Event each; the others share one.
    if (!similar.messages.has(event.message) && similar.messages.size < (this.#options.maxSimilar ?? 10) - 1)
      similar.messages.add(event.message);
    if (similar.messages.has(event.message))
      return { key: JSON.stringify([similarKey, event.message]), message: event.message };
    return { key: similarKey, message: `${COMBINED_PREFIX}${event.message}` };
  }

  #newEvent(event: EventRecord, message: string, nowMs: number): KubeObject<"Event"> {
    const { regarding } = event;
    const { component, instance } = this.#options;
    const timestamp = rfc3339(nowMs);
    // Unique per recorder and millisecond (the clock keeps names apart across restarts); of one
    // width, so one object's Events sort by name in the order they were made.
    const name = `${regarding.name}.${nowMs.toString(16)}${(this.#sequence++ % 0x10000).toString(16).padStart(4, "0")}`;
    return {
      apiVersion: "v1",
      kind: "Event",
      metadata: { name, namespace: regarding.namespace ?? "default" },
      involvedObject: { apiVersion: KINDS[regarding.kind].apiVersion, ...regarding },
      type: event.type,
      reason: event.reason,
      // The API server refuses longer messages.
      message: message.slice(0, 1_024),
      source: { component, ...(instance === undefined ? {} : { host: instance }) },
      reportingComponent: component,
      ...(instance === undefined ? {} : { reportingInstance: instance }),
      firstTimestamp: timestamp,
      lastTimestamp: timestamp,
      count: 1,
    };
  }

  /** Queues a write after the ones before it; a failure drops the record and forgets its Event. */
  #send(key: string, write: () => Promise<KubeObject>): void {
    this.#queued++;
    this.#tail = this.#tail.then(async () => {
      try {
        await write();
      } catch (error) {
        // Anything but an ApiError is a programmer error (ports.ts): surfaced, not dropped.
        if (!isApiError(error))
          queueMicrotask(() => {
            throw error;
          });
        this.#droppedCount++;
        this.#written.delete(key);
      } finally {
        this.#queued--;
      }
    });
  }

  #windowMs(): number {
    return this.#options.windowMs ?? 600_000;
  }

  #maxKeys(): number {
    return this.#options.maxKeys ?? 4_096;
  }
}

/** Sets `key` as the most recently used entry of `cache`, forgetting the least recently used beyond `maxKeys`. */
function remember<V>(cache: Map<string, V>, key: string, value: V, maxKeys: number): void {
  cache.delete(key);
  cache.set(key, value);
  if (cache.size > maxKeys) {
    const oldest = cache.keys().next();
    if (oldest.done !== true) cache.delete(oldest.value);
  }
}
