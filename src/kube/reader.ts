/**
 * `KubeReader`: the engine's ClusterReader on a real API server. One `Reflector` per kind keeps
 * a local cache by list + watch (see reflector.ts for restart, relist and watchdog rules); the
 * cache delivers ADDED/MODIFIED/DELETED to subscribers in the order it applies them, and a relist
 * is delivered as the difference between the old and new cache (unchanged objects: nothing), the
 * same contract as the simulator's informer (src/sim/informer.ts). The cache keeps objects as
 * the `dropUnread` transform leaves them (default: without `metadata.managedFields`; unread.ts).
 */
import { deepFreeze } from "../core/frozen.ts";
import { Listeners } from "../engine/listeners.ts";
import type { Logger } from "../engine/logger.ts";
import { silentLogger } from "../engine/logger.ts";
import { matchesSelector, parseSelector } from "../engine/labels.ts";
import type {
  Clock,
  ClusterReader,
  Kind,
  KubeObject,
  ListOptions,
  WatchEvent,
  WatchEventType,
} from "../engine/ports.ts";
import { Reflector } from "./reflector.ts";
import { dropManagedFields } from "./unread.ts";
import type { DropUnread } from "./unread.ts";
import type { ReflectorOptions } from "./reflector.ts";
import type { KubeTransport } from "./transport.ts";
import { compareStrings } from "../core/maps.ts";

/** The kinds the controller observes (src/engine/reconciler.ts). */
export const CONTROLLER_KINDS: readonly Kind[] = ["ModelServing", "Pod", "Service", "ControllerRevision", "Lease"];

export interface KubeReaderOptions {
  readonly transport: KubeTransport;
  readonly clock: Clock;
  /** Default CONTROLLER_KINDS. */
  readonly kinds?: readonly Kind[];
  /** Watch only this namespace; all namespaces when absent. */
  readonly namespace?: string | undefined;
  /** Kinds watched in every namespace even when `namespace` is set (router Leases: a router may register anywhere). */
  readonly clusterWideKinds?: readonly Kind[];
  /** A label selector per kind: only matching objects are listed and watched (and cached). */
  readonly labelSelectors?: Partial<Record<Kind, string>>;
  readonly logger?: Logger;
  /**
   * Applied to every object before it is cached and delivered: removes what this reader's
   * consumers never read (default `dropManagedFields`; the controller's is `dropControllerUnread`).
   */
  readonly dropUnread?: DropUnread;
  /** Passed to every reflector (watchdog, backoff and its jitter source, page size). */
  readonly reflector?: Partial<
    Pick<ReflectorOptions, "watchdogMs" | "watchTimeoutSeconds" | "baseDelayMs" | "maxDelayMs" | "pageSize" | "random">
  >;
}

/** Subscribers at once; more is a leak. */
const MAX_SUBSCRIBERS = 64;

export class KubeReader implements ClusterReader {
  readonly #caches = new Map<Kind, Map<string, KubeObject>>();
  readonly #reflectors = new Map<Kind, Reflector>();
  readonly #subscribers = new Listeners<WatchEvent>(MAX_SUBSCRIBERS, "subscribers");
  readonly #dropUnread: DropUnread;

  constructor(options: KubeReaderOptions) {
    this.#dropUnread = options.dropUnread ?? dropManagedFields;
    for (const kind of options.kinds ?? CONTROLLER_KINDS) {
      const cache = new Map<string, KubeObject>();
      this.#caches.set(kind, cache);
      const sink = {
        replace: (items: KubeObject[]) => {
          this.#replace(cache, items);
        },
        apply: (type: WatchEventType, object: KubeObject) => {
          this.#apply(cache, type, object);
        },
      };
      const reflector = new Reflector({
        ...options.reflector,
        kind,
        namespace: options.clusterWideKinds?.includes(kind) === true ? undefined : options.namespace,
        labelSelector: options.labelSelectors?.[kind],
        transport: options.transport,
        clock: options.clock,
        sink,
        logger: options.logger ?? silentLogger,
      });
      this.#reflectors.set(kind, reflector);
    }
  }

  /** Starts listing and watching every kind. */
  start(): void {
    for (const reflector of this.#reflectors.values()) reflector.start();
  }

  /** Stops every watch; the cache keeps its contents and delivers no more events. */
  async stop(): Promise<void> {
    this.#subscribers.clear();
    await Promise.all([...this.#reflectors.values()].map((reflector) => reflector.stop()));
  }

  /** Lists served per kind (1 after the initial sync; relists add). */
  listCounts(): Partial<Record<Kind, number>> {
    return Object.fromEntries([...this.#reflectors].map(([kind, reflector]) => [kind, reflector.listCount()]));
  }

  get<K extends Kind>(kind: K, namespace: string | undefined, name: string): KubeObject<K> | undefined {
    const object = this.#cache(kind).get(storeKey(namespace, name));
    return object as KubeObject<K> | undefined;
  }

  list<K extends Kind>(kind: K, options: ListOptions = {}): KubeObject<K>[] {
    const selector = parseSelector(options.labelSelector ?? "");
    return [...this.#cache(kind).entries()]
      .filter(([, object]) => options.namespace === undefined || object.metadata.namespace === options.namespace)
      .filter(([, object]) => matchesSelector(selector, object.metadata.labels))
      .sort(([a], [b]) => compareStrings(a, b))
      .map(([, object]) => object as KubeObject<K>);
  }

  subscribe(handler: (event: WatchEvent) => void): () => void {
    return this.#subscribers.add(handler);
  }

  hasSynced(): boolean {
    return [...this.#reflectors.values()].every((reflector) => reflector.hasSynced());
  }

  #cache(kind: Kind): Map<string, KubeObject> {
    const cache = this.#caches.get(kind);
    if (cache === undefined) throw new Error(`this reader does not watch ${kind}`);
    return cache;
  }

  /** Replaces the cache with a fresh list, delivering the differences as events. */
  #replace(cache: Map<string, KubeObject>, items: readonly KubeObject[]): void {
    const fresh = new Map(items.map((object) => [keyOf(object), object]));
    for (const [key, old] of [...cache]) {
      if (!fresh.has(key)) this.#apply(cache, "DELETED", old);
    }
    for (const [key, object] of fresh) {
      const old = cache.get(key);
      if (old === undefined) this.#apply(cache, "ADDED", object);
      else if (old.metadata.resourceVersion !== object.metadata.resourceVersion) this.#apply(cache, "MODIFIED", object);
    }
  }

  #apply(cache: Map<string, KubeObject>, type: WatchEventType, object: KubeObject): void {
    const key = keyOf(object);
    this.#dropUnread(object);
    // Frozen once here and shared by every read (the ports' read-only contract), not copied per read.
    deepFreeze(object);
    if (type === "DELETED") cache.delete(key);
    else cache.set(key, object);
    this.#subscribers.notify({ type, object });
  }
}

/** Sort and lookup key: namespace, NUL, name (so the order is by namespace then name). */
function storeKey(namespace: string | undefined, name: string): string {
  return `${namespace ?? ""}\u0000${name}`;
}

function keyOf(object: KubeObject): string {
  return storeKey(object.metadata.namespace, object.metadata.name);
}
