import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { JsonObject, KubeObject } from "../engine/ports.ts";
import { SimCluster } from "./cluster.ts";
import type { SimClusterOptions } from "./cluster.ts";
import { aPod } from "./test-fixtures.ts";

const SECOND = 1_000;

/** Two 8-GPU nodes, no jitter, DESIGN §6's example timing: pods bound at 1 s, pulled by 21 s, ready at 81 s. */
function newCluster(options: SimClusterOptions = {}): SimCluster {
  return new SimCluster({
    nodes: [{ name: "gpu", count: 2, gpus: 8 }],
    timing: { scheduleSeconds: 1, pullSeconds: 20, startSeconds: 60, terminationSeconds: 5 },
    jitterPercent: 0,
    ...options,
  });
}

interface PodShape {
  images?: Record<string, string>;
  gpus?: number;
  gate?: boolean;
  graceSeconds?: number;
}

function podOf(name: string, shape: PodShape = {}): KubeObject<"Pod"> {
  const containers = Object.entries(shape.images ?? { main: "vllm:v1" }).map(([container, image], index) => ({
    name: container,
    image,
    ...(index === 0 ? { resources: { limits: { "nvidia.com/gpu": shape.gpus ?? 1 } } } : {}),
  }));
  const spec: JsonObject = { containers, terminationGracePeriodSeconds: shape.graceSeconds ?? 30 };
  if (shape.gate === true) spec["readinessGates"] = [{ conditionType: "tandem.dev/serving" }];
  return aPod(
    name,
    {
      "tandem.dev/role": "decode",
      "tandem.dev/group": "0",
      "tandem.dev/instance": `decode-${name}`,
      "tandem.dev/revision": "m-abc",
    },
    spec,
  );
}

const ref = (name: string) => ({ kind: "Pod", namespace: "default", name }) as const;

function podNamed(cluster: SimCluster, name: string): KubeObject | undefined {
  return cluster.server.list("Pod").items.find((pod) => pod.metadata.name === name);
}

function statusOf(cluster: SimCluster, name: string): any {
  return podNamed(cluster, name)?.status ?? {};
}

function condition(cluster: SimCluster, name: string, type: string): any {
  return (statusOf(cluster, name).conditions ?? []).find((candidate: any) => candidate.type === type);
}

function container(cluster: SimCluster, name: string, containerName = "main"): any {
  return (statusOf(cluster, name).containerStatuses ?? []).find((candidate: any) => candidate.name === containerName);
}

/** The controller's write of the serving gate: the whole condition list, with a resourceVersion precondition. */
async function setGate(cluster: SimCluster, name: string, status: "True" | "False"): Promise<void> {
  const pod = podNamed(cluster, name)!;
  const others = ((pod.status?.["conditions"] ?? []) as any[]).filter(
    (candidate) => candidate.type !== "tandem.dev/serving",
  );
  const gate = { type: "tandem.dev/serving", status, lastTransitionTime: cluster.clock.nowRfc3339() };
  await cluster.writer().patchStatus(ref(name), {
    metadata: { resourceVersion: pod.metadata.resourceVersion ?? "" },
    status: { conditions: [...others, gate] },
  });
}

describe("SimKubelet: pulls, starts, readiness", () => {
  it("pulls an image once per node: a second pod on the same node starts without pulling", async () => {
    const cluster = newCluster();
    await cluster.writer().create(podOf("a"));
    await cluster.runUntil(1 * SECOND);
    assert.equal(podNamed(cluster, "a")?.spec?.["nodeName"], "gpu-0");
    assert.deepEqual(container(cluster, "a").state, { waiting: { reason: "ContainerCreating" } });
    assert.equal(statusOf(cluster, "a").phase, "Pending");
    await cluster.runUntil(21 * SECOND - 1);
    assert.equal(container(cluster, "a").state.waiting?.reason, "ContainerCreating", "still pulling");
    await cluster.runUntil(21 * SECOND);
    assert.equal(statusOf(cluster, "a").phase, "Running");
    assert.deepEqual(container(cluster, "a").state, { running: { startedAt: "2026-01-01T00:00:21Z" } });
    assert.equal(container(cluster, "a").ready, false);
    await cluster.runUntil(81 * SECOND - 1);
    assert.equal(condition(cluster, "a", "Ready").status, "False");
    await cluster.runUntil(81 * SECOND);
    assert.deepEqual(condition(cluster, "a", "Ready"), {
      type: "Ready",
      status: "True",
      lastTransitionTime: "2026-01-01T00:01:21Z",
    });
    assert.deepEqual(cluster.kubelet.cachedImages("gpu-0"), ["vllm:v1"]);

    await cluster.runUntil(100 * SECOND);
    await cluster.writer().create(podOf("b"));
    await cluster.runUntil(101 * SECOND);
    assert.equal(podNamed(cluster, "b")?.spec?.["nodeName"], "gpu-0", "best fit: the fuller node");
    assert.ok(container(cluster, "b").state.running !== undefined, "no pull: running as soon as bound");
    await cluster.runUntil(161 * SECOND);
    assert.equal(condition(cluster, "b", "Ready").status, "True");

    const a = statusOf(cluster, "a");
    const b = statusOf(cluster, "b");
    assert.match(container(cluster, "a").imageID, /^sim:\/\/vllm:v1@sha256:[0-9a-f]{64}$/);
    assert.equal(container(cluster, "a").imageID, container(cluster, "b").imageID, "same image, same digest");
    assert.notEqual(container(cluster, "a").containerID, container(cluster, "b").containerID);
    assert.notEqual(a.podIP, b.podIP);
    assert.match(a.podIP, /^10\.\d+\.\d+\.\d+$/);
    assert.equal(a.hostIP, b.hostIP);
    assert.deepEqual(cluster.kubelet.cachedImages("gpu-1"), []);
  });

  it("reports Ready only when containers are ready and the readiness gate is True, and follows the gate", async () => {
    const cluster = newCluster();
    await cluster.writer().create(podOf("a", { gate: true }));
    await cluster.runUntil(81 * SECOND);
    assert.equal(condition(cluster, "a", "ContainersReady").status, "True");
    assert.deepEqual(condition(cluster, "a", "Ready"), {
      type: "Ready",
      status: "False",
      reason: "ReadinessGatesNotReady",
      message: 'corresponding condition of pod readiness gate "tandem.dev/serving" does not exist',
      lastTransitionTime: "2026-01-01T00:00:01Z",
    });

    await cluster.runUntil(90 * SECOND);
    await setGate(cluster, "a", "True");
    await cluster.advance(0);
    assert.deepEqual(condition(cluster, "a", "Ready"), {
      type: "Ready",
      status: "True",
      lastTransitionTime: "2026-01-01T00:01:30Z",
    });
    assert.equal(condition(cluster, "a", "tandem.dev/serving").status, "True", "the controller's condition is kept");
    assert.equal(condition(cluster, "a", "PodScheduled").status, "True", "so is the scheduler's");

    await cluster.runUntil(120 * SECOND);
    await setGate(cluster, "a", "False");
    await cluster.advance(0);
    assert.equal(condition(cluster, "a", "Ready").status, "False");
    assert.equal(condition(cluster, "a", "Ready").lastTransitionTime, "2026-01-01T00:02:00Z");
    assert.deepEqual(
      condition(cluster, "a", "ContainersReady"),
      { type: "ContainersReady", status: "True", lastTransitionTime: "2026-01-01T00:01:21Z" },
      "unchanged",
    );
    assert.equal(
      cluster.server.apiWrites({ client: "controller", verb: "patchStatus" }),
      2,
      "kubelet writes are counted apart",
    );
  });

  it("reports PodScheduled=True for a pod created on a node, and keeps the scheduler's for a bound one", async () => {
    const cluster = newCluster();
    await cluster.writer().create({ ...podOf("direct"), spec: { ...podOf("direct").spec, nodeName: "gpu-1" } });
    await cluster.writer().create(podOf("scheduled"));
    await cluster.runUntil(5 * SECOND);
    assert.deepEqual(condition(cluster, "direct", "PodScheduled"), {
      type: "PodScheduled",
      status: "True",
      lastTransitionTime: "2026-01-01T00:00:00Z",
    });
    assert.deepEqual(
      condition(cluster, "scheduled", "PodScheduled"),
      { type: "PodScheduled", status: "True", lastTransitionTime: "2026-01-01T00:00:01Z" },
      "bound at 1 s",
    );
  });

  it("keeps following pods after its watch is dropped, and so does the report's event log", async () => {
    const cluster = newCluster();
    await cluster.writer().create(podOf("a", { gate: true }));
    await cluster.runUntil(90 * SECOND);
    assert.ok(cluster.server.dropWatches("Pod") >= 3, "scheduler, kubelet and event log streams");
    await setGate(cluster, "a", "True");
    await cluster.advance(0);
    assert.equal(condition(cluster, "a", "Ready").status, "True");
    assert.deepEqual(
      cluster.events().map((event) => [event.t, event.type]),
      [
        [0, "PodCreated"],
        [90, "PodReady"],
      ],
    );
  });

  it("acts on an image change folded unseen into its own status write (the change's event lost with a dropped watch)", async () => {
    const cluster = newCluster();
    await cluster.writer().create(podOf("a"));
    await cluster.runUntil(21 * SECOND - 1);
    // The pull completes: the container starts and a status write is due at this instant.
    assert.equal(cluster.clock.fireNext(21 * SECOND), true);
    assert.equal(cluster.clock.nowMs(), 21 * SECOND);
    cluster.server.dropWatches("Pod");
    await cluster.writer().patch(ref("a"), {
      spec: { containers: [{ name: "main", image: "vllm:v2", resources: { limits: { "nvidia.com/gpu": 1 } } }] },
    });
    await cluster.runUntil(200 * SECOND);
    assert.equal(container(cluster, "a").image, "vllm:v2");
    assert.equal(container(cluster, "a").restartCount, 1);
  });

  it("terminates a pod whose deletion was folded unseen into its own status write", async () => {
    const cluster = newCluster();
    await cluster.writer().create(podOf("a"));
    await cluster.runUntil(21 * SECOND - 1);
    assert.equal(cluster.clock.fireNext(21 * SECOND), true, "the pull completes: a status write is due now");
    cluster.server.dropWatches("Pod");
    await cluster.writer().delete(ref("a"));
    await cluster.runUntil(60 * SECOND);
    assert.equal(podNamed(cluster, "a"), undefined, "containers stopped and the deletion finished");
  });

  it("computes Ready from the stored pod at write time: a gate flipped unseen (its event lost) still counts", async () => {
    const cluster = newCluster();
    await cluster.writer().create(podOf("a", { gate: true }));
    await cluster.runUntil(81 * SECOND - 1);
    assert.equal(cluster.clock.fireNext(81 * SECOND), true, "the container becomes ready: a status write is due now");
    cluster.server.dropWatches("Pod");
    await setGate(cluster, "a", "True");
    await cluster.runUntil(100 * SECOND);
    assert.equal(condition(cluster, "a", "Ready").status, "True");
  });

  it("retries a status write that conflicted, re-reading the pod", async () => {
    const cluster = newCluster();
    cluster.server.faults.failNth({ client: "kubelet", verb: "patchStatus" }, 1, { error: "Conflict" });
    cluster.server.faults.failNth({ client: "kubelet", verb: "patchStatus" }, 3, { error: "ServerError" });
    await cluster.writer().create(podOf("a"));
    await cluster.runUntil(81 * SECOND);
    assert.equal(
      condition(cluster, "a", "Ready").status,
      "True",
      "ready on time; the server error was retried within a second",
    );
  });
});

describe("SimKubelet: crash loops and in-place image changes", () => {
  it("restarts a crashing container with back-off 10 s doubling to 300 s, counting restarts, never Ready", async () => {
    const cluster = newCluster({ images: { "vllm:bad": { crash: true, crashAfterSeconds: 5 } } });
    const restarts: [number, number][] = [];
    cluster.server.watch(
      "Pod",
      { lagMs: 0 },
      {
        onEvent: (event) => {
          const count = (event.object.status?.["containerStatuses"] as any[] | undefined)?.[0]?.restartCount ?? 0;
          if (count !== (restarts.at(-1)?.[1] ?? 0)) restarts.push([cluster.clock.nowMs() / SECOND, count]);
        },
        onClose: () => undefined,
      },
    );
    await cluster.writer().create(podOf("a", { images: { main: "vllm:bad" } }));
    await cluster.runUntil(30 * SECOND);
    const waiting = container(cluster, "a");
    assert.deepEqual(waiting.state, {
      waiting: { reason: "CrashLoopBackOff", message: "back-off 10s restarting failed container=main pod=a" },
    });
    assert.equal(waiting.restartCount, 0);
    assert.equal(waiting.lastState.terminated.exitCode, 1);
    assert.equal(waiting.lastState.terminated.finishedAt, "2026-01-01T00:00:26Z", "started at 21 s, crashed 5 s later");

    await cluster.runUntil(1_000 * SECOND);
    // Starts at 21; each run lasts 5 s, then waits 10, 20, 40, 80, 160, 300, 300 s.
    assert.deepEqual(restarts, [
      [36, 1],
      [61, 2],
      [106, 3],
      [191, 4],
      [356, 5],
      [661, 6],
      [966, 7],
    ]);
    assert.equal(statusOf(cluster, "a").phase, "Running");
    assert.equal(condition(cluster, "a", "Ready").status, "False");
    assert.equal(container(cluster, "a").state.waiting.message, "back-off 300s restarting failed container=main pod=a");
    assert.deepEqual(cluster.kubelet.restartsByRole(), { decode: 7 });
  });

  it("marks a crashing pod with restartPolicy Never Failed", async () => {
    const cluster = newCluster({ images: { "vllm:bad": { crash: true } } });
    const pod = podOf("a", { images: { main: "vllm:bad" } });
    pod.spec!["restartPolicy"] = "Never";
    await cluster.writer().create(pod);
    await cluster.runUntil(60 * SECOND);
    assert.equal(statusOf(cluster, "a").phase, "Failed");
    assert.equal(container(cluster, "a").state.terminated.exitCode, 1);
    assert.equal(container(cluster, "a").restartCount, 0);
  });

  it("restarts only the container whose image changed in place, with new ids and restartCount + 1", async () => {
    const cluster = newCluster({ images: { "vllm:v2": { startSeconds: 90 } } });
    await cluster.writer().create(podOf("a", { images: { main: "vllm:v1", proxy: "envoy:v1" } }));
    await cluster.runUntil(100 * SECOND);
    const before = { main: container(cluster, "a", "main"), proxy: container(cluster, "a", "proxy") };
    assert.equal(condition(cluster, "a", "Ready").status, "True");

    const pod = podNamed(cluster, "a")!;
    const containers = (pod.spec!["containers"] as any[]).map((entry) =>
      entry.name === "main" ? { ...entry, image: "vllm:v2" } : entry,
    );
    await cluster.writer().update({ ...pod, spec: { ...pod.spec, containers } });
    await cluster.advance(0);
    assert.deepEqual(container(cluster, "a", "main").state, { waiting: { reason: "ContainerCreating" } });
    assert.equal(container(cluster, "a", "main").lastState.terminated.containerID, before.main.containerID);
    assert.equal(condition(cluster, "a", "Ready").status, "False");
    assert.deepEqual(container(cluster, "a", "proxy"), before.proxy, "the other container is untouched");

    await cluster.runUntil(120 * SECOND); // pulled vllm:v2
    const restarted = container(cluster, "a", "main");
    assert.equal(restarted.image, "vllm:v2");
    assert.equal(restarted.restartCount, 1);
    assert.notEqual(restarted.containerID, before.main.containerID);
    assert.match(restarted.imageID, /^sim:\/\/vllm:v2@sha256:/);
    assert.equal(restarted.ready, false);
    await cluster.runUntil(210 * SECOND - 1);
    assert.equal(condition(cluster, "a", "Ready").status, "False", "vllm:v2 takes 90 s to start");
    await cluster.runUntil(210 * SECOND);
    assert.equal(condition(cluster, "a", "Ready").status, "True");
    assert.deepEqual(container(cluster, "a", "proxy"), before.proxy);
  });

  it("recovers from a bad image when the image is changed again", async () => {
    const cluster = newCluster({ images: { "vllm:bad": { crash: true } } });
    await cluster.writer().create(podOf("a", { images: { main: "vllm:bad" } }));
    await cluster.runUntil(50 * SECOND);
    const pod = podNamed(cluster, "a")!;
    const containers = (pod.spec!["containers"] as any[]).map((entry) => ({ ...entry, image: "vllm:v1" }));
    await cluster.writer().update({ ...pod, spec: { ...pod.spec, containers } });
    await cluster.runUntil(50 * SECOND + 20 * SECOND + 60 * SECOND);
    assert.equal(condition(cluster, "a", "Ready").status, "True");
    assert.equal(container(cluster, "a").restartCount, 2, "one crash restart at 36 s, one image change");
  });
});

describe("SimKubelet: graceful termination", () => {
  it("stops containers terminationSeconds after the delete, then finishes the deletion", async () => {
    const cluster = newCluster();
    await cluster.writer().create(podOf("a"));
    await cluster.runUntil(100 * SECOND);
    await cluster.writer().delete(ref("a"));
    await cluster.runUntil(105 * SECOND - 1);
    assert.equal(podNamed(cluster, "a")?.metadata.deletionTimestamp, "2026-01-01T00:02:10Z", "grace period 30 s");
    assert.equal(condition(cluster, "a", "Ready").status, "True", "serving until its containers stop");
    await cluster.runUntil(105 * SECOND);
    assert.equal(podNamed(cluster, "a"), undefined);
    assert.deepEqual(
      cluster.events().filter((event) => event.t >= 100),
      [
        { t: 105, type: "PodNotReady", pod: "a", role: "decode", group: 0, instance: "decode-a", revision: "m-abc" },
        { t: 105, type: "PodDeleted", pod: "a", role: "decode", group: 0, instance: "decode-a", revision: "m-abc" },
      ],
    );
  });

  it("bounds the stop by the grace period, and a shorter second delete brings it forward", async () => {
    const cluster = newCluster({ timing: { terminationSeconds: 20 } });
    await cluster.writer().create(podOf("short", { graceSeconds: 2 }));
    await cluster.writer().create(podOf("shortened"));
    await cluster.runUntil(100 * SECOND);
    await cluster.writer().delete(ref("short"));
    await cluster.writer().delete(ref("shortened"));
    await cluster.runUntil(101 * SECOND);
    await cluster.writer().delete(ref("shortened"), { gracePeriodSeconds: 3 });
    await cluster.runUntil(102 * SECOND - 1);
    assert.ok(podNamed(cluster, "short") !== undefined);
    await cluster.runUntil(102 * SECOND);
    assert.equal(podNamed(cluster, "short"), undefined);
    assert.equal(podNamed(cluster, "shortened")?.metadata.deletionTimestamp, "2026-01-01T00:01:43Z");
    await cluster.runUntil(103 * SECOND - 1);
    assert.ok(podNamed(cluster, "shortened") !== undefined);
    await cluster.runUntil(103 * SECOND);
    assert.equal(
      podNamed(cluster, "shortened"),
      undefined,
      "as in Kubernetes, a shortened grace period counts from the first delete (100 s)",
    );
  });

  it("deletes a pod whose containers never started at once, and an unscheduled pod through the server", async () => {
    const cluster = newCluster();
    await cluster.writer().create(podOf("pulling"));
    await cluster.writer().create(podOf("huge", { gpus: 64 }));
    await cluster.runUntil(5 * SECOND);
    await cluster.writer().delete(ref("pulling"));
    await cluster.writer().delete(ref("huge"));
    assert.equal(podNamed(cluster, "huge"), undefined);
    await cluster.advance(0);
    assert.equal(podNamed(cluster, "pulling"), undefined);
    assert.equal(cluster.clock.nowMs(), 5 * SECOND);
  });
});
