/**
 * The simulator's ClusterReader: an informer cache fed by list + watch through a SimClient, so it
 * lags the server by the watch lag and is subject to the client's faults.
 *
 * Per kind: list, then open a watch at the same virtual instant (nothing can commit in between, so
 * no change is missed). When the server ends the watch (a dropped stream, a slow consumer) or a
 * list/watch request fails, the kind is relisted `relistDelayMs` later; the difference between the
 * old cache and the new list is delivered to subscribers as ADDED/MODIFIED/DELETED events.
 */
import { KINDS, isApiError } from "../engine/ports.ts";
import type { Clock, ClusterReader, Kind, KubeObject, ListOptions, WatchEvent } from "../engine/ports.ts";
import { matchesSelector, parseSelector } from "../engine/labels.ts";
import type { SimClient } from "./client.ts";
import { jsonCopy } from "./json.ts";
import { keyOf } from "./objects.ts";
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
  /** Cached objects by store key. */
  readonly cache: Map<string, KubeObject>;
  stream: WatchStream | undefined;
  synced: boolean;
}

export class SimInformer implements ClusterReader {
  readonly #client: SimClient;
  readonly #clock: Clock;
  readonly #options: InformerOptions;
  readonly #kinds = new Map<Kind, KindState>();
  readonly #subscribers: ((event: WatchEvent) => void)[] = [];
  #stopped = false;
  #relistCount = 0;

  constructor(client: SimClient, clock: Clock, options: InformerOptions) {
    this.#client = client;
    this.#clock = clock;
    this.#options = options;
    for (const kind of options.kinds) this.#kinds.set(kind, { cache: new Map(), stream: undefined, synced: false });
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

  get<K extends Kind>(kind: K, namespace: string | undefined, name: string): KubeObject<K> | undefined {
    const object = this.#state(kind).cache.get(keyOf({ kind, metadata: { name, namespace } }));
    return object === undefined ? undefined : (jsonCopy(object) as KubeObject<K>);
  }

  list<K extends Kind>(kind: K, options: ListOptions = {}): KubeObject<K>[] {
    const selector = parseSelector(options.labelSelector ?? "");
    return [...this.#state(kind).cache.values()]
      .filter((object) => options.namespace === undefined || object.metadata.namespace === options.namespace)
      .filter((object) => matchesSelector(selector, object.metadata.labels))
      .sort((a, b) => byNamespaceAndName(a, b))
      .map((object) => jsonCopy(object) as KubeObject<K>);
  }

  subscribe(handler: (event: WatchEvent) => void): () => void {
    if (this.#subscribers.length >= MAX_SUBSCRIBERS) throw new Error(`more than ${MAX_SUBSCRIBERS} subscribers`);
    this.#subscribers.push(handler);
    return () => {
      const index = this.#subscribers.indexOf(handler);
      if (index !== -1) this.#subscribers.splice(index, 1);
    };
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
      state.stream = this.#client.watch(kind, { ...scope, ...lag }, {
        onEvent: (event) => {
          this.#apply(state, event);
        },
        onClose: () => {
          this.#relistLater(kind);
        },
      });
      const wasSynced = state.synced;
      state.synced = true;
      this.#replace(state, listed.items);
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

  /** Replaces the cache with a fresh list, delivering the differences as events. */
  #replace(state: KindState, items: readonly KubeObject[]): void {
    const fresh = new Map(items.map((object) => [keyOf(object), object]));
    for (const [key, old] of [...state.cache]) {
      if (!fresh.has(key)) this.#apply(state, { type: "DELETED", object: old });
    }
    for (const [key, object] of fresh) {
      const old = state.cache.get(key);
      if (old === undefined) this.#apply(state, { type: "ADDED", object });
      else if (old.metadata.resourceVersion !== object.metadata.resourceVersion) this.#apply(state, { type: "MODIFIED", object });
    }
  }

  #apply(state: KindState, event: WatchEvent): void {
    const key = keyOf(event.object);
    if (event.type === "DELETED") state.cache.delete(key);
    else state.cache.set(key, event.object);
    for (const subscriber of [...this.#subscribers]) subscriber({ type: event.type, object: jsonCopy(event.object) });
  }
}

function byNamespaceAndName(a: KubeObject, b: KubeObject): number {
  const left = `${a.metadata.namespace ?? ""}\u0000${a.metadata.name}`;
  const right = `${b.metadata.namespace ?? ""}\u0000${b.metadata.name}`;
  return left < right ? -1 : left > right ? 1 : 0;
}
