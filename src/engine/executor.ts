/**
 * The executor: applies a plan's actions through the ClusterWriter, honouring the ordering contract
 * of `core/actions.ts`:
 *
 * - Actions run in list order. A run of consecutive non-barrier actions of the same type (pod
 *   creations, deletions, annotations, …) is sent concurrently, at most `maxParallelWrites` at a
 *   time, and waited for as a whole before the next action; requests are issued in list order and
 *   results kept in list order. Barriers and status writes always run alone.
 * - A barrier that does not succeed drops the rest of the plan (counted as skipped).
 * - Outcomes: *applied* (the cluster is as planned: includes AlreadyExists on a create and
 *   NotFound on a delete), *stale* (a Conflict, or NotFound on a patch: the plan was made on a
 *   state that no longer holds; requeue, no error log), or *failed* (anything else; requeue with
 *   backoff, logged).
 * - Each applied write is recorded as an expectation of its key, so the next plan waits for the
 *   cache to show it. So is a patch or delete that timed out, for `UNKNOWN_OUTCOME_WAIT_MS`: it may
 *   have been applied, and a plan on a cache without it would act on a state the controller itself
 *   has changed (open a gate, then count the pod as not serving and move its group for free:
 *   fuzz-faults-coordinated-crash-gang-242 disrupted a group beyond maxUnavailable 0 so). One that
 *   was not applied is never shown, so the wait is short: a stalled key is worse than a plan on a
 *   stale cache (a partly created instance left waiting counts as failed once its pods start). A
 *   create that timed out needs none: a repeated create meets AlreadyExists.
 *
 * Status writes (WriteStatus) send the whole status as a merge patch computed against the status
 * the plan observed: keys that disappear are sent as null. The observed ModelServing's uid and
 * resourceVersion go with it as preconditions, so the patch applies to exactly the status it was
 * computed from (else Conflict, and the key is planned again on a fresher cache).
 */
import type { Action, PodFinalizers } from "../core/actions.ts";
import { FINALIZER_RECOVERY } from "../api/wellknown.ts";
import type { PodCondition } from "../api/kube.ts";
import { expectCreated, expectDeleted, expectExists, expectPatched } from "./expectations.ts";
import type { Expectation, Expectations } from "./expectations.ts";
import { isJsonObject, jsonEqual, mergePatchBetween, toJsonObject } from "./json.ts";
import { ApiError, isApiError } from "./ports.ts";
import type { ClusterReader, ClusterWriter, JsonObject, JsonValue, KubeObject, ObjectRef, Recorder } from "./ports.ts";

/** The ModelServing a plan was made for, as observed when planning. */
export interface PlanTarget {
  /** The work-queue key, `namespace/name`. */
  readonly key: string;
  readonly namespace: string;
  readonly name: string;
  readonly uid: string | undefined;
  readonly resourceVersion: string | undefined;
  readonly status: JsonObject | undefined;
}

export interface ExecutionResult {
  /** Actions whose effect now holds in the cluster. */
  readonly applied: number;
  /** Stale outcomes (Conflict, NotFound on a patch), each naming its action. */
  readonly conflicts: readonly Error[];
  /** Other failures, each naming its action, with the ApiError as `cause`. */
  readonly failed: readonly Error[];
  /** Actions not run: after a barrier that did not succeed, or after `signal` aborted. */
  readonly skipped: number;
}

export interface ExecutorPorts {
  readonly writer: ClusterWriter;
  /** Read for SetPodCondition, which must send a pod's whole condition list. */
  readonly reader: ClusterReader;
  readonly recorder: Recorder;
}

export interface ExecutorOptions {
  /** Concurrent requests within a batch. Default 8; 1 makes the executor strictly sequential. */
  readonly maxParallelWrites?: number;
  /** Where applied writes are recorded; none when absent. */
  readonly expectations?: Expectations;
}

type Outcome =
  | { readonly kind: "applied"; readonly expectation?: Expectation }
  | { readonly kind: "stale" | "failed"; readonly error: Error; readonly expectation?: Expectation };

/**
 * How long the cache is given to show a write that timed out (clock time): a few times what a
 * lagging informer or a relist after a dropped watch takes to deliver it.
 */
const UNKNOWN_OUTCOME_WAIT_MS = 5_000;

/** A write that timed out: it may have been applied, and `expectation` is what the cache shows if it was. */
class UnknownOutcome extends Error {
  readonly expectation: Expectation;
  constructor(cause: unknown, ifApplied: Expectation) {
    super(messageOf(cause), { cause });
    this.expectation = { ...ifApplied, timeoutMs: UNKNOWN_OUTCOME_WAIT_MS };
  }
}

/** `request`, with a Timeout turned into an `UnknownOutcome` carrying `ifApplied`. */
async function orUnknown<T>(request: Promise<T>, ifApplied: Expectation): Promise<T> {
  try {
    return await request;
  } catch (error) {
    throw isApiError(error, "Timeout") ? new UnknownOutcome(error, ifApplied) : error;
  }
}

/** Mutable per-run state: the ModelServing's status and version move as this run writes them. */
interface RunState {
  readonly target: PlanTarget;
  resourceVersion: string | undefined;
  status: JsonObject;
}

export class Executor {
  readonly #ports: ExecutorPorts;
  readonly #maxParallelWrites: number;
  readonly #expectations: Expectations | undefined;

  constructor(ports: ExecutorPorts, options: ExecutorOptions = {}) {
    this.#ports = ports;
    this.#maxParallelWrites = options.maxParallelWrites ?? 8;
    this.#expectations = options.expectations;
    if (!Number.isSafeInteger(this.#maxParallelWrites) || this.#maxParallelWrites < 1) {
      throw new Error(`maxParallelWrites must be a positive integer, got ${this.#maxParallelWrites}`);
    }
  }

  /** Applies `actions` for `target` (see the module comment); never rejects: every error lands in the result. */
  async execute(target: PlanTarget, actions: readonly Action[], signal?: AbortSignal): Promise<ExecutionResult> {
    const state: RunState = { target, resourceVersion: target.resourceVersion, status: target.status ?? {} };
    const result = { applied: 0, conflicts: [] as Error[], failed: [] as Error[], skipped: 0 };
    let index = 0;
    // Each pass consumes at least one action, so the loop ends within actions.length passes.
    while (index < actions.length) {
      if (signal?.aborted === true) break;
      const batch = nextBatch(actions, index, this.#maxParallelWrites);
      const outcomes = await Promise.all(batch.map((action) => this.#apply(action, state)));
      index += batch.length;
      for (const outcome of outcomes) this.#tally(target.key, outcome, result);
      // A barrier always runs alone; the rest of the plan depends on it.
      if (isBarrier(batch[0]) && outcomes[0]?.kind !== "applied") break;
    }
    result.skipped = actions.length - index;
    return result;
  }

  #tally(key: string, outcome: Outcome, result: { applied: number; conflicts: Error[]; failed: Error[] }): void {
    if (outcome.kind === "applied") {
      result.applied++;
      if (outcome.expectation !== undefined) this.#expectations?.expect(key, outcome.expectation);
    } else if (outcome.kind === "stale") {
      result.conflicts.push(outcome.error);
    } else {
      result.failed.push(outcome.error);
      if (outcome.expectation !== undefined) this.#expectations?.expect(key, outcome.expectation);
    }
  }

  /** Runs one action and classifies its result; never rejects for an ApiError. */
  async #apply(action: Action, state: RunState): Promise<Outcome> {
    try {
      return { kind: "applied", ...(await this.#write(action, state)) };
    } catch (error) {
      return classify(action, state.target, error);
    }
  }

  /** The request(s) of one action; resolves with what the cache should show afterwards. */
  async #write(action: Action, state: RunState): Promise<{ expectation?: Expectation }> {
    const { writer } = this.#ports;
    const { namespace } = state.target;
    switch (action.type) {
      case "CreateRevision":
        return this.#create(toJsonObject(action.revision), namespace);
      case "AdvanceRevision": {
        const ref = { kind: "ControllerRevision", namespace, name: action.name } as const;
        const shows = (object: KubeObject): boolean => object["revision"] === action.revision;
        const stored = await orUnknown(
          writer.patch(ref, { revision: action.revision }),
          expectPatched(ref, undefined, `revision ${action.revision}`, shows),
        );
        return { expectation: expectPatched(ref, stored.metadata.uid, `revision ${action.revision}`, shows) };
      }
      case "DeleteRevision":
        return this.#delete({ kind: "ControllerRevision", namespace, name: action.name }, undefined);
      case "WriteStatus":
        return this.#writeStatus(toJsonObject(action.status), state);
      case "CreatePod":
        return this.#create(toJsonObject(action.pod), namespace);
      case "CreateService":
        return this.#create(toJsonObject(action.service), namespace);
      case "DeletePod":
        // Released first, deleted only once that is applied: a pod the controller deletes never
        // looks lost (core/tracking.ts). A failed release fails the action, nothing deleted.
        return this.#deletePod(action, namespace);
      case "SetPodFinalizers":
        return this.#setFinalizers(action, namespace);
      case "DeleteService":
        return this.#delete({ kind: "Service", namespace, name: action.name }, action.uid);
      case "AnnotatePod":
        return this.#annotatePod(action, namespace);
      case "PatchPodImages":
        return this.#patchPodImages(action, namespace);
      case "SetPodCondition":
        return this.#setPodCondition(action, namespace);
      case "RecordEvent":
        this.#recordEvent(action, state.target);
        return {};
    }
  }

  /** Creates `object` (in the ModelServing's namespace when it names none). */
  async #create(object: JsonObject, namespace: string): Promise<{ expectation: Expectation }> {
    const sent = object as unknown as KubeObject;
    sent.metadata.namespace ??= namespace;
    const stored = await this.#ports.writer.create(sent);
    return { expectation: expectCreated(refOf(sent), stored.metadata.uid ?? "") };
  }

  /**
   * Deletes a pod (see `DeletePod`), released first when asked. The release is guarded by the
   * version the plan saw; a guarded deletion then requires the version the release wrote, so
   * nothing that changed the pod in between goes unnoticed.
   */
  async #deletePod(
    action: Extract<Action, { type: "DeletePod" }>,
    namespace: string,
  ): Promise<{ expectation: Expectation }> {
    const { name, uid, release, gracePeriodSeconds } = action;
    let { resourceVersion } = action;
    if (release !== undefined) {
      const released = await this.#setFinalizers({ ...release, name, uid }, namespace);
      if (resourceVersion !== undefined) resourceVersion = released.resourceVersion;
    }
    return this.#delete({ kind: "Pod", namespace, name }, uid, gracePeriodSeconds, resourceVersion);
  }

  async #delete(
    ref: ObjectRef,
    uid: string | undefined,
    gracePeriodSeconds?: number,
    resourceVersion?: string,
  ): Promise<{ expectation: Expectation }> {
    const options = {
      ...(uid === undefined ? {} : { uid }),
      ...(resourceVersion === undefined ? {} : { resourceVersion }),
      ...(gracePeriodSeconds === undefined ? {} : { gracePeriodSeconds }),
    };
    const expectation = expectDeleted(ref, uid);
    await orUnknown(this.#ports.writer.delete(ref, options), expectation);
    return { expectation };
  }

  /**
   * Sets the pod's finalizers: the whole list (a merge patch replaces lists) under the UID and the
   * resourceVersion the plan saw. Met once the cache shows the recovery finalizer as sent.
   */
  async #setFinalizers(
    set: PodFinalizers & { readonly name: string; readonly uid: string },
    namespace: string,
  ): Promise<{ expectation: Expectation; resourceVersion: string | undefined }> {
    const { name, uid, resourceVersion, finalizers } = set;
    const ref = { kind: "Pod", namespace, name } as const;
    const tracked = finalizers.includes(FINALIZER_RECOVERY);
    const expectation = expectPatched(
      ref,
      uid,
      `finalizer ${FINALIZER_RECOVERY} ${tracked ? "added" : "removed"}`,
      (object) => (object.metadata.finalizers ?? []).includes(FINALIZER_RECOVERY) === tracked,
    );
    const stored = await orUnknown(
      this.#ports.writer.patch(ref, { metadata: { uid, resourceVersion, finalizers: [...finalizers] } }),
      expectation,
    );
    return { expectation, resourceVersion: stored.metadata.resourceVersion };
  }

  /** Sends the difference to the observed status (see the module comment); no request when equal. */
  async #writeStatus(desired: JsonObject, state: RunState): Promise<{ expectation?: Expectation }> {
    const statusPatch = mergePatchBetween(state.status, desired);
    if (Object.keys(statusPatch).length === 0) return {};
    const { namespace, name, uid } = state.target;
    const preconditions = {
      ...(uid === undefined ? {} : { uid }),
      ...(state.resourceVersion === undefined ? {} : { resourceVersion: state.resourceVersion }),
    };
    const ref = { kind: "ModelServing", namespace, name } as const;
    const basedOn = state.resourceVersion;
    // Timed out, the write may have applied: then the cache moves past the version it was conditional on.
    const moved = expectPatched(
      ref,
      uid,
      "status written",
      (object) => basedOn === undefined || object.metadata.resourceVersion !== basedOn,
    );
    const stored = await orUnknown(
      this.#ports.writer.patchStatus(ref, { metadata: preconditions, status: statusPatch }),
      moved,
    );
    // A later status write in this plan diffs against, and is conditional on, this one.
    state.resourceVersion = stored.metadata.resourceVersion;
    state.status = stored.status ?? {};
    const written = state.status;
    // Met once the cache shows this status, or any version past the one the write was conditional
    // on: a second status write in the same plan may land before the cache shows the first.
    const shows = (object: KubeObject): boolean =>
      jsonEqual(object.status ?? {}, written) || (basedOn !== undefined && object.metadata.resourceVersion !== basedOn);
    return { expectation: expectPatched(ref, uid, "status written", shows) };
  }

  /**
   * Sets and removes annotations (and sets labels, when given) in one merge patch, UID
   * precondition; with `release`, the finalizers too, under its resourceVersion. With `gate`, the
   * write is a status write that also sets that condition, under the gate's resourceVersion (the
   * version the plan saw; see `AnnotatePod`): pods/status changes labels, annotations and
   * finalizers as well (`KINDS.Pod.statusWritesMetadata`).
   */
  async #annotatePod(
    action: Extract<Action, { type: "AnnotatePod" }>,
    namespace: string,
  ): Promise<{ expectation: Expectation }> {
    const { name, uid, annotations, labels, release, gate } = action;
    const ref = { kind: "Pod", namespace, name } as const;
    const resourceVersion = gate?.resourceVersion ?? release?.resourceVersion;
    const tracked = release === undefined ? undefined : release.finalizers.includes(FINALIZER_RECOVERY);
    const shows = (object: KubeObject): boolean =>
      showsMetadata(object, annotations, labels ?? {}) &&
      (tracked === undefined || (object.metadata.finalizers ?? []).includes(FINALIZER_RECOVERY) === tracked) &&
      (gate === undefined || showsCondition(object, gate.condition));
    const what = [
      ...Object.keys(annotations).map((key) => `annotation ${key}`),
      ...Object.keys(labels ?? {}).map((key) => `label ${key}`),
      ...(tracked === undefined ? [] : [`finalizer ${FINALIZER_RECOVERY} ${tracked ? "added" : "removed"}`]),
      ...(gate === undefined ? [] : [`condition ${gate.condition.type}=${gate.condition.status}`]),
    ].join(",");
    const expectation = expectPatched(ref, uid, what, shows);
    const metadata = {
      uid,
      ...(resourceVersion === undefined ? {} : { resourceVersion }),
      ...(release === undefined ? {} : { finalizers: [...release.finalizers] }),
      annotations: { ...annotations },
      ...(labels === undefined ? {} : { labels: { ...labels } }),
    };
    if (gate === undefined) {
      await orUnknown(this.#ports.writer.patch(ref, { metadata }), expectation);
      return { expectation };
    }
    const conditions = this.#conditionsWith(ref, uid, gate.resourceVersion, gate.condition);
    await orUnknown(this.#ports.writer.patchStatus(ref, { metadata, status: { conditions } }), expectation);
    return { expectation };
  }

  /**
   * Sets container images in place (and the pod annotations that record the progress) in one
   * merge patch. A merge patch replaces arrays whole, so the pod's whole container list goes, as
   * the cache holds it at the version the plan saw, with only the named images changed, under
   * that resourceVersion.
   */
  async #patchPodImages(
    action: Extract<Action, { type: "PatchPodImages" }>,
    namespace: string,
  ): Promise<{ expectation: Expectation }> {
    const ref = { kind: "Pod", namespace, name: action.name } as const;
    const { uid, resourceVersion, images, annotations } = action;
    const cached = this.#cachedAt("Pod", namespace, action.name, uid, resourceVersion);
    const listed = cached.spec?.["containers"];
    const containers = (Array.isArray(listed) ? listed.filter(isJsonObject) : []).map((container) => {
      const image = typeof container["name"] === "string" ? images[container["name"]] : undefined;
      return image === undefined ? container : { ...container, image };
    });
    const shows = (object: KubeObject): boolean =>
      showsImages(object, images) && showsMetadata(object, annotations, {});
    const expectation = expectPatched(ref, uid, `images ${Object.values(images).join(",")}`, shows);
    await orUnknown(
      this.#ports.writer.patch(ref, {
        metadata: { uid, resourceVersion, annotations: { ...annotations } },
        spec: { containers },
      }),
      expectation,
    );
    return { expectation };
  }

  /** The cached object at exactly `uid` and `resourceVersion`, else Conflict (the server would refuse the same way). */
  #cachedAt(kind: "Pod", namespace: string, name: string, uid: string, resourceVersion: string): KubeObject<"Pod"> {
    const cached = this.#ports.reader.get(kind, namespace, name);
    if (cached?.metadata.uid !== uid || cached.metadata.resourceVersion !== resourceVersion) {
      throw new ApiError(
        "Conflict",
        `pod "${name}" is no longer at uid ${uid}, resourceVersion ${resourceVersion} in the cache`,
      );
    }
    return cached;
  }

  /**
   * Replaces (or adds) one condition in the pod's list as the cache holds it at the version the
   * plan saw, and sends the whole list under that resourceVersion: a merge patch replaces arrays.
   */
  async #setPodCondition(
    action: Extract<Action, { type: "SetPodCondition" }>,
    namespace: string,
  ): Promise<{ expectation: Expectation }> {
    const ref = { kind: "Pod", namespace, name: action.name } as const;
    const { uid, resourceVersion, condition } = action;
    const conditions = this.#conditionsWith(ref, uid, resourceVersion, condition);
    const expectation = expectPatched(ref, uid, `condition ${condition.type}=${condition.status}`, (object) =>
      showsCondition(object, condition),
    );
    await orUnknown(
      this.#ports.writer.patchStatus(ref, { metadata: { uid, resourceVersion }, status: { conditions } }),
      expectation,
    );
    return { expectation };
  }

  /**
   * The pod's condition list as the cache holds it at `resourceVersion` (the version the plan
   * saw), with `condition` in place of its type's; Conflict when the cache has moved past it (the
   * server would refuse too).
   */
  #conditionsWith(
    ref: { readonly namespace: string; readonly name: string },
    uid: string,
    resourceVersion: string,
    condition: PodCondition,
  ): JsonObject[] {
    const cached = this.#cachedAt("Pod", ref.namespace, ref.name, uid, resourceVersion);
    return withCondition(cached.status?.["conditions"], toJsonObject(condition));
  }

  #recordEvent(action: Extract<Action, { type: "RecordEvent" }>, target: PlanTarget): void {
    const { namespace, name, uid } = target;
    const regarding =
      action.pod === undefined
        ? { kind: "ModelServing" as const, namespace, name, ...(uid === undefined ? {} : { uid }) }
        : { kind: "Pod" as const, namespace, name: action.pod };
    this.#ports.recorder.record({ regarding, type: action.eventType, reason: action.reason, message: action.message });
  }
}

/**
 * The actions from `start` that run together: a barrier or a status write alone, else the run of
 * consecutive non-barrier actions of the same type, at most `maxSize` long.
 */
function nextBatch(actions: readonly Action[], start: number, maxSize: number): Action[] {
  const first = actions[start];
  if (first === undefined) return [];
  if (isBarrier(first) || first.type === "WriteStatus") return [first];
  const batch = [first];
  for (let i = start + 1; i < actions.length && batch.length < maxSize; i++) {
    const action = actions[i];
    if (action === undefined || action.type !== first.type || isBarrier(action)) break;
    batch.push(action);
  }
  return batch;
}

function isBarrier(action: Action | undefined): boolean {
  return action !== undefined && "barrier" in action && action.barrier;
}

/** Classifies a write's error (see the module comment); the error names the action. */
function classify(action: Action, target: PlanTarget, error: unknown): Outcome {
  const isCreate = action.type === "CreateRevision" || action.type === "CreatePod" || action.type === "CreateService";
  const isDelete = action.type === "DeleteRevision" || action.type === "DeletePod" || action.type === "DeleteService";
  const ref = refOfAction(action, target);
  if (isCreate && isApiError(error, "AlreadyExists")) return { kind: "applied", expectation: expectExists(ref) };
  if (isDelete && isApiError(error, "NotFound"))
    return { kind: "applied", expectation: expectDeleted(ref, uidOf(action)) };
  const named = new Error(`${action.type} ${ref.kind} ${ref.namespace ?? ""}/${ref.name}: ${messageOf(error)}`, {
    cause: error instanceof UnknownOutcome ? error.cause : error,
  });
  if (error instanceof UnknownOutcome) return { kind: "failed", error: named, expectation: error.expectation };
  const stale = isApiError(error, "Conflict") || (!isCreate && !isDelete && isApiError(error, "NotFound"));
  return { kind: stale ? "stale" : "failed", error: named };
}

/** The object an action writes (the ModelServing for status writes and events on it). */
function refOfAction(action: Action, target: PlanTarget): ObjectRef {
  const { namespace } = target;
  switch (action.type) {
    case "CreateRevision":
      return { kind: "ControllerRevision", namespace, name: action.revision.metadata.name };
    case "CreatePod":
      return { kind: "Pod", namespace, name: action.pod.metadata.name };
    case "CreateService":
      return { kind: "Service", namespace, name: action.service.metadata.name };
    case "AdvanceRevision":
    case "DeleteRevision":
      return { kind: "ControllerRevision", namespace, name: action.name };
    case "DeletePod":
    case "SetPodFinalizers":
    case "AnnotatePod":
    case "PatchPodImages":
    case "SetPodCondition":
      return { kind: "Pod", namespace, name: action.name };
    case "DeleteService":
      return { kind: "Service", namespace, name: action.name };
    case "WriteStatus":
    case "RecordEvent":
      return { kind: "ModelServing", namespace, name: target.name };
  }
}

function uidOf(action: Action): string | undefined {
  return "uid" in action ? action.uid : undefined;
}

function refOf(object: KubeObject): ObjectRef {
  const { name, namespace } = object.metadata;
  return namespace === undefined ? { kind: object.kind, name } : { kind: object.kind, namespace, name };
}

/** `conditions` (any JSON; non-objects dropped) with the entry of `condition.type` replaced or appended. */
function withCondition(conditions: JsonValue | undefined, condition: JsonObject): JsonObject[] {
  const list = Array.isArray(conditions) ? conditions.filter(isJsonObject) : [];
  const index = list.findIndex((entry) => entry["type"] === condition["type"]);
  if (index === -1) return [...list, condition];
  return list.map((entry, i) => (i === index ? condition : entry));
}

/** The object's annotations and labels read as `annotations` and `labels` set them (null: absent). */
function showsMetadata(
  object: KubeObject,
  annotations: Readonly<Record<string, string | null>>,
  labels: Readonly<Record<string, string>>,
): boolean {
  return (
    Object.entries(annotations).every(([key, value]) => (object.metadata.annotations?.[key] ?? null) === value) &&
    Object.entries(labels).every(([key, value]) => object.metadata.labels?.[key] === value)
  );
}

/** Every named container of the pod spec has its image from `images`. */
function showsImages(object: KubeObject, images: Readonly<Record<string, string>>): boolean {
  const containers = object.spec?.["containers"];
  const list = Array.isArray(containers) ? containers.filter(isJsonObject) : [];
  return Object.entries(images).every(([name, image]) =>
    list.some((container) => container["name"] === name && container["image"] === image),
  );
}

function showsCondition(object: KubeObject, condition: PodCondition): boolean {
  const conditions = object.status?.["conditions"];
  return (
    Array.isArray(conditions) &&
    conditions.some(
      (entry) => isJsonObject(entry) && entry["type"] === condition.type && entry["status"] === condition.status,
    )
  );
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
