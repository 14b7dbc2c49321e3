/**
 * The simulator's ClusterReader: an informer cache fed by list + watch through a SimClient, so it
 * lags the server by the watch lag and is subject to the client's faults.
 *
 * Per kind: list, then open a watch at the same virtual instant (nothing can commit in between, so
 * no change is missed). When the server ends the watch (a dropped stream, a slow consumer) or a
 * list/watch request fails, the kind is relisted `relistDelayMs` later; the difference between the
 * old cache and the new list is delivered to subscribers as ADDED/MODIFIED/DELETED events.
 *
 * **Read contract: shared, frozen objects.** `get`, `list` and subscribers receive the cached
 * objects themselves, deeply frozen (the API server's stored objects, delivered by the watch
 * without copies); a caller that mutates one gets a TypeError, so the cache cannot be changed by
 * a reader. `list` returns a fresh array each call (the caller may sort or push on it). Reads do
 * no copying and no validation: the server validated every object when it was written.
 *
 * **Indexes.** Each kind keeps its objects in (namespace, name) order, maintained on every change,
 * and an index by namespace and `tandem.dev/modelserving` label; a `list` in one namespace whose
 * selector requires only that label, to equal one value (the reconciler's `observe`), is that
 * bucket, read without looking at its objects. A `list` result is kept per options until the kind
 * next changes, and answered again as a copy. Results are the same as filtering the whole cache.
 */
import { Listeners } from "../engine/listeners.ts";
import { KINDS, isApiError } from "../engine/ports.ts";
import type { Clock, ClusterReader, Kind, KubeObject, ListOptions, WatchEvent } from "../engine/ports.ts";
import { matchesSelector, parseSelector } from "../engine/labels.ts";
import type { LabelSelector } from "../engine/labels.ts";
import { LABEL_MODEL_SERVING } from "../api/wellknown.ts";
import type { SimClient } from "./client.ts";
import { deepFreeze } from "../core/frozen.ts";
import { getOrCreate } from "../core/maps.ts";
import { keyOf } from "./objects.ts";
import { SortedStore } from "./sorted-store.ts";
import type { WatchStream } from "./watch.ts";

export interface InformerOptions {
  kinds: readonly Kind[];
  /** Watch only this namespace (cluster-scoped kinds are always watched cluster-wide). */
  namespace?: string;
  /** Watch delivery lag for this informer's streams; the server's default when absent. */
  lagMs?: number;
  /** Delay before relisting after a lost watch or a failed request. Default 1000. */
  relistDelayMs?: number;
}

/** Subscribers at once; more is a leak. */
const MAX_SUBSCRIBERS = 64;

interface KindState {
  /** Every cached object, by namespace and name, in that order. */
  readonly cache: SortedStore;
  /** Cached objects by namespace (undefined for none), then `tandem.dev/modelserving` label value. */
  readonly byOwner: Map<string | undefined, Map<string, SortedStore>>;
  /**
   * `list` results by `listKeyOf` its options, until the kind's cache next changes (then all are
   * dropped): a controller lists the same selection again and again between changes.
   */
  readonly lists: Map<string, readonly KubeObject[]>;
  stream: WatchStream | undefined;
  synced: boolean;
}

export class SimInformer implements ClusterReader {
  readonly #client: SimClient;
  readonly #clock: Clock;
  readonly #options: InformerOptions;
  readonly #kinds = new Map<Kind, KindState>();
  readonly #subscribers = new Listeners<WatchEvent>(MAX_SUBSCRIBERS, "subscribers");
  #stopped = false;
  #relistCount = 0;

  constructor(client: SimClient, clock: Clock, options: InformerOptions) {
    this.#client = client;
    this.#clock = clock;
    this.#options = options;
    for (const kind of options.kinds) {
      this.#kinds.set(kind, {
        cache: new SortedStore(),
        byOwner: new Map(),
        lists: new Map(),
        stream: undefined,
        synced: false,
      });
    }
  }

  /** Lists and watches every kind now. */
  start(): void {
    for (const kind of this.#kinds.keys()) this.#sync(kind);
  }

  /** Closes every watch; the cache keeps its last contents and no more events are delivered. */
  stop(): void {
    this.#stopped = true;
    for (const state of this.#kinds.values()) state.stream?.stop();
  }

  /** Lists served after the initial one (each caused by a lost watch or a failed request). */
  relistCount(): number {
    return this.#relistCount;
  }

  /** The cached object (shared and frozen: see the module comment), or undefined. */
  get<K extends Kind>(kind: K, namespace: string | undefined, name: string): KubeObject<K> | undefined {
    return this.#state(kind).cache.get(namespace, name) as KubeObject<K> | undefined;
  }

  /** Cached objects matching `options`, in (namespace, name) order; a fresh array of shared, frozen objects. */
  list<K extends Kind>(kind: K, options: ListOptions = {}): KubeObject<K>[] {
    const listKey = listKeyOf(options);
    const listed = this.#kinds.get(kind)?.lists.get(listKey);
    if (listed !== undefined) return [...listed] as KubeObject<K>[];
    const selector = parseSelector(options.labelSelector ?? "");
    const state = this.#state(kind);
    const owner = requiredValue(selector, LABEL_MODEL_SERVING);
    const { namespace } = options;
    const pinned = owner !== undefined && namespace !== undefined;
    // The bucket of a pinned namespace and owner holds exactly the objects with both.
    const candidates = pinned ? state.byOwner.get(namespace)?.get(owner) : state.cache;
    let result: readonly KubeObject[];
    if (pinned && selector.requirements.length === 1) {
      // Frozen, and kept by the bucket until it changes.
      result = candidates?.values() ?? NO_OBJECTS;
    } else {
      const matching: KubeObject[] = [];
      candidates?.forEach((object) => {
        const inNamespace = namespace === undefined || object.metadata.namespace === namespace;
        if (inNamespace && matchesSelector(selector, object.metadata.labels)) matching.push(object);
      });
      result = Object.freeze(matching);
    }
    state.lists.set(listKey, result);
    return [...result] as KubeObject<K>[];
  }

  subscribe(handler: (event: WatchEvent) => void): () => void {
    return this.#subscribers.add(handler);
  }

  hasSynced(): boolean {
    return [...this.#kinds.values()].every((state) => state.synced);
  }

  #state(kind: Kind): KindState {
    const state = this.#kinds.get(kind);
    if (state === undefined) throw new Error(`this informer does not watch ${kind}`);
    return state;
  }

  #sync(kind: Kind): void {
    if (this.#stopped) return;
    const state = this.#state(kind);
    const namespace = KINDS[kind].namespaced ? this.#options.namespace : undefined;
    const scope = namespace === undefined ? {} : { namespace };
    const lag = this.#options.lagMs === undefined ? {} : { lagMs: this.#options.lagMs };
    try {
      const listed = this.#client.list(kind, scope);
      state.stream = this.#client.watch(
        kind,
        { ...scope, ...lag },
        {
          onEvent: (event) => {
            this.#apply(state, event);
          },
          onClose: () => {
            this.#relistLater(kind);
          },
        },
      );
      const wasSynced = state.synced;
      state.synced = true;
      this.#replace(
        state,
        listed.items.map((object) => deepFreeze(object)),
      );
      if (wasSynced) this.#relistCount++;
    } catch (error) {
      if (!isApiError(error)) throw error;
      state.stream?.stop();
      this.#relistLater(kind);
    }
  }

  #relistLater(kind: Kind): void {
    this.#clock.setTimer(this.#options.relistDelayMs ?? 1_000, () => {
      this.#sync(kind);
    });
  }

  /** Replaces the cache with a fresh list (frozen objects), delivering the differences as events. */
  #replace(state: KindState, items: readonly KubeObject[]): void {
    const fresh = new Map(items.map((object) => [keyOf(object), object]));
    for (const old of state.cache.values()) {
      if (!fresh.has(keyOf(old))) this.#apply(state, Object.freeze({ type: "DELETED", object: old }));
    }
    for (const object of fresh.values()) {
      const old = state.cache.get(object.metadata.namespace, object.metadata.name);
      if (old === undefined) this.#apply(state, Object.freeze({ type: "ADDED", object }));
      else if (old.metadata.resourceVersion !== object.metadata.resourceVersion)
        this.#apply(state, Object.freeze({ type: "MODIFIED", object }));
    }
  }

  /**
   * Applies one change to the cache and its index, then hands it to every subscriber as it is:
   * `event` and its object are frozen (a watch's events are; a relist's are frozen where made).
   */
  #apply(state: KindState, event: WatchEvent): void {
    // Most changes come with no list kept since the last one: nothing to drop.
    if (state.lists.size > 0) state.lists.clear();
    const { namespace, name } = event.object.metadata;
    const removed = event.type === "DELETED";
    const old = removed ? state.cache.delete(namespace, name) : state.cache.set(event.object);
    const oldOwner = ownerOf(old);
    const newOwner = removed ? undefined : ownerOf(event.object);
    if (oldOwner !== undefined && oldOwner !== newOwner) {
      const buckets = state.byOwner.get(namespace);
      const bucket = buckets?.get(oldOwner);
      bucket?.delete(namespace, name);
      if (bucket?.size === 0) buckets?.delete(oldOwner);
    }
    if (newOwner !== undefined) bucketOf(state.byOwner, namespace, newOwner).set(event.object);
    this.#subscribers.notify(event);
  }
}

/** The key of a `list` call's options in `KindState.lists`. */
function listKeyOf(options: ListOptions): string {
  return JSON.stringify([options.namespace ?? null, options.labelSelector ?? ""]);
}

function ownerOf(object: KubeObject | undefined): string | undefined {
  return object?.metadata.labels?.[LABEL_MODEL_SERVING];
}

function bucketOf(byOwner: KindState["byOwner"], namespace: string | undefined, owner: string): SortedStore {
  const buckets = getOrCreate(byOwner, namespace, () => new Map<string, SortedStore>());
  return getOrCreate(buckets, owner, () => new SortedStore());
}

/** The listing of an owner without a bucket: one frozen, empty array. */
const NO_OBJECTS: readonly KubeObject[] = Object.freeze([]);

/**
 * The one value `selector` requires label `key` to have (`key=v` or `key in (v)`), or undefined
 * when it does not pin the label to a single value.
 */
function requiredValue(selector: LabelSelector, key: string): string | undefined {
  for (const requirement of selector.requirements) {
    const pinned = (requirement.operator === "=" || requirement.operator === "in") && requirement.values.length === 1;
    if (requirement.key === key && pinned) return requirement.values[0];
  }
  return undefined;
}
