/**
 * A fake kubelet for the e2e tests: there is no scheduler or kubelet on the test control plane, so
 * this loop plays both for the pods of one namespace, through the API server (admin identity):
 *
 * - binds each unscheduled pod to node `fake-node` through the `binding` subresource;
 * - reports bound pods Running with every container started and ready, running the image of its
 *   spec (a new imageID when the image changes); `ContainersReady` True;
 * - computes `Ready` as Kubernetes does: containers ready and every readiness gate's condition True
 *   (the controller sets `tandem.dev/serving`), keeping conditions other writers own;
 * - removes terminating pods at once (delete with grace 0), as a kubelet does once containers stop;
 *   a pod with finalizers (the controller's `tandem.dev/recovery`) then stays until they are
 *   removed, and is not deleted again.
 *
 * It plays no router: with no router Lease registered, the controller's drains wait only the
 * settle (DESIGN §3.5).
 *
 * Status writes are full `PUT .../status` with the resourceVersion read, so a concurrent write of
 * the controller's gate condition is never lost (a conflict is retried on the next tick).
 * Polls every `intervalMs` (default 100); `stop()` resolves after the current tick.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { isDeepStrictEqual } from "node:util";
import { type KubeClient, resourcePath } from "./client.ts";

const PODS = { group: "", version: "v1", plural: "pods", namespaced: true } as const;
export const FAKE_NODE = "fake-node";

export interface FakeKubelet {
  stop(): Promise<void>;
  /** Pods deleted with grace 0 after the controller (or a test) started deleting them. */
  removedCount(): number;
}

export function startFakeKubelet(admin: KubeClient, namespace: string, intervalMs = 100): FakeKubelet {
  let stopped = false;
  let removed = 0;
  const loop = (async () => {
    while (!stopped) {
      try {
        const list = await admin.list(PODS, namespace);
        for (const pod of list.items as any[]) removed += await tend(admin, namespace, pod);
      } catch {
        // A failed tick (conflict, API hiccup) is retried on the next one.
      }
      await sleep(intervalMs);
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
    },
    removedCount: () => removed,
  };
}

/** One step for one pod; resolves with 1 when it removed the pod. */
async function tend(admin: KubeClient, namespace: string, pod: any): Promise<number> {
  const name: string = pod.metadata.name;
  if (pod.metadata.deletionTimestamp !== undefined) {
    // Deleted with grace 0 already: only its finalizers hold it, which are not the kubelet's.
    if (pod.metadata.deletionGracePeriodSeconds === 0) return 0;
    const response = await admin.request("DELETE", resourcePath(PODS, { namespace, name }), { apiVersion: "v1", kind: "DeleteOptions", gracePeriodSeconds: 0, preconditions: { uid: pod.metadata.uid } });
    return response.status === 200 ? 1 : 0;
  }
  if (pod.spec.nodeName === undefined || pod.spec.nodeName === "") {
    const binding = { apiVersion: "v1", kind: "Binding", metadata: { name }, target: { apiVersion: "v1", kind: "Node", name: FAKE_NODE } };
    await admin.request("POST", resourcePath(PODS, { namespace, name, subresource: "binding" }), binding);
    return 0;
  }
  const status = desiredStatus(pod);
  if (!isDeepStrictEqual(status, pod.status)) {
    await admin.request("PUT", resourcePath(PODS, { namespace, name, subresource: "status" }), { ...pod, status });
  }
  return 0;
}

/** The status a healthy node would report for `pod`, keeping conditions it does not own. */
export function desiredStatus(pod: any): any {
  const old = pod.status ?? {};
  const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
  const containerStatuses = (pod.spec.containers as any[]).map((container) => {
    const previous = (old.containerStatuses ?? []).find((status: any) => status.name === container.name);
    const same = previous?.image === container.image;
    return same ? previous : {
      name: container.name,
      image: container.image,
      imageID: `fake://${container.image}`,
      containerID: `fake://${pod.metadata.uid}/${container.name}/${container.image}`,
      ready: true,
      started: true,
      restartCount: 0,
      state: { running: { startedAt: now } },
      lastState: {},
    };
  });
  const conditions: any[] = old.conditions ?? [];
  const find = (type: string): any => conditions.find((condition) => condition.type === type);
  const gatesTrue = (pod.spec.readinessGates ?? []).every((gate: any) => find(gate.conditionType)?.status === "True");
  const owned: Record<string, string> = { PodScheduled: "True", Initialized: "True", ContainersReady: "True", Ready: gatesTrue ? "True" : "False" };
  const kept = conditions.filter((condition) => !(condition.type in owned));
  const mine = Object.entries(owned).map(([type, status]) => {
    const previous = find(type);
    return previous?.status === status ? previous : { type, status, lastProbeTime: null, lastTransitionTime: now, ...(status === "False" ? { reason: "ReadinessGatesNotReady" } : {}) };
  });
  return { ...old, phase: "Running", hostIP: "127.0.0.1", podIP: old.podIP ?? fakeIp(pod.metadata.uid), startTime: old.startTime ?? now, conditions: [...mine, ...kept], containerStatuses };
}

function fakeIp(uid: string): string {
  const hex = uid.replace(/[^0-9a-f]/g, "");
  return `10.244.${Number.parseInt(hex.slice(0, 2), 16)}.${Number.parseInt(hex.slice(2, 4), 16) || 1}`;
}
