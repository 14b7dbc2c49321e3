/**
 * End to end, in virtual time: the simulated cluster (API server, scheduler, kubelet), the real
 * engine (`Controller`: informer, queue, executor) and the core's plan, for an InPlaceUpdate.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { plan } from "../src/core/plan.ts";
import { decodeControllerRevision } from "../src/core/revision/controller-revision.ts";
import { roleHash } from "../src/core/role-hash.ts";
import { Controller } from "../src/engine/controller.ts";
import type { KubeObject } from "../src/engine/ports.ts";
import { SimCluster } from "../src/sim/cluster.ts";

const MINUTE_MS = 60_000;
const ref = { kind: "ModelServing", namespace: "default", name: "m" } as const;

const template = (image: string) => ({
  spec: {
    containers: [
      { name: "vllm", image, resources: { limits: { "nvidia.com/gpu": "2" } } },
      { name: "sidecar", image: "proxy:v1" },
    ],
  },
});

const manifest = {
  apiVersion: "tandem.dev/v1alpha1",
  kind: "ModelServing",
  metadata: { name: "m", namespace: "default" },
  spec: {
    replicas: 2,
    drain: { timeoutSeconds: 30 },
    rolloutStrategy: { type: "InPlaceUpdate" },
    template: {
      roles: [
        { name: "prefill", replicas: 1, entryTemplate: template("vllm:v1") },
        {
          name: "decode",
          replicas: 1,
          workerReplicas: 1,
          entryTemplate: template("vllm:v1"),
          workerTemplate: template("vllm:v1"),
        },
      ],
    },
  },
};

interface PodRecord {
  uid: string;
  node: string;
  images: string[];
  restarts: Record<string, number>;
  ready: boolean;
}

function pods(cluster: SimCluster): Map<string, PodRecord> {
  const records = new Map<string, PodRecord>();
  for (const pod of cluster.server.stored("Pod")) {
    const spec = pod.spec as { nodeName?: string; containers: { image: string }[] };
    const statuses = (pod.status?.["containerStatuses"] ?? []) as { name: string; restartCount: number }[];
    const conditions = (pod.status?.["conditions"] ?? []) as { type: string; status: string }[];
    records.set(pod.metadata.name, {
      uid: pod.metadata.uid ?? "",
      node: spec.nodeName ?? "",
      images: spec.containers.map((container) => container.image),
      restarts: Object.fromEntries(statuses.map((status) => [status.name, status.restartCount])),
      ready: conditions.some((condition) => condition.type === "Ready" && condition.status === "True"),
    });
  }
  return records;
}

function status(cluster: SimCluster): Record<string, any> {
  return (cluster.server.get(ref) as KubeObject<"ModelServing">).status ?? {};
}

/** The role hash `role` has in revision `name`, as stored; undefined when it is not (yet). */
function roleHashIn(cluster: SimCluster, name: string, role: string): string | undefined {
  const stored = cluster.server.stored("ControllerRevision").find((object) => object.metadata.name === name);
  const decoded = stored === undefined ? undefined : decodeControllerRevision(stored);
  return decoded?.ok === true ? roleHash(decoded.revision.data, role) : undefined;
}

/**
 * The rollout is done: the update revision is current, and every pod runs its role spec (by role
 * hash: in place, pods of a role the update leaves unchanged keep their label) and is Ready.
 */
function complete(cluster: SimCluster): boolean {
  const { currentRevision, updateRevision } = status(cluster);
  const all = cluster.server.stored("Pod");
  return (
    currentRevision !== undefined &&
    currentRevision === updateRevision &&
    all.length === 6 &&
    all.every((pod) => {
      const labels = pod.metadata.labels ?? {};
      const hash = roleHashIn(cluster, updateRevision, labels["tandem.dev/role"] ?? "");
      return hash !== undefined && labels["tandem.dev/role-hash"] === hash;
    }) &&
    [...pods(cluster).values()].every((pod) => pod.ready)
  );
}

describe("InPlaceUpdate end to end (simulated cluster, real engine, core plan)", () => {
  it("an image-only change keeps every pod UID and node and restarts each changed container exactly once", async () => {
    const cluster = new SimCluster({ nodes: [{ name: "gpu", count: 3, gpus: 8 }], jitterPercent: 0 });
    const informer = cluster.reader();
    const controller = new Controller(
      { reader: informer, writer: cluster.writer(), clock: cluster.clock, recorder: cluster.recorder() },
      { plan },
    );
    controller.start();
    const unhook = cluster.onSettle(() => controller.idle());
    try {
      await cluster.writer("user").create(manifest as unknown as KubeObject<"ModelServing">);
      assert.ok(await cluster.waitFor(() => complete(cluster), 15 * MINUTE_MS), "the first rollout completes");
      const before = pods(cluster);
      const firstRevision = status(cluster).currentRevision as string;

      const roles = [
        { ...manifest.spec.template.roles[0] },
        { ...manifest.spec.template.roles[1], entryTemplate: template("vllm:v2"), workerTemplate: template("vllm:v2") },
      ];
      await cluster.writer("user").patch(ref, { spec: { template: { roles } } });
      // Every Progressing message the rollout shows, sampled after every settle.
      const progressing = new Set<string>();
      const done = () => {
        const condition = (status(cluster).conditions ?? []).find((c: { type: string }) => c.type === "Progressing");
        if (condition !== undefined) progressing.add(condition.message);
        return status(cluster).currentRevision !== firstRevision && complete(cluster);
      };
      assert.ok(await cluster.waitFor(done, 30 * MINUTE_MS), "the in-place rollout completes");
      assert.ok(
        [...progressing].some((message) => message.includes("1 restart(s)")),
        "a patched pod, restarted, is seen not Ready yet",
      );
      assert.deepEqual(
        [...progressing].filter((message) => message.includes("crashing")),
        [],
        "a restart for an image patch is no crash",
      );

      const after = pods(cluster);
      assert.deepEqual([...after.keys()].sort(), [...before.keys()].sort());
      for (const [name, pod] of after) {
        const old = before.get(name);
        const decode = name.includes("-decode-");
        assert.equal(pod.uid, old?.uid, `${name} kept its UID`);
        assert.equal(pod.node, old?.node, `${name} kept its node`);
        assert.deepEqual(pod.images, [decode ? "vllm:v2" : "vllm:v1", "proxy:v1"]);
        assert.equal(
          pod.restarts["vllm"],
          (old?.restarts["vllm"] ?? 0) + (decode ? 1 : 0),
          `${name}: vllm restarted ${decode ? "once" : "never"}`,
        );
        assert.equal(
          pod.restarts["sidecar"],
          old?.restarts["sidecar"],
          `${name}: the unchanged sidecar never restarted`,
        );
        assert.ok(pod.ready);
      }
      assert.equal(
        cluster.server.stored("Pod").filter((pod) => pod.metadata.annotations?.["tandem.dev/inplace"] !== undefined)
          .length,
        0,
        "no progress mark is left",
      );
      assert.equal(status(cluster).units, undefined);
      for (const pod of cluster.server.stored("Pod")) {
        const labels = pod.metadata.labels ?? {};
        const decode = labels["tandem.dev/role"] === "decode";
        assert.equal(
          labels["tandem.dev/revision"],
          decode ? status(cluster).updateRevision : firstRevision,
          `${pod.metadata.name}: ${decode ? "relabelled" : "unchanged, its label too"}`,
        );
      }
    } finally {
      unhook();
      await controller.stop();
      informer.stop();
      cluster.stop();
    }
  });
});
