/**
 * Engine-mocks behind the fake kubelet's pods, for e2e tests of the request path: each entry pod
 * gets its own loopback IP (127.0.1.N, all of 127.0.0.0/8 is the loopback interface on Linux), and
 * once the kubelet reports it Running an engine-mock listens on that IP and the route's port, with
 * `--kv-format` from the first container's env `KV_FORMAT` (default `v1`). When the kubelet sees
 * the pod terminating, its engine stops at once — every request still on it is cut, as the
 * containers of a deleted pod would — and the pod's annotations at that instant are kept, so a
 * test can check what the pod carried when its deletion began (the drain confirmations).
 */
import { startEngineMock } from "../../src/router/engine-mock/server.ts";
import type { EngineMock } from "../../src/router/engine-mock/server.ts";
import type { FakeKubeletOptions } from "./fake-kubelet.ts";

/** A deleted entry pod: its name, role label and annotations when its deletion was first seen. */
export interface DeletedPod {
  readonly name: string;
  readonly role: string;
  readonly annotations: Readonly<Record<string, string>>;
}

export interface EnginePods {
  /** Options for `startFakeKubelet` that wire the pods to their engines. */
  readonly kubelet: FakeKubeletOptions;
  readonly deleted: () => readonly DeletedPod[];
  /** Stops every engine. */
  close(): Promise<void>;
}

/** Latency of every engine; generation is deterministic. */
export interface EngineLatency {
  readonly ttftMs: number;
  readonly tpotMs: number;
}

/** Engines on `port`, pod IPs from 127.0.1.1 up (at most 254 pods over the test's life). */
export function enginePods(port: number, latency: EngineLatency): EnginePods {
  const engines = new Map<string, Promise<EngineMock | undefined>>();
  const deleted: DeletedPod[] = [];
  const seenDeleting = new Set<string>();
  let nextHost = 1;
  const podIp = (): string => {
    if (nextHost > 254) throw new Error("engine-pods: more than 254 pods");
    return `127.0.1.${nextHost++}`;
  };
  const onRunning = (pod: any): void => {
    const uid: string = pod.metadata.uid;
    if (pod.metadata.labels?.["tandem.dev/entry"] !== "true" || engines.has(uid) || seenDeleting.has(uid)) return;
    const started = startEngineMock({ host: pod.status.podIP, port, kvFormat: kvFormat(pod), ...latency }).catch(
      () => undefined,
    );
    engines.set(uid, started);
  };
  const onTerminating = async (pod: any): Promise<void> => {
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
    await (await engine)?.close();
  };
  return {
    kubelet: { podIp, onRunning, onTerminating, intervalMs: 50 },
    deleted: () => deleted,
    close: async () => {
      const all = [...engines.values()];
      engines.clear();
      await Promise.all(all.map(async (engine) => (await engine)?.close()));
    },
  };
}

function kvFormat(pod: any): string {
  const env: { name?: string; value?: string }[] = pod.spec.containers[0]?.env ?? [];
  return env.find((variable) => variable.name === "KV_FORMAT")?.value ?? "v1";
}
