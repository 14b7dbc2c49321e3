import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { JsonObject, KubeObject } from "../engine/ports.ts";
import { HeldGpuLedger, freeCapacity, nodesOfPools, placeGang, podGpuRequest } from "./placement.ts";
import { aPod } from "./test-fixtures.ts";
import { deepFreeze } from "../core/frozen.ts";

function gpuPod(name: string, gpus: number | string, extra: Record<string, unknown> = {}): KubeObject {
  return aPod(
    name,
    {},
    {
      containers: [{ name: "main", image: "vllm:v1", resources: { limits: { "nvidia.com/gpu": gpus } } }],
      ...(extra as object),
    },
  );
}

describe("node pools and GPU requests", () => {
  it("builds Ready nodes named after their pool with the pool's GPUs", () => {
    const nodes = nodesOfPools([
      { name: "gpu", count: 2, gpus: 8 },
      { name: "small", count: 1, gpus: 2 },
    ]);
    assert.deepEqual(
      nodes.map((node) => node.metadata.name),
      ["gpu-0", "gpu-1", "small-0"],
    );
    assert.deepEqual(freeCapacity(nodes, new Map()), [
      { name: "gpu-0", freeGpus: 8 },
      { name: "gpu-1", freeGpus: 8 },
      { name: "small-0", freeGpus: 2 },
    ]);
  });

  it("computes effective requests: containers summed, init containers maxed, requests before limits", () => {
    const spec: JsonObject = {
      initContainers: [{ name: "init", resources: { requests: { "nvidia.com/gpu": "3" } } }],
      containers: [
        { name: "a", resources: { requests: { "nvidia.com/gpu": 1 }, limits: { "nvidia.com/gpu": 1 } } },
        { name: "b", resources: { limits: { "nvidia.com/gpu": "1" } } },
        { name: "c" },
      ],
    };
    assert.equal(podGpuRequest(aPod("p", {}, spec)), 3);
    assert.equal(podGpuRequest(aPod("p")), 0);
    assert.equal(podGpuRequest(gpuPod("p", "1.5")), undefined);
    assert.equal(podGpuRequest(gpuPod("p", "-1")), undefined);
  });

  it("counts bound and terminating pods against their node, not finished pods or unschedulable nodes", () => {
    const [ready, cordoned, notReady] = nodesOfPools([{ name: "n", count: 3, gpus: 8 }]);
    assert.ok(ready && cordoned && notReady);
    cordoned.spec = { unschedulable: true };
    notReady.status = { ...notReady.status, conditions: [{ type: "Ready", status: "False" }] };
    const bound = gpuPod("a", 2, { nodeName: "n-0" });
    const terminating = gpuPod("b", 3, { nodeName: "n-0" });
    terminating.metadata.deletionTimestamp = "2026-01-01T00:00:30Z";
    const finished = gpuPod("c", 8, { nodeName: "n-0" });
    finished.status = { phase: "Succeeded" };
    const ledger = new HeldGpuLedger();
    for (const pod of [bound, terminating, finished, gpuPod("pending", 8)]) ledger.change(undefined, pod);
    assert.deepEqual(freeCapacity([ready, cordoned, notReady], ledger.byNode()), [{ name: "n-0", freeGpus: 3 }]);
  });

  it("keeps the GPUs held per node as pods are bound, finish and go", () => {
    const ledger = new HeldGpuLedger();
    const pending = gpuPod("a", 2);
    const bound = gpuPod("a", 2, { nodeName: "n-0" });
    const finished = { ...bound, status: { phase: "Failed" } };
    ledger.change(undefined, pending);
    assert.deepEqual([...ledger.byNode()], []);
    ledger.change(pending, bound);
    ledger.change(undefined, gpuPod("b", 3, { nodeName: "n-0" }));
    assert.deepEqual([...ledger.byNode()], [["n-0", 5]]);
    ledger.change(bound, finished);
    assert.deepEqual([...ledger.byNode()], [["n-0", 3]]);
    ledger.change(finished, undefined);
    assert.deepEqual([...ledger.byNode()], [["n-0", 3]]);
  });

  it("reads a frozen node list's free capacity from the current usage, and a changed list's anew", () => {
    const [first, second] = nodesOfPools([{ name: "n", count: 2, gpus: 8 }]);
    assert.ok(first && second);
    const nodes = deepFreeze([first, second]);
    const used = new Map([["n-1", 3]]);
    assert.deepEqual(freeCapacity(nodes, used), [
      { name: "n-0", freeGpus: 8 },
      { name: "n-1", freeGpus: 5 },
    ]);
    used.set("n-0", 8);
    assert.deepEqual(
      freeCapacity(nodes, used),
      [
        { name: "n-0", freeGpus: 0 },
        { name: "n-1", freeGpus: 5 },
      ],
      "usage is read each time",
    );
    const cordoned = deepFreeze([first, { ...second, spec: { unschedulable: true } }]);
    assert.deepEqual(freeCapacity(cordoned, used), [{ name: "n-0", freeGpus: 0 }]);
  });
});

describe("placeGang", () => {
  const nodes = [
    { name: "a", freeGpus: 8 },
    { name: "b", freeGpus: 4 },
    { name: "c", freeGpus: 8 },
  ];

  it("places the largest requests first, each on the tightest node that fits, ties by name", () => {
    const placement = placeGang(
      [
        { pod: "small", gpus: 4 },
        { pod: "big", gpus: 8 },
        { pod: "tiny", gpus: 2 },
      ],
      nodes,
      3,
    );
    assert.ok(placement.ok);
    assert.deepEqual(
      [...placement.nodeByPod],
      [
        ["big", "a"],
        ["small", "b"],
        ["tiny", "c"],
      ],
    );
    assert.deepEqual(nodes[0], { name: "a", freeGpus: 8 }, "input not modified");
  });

  it("places all or nothing, saying which pod did not fit and why", () => {
    const placement = placeGang(
      [
        { pod: "x", gpus: 8 },
        { pod: "y", gpus: 8 },
        { pod: "z", gpus: 8 },
      ],
      nodes,
      5,
    );
    assert.equal(placement.ok, false);
    assert.ok(!placement.ok);
    assert.equal(
      placement.reason,
      "0/5 nodes are available: pod z needs 8 nvidia.com/gpu, at most 4 free on any schedulable node after placing 2 of the gang's pods, 2 not schedulable (NotReady or cordoned) (gang of 3 pods, placed all-or-nothing)",
    );
    assert.equal(placeGang([{ pod: "bad", gpus: undefined }], nodes, 3).ok, false);
  });
});
