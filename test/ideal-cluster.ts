/**
 * A minimal, idealized cluster for unit tests of `plan`: applies actions instantly and makes every
 * pod Running and Ready at once. No scheduler, no lag, no faults — the simulator covers those.
 *
 * In-place image changes (`PatchPodImages`) restart the changed containers at once: their status
 * gets the new image, a new containerID and imageID, and one more restart; an image listed in
 * `badImages` never becomes ready (CrashLoopBackOff). Pod writes bump the pod's resourceVersion,
 * and a write conditional on another version is dropped, as the API server would refuse it.
 */
import type { Pod, PodCondition, Service } from "../src/api/kube.ts";
import type { Action } from "../src/core/actions.ts";
import type { Observed, ObservedRouter } from "../src/core/observed.ts";
import { plan } from "../src/core/plan.ts";

export interface IdealCluster {
  modelServing: Record<string, any>;
  pods: Map<string, Pod>;
  services: Map<string, Service>;
  revisions: Map<string, Record<string, any>>;
  uidCounter: number;
  /** Images whose containers crash-loop after an in-place patch. */
  badImages: Set<string>;
  /** Actions dropped because their resourceVersion precondition failed. */
  conflicts: number;
  /** The routers every plan observes (none by default: drains wait only the settle). */
  routers: ObservedRouter[];
}

export function idealCluster(modelServing: Record<string, any>): IdealCluster {
  return {
    modelServing: {
      ...structuredClone(modelServing),
      metadata: { namespace: "ns", uid: "ms-uid", generation: 1, ...modelServing.metadata },
    },
    pods: new Map(),
    services: new Map(),
    revisions: new Map(),
    uidCounter: 0,
    badImages: new Set(),
    conflicts: 0,
    routers: [],
  };
}

export function observe(cluster: IdealCluster): Observed {
  return {
    modelServing: structuredClone(cluster.modelServing),
    pods: [...cluster.pods.values()].map((p) => structuredClone(p)),
    services: [...cluster.services.values()],
    revisions: [...cluster.revisions.values()],
    routers: cluster.routers,
  };
}

const T0 = "2026-11-30T00:00:00Z";

/** `pod` Pending because the scheduler cannot place it (no node has room), as the scheduler reports it. */
export function unschedulablePod(pod: Pod): Pod {
  return {
    ...pod,
    status: {
      phase: "Pending",
      conditions: [{ type: "PodScheduled", status: "False", reason: "Unschedulable", lastTransitionTime: T0 }],
    },
  };
}

/** A pod as a perfect kubelet would report it once its containers run. */
export function readyPod(pod: Pod, serving: boolean): Pod {
  const conditions = [
    { type: "PodScheduled", status: "True" as const, lastTransitionTime: T0 },
    { type: "ContainersReady", status: "True" as const, lastTransitionTime: T0 },
    { type: "Ready", status: serving ? ("True" as const) : ("False" as const), lastTransitionTime: T0 },
    ...(serving ? [{ type: "tandem.dev/serving", status: "True" as const, lastTransitionTime: T0 }] : []),
  ];
  const uid = pod.metadata.uid ?? "";
  return {
    ...pod,
    status: {
      phase: "Running",
      conditions,
      containerStatuses: pod.spec.containers.map((c) => ({
        name: c.name,
        image: c.image,
        imageID: `sha:${c.image}`,
        containerID: `ctr://${uid}/${c.name}/0`,
        ready: true,
        restartCount: 0,
      })),
    },
  };
}

/** The pod after its changed containers restarted on their new images (see the module comment). */
function patchImages(cluster: IdealCluster, pod: Pod, images: Readonly<Record<string, string>>): void {
  pod.spec.containers = pod.spec.containers.map((c) =>
    images[c.name] === undefined ? c : { ...c, image: images[c.name]! },
  );
  const statuses = (pod.status?.containerStatuses ?? []).map((status) => {
    const image = images[status.name];
    if (image === undefined) return status;
    const restartCount = status.restartCount + 1;
    const restarted = {
      ...status,
      image,
      imageID: `sha:${image}`,
      containerID: `ctr://${pod.metadata.uid ?? ""}/${status.name}/${restartCount}`,
      restartCount,
    };
    return cluster.badImages.has(image)
      ? { ...restarted, ready: false, state: { waiting: { reason: "CrashLoopBackOff" } } }
      : { ...restarted, ready: true, state: { running: {} } };
  });
  const ready = statuses.every((status) => status.ready);
  const others = (pod.status?.conditions ?? []).filter((c) => c.type !== "ContainersReady" && c.type !== "Ready");
  const serving = others.some((c) => c.type === "tandem.dev/serving" && c.status === "True");
  const readiness = [
    { type: "ContainersReady", status: ready ? ("True" as const) : ("False" as const), lastTransitionTime: T0 },
    { type: "Ready", status: ready && serving ? ("True" as const) : ("False" as const), lastTransitionTime: T0 },
  ];
  pod.status = { ...pod.status, containerStatuses: statuses, conditions: [...others, ...readiness] };
}

/** A pod write: dropped (counted) when conditional on a version the pod is no longer at. */
function podWrite(
  cluster: IdealCluster,
  name: string,
  resourceVersion: string | undefined,
  write: (pod: Pod) => void,
): void {
  const pod = cluster.pods.get(name);
  if (pod === undefined) return;
  if (resourceVersion !== undefined && pod.metadata.resourceVersion !== resourceVersion) {
    cluster.conflicts += 1;
    return;
  }
  write(pod);
  pod.metadata.resourceVersion = String(Number(pod.metadata.resourceVersion ?? "0") + 1);
}

export function apply(cluster: IdealCluster, actions: readonly Action[]): void {
  for (const action of actions) {
    switch (action.type) {
      case "CreateRevision":
        cluster.revisions.set(action.revision.metadata.name, structuredClone(action.revision));
        break;
      case "AdvanceRevision":
        cluster.revisions.get(action.name)!.revision = action.revision;
        break;
      case "DeleteRevision":
        cluster.revisions.delete(action.name);
        break;
      case "WriteStatus":
        cluster.modelServing.status = structuredClone(action.status);
        break;
      case "CreatePod":
        cluster.pods.set(
          action.pod.metadata.name,
          readyPod(
            {
              ...structuredClone(action.pod),
              metadata: { ...action.pod.metadata, uid: `uid-${++cluster.uidCounter}`, resourceVersion: "1" },
            },
            false,
          ),
        );
        break;
      case "DeletePod":
        remove(cluster, action.name, action.release?.finalizers);
        break;
      case "SetPodFinalizers":
        podWrite(cluster, action.name, action.resourceVersion, (pod) => {
          pod.metadata.finalizers = [...action.finalizers];
        });
        if (cluster.pods.get(action.name)?.metadata.deletionTimestamp !== undefined)
          remove(cluster, action.name, action.finalizers);
        break;
      case "AnnotatePod": {
        // One write; with a gate, a status write that sets the condition too.
        const version = action.gate?.resourceVersion ?? action.release?.resourceVersion;
        podWrite(cluster, action.name, version, (pod) => {
          const merged = { ...pod.metadata.annotations, ...action.annotations };
          pod.metadata.annotations = Object.fromEntries(
            Object.entries(merged).filter((entry): entry is [string, string] => entry[1] !== null),
          );
          if (action.labels !== undefined) pod.metadata.labels = { ...pod.metadata.labels, ...action.labels };
          if (action.release !== undefined) pod.metadata.finalizers = [...action.release.finalizers];
          if (action.gate !== undefined) withCondition(pod, action.gate.condition);
        });
        break;
      }
      case "PatchPodImages":
        podWrite(cluster, action.name, action.resourceVersion, (pod) => {
          const merged = { ...pod.metadata.annotations, ...action.annotations };
          pod.metadata.annotations = Object.fromEntries(
            Object.entries(merged).filter((entry): entry is [string, string] => entry[1] !== null),
          );
          patchImages(cluster, pod, action.images);
        });
        break;
      case "SetPodCondition":
        setCondition(cluster, action.name, action.resourceVersion, action.condition);
        break;
      case "CreateService":
        cluster.services.set(action.service.metadata.name, {
          ...structuredClone(action.service),
          metadata: { ...action.service.metadata, uid: `uid-${++cluster.uidCounter}` },
        });
        break;
      case "DeleteService":
        cluster.services.delete(action.name);
        break;
      case "RecordEvent":
        break;
    }
  }
}

/** Sets one pod condition (the serving gate) and Ready with it, conditional on `resourceVersion`. */
function setCondition(cluster: IdealCluster, name: string, resourceVersion: string, condition: PodCondition): void {
  podWrite(cluster, name, resourceVersion, (pod) => withCondition(pod, condition));
}

/** Sets `condition` in the pod's status, and Ready as the kubelet would derive it. */
function withCondition(pod: Pod, condition: PodCondition): void {
  const others = (pod.status?.conditions ?? []).filter((c) => c.type !== condition.type && c.type !== "Ready");
  const containersReady = others.some((c) => c.type === "ContainersReady" && c.status === "True");
  const ready = condition.status === "True" && containersReady;
  pod.status = {
    ...pod.status,
    conditions: [...others, condition, { type: "Ready", status: ready ? "True" : "False", lastTransitionTime: T0 }],
  };
}

/**
 * Deletes the pod as the API server would (`finalizers`: what it holds then, its own when
 * undefined): gone at once without finalizers, else terminating until they are removed.
 */
function remove(cluster: IdealCluster, name: string, finalizers: readonly string[] | undefined): void {
  const pod = cluster.pods.get(name);
  if (pod === undefined) return;
  if ((finalizers ?? pod.metadata.finalizers ?? []).length === 0) cluster.pods.delete(name);
  else pod.metadata.deletionTimestamp ??= T0;
}

/** Someone other than the controller deletes the pod (a user, an eviction). */
export function deleteByOthers(cluster: IdealCluster, name: string): void {
  remove(cluster, name, undefined);
}

/** Plans and applies until a plan is empty; returns every action applied. Bounded. */
export function converge(cluster: IdealCluster, nowMs: number, maxRounds = 20): Action[] {
  const all: Action[] = [];
  for (let round = 0; round < maxRounds; round++) {
    const { actions } = plan(observe(cluster), nowMs);
    if (actions.length === 0) return all;
    apply(cluster, actions);
    all.push(...actions);
  }
  throw new Error(`no convergence after ${maxRounds} rounds`);
}

/** A pod's `tandem.dev/<key>` label, "" when absent. */
export const label = (pod: Pod, key: string): string => pod.metadata.labels?.[`tandem.dev/${key}`] ?? "";

/** Ready and not marked for a drain: it serves. */
export const servesReady = (pod: Pod): boolean =>
  pod.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true &&
  pod.metadata.annotations?.["tandem.dev/draining"] === undefined;

/** Available instances per `group/role` (every pod present, live and serving), surge included. */
export function availableInstances(
  cluster: IdealCluster,
  roles: readonly { readonly name: string; readonly workerReplicas: number }[],
): Map<string, number> {
  const instances = new Map<string, Pod[]>();
  for (const pod of cluster.pods.values()) {
    if (pod.metadata.deletionTimestamp !== undefined) continue;
    const key = `${label(pod, "group")}/${label(pod, "role")}/${label(pod, "instance")}`;
    instances.set(key, [...(instances.get(key) ?? []), pod]);
  }
  const counts = new Map<string, number>();
  for (const [key, pods] of instances) {
    const role = roles.find((r) => key.split("/")[1] === r.name);
    if (role === undefined || pods.length !== 1 + role.workerReplicas || !pods.every(servesReady)) continue;
    const groupRole = key.split("/").slice(0, 2).join("/");
    counts.set(groupRole, (counts.get(groupRole) ?? 0) + 1);
  }
  return counts;
}
