/**
 * Engine-mocks behind the entry pods that KWOK runs, for e2e tests of the request path. KWOK gives
 * each pod an IP from its node's pod CIDR on the loopback range (127.10.N.M: all of 127.0.0.0/8 is
 * the loopback interface on Linux, see cluster.ts `nodeObject`); once an entry pod is Running an
 * engine-mock listens on that IP and the route's port, with `--kv-format` from the first
 * container's env `KV_FORMAT` (default `v1`). When the pod is seen terminating (or gone), its
 * engine stops at once — every request still on it is cut, as the containers of a deleted pod
 * would — and the pod's annotations at that instant are kept, so a test can check what the pod
 * carried when its deletion began (the drain confirmations).
 *
 * It follows the pods with a watch rather than by polling: KWOK deletes a terminating pod within
 * milliseconds, and only a watch is sure to deliver the state it had. This is what remains of the
 * fake kubelet: KWOK reports the pods, this runs the processes a kubelet would start on them.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { startEngineMock } from "../../src/router/engine-mock/server.ts";
import type { EngineMock } from "../../src/router/engine-mock/server.ts";
import type { KubeClient } from "./client.ts";

const PODS = { group: "", version: "v1", plural: "pods", namespaced: true } as const;

/** A deleted entry pod: its name, role label and annotations when its deletion was first seen. */
export interface DeletedPod {
  readonly name: string;
  readonly role: string;
  readonly annotations: Readonly<Record<string, string>>;
}

export interface EnginePods {
  readonly deleted: () => readonly DeletedPod[];
  /** Stops following the pods and stops every engine. */
  close(): Promise<void>;
}

/** Latency of every engine; generation is deterministic. */
export interface EngineLatency {
  readonly ttftMs: number;
  readonly tpotMs: number;
}

/** Engines on `port` behind the entry pods of `namespace`, followed through `admin`. */
export function startEnginePods(
  admin: KubeClient,
  namespace: string,
  port: number,
  latency: EngineLatency,
): EnginePods {
  const engines = new Map<string, { readonly ip: string; readonly started: Promise<EngineMock | undefined> }>();
  /** An IP's engine being closed: KWOK reuses a deleted pod's IP, and the next engine must wait for the port. */
  const closing = new Map<string, Promise<void>>();
  const lastSeen = new Map<string, any>();
  const deleted: DeletedPod[] = [];
  const seenDeleting = new Set<string>();

  const start = (pod: any): void => {
    const uid: string = pod.metadata.uid;
    const ip: string = pod.status.podIP;
    const started = (async () => {
      await closing.get(ip);
      return startEngineMock({ host: ip, port, kvFormat: kvFormat(pod), ...latency });
    })().catch(() => undefined);
    engines.set(uid, { ip, started });
  };
  const stop = (pod: any): void => {
    const uid: string = pod.metadata.uid;
    if (seenDeleting.has(uid)) return;
    seenDeleting.add(uid);
    if (pod.metadata.labels?.["tandem.dev/entry"] === "true") {
      deleted.push({
        name: pod.metadata.name,
        role: pod.metadata.labels["tandem.dev/role"] ?? "",
        annotations: { ...(pod.metadata.annotations ?? {}) },
      });
    }
    const engine = engines.get(uid);
    engines.delete(uid);
    if (engine !== undefined)
      closing.set(
        engine.ip,
        engine.started.then((mock) => mock?.close()),
      );
  };
  const onEvent = (type: string, pod: any): void => {
    const uid: string = pod.metadata.uid;
    lastSeen.set(uid, pod);
    if (type === "DELETED" || pod.metadata.deletionTimestamp !== undefined) {
      stop(pod);
      return;
    }
    const running = pod.status?.phase === "Running" && typeof pod.status?.podIP === "string";
    if (pod.metadata.labels?.["tandem.dev/entry"] === "true" && running && !engines.has(uid) && !seenDeleting.has(uid))
      start(pod);
  };

  const aborter = new AbortController();
  const follow = (async () => {
    while (!aborter.signal.aborted) {
      try {
        const list = await admin.list(PODS, namespace);
        const present = new Set((list.items as any[]).map((pod) => pod.metadata.uid as string));
        // Gone between two watches: stopped as last seen.
        for (const uid of [...engines.keys()]) if (!present.has(uid)) stop(lastSeen.get(uid));
        for (const pod of list.items as any[]) onEvent("ADDED", pod);
        await admin.watch(PODS, namespace, list.metadata.resourceVersion, onEvent, aborter.signal);
      } catch {
        await sleep(200); // the API server restarting, a 410 Gone: list again
      }
    }
  })();

  return {
    deleted: () => deleted,
    close: async () => {
      aborter.abort();
      await follow;
      const all = [...engines.values()];
      engines.clear();
      await Promise.all([...closing.values(), ...all.map(async (engine) => (await engine.started)?.close())]);
    },
  };
}

function kvFormat(pod: any): string {
  const env: { name?: string; value?: string }[] = pod.spec.containers[0]?.env ?? [];
  return env.find((variable) => variable.name === "KV_FORMAT")?.value ?? "v1";
}
