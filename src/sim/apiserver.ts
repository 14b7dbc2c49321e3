/**
 * An in-memory Kubernetes API server with the semantics a controller relies on:
 *
 * - objects keyed by kind, namespace and name; namespaced kinds need an existing namespace;
 * - server-assigned `uid`, `creationTimestamp` (virtual clock, RFC 3339) and a global,
 *   monotonically increasing `resourceVersion` (one counter for all kinds, as etcd's revision);
 * - optimistic concurrency: update needs the current resourceVersion, else Conflict;
 * - `generation` bumped on spec changes only, for kinds that track it (ModelServing);
 * - the status subresource: status writes change only status, other writes never change status;
 * - JSON merge patch (RFC 7386); a write that changes nothing bumps nothing and emits no event;
 * - graceful deletion: `deletionTimestamp` + `deletionGracePeriodSeconds`, finalizers that hold an
 *   object until removed, UID and resourceVersion preconditions on delete;
 * - background garbage collection through ownerReferences (`gc.ts`);
 * - watch streams delivered through the virtual clock with a lag (`watch.ts`);
 * - fault injection and per-client write metrics on requests made through `client(name)`.
 *
 * The verbs on this class are the server's own, trusted path: no faults, no metrics. Components of
 * the simulation (controller, kubelet, scheduler) talk to it through a `SimClient`.
 *
 * **Copy on write.** What a client sends is copied (and checked as JSON) on the way in; stored
 * objects are deeply frozen and never edited. A write builds a new top level and metadata and
 * shares every unchanged part with the version it replaces, so an unchanged spec costs nothing to
 * keep, compare or freeze. Writes answer with the stored object itself (read-only, as readers'
 * objects are); `get` and `list` answer with copies.
 */
import { ApiError, KINDS, isKind } from "../engine/ports.ts";
import type { DeleteOptions, JsonObject, JsonValue, Kind, KubeObject, ObjectRef } from "../engine/ports.ts";
import { matchesSelector, parseSelector } from "../engine/labels.ts";
import type { VirtualClock } from "./clock.ts";
import { FaultInjector, injectedError, isWriteVerb } from "./faults.ts";
import type { Request, WriteVerb } from "./faults.ts";
import { GarbageCollector } from "./gc.ts";
import { isJsonObject, jsonCopy, jsonEqual, mergePatch, shareEqualParts, trustedCopy } from "./json.ts";
import { STRATEGIES } from "./kinds.ts";
import { conditionsOf, mergeConditions } from "./pod-status.ts";
import { deepFreeze } from "../core/frozen.ts";
import { SERVER_FIELDS_IN_ORDER, admissionProblem, isDeleting, keyOf, refOf, withoutServerFields } from "./objects.ts";
import type { Prng } from "./prng.ts";
import { SimClient } from "./client.ts";
import { SortedStore } from "./sorted-store.ts";
import { WatchHub } from "./watch.ts";
import type { WatchHandlers, WatchOptions, WatchStream } from "./watch.ts";
import { compareStrings, getOrCreate } from "../core/maps.ts";

export interface ApiServerOptions {
  /** Default delay between a commit and its delivery on a watch stream. Default 0. */
  watchLagMs?: number;
  /** Delay between an owner's disappearance and the collection of its dependents. Default 1000. */
  gcDelayMs?: number;
  /**
   * Who finishes a pod's graceful deletion. "gracePeriod" (default): the server, when the grace
   * period ends. "external": a simulated kubelet, by deleting the pod again with
   * `gracePeriodSeconds: 0` once its containers have stopped, as the real kubelet does.
   */
  podTermination?: "gracePeriod" | "external";
  /** Namespaces that exist from the start. Default ["default", "kube-system"]. */
  namespaces?: readonly string[];
  /** Objects stored at once; more is refused with ServerError. Default 100 000. */
  maxObjects?: number;
  /** Undelivered events per watch stream before the server closes it. Default 10 000. */
  maxWatchBacklog?: number;
  /** Open watch streams at once. Default 1 000. */
  maxWatchStreams?: number;
}

export interface ListResult {
  items: KubeObject[];
  /** The server's resourceVersion when the list was served. */
  resourceVersion: string;
}

/**
 * Told of every commit of one kind, synchronously, as it is made: `before` is the stored object the
 * commit replaces or removes (undefined for a creation), `after` the one it stores (undefined for
 * a removal). Both are frozen stored objects.
 */
export type CommitListener = (before: KubeObject | undefined, after: KubeObject | undefined) => void;

/** Write requests counted for one (client, kind, verb), failed ones included. */
export interface WriteCount {
  client: string;
  kind: Kind;
  verb: WriteVerb;
  count: number;
}

/** The listing of a kind with no stored object: one frozen array, like a store's until it changes. */
const NO_OBJECTS: readonly KubeObject[] = Object.freeze([]);

export class ApiServer {
  readonly clock: VirtualClock;
  readonly faults: FaultInjector;
  readonly #watches: WatchHub;
  readonly #gc: GarbageCollector;
  readonly #uidRng: Prng;
  /** Stored objects per kind, in (namespace, name) order: lookups, and `stored(kind)` without a sort. */
  readonly #byKind = new Map<Kind, SortedStore>();
  /**
   * Every stored object's key (`keyOf`) → its kind, namespace and name, in the order the objects
   * were created: the order of `stored()` among objects of the same namespace and name. The
   * current version is its kind's store's.
   */
  readonly #creationOrder = new Map<string, ObjectRef>();
  /** Write counts by client, kind and verb: nested maps, so counting a write builds no key. */
  readonly #writeCounts = new Map<string, Map<Kind, Map<WriteVerb, WriteCount>>>();
  readonly #commitListeners = new Map<Kind, CommitListener[]>();
  readonly #podTermination: "gracePeriod" | "external";
  readonly #maxObjects: number;
  #resourceVersion = 0;
  /** `#resourceVersion` as text, kept with it: read far more often than it changes. */
  #resourceVersionText = "0";
  #requestCount = 0;

  /** `rng` is the simulator's stream for the API server; uids and fault streams fork from it. */
  constructor(clock: VirtualClock, rng: Prng, options: ApiServerOptions = {}) {
    this.clock = clock;
    this.faults = new FaultInjector(rng.fork("faults"));
    this.#uidRng = rng.fork("uid");
    this.#podTermination = options.podTermination ?? "gracePeriod";
    this.#maxObjects = options.maxObjects ?? 100_000;
    this.#watches = new WatchHub(clock, {
      defaultLagMs: options.watchLagMs ?? 0,
      maxBacklog: options.maxWatchBacklog ?? 10_000,
      maxStreams: options.maxWatchStreams ?? 1_000,
    });
    this.#gc = new GarbageCollector(this, clock, options.gcDelayMs ?? 1_000);
    for (const name of options.namespaces ?? ["default", "kube-system"]) {
      this.create({ apiVersion: "v1", kind: "Namespace", metadata: { name } });
    }
  }

  /** A client named `name`: its requests are counted under that name and matched by fault rules. */
  client(name: string): SimClient {
    return new SimClient(this, name);
  }

  /** The current resourceVersion (the last commit's). */
  resourceVersion(): string {
    return this.#resourceVersionText;
  }

  // -------------------------------------------------------------------------------------------
  // Reads

  /** The object named by `ref`. Throws NotFound. */
  get(ref: ObjectRef): KubeObject {
    return trustedCopy(this.#mustGet(ref));
  }

  /**
   * The stored object named by `ref` itself (deeply frozen, never copied), or undefined: the
   * simulator's own components' read path. Unlike `get`, it neither copies nor throws NotFound.
   */
  peek(ref: ObjectRef): KubeObject | undefined {
    if (!isKind(ref.kind)) return undefined;
    const namespace = KINDS[ref.kind].namespaced ? ref.namespace : undefined;
    return this.#lookup(ref.kind, namespace, ref.name);
  }

  /** Objects of `kind` matching the options, sorted by namespace then name. */
  list(kind: Kind, options: { namespace?: string; labelSelector?: string } = {}): ListResult {
    const selector = parseSelector(options.labelSelector ?? "");
    const items = this.#stored(kind)
      .filter((object) => options.namespace === undefined || object.metadata.namespace === options.namespace)
      .filter((object) => matchesSelector(selector, object.metadata.labels))
      .map((object) => trustedCopy(object));
    return { items, resourceVersion: this.resourceVersion() };
  }

  /** Opens a watch stream of changes committed from now on (see `watch.ts`). */
  watch(kind: Kind, options: WatchOptions, handlers: WatchHandlers): WatchStream {
    return this.#watches.open(kind, options, handlers);
  }

  // -------------------------------------------------------------------------------------------
  // Writes

  /** Creates `object`. Throws AlreadyExists, NotFound (namespace), Invalid. */
  create(object: KubeObject): KubeObject {
    // A frozen copy, given a new top level and metadata: the only parts a creation changes.
    const sent = withoutServerFields(checkedShape(object, true));
    const kind = checkedKind(sent);
    this.#checkNamespace(kind, sent);
    const problem = admissionProblem(sent);
    if (problem !== undefined) throw new ApiError("Invalid", `${kind} ${sent.metadata.name}: ${problem}`);
    if (this.#lookup(kind, sent.metadata.namespace, sent.metadata.name) !== undefined)
      throw new ApiError("AlreadyExists", `${kind} "${sent.metadata.name}" already exists`);
    if (this.#creationOrder.size >= this.#maxObjects)
      throw new ApiError("ServerError", `more than ${this.#maxObjects} objects stored`);
    const strategy = STRATEGIES[kind];
    const status = strategy.statusSubresource ? strategy.initialStatus(sent.status) : sent.status;
    const created: KubeObject = {
      ...sent,
      metadata: {
        ...sent.metadata,
        uid: this.#newUid(),
        creationTimestamp: this.clock.nowRfc3339(),
        ...(strategy.hasGeneration ? { generation: 1 } : {}),
      },
    };
    if (status === undefined) delete created.status;
    else created.status = status;
    const stored = this.#commit("ADDED", created);
    this.#gc.noteCreated(stored);
    return stored;
  }

  /**
   * Replaces the object (not its status, for kinds with a status subresource). Throws Conflict
   * when `metadata.resourceVersion` is stale, Invalid when it is missing or a field is immutable.
   */
  update(object: KubeObject): KubeObject {
    const sent = checkedShape(object);
    const existing = this.#mustGet(refOf(sent));
    if (sent.metadata.resourceVersion === undefined) {
      throw new ApiError(
        "Invalid",
        `${sent.kind} "${sent.metadata.name}": metadata.resourceVersion must be specified for an update`,
      );
    }
    checkPreconditions(existing, sent.metadata.uid, sent.metadata.resourceVersion);
    return this.#replace(existing, this.#mainUpdate(existing, sent));
  }

  /** Applies a JSON merge patch to the object (status excluded where it is a subresource). */
  patch(ref: ObjectRef, patch: JsonObject): KubeObject {
    return this.#patch(ref, patch, "main");
  }

  /**
   * Applies a JSON merge patch to the status subresource only. NotFound for a kind without one,
   * as the Kubernetes API has no such path.
   */
  patchStatus(ref: ObjectRef, patch: JsonObject): KubeObject {
    if (isKind(ref.kind) && !KINDS[ref.kind].statusSubresource)
      throw new ApiError("NotFound", `${ref.kind} has no status subresource`);
    return this.#patch(ref, patch, "status");
  }

  /**
   * Binds a pod to a node, as the pods/binding subresource does: `spec.nodeName` and
   * `PodScheduled=True` (replacing the pod's PodScheduled condition in place) in one commit, so no
   * reader ever sees a bound pod not marked scheduled. NotFound; Invalid for an empty node name;
   * Conflict when `uid` (if given) is not the stored pod's, or the pod is being deleted or already
   * bound.
   */
  bind(ref: ObjectRef, nodeName: string, uid?: string): KubeObject {
    if (ref.kind !== "Pod") throw new ApiError("NotFound", `${ref.kind} has no binding subresource`);
    if (nodeName === "") throw new ApiError("Invalid", "binding: target node name must not be empty");
    const existing = this.#mustGet(ref);
    checkPreconditions(existing, uid, undefined);
    const what = `Pod "${existing.metadata.name}"`;
    if (isDeleting(existing))
      throw new ApiError("Conflict", `${what} is being deleted and cannot be assigned to a node`);
    const boundTo = existing.spec?.["nodeName"];
    if (boundTo !== undefined)
      throw new ApiError("Conflict", `${what} is already assigned to node ${JSON.stringify(boundTo)}`);
    const conditions = mergeConditions(
      conditionsOf(existing),
      [{ type: "PodScheduled", status: "True" }],
      this.clock.nowRfc3339(),
    );
    const next = withStatus(existing, { ...existing.status, conditions });
    next.spec = { ...existing.spec, nodeName };
    return this.#replace(existing, next);
  }

  /**
   * Deletes gracefully (see ClusterWriter.delete). Throws NotFound, or Conflict on a failed
   * precondition. Namespace deletion is not modelled and is refused as Invalid.
   */
  delete(ref: ObjectRef, options: DeleteOptions = {}): void {
    const existing = this.#mustGet(ref);
    checkPreconditions(existing, options.uid, options.resourceVersion);
    const requestedSeconds = options.gracePeriodSeconds;
    if (requestedSeconds !== undefined && (!Number.isSafeInteger(requestedSeconds) || requestedSeconds < 0)) {
      throw new ApiError("Invalid", `gracePeriodSeconds must be a non-negative integer, got ${requestedSeconds}`);
    }
    if (existing.kind === "Namespace")
      throw new ApiError("Invalid", "namespace deletion is not modelled by the simulator");
    if (isDeleting(existing)) {
      this.#shortenGracePeriod(existing, requestedSeconds);
      return;
    }
    const gracePeriodSeconds = STRATEGIES[existing.kind].gracePeriodSeconds(existing, requestedSeconds);
    if (gracePeriodSeconds === 0 && (existing.metadata.finalizers ?? []).length === 0) {
      this.#remove(existing);
      return;
    }
    this.#markDeleting(existing, gracePeriodSeconds);
  }

  // -------------------------------------------------------------------------------------------
  // Requests from clients: faults and metrics

  /**
   * Serves one client request: counts it if it is a write, consults the fault rules, then runs it.
   * An applied Timeout runs the request and throws anyway; its own error, if any, is hidden.
   */
  handle<T>(request: Request, run: () => T): T {
    this.#requestCount++;
    if (isWriteVerb(request.verb)) this.#countWrite(request.client, request.kind, request.verb);
    const effect = this.faults.decide(request);
    if (effect === undefined) return run();
    if (effect.applied === true) {
      try {
        run();
      } catch {
        // The client cannot tell: a timeout hides the outcome either way.
      }
    }
    throw injectedError(effect, request);
  }

  /** Client requests served so far, reads and failed ones included; only grows. */
  requestCount(): number {
    return this.#requestCount;
  }

  /** Ends open watch streams of `kind` (all when absent) as a fault; consumers must relist. */
  dropWatches(kind?: Kind): number {
    return this.#watches.drop(kind);
  }

  /** Write requests matching the filter, summed (failed requests included). */
  apiWrites(filter: { client?: string; kind?: Kind; verb?: WriteVerb } = {}): number {
    return this.apiWriteCounts()
      .filter((row) => (filter.client ?? row.client) === row.client && (filter.kind ?? row.kind) === row.kind)
      .filter((row) => (filter.verb ?? row.verb) === row.verb)
      .reduce((sum, row) => sum + row.count, 0);
  }

  /** Every (client, kind, verb) with its count, sorted by client, kind, verb. */
  apiWriteCounts(): WriteCount[] {
    return [...this.#writeCounts.values()]
      .flatMap((byKind) => [...byKind.values()].flatMap((byVerb) => [...byVerb.values()]))
      .map((row) => ({ ...row }))
      .sort(
        (a, b) =>
          compareStrings(a.client, b.client) || compareStrings(a.kind, b.kind) || compareStrings(a.verb, b.verb),
      );
  }

  // -------------------------------------------------------------------------------------------
  // Internals shared with the garbage collector

  /** Stored objects of `kind` (or all kinds), sorted by namespace then name; read-only (one kind's array is frozen). */
  stored(kind?: Kind): readonly KubeObject[] {
    return this.#stored(kind);
  }

  /**
   * Calls `listener` at every later commit of `kind` (a change feed: what changed, without
   * comparing listings). Listeners run inside the commit, once the store holds the change and
   * before watchers hear of it; they must not write to the server.
   */
  onCommit(kind: Kind, listener: CommitListener): void {
    const listeners = this.#commitListeners.get(kind) ?? [];
    listeners.push(listener);
    this.#commitListeners.set(kind, listeners);
  }

  /** True when an object of `kind` named `name` in `namespace` has `uid`. */
  exists(kind: Kind, namespace: string | undefined, name: string, uid: string): boolean {
    return this.#lookup(kind, namespace, name)?.metadata.uid === uid;
  }

  /** Replaces the ownerReferences of a stored object (the garbage collector dropping dangling ones). */
  setOwnerReferences(object: KubeObject, ownerReferences: KubeObject["metadata"]["ownerReferences"]): void {
    const next = withOwnMetadata(object);
    if (ownerReferences === undefined || ownerReferences.length === 0) delete next.metadata.ownerReferences;
    else next.metadata.ownerReferences = ownerReferences;
    this.#replace(object, this.#mainUpdate(object, next));
  }

  // -------------------------------------------------------------------------------------------
  // Private

  #patch(ref: ObjectRef, patch: JsonObject, mode: "main" | "status"): KubeObject {
    const existing = this.#mustGet(ref);
    const metadata = patch["metadata"];
    if (isJsonObject(metadata))
      checkPreconditions(existing, stringOrUndefined(metadata["uid"]), stringOrUndefined(metadata["resourceVersion"]));
    if (mode === "status") return this.#writeStatus(existing, patch, isJsonObject(metadata) ? metadata : undefined);
    const patched = mergePatch(existing as unknown as JsonObject, patch);
    if (!isJsonObject(patched)) throw new ApiError("Invalid", "a merge patch must produce an object");
    return this.#replace(existing, this.#mainUpdate(existing, patched as unknown as KubeObject));
  }

  /**
   * A status write: the status `patch` makes, and for kinds whose strategy allows it the labels,
   * annotations and finalizers it makes in `metadata` (the patch's own) in the same commit.
   */
  #writeStatus(existing: KubeObject, patch: JsonObject, metadata: JsonObject | undefined): KubeObject {
    const status = patchedStatus(existing, patch);
    if (!STRATEGIES[existing.kind].statusWritesMetadata || metadata === undefined || !writesMetadata(metadata))
      return this.#replaceStatus(existing, status);
    const next = withStatus(existing, status);
    for (const field of STATUS_WRITABLE_METADATA)
      if (field in metadata) setOrDelete(next.metadata, field, mergePatch(existing.metadata[field], metadata[field]));
    const problem = admissionProblem(next) ?? newFinalizerProblem(existing, next);
    if (problem !== undefined) throw new ApiError("Invalid", `${whatOf(existing)}: ${problem}`);
    return this.#replace(existing, next);
  }

  /**
   * Commits `next` (the server's own object: a binding's or `#mainUpdate`'s) over `existing`
   * after preconditions were checked: bumps generation, and finishes a deletion whose last
   * finalizer went away. A `next` equal to `existing` commits nothing.
   */
  #replace(existing: KubeObject, next: KubeObject): KubeObject {
    // Unchanged parts become the stored version's own: nothing to freeze, equal by identity.
    shareEqualParts(next as unknown as JsonObject, existing as unknown as JsonObject, "metadata");
    shareEqualParts(next.metadata as unknown as JsonObject, existing.metadata as unknown as JsonObject);
    if (jsonEqual(next, existing)) return existing;
    return this.#commitChange(existing, next);
  }

  /**
   * `#replace` for a status write of `status` over `existing`: only the status can differ, so only
   * it is compared. `status` is a merge patch's result over `existing.status`, which shares every
   * part that keeps its JSON text already: nothing is left to share.
   */
  #replaceStatus(existing: KubeObject, status: JsonValue | undefined): KubeObject {
    if (jsonEqual(status, existing.status)) return existing;
    return this.#commitChange(existing, withStatus(existing, status));
  }

  /** Commits `next`, which differs from `existing` (see `#replace`). */
  #commitChange(existing: KubeObject, next: KubeObject): KubeObject {
    const strategy = STRATEGIES[existing.kind];
    if (strategy.hasGeneration && !jsonEqual(specOf(existing), specOf(next))) {
      next.metadata.generation = (existing.metadata.generation ?? 0) + 1;
    }
    if (
      isDeleting(next) &&
      (next.metadata.finalizers ?? []).length === 0 &&
      next.metadata.deletionGracePeriodSeconds === 0
    ) {
      return this.#remove(next);
    }
    return this.#commit("MODIFIED", next);
  }

  /**
   * What an update or patch of the main resource stores: `candidate` with the server's fields of
   * `existing` (and its status, for kinds with a status subresource), once admission and the
   * kind's update rules allow it. Throws Invalid.
   */
  #mainUpdate(existing: KubeObject, candidate: KubeObject): KubeObject {
    if (candidate.kind !== existing.kind || candidate.apiVersion !== existing.apiVersion) {
      throw new ApiError("Invalid", `${whatOf(existing)}: apiVersion and kind cannot change`);
    }
    if (
      candidate.metadata.name !== existing.metadata.name ||
      candidate.metadata.namespace !== existing.metadata.namespace
    ) {
      throw new ApiError("Invalid", `${whatOf(existing)}: metadata.name and metadata.namespace cannot change`);
    }
    const next: KubeObject = {
      ...candidate,
      metadata: { ...withoutServerFields(candidate).metadata, ...serverFieldsOf(existing) },
    };
    if (STRATEGIES[existing.kind].statusSubresource) {
      if (existing.status === undefined) delete next.status;
      else next.status = existing.status;
    }
    const problem =
      admissionProblem(next) ??
      STRATEGIES[existing.kind].updateProblem(existing, next) ??
      newFinalizerProblem(existing, next);
    if (problem !== undefined) throw new ApiError("Invalid", `${whatOf(existing)}: ${problem}`);
    // No copy: the candidate is the server's own (a checked copy of the request, a merge patch
    // whose new parts are copies, or stored objects) and its shared parts are frozen.
    return next;
  }

  /** Starts a graceful deletion: deletionTimestamp at the end of the grace period. */
  #markDeleting(existing: KubeObject, gracePeriodSeconds: number): void {
    const next = withOwnMetadata(existing);
    next.metadata.deletionTimestamp = this.clock.rfc3339(this.clock.nowMs() + gracePeriodSeconds * 1000);
    next.metadata.deletionGracePeriodSeconds = gracePeriodSeconds;
    // Kubernetes bumps generation when deletion starts: controllers of the object must notice.
    if ((existing.metadata.generation ?? 0) > 0) next.metadata.generation = (existing.metadata.generation ?? 0) + 1;
    const stored = this.#commit("MODIFIED", next);
    if (gracePeriodSeconds > 0 && this.#podTermination === "gracePeriod") this.#expireAfterGracePeriod(stored);
  }

  /** A second delete may only shorten a pending grace period; reaching 0 may finish the deletion. */
  #shortenGracePeriod(existing: KubeObject, requestedSeconds: number | undefined): void {
    const currentSeconds = existing.metadata.deletionGracePeriodSeconds ?? 0;
    if (requestedSeconds === undefined || requestedSeconds >= currentSeconds) {
      // Nothing to shorten; an object whose grace already ended is retried for removal.
      if (currentSeconds === 0 && (existing.metadata.finalizers ?? []).length === 0) this.#remove(existing);
      return;
    }
    const next = withOwnMetadata(existing);
    const deletionMs = this.clock.parseRfc3339(existing.metadata.deletionTimestamp ?? "");
    next.metadata.deletionTimestamp = this.clock.rfc3339(deletionMs - (currentSeconds - requestedSeconds) * 1000);
    next.metadata.deletionGracePeriodSeconds = requestedSeconds;
    if (requestedSeconds === 0 && (next.metadata.finalizers ?? []).length === 0) {
      this.#remove(next);
      return;
    }
    const stored = this.#commit("MODIFIED", next);
    // The earlier timer still fires, finds the deletion already done, and does nothing.
    if (requestedSeconds > 0 && this.#podTermination === "gracePeriod") this.#expireAfterGracePeriod(stored);
  }

  #expireAfterGracePeriod(object: KubeObject): void {
    const ref = refOf(object);
    const uid = object.metadata.uid;
    this.clock.setTimer((object.metadata.deletionGracePeriodSeconds ?? 0) * 1000, () => {
      const current = this.#lookup(object.kind, object.metadata.namespace, object.metadata.name);
      // The object may be gone, re-created under the same name, or already shortened to 0.
      if (current === undefined || current.metadata.uid !== uid || !isDeleting(current)) return;
      this.delete(ref, { uid, gracePeriodSeconds: 0 });
    });
  }

  /** Removes a stored object for good: one DELETED event, then dependents are looked at. */
  #remove(object: KubeObject): KubeObject {
    const removed = this.#commit("DELETED", withOwnMetadata(object));
    this.#gc.noteRemoved(removed);
    return removed;
  }

  /**
   * Assigns the next resourceVersion, stores (or removes) the object, then tells the garbage
   * collector and the commit listeners (which see the store with the change) and publishes it.
   */
  #commit(type: "ADDED" | "MODIFIED" | "DELETED", object: KubeObject): KubeObject {
    this.#resourceVersion++;
    this.#resourceVersionText = String(this.#resourceVersion);
    object.metadata.resourceVersion = this.#resourceVersionText;
    const stored = deepFreeze(object);
    const after = type === "DELETED" ? undefined : stored;
    // Only a creation or a removal changes which objects exist (a new key string costs a hash).
    if (type === "ADDED") this.#creationOrder.set(keyOf(stored), refOf(stored));
    if (type === "DELETED") this.#creationOrder.delete(keyOf(stored));
    const replaced =
      after === undefined
        ? this.#byKind.get(stored.kind)?.delete(stored.metadata.namespace, stored.metadata.name)
        : this.#storeOf(stored.kind).set(stored);
    this.#gc.noteCommitted(replaced, after);
    for (const listener of this.#commitListeners.get(stored.kind) ?? []) listener(replaced, after);
    this.#watches.publish(stored.kind, type, stored, type === "MODIFIED" ? replaced : undefined);
    return stored;
  }

  #mustGet(ref: ObjectRef): KubeObject {
    if (!isKind(ref.kind)) throw new ApiError("Invalid", `unknown kind "${String(ref.kind)}"`);
    const namespace = KINDS[ref.kind].namespaced ? ref.namespace : undefined;
    const object = this.#lookup(ref.kind, namespace, ref.name);
    if (object === undefined) {
      throw new ApiError(
        "NotFound",
        `${ref.kind} "${ref.name}"${namespace === undefined ? "" : ` in namespace "${namespace}"`} not found`,
      );
    }
    return object;
  }

  #storeOf(kind: Kind): SortedStore {
    let store = this.#byKind.get(kind);
    if (store === undefined) {
      store = new SortedStore();
      this.#byKind.set(kind, store);
    }
    return store;
  }

  /** The stored object of `kind` named `name` in `namespace` (undefined when cluster-scoped), or undefined. */
  #lookup(kind: Kind, namespace: string | undefined, name: string): KubeObject | undefined {
    return this.#byKind.get(kind)?.get(namespace, name);
  }

  #stored(kind?: Kind): readonly KubeObject[] {
    if (kind !== undefined) return this.#byKind.get(kind)?.values() ?? NO_OBJECTS;
    const current = [...this.#creationOrder.values()].map((ref) => this.#mustGet(ref));
    return current.sort(
      (a, b) =>
        compareStrings(a.metadata.namespace ?? "", b.metadata.namespace ?? "") ||
        compareStrings(a.metadata.name, b.metadata.name),
    );
  }

  #checkNamespace(kind: Kind, object: KubeObject): void {
    if (!KINDS[kind].namespaced) {
      // Cluster-scoped objects have no namespace; Kubernetes ignores one that is sent.
      delete object.metadata.namespace;
      return;
    }
    const namespace = object.metadata.namespace;
    if (namespace === undefined || namespace === "") {
      throw new ApiError("Invalid", `${kind} "${object.metadata.name}": metadata.namespace is required`);
    }
    if (this.#lookup("Namespace", undefined, namespace) === undefined) {
      throw new ApiError("NotFound", `namespace "${namespace}" not found`);
    }
  }

  /** A random version-4 UUID from the server's own stream. */
  #newUid(): string {
    let hex = "";
    for (let word = 0; word < 4; word++) hex += this.#uidRng.nextUint32().toString(16).padStart(8, "0");
    const variant = ((parseInt(hex.charAt(16), 16) & 0x3) | 0x8).toString(16);
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
  }

  #countWrite(client: string, kind: Kind, verb: WriteVerb): void {
    const byKind = getOrCreate(this.#writeCounts, client, () => new Map<Kind, Map<WriteVerb, WriteCount>>());
    const byVerb = getOrCreate(byKind, kind, () => new Map<WriteVerb, WriteCount>());
    const row = byVerb.get(verb);
    if (row === undefined) byVerb.set(verb, { client, kind, verb, count: 1 });
    else row.count++;
  }
}

/** The metadata fields only the server sets, taken from the stored object. */
function serverFieldsOf(object: KubeObject): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (const field of SERVER_FIELDS_IN_ORDER) {
    const value = object.metadata[field];
    if (value !== undefined) fields[field] = value;
  }
  return fields;
}

/**
 * A new top level and metadata over `object`'s other parts, shared: what a commit may change
 * (metadata fields, the top-level status) without touching a stored, frozen object.
 */
function withOwnMetadata(object: KubeObject): KubeObject {
  return { ...object, metadata: { ...object.metadata } };
}

/** What a status write may change in metadata, for kinds whose strategy allows it (`statusWritesMetadata`). */
const STATUS_WRITABLE_METADATA = ["labels", "annotations", "finalizers"] as const;

function writesMetadata(metadata: JsonObject): boolean {
  return STATUS_WRITABLE_METADATA.some((field) => field in metadata);
}

function setOrDelete(
  metadata: KubeObject["metadata"],
  field: (typeof STATUS_WRITABLE_METADATA)[number],
  value: JsonValue | undefined,
): void {
  // The three fields are optional: an emptied one is left out, as the server stores it.
  const fields = metadata as unknown as Record<string, unknown>;
  if (value === undefined || value === null) Reflect.deleteProperty(fields, field);
  else fields[field] = value;
}

/** `existing` with `status` in place of its own (none when undefined). */
function withStatus(existing: KubeObject, status: JsonValue | undefined): KubeObject {
  const next = withOwnMetadata(existing);
  if (status === undefined) delete next.status;
  else next.status = status as JsonObject;
  return next;
}

/**
 * The status `mergePatch(existing, patch)` would hold, found without merging the rest: a status
 * write keeps nothing else. The other fields are still merged (onto nothing, and dropped), so a
 * patch that `mergePatch` refuses is refused with the same error.
 */
function patchedStatus(existing: KubeObject, patch: JsonObject): JsonValue | undefined {
  let status: JsonValue | undefined = existing.status;
  for (const key of Object.keys(patch)) {
    const value = patch[key];
    if (key === "status") status = value === null ? undefined : mergePatch(existing.status, value, 1);
    else if (value !== null) mergePatch(undefined, value, 1);
  }
  return status;
}

/** Everything generation counts: the object without metadata and status. */
function specOf(object: KubeObject): Record<string, unknown> {
  return Object.fromEntries(Object.entries(object).filter(([field]) => field !== "metadata" && field !== "status"));
}

function checkPreconditions(existing: KubeObject, uid: string | undefined, resourceVersion: string | undefined): void {
  if (uid !== undefined && uid !== existing.metadata.uid) {
    const stored = existing.metadata.uid ?? "none";
    throw new ApiError(
      "Conflict",
      `${whatOf(existing)}: precondition failed: UID ${uid}, stored ${stored}; it may have been deleted and re-created`,
    );
  }
  if (resourceVersion !== undefined && resourceVersion !== existing.metadata.resourceVersion) {
    const stored = existing.metadata.resourceVersion ?? "none";
    throw new ApiError(
      "Conflict",
      `${whatOf(existing)}: the object has been modified (resourceVersion ${resourceVersion}, stored ${stored}); re-read and retry`,
    );
  }
}

/** How errors name `object`: its kind and name. */
function whatOf(object: KubeObject): string {
  return `${object.kind} "${object.metadata.name}"`;
}

function newFinalizerProblem(existing: KubeObject, next: KubeObject): string | undefined {
  if (!isDeleting(existing)) return undefined;
  const before = new Set(existing.metadata.finalizers ?? []);
  const added = (next.metadata.finalizers ?? []).filter((finalizer) => !before.has(finalizer));
  if (added.length === 0) return undefined;
  return `metadata.finalizers: no new finalizers can be added while the object is being deleted (${added.join(", ")})`;
}

/** A copy of what a client sent (deeply frozen with `freeze`), if it has the shape of an object with a name. */
function checkedShape(sent: unknown, freeze = false): KubeObject {
  const object = jsonCopy(sent, freeze);
  if (!isJsonObject(object) || !isJsonObject(object["metadata"]) || typeof object["metadata"]["name"] !== "string") {
    throw new ApiError("Invalid", "an object needs metadata.name");
  }
  return object as unknown as KubeObject;
}

function checkedKind(object: KubeObject): Kind {
  const kind: string = object.kind;
  if (!isKind(kind)) throw new ApiError("Invalid", `unknown kind "${kind}"`);
  if (object.apiVersion !== KINDS[kind].apiVersion) {
    throw new ApiError("Invalid", `${kind} has apiVersion ${KINDS[kind].apiVersion}, not ${object.apiVersion}`);
  }
  return kind;
}

function stringOrUndefined(value: JsonValue | undefined): string | undefined {
  return typeof value === "string" ? value : undefined;
}
