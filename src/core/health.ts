/**
 * Named predicates over observed pods and instances: readiness, planned deletion, failure. Shared
 * by planning, status and the invariants, so all three mean the same thing by "Ready" or "failed".
 * Pure; time is an argument.
 */
import type { Pod, PodCondition } from "../api/kube.ts";
import { drainConfirmationKeys } from "../api/router-lease.ts";
import { ANNOTATION_DRAINING, ANNOTATION_IN_PLACE, FINALIZER_RECOVERY, SERVING_GATE } from "../api/wellknown.ts";
import type { InstancePods, PodView } from "./model.ts";

export function podCondition(pod: Pod, type: string): PodCondition | undefined {
  const conditions = pod.status?.conditions ?? [];
  // A loop, not `find`: stored pods are frozen, and V8 takes a slow path for `find` on frozen arrays.
  for (let index = 0; index < conditions.length; index++) {
    const condition = conditions[index];
    if (condition?.type === type) return condition;
  }
  return undefined;
}

/** The pod is being deleted (it has a deletionTimestamp). */
export function isTerminating(pod: Pod): boolean {
  return pod.metadata.deletionTimestamp !== undefined;
}

/** The pod holds the recovery finalizer: the controller has not released it (docs/design/pod-tracking.md). */
export function isTracked(pod: Pod): boolean {
  return pod.metadata.finalizers?.includes(FINALIZER_RECOVERY) === true;
}

/** Ready as Kubernetes computes it (containers ready and every readiness gate True), not terminating. */
export function isPodReady(pod: Pod): boolean {
  return !isTerminating(pod) && podCondition(pod, "Ready")?.status === "True";
}

function areContainersReady(pod: Pod): boolean {
  return podCondition(pod, "ContainersReady")?.status === "True";
}

/** The serving readiness gate is True: the pod may take traffic. */
function isServing(pod: Pod): boolean {
  return podCondition(pod, SERVING_GATE)?.status === "True";
}

/**
 * The controller has marked the pod for a planned deletion (drain started), at this time; an
 * unreadable mark counts as the epoch (long past: the drain's wait is over).
 */
export function drainingSinceMs(pod: Pod): number | undefined {
  const value = pod.metadata.annotations?.[ANNOTATION_DRAINING];
  if (value === undefined) return undefined;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? 0 : ms;
}

/** The controller's own annotations of a drain or an in-place update. */
const DRAIN_MARKS: readonly string[] = [ANNOTATION_DRAINING, ANNOTATION_IN_PLACE];

/**
 * Every annotation key a drain or an in-place update left on the pod: the controller's marks and
 * every router's confirmation `drained.tandem.dev/<router-id>` (DESIGN §3.6: a cancelled or
 * finished drain removes them all, so no confirmation outlives the drain it answered).
 */
export function drainMarkKeys(pod: Pod): string[] {
  const annotations = pod.metadata.annotations;
  if (annotations === undefined) return [];
  return [...DRAIN_MARKS.filter((key) => annotations[key] !== undefined), ...drainConfirmationKeys(annotations)];
}

/** The scheduler has tried and cannot place the pod (PodScheduled False, reason Unschedulable). */
function isUnschedulable(pod: Pod): boolean {
  const scheduled = podCondition(pod, "PodScheduled");
  return scheduled?.status === "False" && scheduled.reason === "Unschedulable";
}

/** The pod has been scheduled and its containers started at least once. */
function hasStarted(pod: Pod): boolean {
  const phase = pod.status?.phase;
  return phase === "Running" || phase === "Succeeded" || phase === "Failed";
}

/**
 * What planning asks of a pod, each fact computed by the predicate of the same meaning here. A
 * pod's view (model.ts) reads them once per pod object, so planning does not search the pod's
 * conditions again on every plan.
 */
export interface PodFacts {
  readonly terminating: boolean;
  readonly ready: boolean;
  readonly containersReady: boolean;
  readonly serving: boolean;
  readonly unschedulable: boolean;
  readonly started: boolean;
  readonly drainingSinceMs: number | undefined;
  /** Its phase is Failed. */
  readonly phaseFailed: boolean;
  /** Some container has restarted. */
  readonly restarted: boolean;
  /** When ContainersReady last changed; NaN when unknown. */
  readonly containersReadySinceMs: number;
  /** Some annotation of `drainMarkKeys` is present (no in-place progress can be read without one). */
  readonly marked: boolean;
  /** It holds the recovery finalizer (`isTracked`). */
  readonly tracked: boolean;
  /**
   * Terminating while it holds the recovery finalizer: deleted by someone other than the
   * controller (which releases a pod before deleting it), and not accounted for yet.
   */
  readonly lost: boolean;
}

/** Reads every fact of `pod`. */
export function podFacts(pod: Pod): PodFacts {
  const since = podCondition(pod, "ContainersReady")?.lastTransitionTime;
  const tracked = isTracked(pod);
  return {
    terminating: isTerminating(pod),
    ready: isPodReady(pod),
    containersReady: areContainersReady(pod),
    serving: isServing(pod),
    unschedulable: isUnschedulable(pod),
    started: hasStarted(pod),
    drainingSinceMs: drainingSinceMs(pod),
    phaseFailed: pod.status?.phase === "Failed",
    restarted: hasRestarted(pod),
    containersReadySinceMs: since === undefined ? Number.NaN : Date.parse(since),
    marked: drainMarkKeys(pod).length > 0,
    tracked,
    lost: tracked && isTerminating(pod),
  };
}

/** Whether a pod counts as failed at `nowMs`, or when to look again. */
export type FailureVerdict = { readonly failed: true } | { readonly failed: false; readonly recheckAtMs?: number };

/**
 * A pod has failed when its phase is Failed, or when a container has restarted and the pod's
 * containers have not been ready for `restartGracePeriodSeconds`, measured from the
 * ContainersReady condition's lastTransitionTime (observable, so it survives a controller restart).
 */
export function podFailure(facts: PodFacts, restartGracePeriodSeconds: number, nowMs: number): FailureVerdict {
  if (facts.phaseFailed) return FAILED;
  if (!facts.restarted || facts.containersReady) return NOT_FAILED;
  if (Number.isNaN(facts.containersReadySinceMs)) return FAILED;
  const dueMs = facts.containersReadySinceMs + restartGracePeriodSeconds * 1000;
  return nowMs >= dueMs ? FAILED : { failed: false, recheckAtMs: dueMs };
}

/** The verdicts without a time, shared: planning asks for every live pod on every plan. */
const FAILED: FailureVerdict = Object.freeze({ failed: true });
const NOT_FAILED: FailureVerdict = Object.freeze({ failed: false });

/** Some container of the pod has restarted. */
function hasRestarted(pod: Pod): boolean {
  return (pod.status?.containerStatuses ?? []).some((status) => status.restartCount > 0);
}

/** An instance's pods sorted by what planning needs to know about them. */
export interface InstanceHealth {
  /** Pods not being deleted. */
  readonly live: readonly PodView[];
  /** Pods being deleted (by anyone). */
  readonly terminating: readonly PodView[];
  /** Terminating pods at expected indices deleted by someone else and not released yet (`PodFacts.lost`). */
  readonly lost: readonly PodView[];
  /** Expected pod indices with no pod at all. */
  readonly absent: readonly number[];
  /** Live pods beyond the expected count (a smaller workerReplicas). */
  readonly extra: readonly PodView[];
  /** Every expected pod is live. */
  readonly complete: boolean;
  /** Complete and every pod Ready. */
  readonly ready: boolean;
  /** Some live pod is being drained (it has a drain mark with its start time). */
  readonly draining: boolean;
  /** Some live pod carries a drain or in-place mark (`PodFacts.marked`). */
  readonly marked: boolean;
  /** Some live pod is Pending because the scheduler cannot place it. */
  readonly unschedulable: boolean;
}

/** Sorts an instance's pods against `expectedPods` (1 + workerReplicas), in one pass over them. */
export function instanceHealth(pods: InstancePods | undefined, expectedPods: number): InstanceHealth {
  const live: PodView[] = [];
  const terminating: PodView[] = [];
  const lost: PodView[] = [];
  const extra: PodView[] = [];
  // Pods at expected indices: all of them, and the live ones.
  let expectedPresent = 0;
  let expectedLive = 0;
  let allReady = true;
  let draining = false;
  let marked = false;
  let unschedulable = false;
  // The tree keys each pod by its own index (distinct non-negative integers).
  for (const [index, view] of pods ?? []) {
    const { facts } = view;
    if (index < expectedPods) expectedPresent += 1;
    if (facts.terminating) {
      terminating.push(view);
      if (facts.lost && index < expectedPods) lost.push(view);
      continue;
    }
    live.push(view);
    if (index < expectedPods) expectedLive += 1;
    else extra.push(view);
    if (!facts.ready) allReady = false;
    if (facts.drainingSinceMs !== undefined) draining = true;
    if (facts.marked) marked = true;
    if (facts.unschedulable) unschedulable = true;
  }
  const absent: number[] = [];
  // Usually every expected index has a pod: then none is searched for.
  if (expectedPresent < expectedPods)
    for (let index = 0; index < expectedPods; index++) if (pods?.has(index) !== true) absent.push(index);
  const complete = expectedLive === expectedPods;
  return {
    live,
    terminating,
    lost,
    absent,
    extra,
    complete,
    ready: complete && allReady,
    draining,
    marked,
    unschedulable,
  };
}

/** `[0, 1, …, count − 1]` for an integer `count`; empty when `count` ≤ 0. */
export function range(count: number): number[] {
  const indices: number[] = [];
  for (let index = 0; index < count; index++) indices.push(index);
  return indices;
}
