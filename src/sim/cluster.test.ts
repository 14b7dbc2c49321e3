import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { KubeObject } from "../engine/ports.ts";
import { SimCluster } from "./cluster.ts";
import type { SimClusterOptions } from "./cluster.ts";
import { aPod } from "./test-fixtures.ts";

const SECOND = 1_000;

/** Two 8-GPU nodes; a node failure is detected after 40 s and its pods evicted 60 s later. */
function newCluster(options: SimClusterOptions = {}): SimCluster {
  return new SimCluster({
    nodes: [{ name: "gpu", count: 2, gpus: 8 }],
    timing: {
      scheduleSeconds: 1,
      pullSeconds: 20,
      startSeconds: 60,
      terminationSeconds: 5,
      nodeMonitorGraceSeconds: 40,
      podEvictionSeconds: 60,
    },
    jitterPercent: 0,
    ...options,
  });
}

/** A pod of instance `decode-<j>` of group `g`, revision r1, needing `gpus` GPUs. */
function servingPod(name: string, gpus = 8, g = 0, j = 0): KubeObject<"Pod"> {
  const labels = {
    "tandem.dev/modelserving": "m",
    "tandem.dev/group": String(g),
    "tandem.dev/role": "decode",
    "tandem.dev/instance": `decode-${j}`,
    "tandem.dev/revision": "m-r1",
  };
  return aPod(name, labels, {
    containers: [{ name: "main", image: "vllm:v1", resources: { limits: { "nvidia.com/gpu": gpus } } }],
  });
}

function podNamed(cluster: SimCluster, name: string): KubeObject | undefined {
  return cluster.server.list("Pod").items.find((pod) => pod.metadata.name === name);
}

function readyOf(object: KubeObject | undefined): any {
  return ((object?.status?.["conditions"] ?? []) as any[]).find((condition) => condition.type === "Ready");
}

function nodeOf(cluster: SimCluster, name: string): KubeObject {
  return cluster.server.get({ kind: "Node", name });
}

describe("SimCluster: node failure and recovery", () => {
  it("marks a failed node's pods not ready after the detection delay, then deletes them; nothing is scheduled there", async () => {
    const cluster = newCluster();
    await cluster.writer().create(servingPod("a"));
    await cluster.runUntil(100 * SECOND);
    assert.equal(readyOf(podNamed(cluster, "a")).status, "True");
    assert.equal(podNamed(cluster, "a")?.spec?.["nodeName"], "gpu-0");
    const kubeletWrites = cluster.server.apiWrites({ client: "kubelet" });

    cluster.failNode("gpu-0");
    await cluster.runUntil(140 * SECOND - 1);
    assert.equal(readyOf(podNamed(cluster, "a")).status, "True", "nobody knows yet");
    await cluster.runUntil(140 * SECOND);
    assert.deepEqual(readyOf(podNamed(cluster, "a")), {
      type: "Ready",
      status: "False",
      lastTransitionTime: "2026-01-01T00:02:20Z",
      reason: "NodeNotReady",
      message: "node gpu-0 is not ready",
    });
    assert.equal(readyOf(nodeOf(cluster, "gpu-0")).status, "Unknown");
    assert.deepEqual(cluster.nodeLifecycle.outages(), [{ node: "gpu-0", stage: "notReady" }]);

    await cluster.writer().create(servingPod("b", 8, 0, 1));
    await cluster.writer().create(servingPod("c", 8, 0, 2));
    await cluster.runUntil(150 * SECOND);
    assert.equal(podNamed(cluster, "b")?.spec?.["nodeName"], "gpu-1");
    assert.equal(podNamed(cluster, "c")?.spec?.["nodeName"], undefined, "the failed node takes nothing");
    const scheduled = ((podNamed(cluster, "c")?.status?.["conditions"] ?? []) as any[]).find(
      (condition) => condition.type === "PodScheduled",
    );
    assert.match(scheduled.message, /1 not schedulable \(NotReady or cordoned\)/);

    await cluster.runUntil(200 * SECOND - 1);
    assert.ok(podNamed(cluster, "a") !== undefined);
    await cluster.runUntil(200 * SECOND);
    assert.equal(podNamed(cluster, "a"), undefined, "evicted with grace period 0");
    assert.equal(
      cluster.server.apiWrites({ client: "kubelet" }) - kubeletWrites,
      2,
      "pod b admitted (141 s) and started (161 s) on gpu-1; nothing for pod a",
    );
  });

  it("restarts the pods of a node that recovers before detection, from the image cache, with restartCount + 1", async () => {
    const cluster = newCluster();
    await cluster.writer().create(servingPod("a"));
    await cluster.runUntil(100 * SECOND);
    const before = (podNamed(cluster, "a")?.status?.["containerStatuses"] as any[])[0];
    cluster.failNode("gpu-0");
    await cluster.runUntil(120 * SECOND);
    cluster.recoverNode("gpu-0");
    await cluster.advance(0);
    const restarted = (podNamed(cluster, "a")?.status?.["containerStatuses"] as any[])[0];
    assert.equal(restarted.restartCount, 1);
    assert.notEqual(restarted.containerID, before.containerID);
    assert.deepEqual(
      restarted.state,
      { running: { startedAt: "2026-01-01T00:02:00Z" } },
      "no pull: the cache survived",
    );
    assert.equal(restarted.lastState.terminated.reason, "Unknown");
    assert.equal(readyOf(podNamed(cluster, "a")).status, "False");
    await cluster.runUntil(180 * SECOND);
    assert.equal(readyOf(podNamed(cluster, "a")).status, "True");
    await cluster.runUntil(400 * SECOND);
    assert.ok(podNamed(cluster, "a") !== undefined, "never evicted");
    assert.equal(cluster.server.apiWrites({ client: "node-lifecycle" }), 0, "the failure was never detected");
    assert.deepEqual(
      cluster.events().map((event) => [event.t, event.type]),
      [
        [0, "PodCreated"],
        [81, "PodReady"],
        [120, "PodNotReady"],
        [180, "PodReady"],
      ],
    );
  });

  it("makes a node recovered after detection schedulable again and cancels the eviction", async () => {
    const cluster = newCluster({ nodes: [{ name: "gpu", count: 1, gpus: 8 }] });
    await cluster.writer().create(servingPod("a", 4));
    await cluster.runUntil(100 * SECOND);
    cluster.failNode("gpu-0");
    await cluster.runUntil(145 * SECOND);
    await cluster.writer().create(servingPod("b", 4));
    await cluster.runUntil(150 * SECOND);
    assert.equal(podNamed(cluster, "b")?.spec?.["nodeName"], undefined);
    cluster.recoverNode("gpu-0");
    await cluster.advance(0);
    assert.deepEqual(readyOf(nodeOf(cluster, "gpu-0")), {
      type: "Ready",
      status: "True",
      reason: "KubeletReady",
      message: "kubelet is posting ready status",
      lastTransitionTime: "2026-01-01T00:02:30Z",
    });
    await cluster.runUntil(151 * SECOND);
    assert.equal(podNamed(cluster, "b")?.spec?.["nodeName"], "gpu-0", "scheduled on the next cycle");
    await cluster.runUntil(400 * SECOND);
    assert.equal(readyOf(podNamed(cluster, "a")).status, "True", "restarted at 150 s, ready at 210 s, never evicted");
    assert.equal(readyOf(podNamed(cluster, "b")).status, "True");
  });

  it("finishes, on recovery, the deletion of a pod deleted while its node was down", async () => {
    const cluster = newCluster();
    await cluster.writer().create(servingPod("a"));
    await cluster.runUntil(100 * SECOND);
    cluster.failNode("gpu-0");
    await cluster.writer().delete({ kind: "Pod", namespace: "default", name: "a" });
    await cluster.runUntil(135 * SECOND);
    assert.ok(podNamed(cluster, "a") !== undefined, "stuck terminating: no kubelet to stop it");
    cluster.recoverNode("gpu-0");
    await cluster.advance(0);
    assert.equal(podNamed(cluster, "a"), undefined, "its containers are already gone");
  });
});

describe("SimCluster: report events and determinism", () => {
  it("records pod events with times and the pod's identity", async () => {
    const cluster = newCluster();
    await cluster.writer().create(servingPod("m-0-decode-0-0", 8, 0, 0));
    await cluster.runUntil(100 * SECOND);
    const deleted = await cluster.deletePods("tandem.dev/role=decode", 5);
    assert.deepEqual(deleted, ["m-0-decode-0-0"]);
    await cluster.runUntil(200 * SECOND);
    const identity = { pod: "m-0-decode-0-0", role: "decode", group: 0, instance: "decode-0", revision: "m-r1" };
    assert.deepEqual(cluster.events(), [
      { t: 0, type: "PodCreated", ...identity },
      { t: 81, type: "PodReady", ...identity },
      { t: 105, type: "PodNotReady", ...identity },
      { t: 105, type: "PodDeleted", ...identity },
    ]);
    assert.equal(cluster.server.apiWrites({ client: "chaos", verb: "delete" }), 1);
  });

  /** A small workload with jitter: pods, a crash image, a node failure and a random deletion. */
  async function trace(seed: number): Promise<string> {
    const cluster = new SimCluster({
      seed,
      nodes: [{ name: "gpu", count: 3, gpus: 8 }],
      timing: { nodeMonitorGraceSeconds: 40, podEvictionSeconds: 60 },
      images: { "vllm:bad": { crash: true } },
    });
    for (let j = 0; j < 4; j++) await cluster.writer().create(servingPod(`m-0-decode-${j}-0`, 4, 0, j));
    const bad = servingPod("bad", 1);
    (bad.spec!["containers"] as any[])[0].image = "vllm:bad";
    await cluster.writer().create(bad);
    await cluster.runUntil(120 * SECOND);
    cluster.failNode("gpu-1");
    await cluster.deletePods("tandem.dev/role=decode", 1);
    await cluster.runUntil(400 * SECOND);
    const pods = cluster.server.list("Pod").items.map((pod) => [pod.metadata.name, pod.spec?.["nodeName"], pod.status]);
    return JSON.stringify({ events: cluster.events(), pods, writes: cluster.server.apiWriteCounts() });
  }

  it("replays the same trace for the same seed, and other timings for another seed", async () => {
    const first = await trace(7);
    assert.equal(await trace(7), first);
    const other = await trace(8);
    assert.notEqual(other, first);
    const times = (text: string) => (JSON.parse(text).events as { t: number }[]).map((event) => event.t);
    assert.notDeepEqual(times(other), times(first), "the kubelet's jitter moves pull and start times");
  });
});

describe("SimCluster: ports and time", () => {
  it("lets a controller's chain of awaited writes finish at the instant it starts, and waits for a predicate", async () => {
    const cluster = newCluster({ informerLagMs: 100 });
    const reader = cluster.reader();
    const writer = cluster.writer();
    const labelledAt: number[] = [];
    reader.subscribe((event) => {
      if (event.type !== "ADDED" || event.object.kind !== "Pod") return;
      const ref = { kind: "Pod", namespace: "default", name: event.object.metadata.name } as const;
      void (async () => {
        for (let i = 0; i < 10; i++) await writer.patch(ref, { metadata: { labels: { step: String(i) } } });
        labelledAt.push(cluster.clock.nowMs());
      })();
    });
    await cluster.server.client("user").create(servingPod("a"));
    const ready = await cluster.waitFor(() => readyOf(podNamed(cluster, "a"))?.status === "True", 300 * SECOND);
    assert.equal(ready, true);
    assert.equal(cluster.clock.nowMs(), 81 * SECOND, "time stops when the predicate first holds");
    assert.deepEqual(labelledAt, [100], "ten sequential writes, all at the instant the informer delivered the pod");
    assert.equal(cluster.server.apiWrites({ client: "controller" }), 10);
    assert.equal(await cluster.waitFor(() => false, 5 * SECOND), false);
    assert.equal(cluster.clock.nowMs(), 86 * SECOND);
    assert.equal(reader.hasSynced(), true);
  });

  it("awaits settle hooks, so a long chain of awaits that touches nothing still finishes in its instant", async () => {
    const cluster = newCluster();
    const reader = cluster.reader({ lagMs: 0 });
    let work: Promise<void> = Promise.resolve();
    let patchedAt: number | undefined;
    reader.subscribe((event) => {
      if (event.type !== "ADDED" || event.object.kind !== "Pod") return;
      work = (async () => {
        for (let i = 0; i < 500; i++) await Promise.resolve(); // far beyond the quiet rounds
        await cluster
          .writer()
          .patch({ kind: "Pod", namespace: "default", name: "a" }, { metadata: { labels: { seen: "yes" } } });
        patchedAt = cluster.clock.nowMs();
      })();
    });
    const remove = cluster.onSettle(() => work);
    await cluster.advance(10); // the informer starts empty: nothing to see yet
    await cluster.server.client("user").create(servingPod("a"));
    await cluster.advance(0);
    assert.equal(patchedAt, 10);
    remove();
  });

  it("builds nodes from pools with their GPUs, and hands out named PRNG streams", () => {
    const cluster = new SimCluster({
      nodes: [
        { name: "a100", count: 2, gpus: 8 },
        { name: "h100", count: 1, gpus: 4 },
      ],
    });
    const nodes = cluster.server
      .list("Node")
      .items.map((node) => [node.metadata.name, (node.status?.["allocatable"] as any)["nvidia.com/gpu"]]);
    assert.deepEqual(nodes, [
      ["a100-0", "8"],
      ["a100-1", "8"],
      ["h100-0", "4"],
    ]);
    assert.equal(
      cluster.rng("controller").int(0, 1_000_000),
      new SimCluster({ seed: 1 }).rng("controller").int(0, 1_000_000),
    );
    assert.notEqual(
      cluster.rng("controller").int(0, 1_000_000),
      new SimCluster({ seed: 2 }).rng("controller").int(0, 1_000_000),
    );
    assert.throws(() => cluster.failNode("nope"), /NotFound/);
  });
});
