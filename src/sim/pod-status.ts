/**
 * Pure pieces of the simulated kubelet: the runtime state of a container, and the pod status the
 * kubelet reports from it (phase, the conditions it owns, containerStatuses). Conditions the
 * kubelet does not own (PodScheduled from the scheduler, readiness-gate conditions such as
 * `tandem.dev/serving` from the controller) are kept as they are; a condition's
 * `lastTransitionTime` moves only when its status does.
 */
import { createHash } from "node:crypto";
import type { JsonObject, JsonValue, KubeObject, Timer } from "../engine/ports.ts";
import { isJsonObject } from "./json.ts";

/**
 * Where a container is in its life:
 * - `creating`: waiting for its image or to be (re)started (waiting, ContainerCreating);
 * - `starting`: its process runs but has not finished starting (running, not ready);
 * - `running`: started and ready;
 * - `backoff`: it exited and waits out a restart back-off (waiting, CrashLoopBackOff);
 * - `exited`: it stopped for good (terminated): the pod is terminating or will not restart it.
 */
export type ContainerPhase = "creating" | "starting" | "running" | "backoff" | "exited";

export interface ContainerExit {
  readonly exitCode: number;
  readonly reason: string;
  readonly containerID: string | undefined;
  readonly startedAtMs: number | undefined;
  readonly finishedAtMs: number;
}

/** One container as the kubelet runs it; mutated by the kubelet only. */
export interface ContainerRuntime {
  readonly name: string;
  /** The image this container runs or is being (re)started with. */
  image: string;
  phase: ContainerPhase;
  /** The current container's id, or the last one's; undefined until it first starts. */
  containerID: string | undefined;
  imageID: string | undefined;
  startedAtMs: number | undefined;
  restartCount: number;
  /** Crashes since the image last changed: the exponent of the restart back-off. */
  crashes: number;
  /** Seconds of the back-off being waited out, for the CrashLoopBackOff message. */
  backoffSeconds: number;
  lastExit: ContainerExit | undefined;
  /** The next step of this container (image ready, started, crash, restart), if one is due. */
  timer: Timer | undefined;
  /** Its image was changed in place (a patch of a running pod), not given at the pod's creation. */
  changedInPlace: boolean;
}

export function newContainer(name: string, image: string): ContainerRuntime {
  return {
    name,
    image,
    phase: "creating",
    containerID: undefined,
    imageID: undefined,
    startedAtMs: undefined,
    restartCount: 0,
    crashes: 0,
    backoffSeconds: 0,
    lastExit: undefined,
    timer: undefined,
    changedInPlace: false,
  };
}

/**
 * `imageIdOf` by image name: the digest is a pure function of the name. Scenarios use few images;
 * the bound keeps a long-lived process that simulates many from growing it without limit.
 */
const imageIds = new Map<string, string>();
const MAX_REMEMBERED_IMAGE_IDS = 1024;

/** A deterministic digest per image name, in the form `sim://<image>@sha256:<hex>`. */
export function imageIdOf(image: string): string {
  let imageId = imageIds.get(image);
  if (imageId === undefined) {
    imageId = `sim://${image}@sha256:${createHash("sha256").update(image).digest("hex")}`;
    if (imageIds.size >= MAX_REMEMBERED_IMAGE_IDS) imageIds.clear();
    imageIds.set(image, imageId);
  }
  return imageId;
}

/** Formats a virtual instant as a Kubernetes timestamp (the clock's `rfc3339`). */
export type Rfc3339 = (atMs: number) => string;

/** `status.containerStatuses[]` for one container. */
export function containerStatus(container: ContainerRuntime, podName: string, rfc3339: Rfc3339): JsonObject {
  const status: JsonObject = {
    name: container.name,
    image: container.image,
    ready: container.phase === "running",
    restartCount: container.restartCount,
    started: container.phase === "running",
    state: containerState(container, podName, rfc3339),
  };
  // A waiting container has no container of its own yet; the last one is under lastState.
  const exists = container.phase === "starting" || container.phase === "running" || container.phase === "exited";
  if (exists && container.containerID !== undefined) status["containerID"] = container.containerID;
  if (exists && container.imageID !== undefined) status["imageID"] = container.imageID;
  const last = container.phase === "exited" ? undefined : container.lastExit;
  if (last !== undefined) status["lastState"] = { terminated: terminatedState(last, rfc3339) };
  return status;
}

function containerState(container: ContainerRuntime, podName: string, rfc3339: Rfc3339): JsonObject {
  switch (container.phase) {
    case "creating":
      return { waiting: { reason: "ContainerCreating" } };
    case "starting":
    case "running":
      return { running: { startedAt: rfc3339(container.startedAtMs ?? 0) } };
    case "backoff": {
      const message = `back-off ${container.backoffSeconds}s restarting failed container=${container.name} pod=${podName}`;
      return { waiting: { reason: "CrashLoopBackOff", message } };
    }
    case "exited":
      return {
        terminated:
          container.lastExit === undefined
            ? { exitCode: 0, reason: "Completed" }
            : terminatedState(container.lastExit, rfc3339),
      };
  }
}

function terminatedState(exit: ContainerExit, rfc3339: Rfc3339): JsonObject {
  const state: JsonObject = { exitCode: exit.exitCode, reason: exit.reason, finishedAt: rfc3339(exit.finishedAtMs) };
  if (exit.startedAtMs !== undefined) state["startedAt"] = rfc3339(exit.startedAtMs);
  if (exit.containerID !== undefined) state["containerID"] = exit.containerID;
  return state;
}

/**
 * The pod phase: terminal once every container exited (Succeeded when all exit codes are 0,
 * else Failed), Running once every container has been started at least once, else Pending.
 */
export function podPhase(containers: readonly ContainerRuntime[]): "Pending" | "Running" | "Succeeded" | "Failed" {
  if (containers.length > 0 && containers.every((container) => container.phase === "exited")) {
    return containers.every((container) => (container.lastExit?.exitCode ?? 0) === 0) ? "Succeeded" : "Failed";
  }
  return containers.every((container) => container.containerID !== undefined) ? "Running" : "Pending";
}

/** A condition as its owner (kubelet, scheduler) wants it; `lastTransitionTime` is decided when merging. */
export interface DesiredCondition {
  readonly type: string;
  readonly status: "True" | "False";
  readonly reason?: string;
  readonly message?: string;
}

/**
 * The conditions the kubelet reports (Initialized, ContainersReady, Ready, and PodScheduled=True:
 * a pod on a kubelet is scheduled, also one created with its nodeName set), from the containers
 * and the pod's readiness gates: Ready is True only when ContainersReady is True and every gate's
 * condition is present and True.
 */
export function kubeletConditions(pod: KubeObject, containers: readonly ContainerRuntime[]): DesiredCondition[] {
  const [containersReady, ready] = readiness(pod, containers);
  return [INITIALIZED, containersReady, ready, POD_SCHEDULED];
}

const INITIALIZED: DesiredCondition = { type: "Initialized", status: "True" };
const POD_SCHEDULED: DesiredCondition = { type: "PodScheduled", status: "True" };
const COMPLETED: readonly [DesiredCondition, DesiredCondition] = [
  { type: "ContainersReady", status: "False", reason: "PodCompleted" },
  { type: "Ready", status: "False", reason: "PodCompleted" },
];
const CONTAINERS_READY: DesiredCondition = { type: "ContainersReady", status: "True" };
const READY: DesiredCondition = { type: "Ready", status: "True" };

/** ContainersReady and Ready, with Kubernetes' reasons. */
function readiness(
  pod: KubeObject,
  containers: readonly ContainerRuntime[],
): readonly [DesiredCondition, DesiredCondition] {
  const phase = podPhase(containers);
  if (phase === "Succeeded" || phase === "Failed") return COMPLETED;
  let unready: string | undefined;
  for (const container of containers)
    if (container.phase !== "running")
      unready = unready === undefined ? container.name : `${unready} ${container.name}`;
  if (unready !== undefined) {
    const message = `containers with unready status: [${unready}]`;
    return [
      { type: "ContainersReady", status: "False", reason: "ContainersNotReady", message },
      { type: "Ready", status: "False", reason: "ContainersNotReady", message },
    ];
  }
  const gateProblems = readinessGateProblems(pod);
  if (gateProblems !== undefined)
    return [
      CONTAINERS_READY,
      { type: "Ready", status: "False", reason: "ReadinessGatesNotReady", message: gateProblems },
    ];
  return [CONTAINERS_READY, READY];
}

/** Why the pod's readiness gates do not pass, in gate order and joined by ", "; undefined when they all pass. */
function readinessGateProblems(pod: KubeObject): string | undefined {
  const gates = pod.spec?.["readinessGates"];
  if (!Array.isArray(gates)) return undefined;
  const conditions = conditionsOf(pod);
  let problems: string | undefined;
  for (let index = 0; index < gates.length; index++) {
    const gate = gates[index];
    const conditionType = isJsonObject(gate) ? gate["conditionType"] : undefined;
    const problem = typeof conditionType === "string" ? gateProblem(conditions, conditionType) : undefined;
    if (problem !== undefined) problems = problems === undefined ? problem : `${problems}, ${problem}`;
  }
  return problems;
}

function gateProblem(conditions: readonly JsonObject[], conditionType: string): string | undefined {
  const condition = conditions[indexOfType(conditions, conditionType)];
  if (condition === undefined) return `corresponding condition of pod readiness gate "${conditionType}" does not exist`;
  const status = condition["status"];
  return status === "True"
    ? undefined
    : `the status of pod readiness gate "${conditionType}" is not "True", but ${JSON.stringify(status)}`;
}

/** The pod's conditions that are objects, read-only: usually the stored list itself, not a copy. */
export function conditionsOf(pod: KubeObject): readonly JsonObject[] {
  const conditions = pod.status?.["conditions"];
  if (!Array.isArray(conditions)) return [];
  // An index loop, not `every` or for-of: this runs on every pod change, and stored lists are
  // frozen, which V8's array builtins and iterators handle on a slow path.
  for (let index = 0; index < conditions.length; index++)
    if (!isJsonObject(conditions[index])) return conditions.filter(isJsonObject);
  return conditions as readonly JsonObject[];
}

/**
 * The pod's conditions with `desired` merged in: each replaces the condition of its type in place
 * (new types are appended), keeping its `lastTransitionTime` unless the status changes; other
 * conditions are kept untouched, and so is a condition already as desired (the same object, so
 * comparing the result with the stored list finds it equal at once).
 */
export function mergeConditions(
  existing: readonly JsonObject[],
  desired: readonly DesiredCondition[],
  nowRfc3339: string,
): JsonValue[] {
  // A new list; the existing condition objects are shared (only read), not copied.
  const merged: JsonObject[] = [...existing];
  for (const want of desired) {
    const index = indexOfType(merged, want.type);
    const old = index === -1 ? undefined : merged[index];
    const since =
      old !== undefined && old["status"] === want.status && typeof old["lastTransitionTime"] === "string"
        ? old["lastTransitionTime"]
        : nowRfc3339;
    if (old !== undefined && isAsDesired(old, want, since)) continue;
    const next: JsonObject = { type: want.type, status: want.status, lastTransitionTime: since };
    if (want.reason !== undefined) next["reason"] = want.reason;
    if (want.message !== undefined) next["message"] = want.message;
    if (index === -1) merged.push(next);
    else merged[index] = next;
  }
  return merged;
}

/**
 * True when `condition` (of `want`'s type) is the same JSON text as the condition `mergeConditions`
 * would make of `want` with `since`: the same values, and the same keys in the same order.
 */
function isAsDesired(condition: JsonObject, want: DesiredCondition, since: string): boolean {
  if (condition["status"] !== want.status || condition["lastTransitionTime"] !== since) return false;
  if (condition["reason"] !== want.reason || condition["message"] !== want.message) return false;
  const keys = Object.keys(condition);
  if (keys[0] !== "type" || keys[1] !== "status" || keys[2] !== "lastTransitionTime") return false;
  let next = 3;
  if (want.reason !== undefined && keys[next++] !== "reason") return false;
  if (want.message !== undefined && keys[next++] !== "message") return false;
  return keys.length === next;
}

/** The index of the first condition of `type`, or -1. */
function indexOfType(conditions: readonly JsonObject[], type: string): number {
  for (let index = 0; index < conditions.length; index++) if (conditions[index]?.["type"] === type) return index;
  return -1;
}

/** True when the pod's Ready condition is True. */
export function isPodReady(pod: KubeObject): boolean {
  const conditions = conditionsOf(pod);
  for (let index = 0; index < conditions.length; index++) {
    const condition = conditions[index];
    if (condition?.["type"] === "Ready" && condition["status"] === "True") return true;
  }
  return false;
}
