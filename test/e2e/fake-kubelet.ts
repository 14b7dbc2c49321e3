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

/** What a test may change about the fake node. */
export interface FakeKubeletOptions {
  /** Poll interval. Default 100. */
  readonly intervalMs?: number;
  /** The IP a pod gets when it first runs. Default: 10.244.x.y from its uid (nothing listens there). */
  readonly podIp?: (pod: any) => string;
  /** How long the pod stays untouched (unscheduled, not started) after this kubelet first sees it. Default 0. */
  readonly holdMs?: (pod: any) => number;
  /** Called once the pod's Running status is stored (its containers "run"), and on each later tick. */
  readonly onRunning?: (pod: any) => void | Promise<void>;
  /** Called when the pod is seen terminating, before it is removed: its containers stop here. */
  readonly onTerminating?: (pod: any) => void | Promise<void>;
}

export function startFakeKubelet(admin: KubeClient, namespace: string, options: FakeKubeletOptions = {}): FakeKubelet {
  const intervalMs = options.intervalMs ?? 100;
  const firstSeenMs = new Map<string, number>();
  const held = (pod: any): boolean => {
    const uid: string = pod.metadata.uid;
    if (!firstSeenMs.has(uid)) firstSeenMs.set(uid, Date.now());
    return Date.now() - (firstSeenMs.get(uid) ?? 0) < (options.holdMs?.(pod) ?? 0);
  };
  let stopped = false;
  let removed = 0;
  const loop = (async () => {
    while (!stopped) {
      try {
        const list = await admin.list(PODS, namespace);
        for (const pod of list.items as any[])
          if (pod.metadata.deletionTimestamp !== undefined || !held(pod))
            removed += await tend(admin, namespace, pod, options);
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
async function tend(admin: KubeClient, namespace: string, pod: any, options: FakeKubeletOptions): Promise<number> {
  const name: string = pod.metadata.name;
  if (pod.metadata.deletionTimestamp !== undefined) {
    await options.onTerminating?.(pod);
    // Deleted with grace 0 already: only its finalizers hold it, which are not the kubelet's.
    if (pod.metadata.deletionGracePeriodSeconds === 0) return 0;
    const response = await admin.request("DELETE", resourcePath(PODS, { namespace, name }), {
      apiVersion: "v1",
      kind: "DeleteOptions",
      gracePeriodSeconds: 0,
      preconditions: { uid: pod.metadata.uid },
    });
    return response.status === 200 ? 1 : 0;
  }
  if (pod.spec.nodeName === undefined || pod.spec.nodeName === "") {
    const binding = {
      apiVersion: "v1",
      kind: "Binding",
      metadata: { name },
      target: { apiVersion: "v1", kind: "Node", name: FAKE_NODE },
    };
    await admin.request("POST", resourcePath(PODS, { namespace, name, subresource: "binding" }), binding);
    return 0;
  }
  const status = desiredStatus(pod, options.podIp);
  if (!isDeepStrictEqual(status, pod.status)) {
    const response = await admin.request("PUT", resourcePath(PODS, { namespace, name, subresource: "status" }), {
      ...pod,
      status,
    });
    if (response.status === 200) await options.onRunning?.(response.body);
  } else {
    await options.onRunning?.(pod);
  }
  return 0;
}

/** The status a healthy node would report for `pod`, keeping conditions it does not own. */
export function desiredStatus(pod: any, podIp: (pod: any) => string = fakeIp): any {
  const old = pod.status ?? {};
  const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
  const containerStatuses = (pod.spec.containers as any[]).map((container) => {
    const previous = (old.containerStatuses ?? []).find((status: any) => status.name === container.name);
    const same = previous?.image === container.image;
    return same
      ? previous
      : {
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
  const owned: Record<string, string> = {
    PodScheduled: "True",
    Initialized: "True",
    ContainersReady: "True",
    Ready: gatesTrue ? "True" : "False",
  };
  const kept = conditions.filter((condition) => !(condition.type in owned));
  const mine = Object.entries(owned).map(([type, status]) => {
    const previous = find(type);
    return previous?.status === status
      ? previous
      : {
          type,
          status,
          lastProbeTime: null,
          lastTransitionTime: now,
          ...(status === "False" ? { reason: "ReadinessGatesNotReady" } : {}),
        };
  });
  return {
    ...old,
    phase: "Running",
    hostIP: "127.0.0.1",
    podIP: old.podIP ?? podIp(pod),
    startTime: old.startTime ?? now,
    conditions: [...mine, ...kept],
    containerStatuses,
  };
}

function fakeIp(pod: any): string {
  const hex = (pod.metadata.uid as string).replace(/[^0-9a-f]/g, "");
  return `10.244.${Number.parseInt(hex.slice(0, 2), 16)}.${Number.parseInt(hex.slice(2, 4), 16) || 1}`;
}
