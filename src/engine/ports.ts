/**
 * The ports through which the engine touches the world (DESIGN §5). Two implementations of each
 * exist: the deterministic simulator (`src/sim/`) and the Kubernetes adapter (`src/kube/`, on
 * @kubernetes/client-node). The engine depends only on this file, so the simulator exercises the
 * real engine through the same contracts as production.
 *
 * Objects are plain JSON-shaped values. Objects a reader returns are read-only: callers must not
 * mutate them (the simulator and the Kubernetes reader hand out frozen objects, so a mutation
 * throws), and the engine and core never do — writes always build new objects. Mutating an
 * argument after a write never changes what was sent.
 */

/** Any JSON value; `undefined` never appears in an object sent to or read from a port. */
export type JsonValue = null | boolean | number | string | JsonValue[] | JsonObject;
export interface JsonObject {
  [key: string]: JsonValue;
}

/** The kinds the controller or the router reads or writes. */
export type Kind =
  "ModelServing" | "ModelRoute" | "Pod" | "Service" | "ControllerRevision" | "Event" | "Lease" | "Node" | "Namespace";

export interface KindInfo {
  readonly apiVersion: string;
  /** Namespaced objects require `metadata.namespace`; cluster-scoped objects have none. */
  readonly namespaced: boolean;
  /** `metadata.generation` starts at 1 and counts changes outside metadata and status. */
  readonly hasGeneration: boolean;
  /** Status is written only by `patchStatus`; `create`/`update`/`patch` never change it. */
  readonly statusSubresource: boolean;
  /**
   * A `patchStatus` may also change `metadata.labels`, `annotations` and `finalizers`, as the
   * status strategies of Kubernetes' built-in kinds allow (they reset the spec only; a pod's
   * also its owner references). A custom resource's status write keeps all of its metadata.
   */
  readonly statusWritesMetadata: boolean;
}

/** Static facts about each kind, shared by both implementations. */
export const KINDS: Readonly<Record<Kind, KindInfo>> = {
  ModelServing: {
    apiVersion: "tandem.dev/v1alpha1",
    namespaced: true,
    hasGeneration: true,
    statusSubresource: true,
    statusWritesMetadata: false,
  },
  ModelRoute: {
    apiVersion: "tandem.dev/v1alpha1",
    namespaced: true,
    hasGeneration: true,
    statusSubresource: true,
    statusWritesMetadata: false,
  },
  Pod: {
    apiVersion: "v1",
    namespaced: true,
    hasGeneration: false,
    statusSubresource: true,
    statusWritesMetadata: true,
  },
  Service: {
    apiVersion: "v1",
    namespaced: true,
    hasGeneration: false,
    statusSubresource: true,
    statusWritesMetadata: true,
  },
  ControllerRevision: {
    apiVersion: "apps/v1",
    namespaced: true,
    hasGeneration: false,
    statusSubresource: false,
    statusWritesMetadata: false,
  },
  Event: {
    apiVersion: "v1",
    namespaced: true,
    hasGeneration: false,
    statusSubresource: false,
    statusWritesMetadata: false,
  },
  Lease: {
    apiVersion: "coordination.k8s.io/v1",
    namespaced: true,
    hasGeneration: false,
    statusSubresource: false,
    statusWritesMetadata: false,
  },
  Node: {
    apiVersion: "v1",
    namespaced: false,
    hasGeneration: false,
    statusSubresource: true,
    statusWritesMetadata: true,
  },
  Namespace: {
    apiVersion: "v1",
    namespaced: false,
    hasGeneration: false,
    statusSubresource: true,
    statusWritesMetadata: true,
  },
};

export function isKind(value: string): value is Kind {
  return Object.hasOwn(KINDS, value);
}

// Object metadata types are shared with the core, which builds the objects (src/api/kube.ts).
export type { ObjectMeta, OwnerReference } from "../api/kube.ts";
import type { ObjectMeta } from "../api/kube.ts";

/**
 * A Kubernetes object of kind `K`. `spec` and `status` are untyped JSON here; callers narrow them
 * (ModelServing through `src/api`'s parser). Kinds with other top-level fields (ControllerRevision
 * `data`/`revision`, Event `reason`/`message`/...) carry them as extra properties.
 */
export interface KubeObject<K extends Kind = Kind> {
  apiVersion: string;
  kind: K;
  metadata: ObjectMeta;
  spec?: JsonObject;
  status?: JsonObject;
  [field: string]: unknown;
}

/** Names one object. `namespace` is required for namespaced kinds and absent otherwise. */
export interface ObjectRef<K extends Kind = Kind> {
  kind: K;
  namespace?: string;
  name: string;
}

// ---------------------------------------------------------------------------------------------
// Errors

/**
 * Why a request failed, as the engine classifies it:
 * - `NotFound` (404): the object (or its namespace) does not exist. On delete, it means success.
 * - `AlreadyExists` (409): create of a name that exists.
 * - `Conflict` (409): a resourceVersion or UID precondition failed; re-read and requeue, no error log.
 * - `Invalid` (400/422): the request can never succeed as sent (bad selector, immutable field).
 * - `ServerError` (500): transient; retry with backoff. The write was not applied.
 * - `Timeout` (504): transient and ambiguous: the write may or may not have been applied.
 */
export type ApiErrorReason = "NotFound" | "AlreadyExists" | "Conflict" | "Invalid" | "ServerError" | "Timeout";

const HTTP_STATUS: Readonly<Record<ApiErrorReason, number>> = {
  NotFound: 404,
  AlreadyExists: 409,
  Conflict: 409,
  Invalid: 422,
  ServerError: 500,
  Timeout: 504,
};

/** The only error type a reader or writer rejects with; anything else is a programmer error. */
export class ApiError extends Error {
  readonly reason: ApiErrorReason;
  /** The HTTP status the Kubernetes API server uses for this reason. */
  readonly code: number;

  constructor(reason: ApiErrorReason, message: string) {
    super(`${reason}: ${message}`);
    this.name = "ApiError";
    this.reason = reason;
    this.code = HTTP_STATUS[reason];
  }
}

/** True when `error` is an ApiError with one of `reasons` (any reason when none are given). */
export function isApiError(error: unknown, ...reasons: ApiErrorReason[]): error is ApiError {
  return error instanceof ApiError && (reasons.length === 0 || reasons.includes(error.reason));
}

// ---------------------------------------------------------------------------------------------
// Clock and randomness

/** A scheduled callback. `cancel` returns false when the timer already fired or was cancelled. */
export interface Timer {
  /** When it fires, on its clock's `nowMs` scale (the work queue compares the two). */
  readonly dueMs: number;
  cancel(): boolean;
}

/**
 * Time, in integer milliseconds since the Unix epoch (virtual time on a fixed epoch in the
 * simulator, `VirtualClock.onEpoch`; wall time in production): the core compares `nowMs` with
 * timestamps the API server and kubelets write. `nowMs` never decreases.
 */
export interface Clock {
  nowMs(): number;
  /**
   * Calls `callback` once, no earlier than `delayMs` (a non-negative integer) from now. Timers due
   * at the same instant fire in the order they were set. Callbacks never run inside `setTimer`.
   */
  setTimer(delayMs: number, callback: () => void): Timer;
}

/**
 * A seeded random stream. Probabilities are exact ratios of integers, never floats. Each method
 * consumes draws from this stream only; `fork(name)` gives a stream that depends on the root seed
 * and the fork's path of names, never on how many values were drawn before.
 */
export interface Rng {
  /** A uniform integer in [minInclusive, maxExclusive); the span is at most 2^32. */
  int(minInclusive: number, maxExclusive: number): number;
  /** True with probability numerator/denominator (integers, 0 ≤ numerator ≤ denominator ≤ 2^32). */
  chance(numerator: number, denominator: number): boolean;
  /** A uniform element of a non-empty array. */
  pick<T>(items: readonly T[]): T;
  /** A uniformly shuffled copy; the input is not modified. */
  shuffle<T>(items: readonly T[]): T[];
  fork(name: string): Rng;
}

// ---------------------------------------------------------------------------------------------
// Cluster reader (an informer cache)

export interface ListOptions {
  /** Only objects in this namespace; all namespaces when absent. */
  namespace?: string;
  /** Kubernetes label selector syntax (`a=b,c!=d,e in (f,g),h,!i`); see `selector.ts`. */
  labelSelector?: string;
}

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED";

export interface WatchEvent<K extends Kind = Kind> {
  type: WatchEventType;
  /** The object after the change; for DELETED, its last known state. */
  object: KubeObject<K>;
}

/**
 * A local cache of the cluster kept by list + watch. It may lag behind the API server by any
 * amount, so every read may be stale; writes through `ClusterWriter` show up here only later.
 * Reads never fail and never block.
 */
export interface ClusterReader {
  get<K extends Kind>(kind: K, namespace: string | undefined, name: string): KubeObject<K> | undefined;
  /**
   * The cached objects of `kind` matching `options`, sorted by namespace then name.
   * Throws ApiError(Invalid) for an unparsable selector.
   */
  list<K extends Kind>(kind: K, options?: ListOptions): KubeObject<K>[];
  /**
   * Calls `handler` after each change to the cache, in the order the cache applied them, with
   * the cache already updated. After a relist (a watch was lost), the differences between the old
   * and the new cache are delivered as ADDED/MODIFIED/DELETED; unchanged objects produce nothing.
   * Returns a function that removes the handler.
   */
  subscribe(handler: (event: WatchEvent) => void): () => void;
  /** True once every kind has been listed at least once. */
  hasSynced(): boolean;
}

// ---------------------------------------------------------------------------------------------
// Cluster writer (API requests)

export interface DeleteOptions {
  /** Precondition: fail with Conflict unless the object has this UID. */
  uid?: string;
  /** Precondition: fail with Conflict unless the object has this resourceVersion. */
  resourceVersion?: string;
  /**
   * Pods only: seconds until the deletion is final; defaults to the pod's
   * `spec.terminationGracePeriodSeconds` (30 when unset). A shorter grace period on a pod already
   * being deleted shortens it. Ignored for other kinds, whose deletion is immediate.
   */
  gracePeriodSeconds?: number;
}

/**
 * Requests to the API server. Each call is one request; a rejected promise always carries an
 * ApiError. Resolved values are the object as stored by the server.
 */
export interface ClusterWriter {
  /**
   * Creates `object`; server fields in it are ignored. For kinds with a status subresource the
   * server sets the initial status (none for ModelServing and Service, `Pending` for pods).
   */
  create<K extends Kind>(object: KubeObject<K>): Promise<KubeObject<K>>;
  /**
   * Replaces the object, requiring `metadata.resourceVersion` to match the stored one (else
   * Conflict; Invalid when missing). Status is ignored for kinds with a status subresource. On an
   * object being deleted, finalizers may be removed but not added.
   */
  update<K extends Kind>(object: KubeObject<K>): Promise<KubeObject<K>>;
  /**
   * Applies a JSON merge patch (RFC 7386) to the object. A `metadata.resourceVersion` or
   * `metadata.uid` in the patch is a precondition (Conflict on mismatch). Status is ignored as in
   * `update`. A merge patch replaces arrays whole: to change one list entry (a pod condition),
   * send the whole list with a resourceVersion precondition.
   */
  patch<K extends Kind>(ref: ObjectRef<K>, mergePatch: JsonObject): Promise<KubeObject<K>>;
  /**
   * Applies a JSON merge patch to the status subresource: `status` changes, and for kinds that
   * allow it (`KINDS[kind].statusWritesMetadata`: pods) labels, annotations and finalizers too, in
   * the same write; nothing else. Preconditions as in `patch`. NotFound for kinds without a status
   * subresource (`KINDS[kind].statusSubresource`).
   */
  patchStatus<K extends Kind>(ref: ObjectRef<K>, mergePatch: JsonObject): Promise<KubeObject<K>>;
  /**
   * Starts deleting the object: it gets a deletionTimestamp and disappears once its finalizers
   * are empty and (pods) its grace period has passed. Deleting an object already being deleted
   * succeeds. NotFound means it is already gone.
   */
  delete(ref: ObjectRef, options?: DeleteOptions): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Events

export type EventType = "Normal" | "Warning";

export interface EventRecord {
  regarding: ObjectRef & { uid?: string };
  type: EventType;
  /** UpperCamelCase, machine-readable (`DrainTimeout`). */
  reason: string;
  /** For a person: what happened and what to do about it. */
  message: string;
}

/** Records Kubernetes Events. Fire-and-forget: an event that cannot be written is dropped. */
export interface Recorder {
  record(event: EventRecord): void;
}
