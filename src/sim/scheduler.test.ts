import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { KubeObject } from "../engine/ports.ts";
import { nodesOfPools } from "./placement.ts";
import { conditionsOf } from "./pod-status.ts";
import { SimScheduler } from "./scheduler.ts";
import { aModelServing, aPod, settle, setupServer } from "./test-fixtures.ts";

/** A pod of ModelServing "m", group `group`, role instance `instance`. */
function groupPod(name: string, group: number, gpus: number, instance = "r-0"): KubeObject<"Pod"> {
  const labels = { "tandem.dev/modelserving": "m", "tandem.dev/group": String(group), "tandem.dev/instance": instance };
  return aPod(name, labels, {
    containers: [{ name: "main", image: "vllm:v1", resources: { limits: { "nvidia.com/gpu": gpus } } }],
    terminationGracePeriodSeconds: 5,
  });
}

async function cluster(pools = [{ name: "gpu", count: 2, gpus: 8 }], gcDelayMs = 1_000) {
  const setup = setupServer({ gcDelayMs });
  for (const node of nodesOfPools(pools)) await setup.server.client("admin").create(node);
  const scheduler = new SimScheduler(setup.server, { cycleMs: 1_000 });
  scheduler.start();
  return { ...setup, scheduler };
}

function placement(server: ReturnType<typeof setupServer>["server"]): Record<string, string> {
  return Object.fromEntries(
    server.list("Pod").items.map((pod) => {
      const nodeName = pod.spec?.["nodeName"];
      return [pod.metadata.name, typeof nodeName === "string" ? nodeName : "pending"];
    }),
  );
}

function scheduledCondition(server: ReturnType<typeof setupServer>["server"], name: string): unknown {
  const conditions = server.get({ kind: "Pod", namespace: "default", name }).status?.["conditions"];
  return Array.isArray(conditions)
    ? conditions.find((condition) => (condition as { type?: string }).type === "PodScheduled")
    : undefined;
}

describe("SimScheduler", () => {
  it("binds a gang that fits cycleMs after it appears, and marks its pods PodScheduled", async () => {
    const { server, client, clock } = await cluster();
    await client.create(groupPod("m-0-a", 0, 8));
    await client.create(groupPod("m-0-b", 0, 8));
    clock.advance(999);
    assert.deepEqual(placement(server), { "m-0-a": "pending", "m-0-b": "pending" });
    clock.advance(1);
    await settle();
    assert.deepEqual(placement(server), { "m-0-a": "gpu-0", "m-0-b": "gpu-1" });
    assert.deepEqual(scheduledCondition(server, "m-0-a"), {
      type: "PodScheduled",
      status: "True",
      lastTransitionTime: "2026-01-01T00:00:01Z",
    });
  });

  it("keeps a gang that does not fit entirely Pending with a reason, and places it once capacity frees up", async () => {
    const { server, client, clock } = await cluster();
    await client.create(groupPod("m-0-a", 0, 8));
    clock.advance(1_000);
    await settle();
    await client.create(groupPod("m-1-a", 1, 8));
    await client.create(groupPod("m-1-b", 1, 8));
    clock.advance(1_000);
    await settle();
    assert.deepEqual(
      placement(server),
      { "m-0-a": "gpu-0", "m-1-a": "pending", "m-1-b": "pending" },
      "gpu-1 has room for one, but not for the gang",
    );
    assert.deepEqual(scheduledCondition(server, "m-1-b"), {
      type: "PodScheduled",
      status: "False",
      reason: "Unschedulable",
      message:
        "0/2 nodes are available: pod default/m-1-b needs 8 nvidia.com/gpu, at most 0 free on any schedulable node after placing 1 of the gang's pods (gang of 2 pods, placed all-or-nothing)",
      lastTransitionTime: "2026-01-01T00:00:02Z",
    });

    await client.delete({ kind: "Pod", namespace: "default", name: "m-0-a" });
    clock.advance(4_000);
    await settle();
    assert.equal(placement(server)["m-1-a"], "pending", "a terminating pod still holds its GPUs");
    clock.advance(2_000);
    await settle();
    assert.deepEqual(placement(server), { "m-1-a": "gpu-0", "m-1-b": "gpu-1" });
  });

  it("goes quiet once nothing is pending: no further writes, no further cycles", async () => {
    const { server, client, clock, scheduler } = await cluster();
    await client.create(groupPod("m-0-a", 0, 16));
    for (let i = 0; i < 10; i++) {
      clock.advance(1_000);
      await settle();
    }
    assert.equal(server.apiWrites({ client: "scheduler" }), 1, "one Unschedulable status write, not one per cycle");
    assert.equal(clock.pendingCount(), 0);
    assert.ok(scheduler.cycleCount() <= 3);
  });

  it("retries a binding that failed, and ignores pods for other schedulers", async () => {
    const { server, client, clock } = await cluster();
    server.faults.failNth({ client: "scheduler", verb: "bind" }, 1, { error: "ServerError" });
    await client.create(groupPod("m-0-a", 0, 1));
    await client.create(aPod("volcano-pod", {}, { schedulerName: "volcano" }));
    clock.advance(1_000);
    await settle();
    assert.equal(placement(server)["m-0-a"], "pending");
    clock.advance(1_000);
    await settle();
    assert.deepEqual(placement(server), { "m-0-a": "gpu-0", "volcano-pod": "pending" });
  });

  it("skips cordoned nodes and places pods without a gang one by one", async () => {
    const { server, client, clock } = await cluster([{ name: "gpu", count: 2, gpus: 4 }]);
    await server.client("admin").patch({ kind: "Node", name: "gpu-0" }, { spec: { unschedulable: true } });
    await client.create(
      aPod("solo-a", {}, { containers: [{ name: "c", resources: { limits: { "nvidia.com/gpu": 4 } } }] }),
    );
    await client.create(
      aPod("solo-b", {}, { containers: [{ name: "c", resources: { limits: { "nvidia.com/gpu": 4 } } }] }),
    );
    clock.advance(1_000);
    await settle();
    assert.deepEqual(placement(server), { "solo-a": "gpu-1", "solo-b": "pending" });
  });

  it("places each role instance as a gang by default: an instance that fits goes, one that does not waits whole", async () => {
    const { server, client, clock } = await cluster([{ name: "gpu", count: 3, gpus: 8 }]);
    for (const [name, instance] of [
      ["m-0-decode-0-0", "decode-0"],
      ["m-0-decode-0-1", "decode-0"],
      ["m-0-decode-1-0", "decode-1"],
      ["m-0-decode-1-1", "decode-1"],
    ] as const) {
      await client.create(groupPod(name, 0, 8, instance));
    }
    clock.advance(1_000);
    await settle();
    assert.deepEqual(placement(server), {
      "m-0-decode-0-0": "gpu-0",
      "m-0-decode-0-1": "gpu-1",
      "m-0-decode-1-0": "pending",
      "m-0-decode-1-1": "pending",
    });
    assert.match((scheduledCondition(server, "m-0-decode-1-0") as { message: string }).message, /gang of 2 pods/);
  });

  it("places a whole ServingGroup as one gang when the owning ModelServing has a gang policy", async () => {
    const { server, client, clock } = await cluster([{ name: "gpu", count: 3, gpus: 8 }]);
    const owner = await client.create({
      ...aModelServing("m"),
      spec: { replicas: 1, template: { gangPolicy: { minRoleReplicas: { decode: 1, prefill: 1 } } } },
    });
    const pods = [
      ["m-0-decode-0-0", "decode-0"],
      ["m-0-decode-0-1", "decode-0"],
      ["m-0-prefill-0-0", "prefill-0"],
      ["m-0-prefill-0-1", "prefill-0"],
    ] as const;
    for (const [name, instance] of pods) {
      const pod = groupPod(name, 0, 8, instance);
      pod.metadata.ownerReferences = [
        {
          apiVersion: "tandem.dev/v1alpha1",
          kind: "ModelServing",
          name: "m",
          uid: owner.metadata.uid ?? "",
          controller: true,
        },
      ];
      await client.create(pod);
    }
    clock.advance(1_000);
    await settle();
    assert.deepEqual(
      Object.values(placement(server)),
      ["pending", "pending", "pending", "pending"],
      "4 nodes' worth of pods, 3 nodes: none placed",
    );
    assert.match((scheduledCondition(server, "m-0-prefill-0-1") as { message: string }).message, /gang of 4 pods/);

    await server.client("admin").create(nodesOfPools([{ name: "extra", count: 1, gpus: 8 }])[0]!);
    clock.advance(1_000);
    await settle();
    assert.deepEqual(new Set(Object.values(placement(server))), new Set(["gpu-0", "gpu-1", "gpu-2", "extra-0"]));
  });

  it("ignores the gang policy of a ModelServing that does not own the pod (re-created under the same name)", async () => {
    // The garbage collector would delete the orphans; keep it out of the way.
    const { server, client, clock } = await cluster([{ name: "gpu", count: 1, gpus: 8 }], 3_600_000);
    await client.create({
      ...aModelServing("m"),
      spec: { replicas: 1, template: { gangPolicy: { minRoleReplicas: { a: 1 } } } },
    });
    for (const [name, instance] of [
      ["m-0-a-0-0", "a-0"],
      ["m-0-b-0-0", "b-0"],
    ] as const) {
      const pod = groupPod(name, 0, 8, instance);
      pod.metadata.ownerReferences = [
        { apiVersion: "tandem.dev/v1alpha1", kind: "ModelServing", name: "m", uid: "an-older-uid", controller: true },
      ];
      await client.create(pod);
    }
    clock.advance(1_000);
    await settle();
    assert.deepEqual(
      placement(server),
      { "m-0-a-0-0": "gpu-0", "m-0-b-0-0": "pending" },
      "instance gangs: the first fits alone",
    );
  });

  it("binds in one write: no reader ever sees a bound pod without PodScheduled=True", async () => {
    const { server, client, clock } = await cluster();
    const seen: unknown[] = [];
    server.watch(
      "Pod",
      { lagMs: 0 },
      {
        onEvent: ({ object }) => {
          const scheduled = conditionsOf(object).some(
            (condition) => condition["type"] === "PodScheduled" && condition["status"] === "True",
          );
          seen.push([object.spec?.["nodeName"] ?? "pending", scheduled ? "PodScheduled" : "-"]);
        },
        onClose: () => undefined,
      },
    );
    await client.create(groupPod("m-0-a", 0, 1));
    clock.advance(1_000);
    await settle();
    clock.advance(0);
    assert.deepEqual(seen, [
      ["pending", "-"],
      ["gpu-0", "PodScheduled"],
    ]);
    assert.equal(server.apiWrites({ client: "scheduler" }), 1);
  });

  it("binds once when the binding timed out after it was applied: the pod is no longer pending", async () => {
    const { server, client, clock } = await cluster();
    server.faults.failNth({ client: "scheduler", verb: "bind" }, 1, { error: "Timeout", applied: true });
    await client.create(groupPod("m-0-a", 0, 1));
    for (let cycle = 0; cycle < 3; cycle++) {
      clock.advance(1_000);
      await settle();
    }
    assert.equal(placement(server)["m-0-a"], "gpu-0");
    assert.equal(server.apiWrites({ client: "scheduler", verb: "bind" }), 1);
  });
});
