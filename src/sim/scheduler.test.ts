import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { KubeObject } from "../engine/ports.ts";
import { nodesOfPools } from "./placement.ts";
import { SimScheduler } from "./scheduler.ts";
import { aPod, settle, setupServer } from "./test-fixtures.ts";

function groupPod(name: string, group: number, gpus: number): KubeObject<"Pod"> {
  const labels = { "tandem.dev/modelserving": "m", "tandem.dev/group": String(group) };
  return aPod(name, labels, { containers: [{ name: "main", image: "vllm:v1", resources: { limits: { "nvidia.com/gpu": gpus } } }], terminationGracePeriodSeconds: 5 });
}

async function cluster(pools = [{ name: "gpu", count: 2, gpus: 8 }]) {
  const setup = setupServer();
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
  return Array.isArray(conditions) ? conditions.find((condition) => (condition as { type?: string }).type === "PodScheduled") : undefined;
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
    assert.deepEqual(scheduledCondition(server, "m-0-a"), { type: "PodScheduled", status: "True", lastTransitionTime: "2026-01-01T00:00:01Z" });
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
    assert.deepEqual(placement(server), { "m-0-a": "gpu-0", "m-1-a": "pending", "m-1-b": "pending" }, "gpu-1 has room for one, but not for the gang");
    assert.deepEqual(scheduledCondition(server, "m-1-b"), {
      type: "PodScheduled",
      status: "False",
      reason: "Unschedulable",
      message: "0/2 nodes are available: pod default/m-1-b needs 8 nvidia.com/gpu, at most 0 free on any schedulable node after placing 1 of the gang's pods (gang of 2 pods, placed all-or-nothing)",
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
    server.faults.failNth({ client: "scheduler", verb: "patch" }, 1, { error: "ServerError" });
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
    await client.create(aPod("solo-a", {}, { containers: [{ name: "c", resources: { limits: { "nvidia.com/gpu": 4 } } }] }));
    await client.create(aPod("solo-b", {}, { containers: [{ name: "c", resources: { limits: { "nvidia.com/gpu": 4 } } }] }));
    clock.advance(1_000);
    await settle();
    assert.deepEqual(placement(server), { "solo-a": "gpu-1", "solo-b": "pending" });
  });
});
