/**
 * Per-kind API server behaviour (the "strategies" of the Kubernetes registry): the static facts of
 * `KINDS` (generation, status subresource) plus what status a new object starts with, which
 * fields are immutable, and how long a graceful deletion lasts.
 */
import { KINDS } from "../engine/ports.ts";
import type { JsonObject, Kind, KindInfo, KubeObject } from "../engine/ports.ts";
import { isJsonObject, jsonEqual } from "./json.ts";

export interface KindStrategy extends KindInfo {
  /** The status a created object starts with, from the status the client sent. */
  initialStatus(sent: JsonObject | undefined): JsonObject | undefined;
  /** Why replacing `old` by `next` is refused (immutable fields), or undefined when allowed. */
  updateProblem(old: KubeObject, next: KubeObject): string | undefined;
  /** The grace period a delete gets, from the one requested (pods only). */
  gracePeriodSeconds(object: KubeObject, requestedSeconds: number | undefined): number;
}

/** Kubernetes' default `terminationGracePeriodSeconds`. */
export const DEFAULT_POD_GRACE_PERIOD_SECONDS = 30;

type Behaviour = Omit<KindStrategy, keyof KindInfo>;

const base: Behaviour = {
  initialStatus: (sent) => sent,
  updateProblem: () => undefined,
  gracePeriodSeconds: () => 0,
};

const BEHAVIOURS: Readonly<Record<Kind, Behaviour>> = {
  // Status subresource kinds: the server decides the initial status.
  ModelServing: { ...base, initialStatus: () => undefined },
  ModelRoute: { ...base, initialStatus: () => undefined },
  Pod: {
    initialStatus: () => ({ phase: "Pending" }),
    updateProblem: podUpdateProblem,
    gracePeriodSeconds: podGracePeriodSeconds,
  },
  Service: { ...base, initialStatus: () => undefined },
  ControllerRevision: {
    ...base,
    updateProblem: (old, next) => (jsonEqual(old["data"], next["data"]) ? undefined : "data: field is immutable"),
  },
  Event: base,
  Lease: base,
  // Nodes register with their capacity in status.
  Node: base,
  Namespace: { ...base, initialStatus: () => ({ phase: "Active" }) },
};

export const STRATEGIES: Readonly<Record<Kind, KindStrategy>> = {
  ModelServing: { ...KINDS.ModelServing, ...BEHAVIOURS.ModelServing },
  ModelRoute: { ...KINDS.ModelRoute, ...BEHAVIOURS.ModelRoute },
  Pod: { ...KINDS.Pod, ...BEHAVIOURS.Pod },
  Service: { ...KINDS.Service, ...BEHAVIOURS.Service },
  ControllerRevision: { ...KINDS.ControllerRevision, ...BEHAVIOURS.ControllerRevision },
  Event: { ...KINDS.Event, ...BEHAVIOURS.Event },
  Lease: { ...KINDS.Lease, ...BEHAVIOURS.Lease },
  Node: { ...KINDS.Node, ...BEHAVIOURS.Node },
  Namespace: { ...KINDS.Namespace, ...BEHAVIOURS.Namespace },
};

/**
 * A pod's spec is immutable except for container images (what an in-place update changes);
 * `nodeName` is set at creation or by binding (`ApiServer.bind`), never by an update.
 */
function podUpdateProblem(old: KubeObject, next: KubeObject): string | undefined {
  if (old.spec?.["nodeName"] !== next.spec?.["nodeName"]) return "spec.nodeName: set only at creation or by binding";
  if (!jsonEqual(withoutMutablePodFields(old.spec, next.spec), withoutMutablePodFields(next.spec, old.spec))) {
    return "spec: pod updates may not change fields other than container images";
  }
  return undefined;
}

/**
 * `spec` without the fields a pod update may change (container images), for comparing with
 * `other`'s. A container list that is the very same array in `other` (shared by copy on write)
 * is left whole: it is equal on both sides either way, and comparing it costs nothing.
 */
function withoutMutablePodFields(spec: JsonObject | undefined, other: JsonObject | undefined): JsonObject {
  const out: JsonObject = { ...spec };
  for (const field of ["containers", "initContainers"]) {
    const containers = out[field];
    if (Array.isArray(containers) && containers !== other?.[field]) {
      out[field] = containers.map((container) =>
        isJsonObject(container)
          ? Object.fromEntries(Object.entries(container).filter(([key]) => key !== "image"))
          : container,
      );
    }
  }
  return out;
}

/**
 * A pod not yet bound to a node, or one that has finished, has nothing to stop: it goes at once,
 * as in Kubernetes. Otherwise the requested period, else the pod's own, else 30 seconds.
 */
function podGracePeriodSeconds(pod: KubeObject, requestedSeconds: number | undefined): number {
  const phase = pod.status?.["phase"];
  if (pod.spec?.["nodeName"] === undefined || phase === "Succeeded" || phase === "Failed") return 0;
  if (requestedSeconds !== undefined) return requestedSeconds;
  const own = pod.spec["terminationGracePeriodSeconds"];
  return typeof own === "number" ? own : DEFAULT_POD_GRACE_PERIOD_SECONDS;
}
