import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Pod, PodCondition } from "../api/kube.ts";
import type { ModelServingStatus } from "../api/schema.ts";
import type { Action } from "../core/actions.ts";
import type { ControllerRevision } from "../core/revision/controller-revision.ts";
import { EventRecorder } from "./recorder.ts";
import { SimInformer } from "../sim/informer.ts";
import { aModelServing, setupServer } from "../sim/test-fixtures.ts";
import { Executor } from "./executor.ts";
import type { PlanTarget } from "./executor.ts";
import { Expectations } from "./expectations.ts";
import { toJsonObject } from "./json.ts";
import { MemoryLogger } from "./logger.ts";
import { isApiError } from "./ports.ts";
import type { ClusterWriter, DeleteOptions, JsonObject, Kind, KubeObject, ObjectRef } from "./ports.ts";

/** Wraps a writer, logging each request as `verb kind/name` in the order it was issued. */
function recording(inner: ClusterWriter): ClusterWriter & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    create: <K extends Kind>(object: KubeObject<K>) => (
      calls.push(`create ${object.kind}/${object.metadata.name}`),
      inner.create(object)
    ),
    update: <K extends Kind>(object: KubeObject<K>) => (
      calls.push(`update ${object.kind}/${object.metadata.name}`),
      inner.update(object)
    ),
    patch: <K extends Kind>(ref: ObjectRef<K>, patch: JsonObject) => (
      calls.push(`patch ${ref.kind}/${ref.name}`),
      inner.patch(ref, patch)
    ),
    patchStatus: <K extends Kind>(ref: ObjectRef<K>, patch: JsonObject) => (
      calls.push(`patchStatus ${ref.kind}/${ref.name}`),
      inner.patchStatus(ref, patch)
    ),
    delete: (ref: ObjectRef, options?: DeleteOptions) => (
      calls.push(`delete ${ref.kind}/${ref.name}`),
      inner.delete(ref, options)
    ),
  };
}

async function setup(options: { maxParallelWrites?: number } = {}) {
  const sim = setupServer();
  const informer = new SimInformer(sim.client, sim.clock, {
    kinds: ["ModelServing", "Pod", "Service", "ControllerRevision"],
    lagMs: 0,
  });
  informer.start();
  const ms = await sim.client.create(aModelServing("m"));
  const writer = recording(sim.server.client("controller"));
  const expectations = new Expectations(sim.clock, { logger: new MemoryLogger() });
  const recorder = new EventRecorder({
    writer: sim.server.client("events"),
    clock: sim.clock.onEpoch(),
    component: "tandem",
  });
  const executor = new Executor({ writer, reader: informer, recorder }, { ...options, expectations });
  sim.clock.advance(0);
  /** The target as the cache now shows the ModelServing. */
  const target = (): PlanTarget => {
    const cached = informer.get("ModelServing", "default", "m");
    const { uid, resourceVersion } = cached?.metadata ?? {};
    return { key: "default/m", namespace: "default", name: "m", uid, resourceVersion, status: cached?.status };
  };
  return { ...sim, informer, ms, writer, expectations, executor, target };
}

/** A pod as the core builds it; `asObject` gives it the ports' type for direct writes. */
function aPod(name: string, extra: Partial<Pod["metadata"]> = {}): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default", labels: { "tandem.dev/modelserving": "m" }, ...extra },
    spec: { containers: [{ name: "main", image: "vllm:v1" }] },
  };
}

function asObject(pod: Pod): KubeObject<"Pod"> {
  return toJsonObject(pod) as unknown as KubeObject<"Pod">;
}

function createPod(name: string): Action {
  return { type: "CreatePod", pod: aPod(name) };
}

function aRevision(name: string): ControllerRevision {
  return {
    apiVersion: "apps/v1",
    kind: "ControllerRevision",
    metadata: {
      name,
      namespace: "default",
      labels: { "tandem.dev/modelserving": "m" },
      annotations: {},
      ownerReferences: [],
    },
    data: {},
    revision: 1,
  } as unknown as ControllerRevision;
}

const podRef = (name: string) => ({ kind: "Pod", namespace: "default", name }) as const;
const msRef = { kind: "ModelServing", namespace: "default", name: "m" } as const;

describe("executor", () => {
  it("issues requests in plan order, batching runs of one type", async () => {
    const { executor, target, writer, client, clock } = await setup({ maxParallelWrites: 2 });
    const old = await client.create(asObject(aPod("old")));
    clock.advance(0);
    const actions: Action[] = [
      { type: "CreateRevision", revision: aRevision("m-1"), barrier: true },
      createPod("p0"),
      createPod("p1"),
      createPod("p2"),
      { type: "DeletePod", name: "old", uid: old.metadata.uid ?? "", reason: "ScaleDown", gracePeriodSeconds: 0 },
      { type: "WriteStatus", status: { replicas: 3 }, barrier: false },
      { type: "DeleteRevision", name: "m-0" },
    ];
    const result = await executor.execute(target(), actions);
    assert.deepEqual(result, { applied: 7, conflicts: [], failed: [], skipped: 0 });
    assert.deepEqual(writer.calls, [
      "create ControllerRevision/m-1",
      "create Pod/p0",
      "create Pod/p1",
      "create Pod/p2",
      "delete Pod/old",
      "patchStatus ModelServing/m",
      "delete ControllerRevision/m-0",
    ]);
  });

  it("sends at most maxParallelWrites requests at once", async () => {
    for (const [maxParallelWrites, expected] of [
      [1, 1],
      [3, 3],
      [8, 5],
    ] as const) {
      const { executor, target, writer } = await setup({ maxParallelWrites });
      let inFlight = 0;
      let maxInFlight = 0;
      const create = writer.create.bind(writer);
      writer.create = (object) => {
        maxInFlight = Math.max(maxInFlight, ++inFlight);
        return create(object).finally(() => inFlight--);
      };
      const result = await executor.execute(target(), ["p0", "p1", "p2", "p3", "p4"].map(createPod));
      assert.equal(result.applied, 5);
      assert.equal(maxInFlight, expected, `maxParallelWrites ${maxParallelWrites}`);
    }
  });

  it("drops the rest of the plan when a barrier fails, but not after a non-barrier failure", async () => {
    const { executor, target, writer, server } = await setup();
    server.faults.failNth({ verb: "patchStatus" }, 1, { error: "ServerError" });
    const actions: Action[] = [
      createPod("p0"),
      { type: "WriteStatus", status: { replicas: 2 }, barrier: true },
      createPod("p1"),
      createPod("p2"),
    ];
    const result = await executor.execute(target(), actions);
    assert.equal(result.applied, 1);
    assert.equal(result.skipped, 2);
    assert.equal(result.failed.length, 1);
    assert.match(result.failed[0]?.message ?? "", /^WriteStatus ModelServing default\/m: ServerError/);
    assert.ok(isApiError(result.failed[0]?.cause, "ServerError"), "the ApiError is the cause");
    assert.deepEqual(writer.calls, ["create Pod/p0", "patchStatus ModelServing/m"]);

    server.faults.failNth({ verb: "create", kind: "Pod" }, 1, { error: "ServerError" });
    const next = await executor.execute(target(), [
      createPod("p1"),
      { type: "WriteStatus", status: { replicas: 2 }, barrier: false },
    ]);
    assert.deepEqual(
      [next.applied, next.failed.length, next.skipped],
      [1, 1, 0],
      "a failed non-barrier action does not stop the plan",
    );
  });

  it("stops at a barrier that meets a Conflict and reports it as a conflict, not a failure", async () => {
    const { executor, target, server } = await setup();
    server.faults.failNth({ verb: "create", kind: "ControllerRevision" }, 1, { error: "Conflict" });
    const result = await executor.execute(target(), [
      { type: "CreateRevision", revision: aRevision("m-1"), barrier: true },
      createPod("p0"),
    ]);
    assert.equal(result.applied, 0);
    assert.equal(result.failed.length, 0);
    assert.equal(result.conflicts.length, 1);
    assert.equal(result.skipped, 1);
  });

  it("counts AlreadyExists on a create and NotFound on a delete as applied", async () => {
    const { executor, target, client, clock } = await setup();
    await client.create(asObject(aPod("p0")));
    clock.advance(0);
    const actions: Action[] = [
      createPod("p0"),
      { type: "DeletePod", name: "gone", uid: "0000", reason: "Orphan" },
      { type: "DeleteService", name: "gone", uid: "0000" },
      { type: "DeleteRevision", name: "gone" },
    ];
    assert.deepEqual(await executor.execute(target(), actions), { applied: 4, conflicts: [], failed: [], skipped: 0 });
  });

  it("reports a UID precondition that fails, and a patch of a vanished pod, as conflicts", async () => {
    const { executor, target, client, clock } = await setup();
    await client.create(asObject(aPod("p0")));
    clock.advance(0);
    const actions: Action[] = [
      { type: "DeletePod", name: "p0", uid: "not-the-uid", reason: "Update" },
      { type: "AnnotatePod", name: "gone", uid: "0000", annotations: { a: "b" } },
    ];
    const result = await executor.execute(target(), actions);
    assert.deepEqual([result.applied, result.conflicts.length, result.failed.length], [0, 2, 0]);
    assert.match(result.conflicts[0]?.message ?? "", /^DeletePod Pod default\/p0: Conflict/);
  });

  it("deletes a pod guarded by a resourceVersion only as the plan saw it; after a release, as the release wrote it", async () => {
    const { executor, target, client, clock, server } = await setup();
    const stored = (name: string) => server.get({ kind: "Pod", namespace: "default", name });
    for (const name of ["p0", "p1", "p2"])
      await client.create(asObject(aPod(name, { finalizers: ["tandem.dev/recovery"] })));
    clock.advance(0);
    const seen = (name: string) => ({
      uid: stored(name).metadata.uid ?? "",
      version: stored(name).metadata.resourceVersion ?? "",
    });
    const [p0, p1, p2] = [seen("p0"), seen("p1"), seen("p2")];
    // p0 changed since the plan saw it (it became Ready): its deletion is a Conflict.
    await client.patch({ kind: "Pod", namespace: "default", name: "p0" }, { metadata: { labels: { ready: "yes" } } });
    const release = (version: string) => ({ resourceVersion: version, finalizers: [] });
    const result = await executor.execute(target(), [
      { type: "DeletePod", name: "p0", uid: p0.uid, reason: "Recovery", resourceVersion: p0.version },
      { type: "DeletePod", name: "p1", uid: p1.uid, reason: "Recovery", resourceVersion: p1.version },
      {
        type: "DeletePod",
        name: "p2",
        uid: p2.uid,
        reason: "Recovery",
        resourceVersion: p2.version,
        release: release(p2.version),
      },
    ]);
    assert.deepEqual([result.applied, result.conflicts.length, result.failed.length], [2, 1, 0]);
    assert.match(result.conflicts[0]?.message ?? "", /^DeletePod Pod default\/p0: Conflict/);
    assert.equal(stored("p0").metadata.deletionTimestamp, undefined, "the changed pod stays");
    assert.notEqual(stored("p1").metadata.deletionTimestamp, undefined, "p1 is deleted (its finalizer holds it)");
    assert.throws(
      () => stored("p2"),
      /NotFound/,
      "p2 is released and gone: the deletion required the release's version",
    );
  });

  it("aggregates partial failures and keeps applying the rest", async () => {
    const { executor, target, server } = await setup({ maxParallelWrites: 3 });
    server.faults.failNth({ verb: "create", kind: "Pod" }, 2, { error: "ServerError" });
    server.faults.failNth({ verb: "create", kind: "Pod" }, 4, { error: "Timeout" });
    const result = await executor.execute(target(), ["p0", "p1", "p2", "p3", "p4"].map(createPod));
    assert.equal(result.applied, 3);
    assert.deepEqual(
      result.failed.map((error) => error.message.split(":")[0]),
      ["CreatePod Pod default/p1", "CreatePod Pod default/p3"],
      "in plan order",
    );
    assert.deepEqual(
      server.list("Pod").items.map((pod) => pod.metadata.name),
      ["p0", "p2", "p4"],
    );
  });

  it("writes the whole status: keys the plan left out are removed, an unchanged status is not written", async () => {
    const { executor, target, server, clock, writer } = await setup();
    const before: ModelServingStatus = {
      replicas: 2,
      conditions: [{ type: "Available", status: "True", reason: "AllReady" }],
      units: [{ group: 1, revision: "m-1" }],
    };
    assert.equal(
      (await executor.execute(target(), [{ type: "WriteStatus", status: before, barrier: true }])).applied,
      1,
    );
    clock.advance(0);
    const after: ModelServingStatus = {
      replicas: 3,
      conditions: [{ type: "Available", status: "False", reason: "Scaling" }],
    };
    assert.equal(
      (await executor.execute(target(), [{ type: "WriteStatus", status: after, barrier: true }])).applied,
      1,
    );
    assert.deepEqual(server.get(msRef).status, after);
    clock.advance(0);
    const calls = writer.calls.length;
    assert.equal(
      (await executor.execute(target(), [{ type: "WriteStatus", status: after, barrier: false }])).applied,
      1,
    );
    assert.equal(writer.calls.length, calls, "no request for an unchanged status");
  });

  it("makes a status write conditional on the resourceVersion it was computed from", async () => {
    const { executor, target, client } = await setup();
    const stale = target();
    await client.patch(msRef, { spec: { replicas: 5 } });
    const result = await executor.execute(stale, [{ type: "WriteStatus", status: { replicas: 1 }, barrier: true }]);
    assert.equal(result.conflicts.length, 1);
  });

  it("sets one pod condition, keeping the others, under the plan's resourceVersion", async () => {
    const { executor, target, client, server, clock, informer } = await setup();
    const pod = await client.create(asObject(aPod("p0")));
    const scheduled: PodCondition = { type: "PodScheduled", status: "True" };
    await client.patchStatus(
      podRef("p0"),
      toJsonObject({ status: { conditions: [scheduled, { type: "tandem.dev/serving", status: "False" }] } }),
    );
    clock.advance(0);
    const cached = informer.get("Pod", "default", "p0");
    const serving: PodCondition = { type: "tandem.dev/serving", status: "True", reason: "Serving" };
    const ready: PodCondition = { type: "Ready", status: "True" };
    const uid = pod.metadata.uid ?? "";
    const setServing: Action = {
      type: "SetPodCondition",
      name: "p0",
      uid,
      resourceVersion: cached?.metadata.resourceVersion ?? "",
      condition: serving,
    };
    assert.equal((await executor.execute(target(), [setServing])).applied, 1);
    clock.advance(0);
    const resourceVersion = informer.get("Pod", "default", "p0")?.metadata.resourceVersion ?? "";
    assert.equal(
      (
        await executor.execute(target(), [
          { type: "SetPodCondition", name: "p0", uid, resourceVersion, condition: ready },
        ])
      ).applied,
      1,
    );
    assert.deepEqual(server.get(podRef("p0")).status?.["conditions"], [scheduled, serving, ready]);

    const stale = await executor.execute(target(), [{ ...setServing, condition: { type: "Ready", status: "False" } }]);
    assert.equal(stale.conflicts.length, 1, "the plan saw an older version");
  });

  it("a drain mark that releases: the gate, the mark and the finalizers in one status write under the plan's version; a pod changed meanwhile is a Conflict, nothing written", async () => {
    const { executor, target, client, server, clock, informer } = await setup();
    for (const name of ["p0", "p1"])
      await client.create(asObject(aPod(name, { finalizers: ["example.com/other", "tandem.dev/recovery"] })));
    clock.advance(0);
    const mark = (name: string): Action => {
      const cached = informer.get("Pod", "default", name);
      const resourceVersion = cached?.metadata.resourceVersion ?? "";
      return {
        type: "AnnotatePod",
        name,
        uid: cached?.metadata.uid ?? "",
        annotations: { "tandem.dev/draining": "2026-11-30T01:00:00.000Z" },
        release: { resourceVersion, finalizers: ["example.com/other"] },
        gate: { resourceVersion, condition: { type: "tandem.dev/serving", status: "False", reason: "Draining" } },
      };
    };
    const [m0, m1] = [mark("p0"), mark("p1")];
    // p1 changed since the plan saw it: its write is a Conflict, and nothing is written.
    await client.patch(podRef("p1"), { metadata: { labels: { ready: "yes" } } });
    const writesBefore = server.apiWrites({ kind: "Pod" });
    const result = await executor.execute(target(), [m0, m1]);
    assert.deepEqual([result.applied, result.conflicts.length], [1, 1]);
    assert.equal(server.apiWrites({ kind: "Pod" }) - writesBefore, 2, "one request a pod; the server refuses p1's");
    const p0 = server.get(podRef("p0"));
    assert.deepEqual(
      [p0.metadata.finalizers, p0.metadata.annotations?.["tandem.dev/draining"], p0.status?.["conditions"]],
      [
        ["example.com/other"],
        "2026-11-30T01:00:00.000Z",
        [{ type: "tandem.dev/serving", status: "False", reason: "Draining" }],
      ],
    );
    const p1 = server.get(podRef("p1"));
    assert.deepEqual(
      [p1.metadata.finalizers, p1.metadata.annotations?.["tandem.dev/draining"]],
      [["example.com/other", "tandem.dev/recovery"], undefined],
    );
  });

  it("annotates with a UID precondition and removes annotations set to null", async () => {
    const { executor, target, client, server } = await setup();
    const pod = await client.create(asObject(aPod("p0", { annotations: { keep: "1", drop: "2" } })));
    const action: Action = {
      type: "AnnotatePod",
      name: "p0",
      uid: pod.metadata.uid ?? "",
      annotations: { drop: null, added: "3" },
    };
    assert.equal((await executor.execute(target(), [action])).applied, 1);
    assert.deepEqual(server.get(podRef("p0")).metadata.annotations, { keep: "1", added: "3" });
  });

  it("annotates and relabels in one write when labels are given", async () => {
    const { executor, target, client, server } = await setup();
    const pod = await client.create(asObject(aPod("p0", { annotations: { "tandem.dev/inplace": "{}" } })));
    const action: Action = {
      type: "AnnotatePod",
      name: "p0",
      uid: pod.metadata.uid ?? "",
      annotations: { "tandem.dev/inplace": null },
      labels: { "tandem.dev/revision": "m-2" },
    };
    assert.equal((await executor.execute(target(), [action])).applied, 1);
    const stored = server.get(podRef("p0"));
    assert.deepEqual(
      [stored.metadata.annotations, stored.metadata.labels],
      [{}, { "tandem.dev/modelserving": "m", "tandem.dev/revision": "m-2" }],
    );
  });

  it("patches container images in place: the whole list as cached, only images changed, with the annotations, under the plan's resourceVersion", async () => {
    const { executor, target, client, server, clock, informer } = await setup();
    const spec = {
      containers: [
        { name: "vllm", image: "vllm:v1", args: ["--tp", "8"] },
        { name: "sidecar", image: "proxy:v1" },
      ],
    };
    const pod = await client.create({ ...asObject(aPod("p0")), spec: toJsonObject(spec) });
    clock.advance(0);
    const resourceVersion = informer.get("Pod", "default", "p0")?.metadata.resourceVersion ?? "";
    const action: Action = {
      type: "PatchPodImages",
      name: "p0",
      uid: pod.metadata.uid ?? "",
      resourceVersion,
      images: { vllm: "vllm:v2" },
      annotations: { "tandem.dev/inplace": '{"phase":"Patched"}' },
    };
    assert.equal((await executor.execute(target(), [action])).applied, 1);
    const stored = server.get(podRef("p0"));
    assert.deepEqual(stored.spec?.["containers"], [
      { name: "vllm", image: "vllm:v2", args: ["--tp", "8"] },
      { name: "sidecar", image: "proxy:v1" },
    ]);
    assert.equal(stored.metadata.annotations?.["tandem.dev/inplace"], '{"phase":"Patched"}');

    const stale = await executor.execute(target(), [action]);
    assert.equal(stale.conflicts.length, 1, "the plan saw an older version");
  });

  it("records events about the ModelServing or one of its pods", async () => {
    const { executor, target, server, clock } = await setup();
    const actions: Action[] = [
      {
        type: "RecordEvent",
        eventType: "Warning",
        reason: "DrainTimeout",
        message: "pod p0 did not drain in 300 s",
        pod: "p0",
      },
      { type: "RecordEvent", eventType: "Normal", reason: "RolloutStarted", message: "rolling out m-2" },
    ];
    assert.equal((await executor.execute(target(), actions)).applied, 2);
    clock.advance(0);
    const events = server
      .list("Event")
      .items.map((event) => [event["reason"], (event["involvedObject"] as { kind: string }).kind]);
    // Listed by event name, which starts with the regarding object's name.
    assert.deepEqual(events, [
      ["RolloutStarted", "ModelServing"],
      ["DrainTimeout", "Pod"],
    ]);
  });

  it("records an expectation for each applied write and none for a failed one", async () => {
    const { executor, target, expectations, server } = await setup();
    server.faults.failNth({ verb: "create", kind: "Pod" }, 2, { error: "ServerError" });
    await executor.execute(target(), [createPod("p0"), createPod("p1")]);
    assert.equal(expectations.count("default/m"), 1);
  });

  it("records a short expectation for a patch or delete that timed out, applied or not, and none for a create (fuzz-faults-coordinated-crash-gang-242: a gate write applied but reported as timed out left none, and the next plan saw the pod not serving)", async () => {
    const { executor, target, expectations, server, clock, informer } = await setup();
    await executor.execute(target(), [createPod("p0"), createPod("p1")]);
    // Let the cache show both pods, so the expectations of their creation are met.
    clock.advance(1000);
    expectations.pending("default/m", informer);
    assert.equal(expectations.count("default/m"), 0);
    server.faults.failNth({ verb: "patch", kind: "Pod" }, 1, { error: "Timeout", applied: true });
    server.faults.failNth({ verb: "delete", kind: "Pod" }, 1, { error: "Timeout" });
    server.faults.failNth({ verb: "create", kind: "Pod" }, 1, { error: "Timeout" });
    const pod = (name: string) => server.get({ kind: "Pod", namespace: "default", name });
    const result = await executor.execute(target(), [
      { type: "AnnotatePod", name: "p0", uid: pod("p0").metadata.uid ?? "", annotations: { note: "x" } },
      { type: "DeletePod", name: "p1", uid: pod("p1").metadata.uid ?? "", reason: "Update" },
      createPod("p2"),
    ]);
    assert.equal(result.failed.length, 3, "all three are reported as failed");
    assert.equal(expectations.count("default/m"), 2, "the patch and the delete may have been applied");
    clock.advance(5_000);
    assert.deepEqual(
      expectations.pending("default/m", informer),
      { satisfied: true },
      "the shown patch met its expectation; the lost delete's lapsed after 5 s",
    );
  });

  it("stops before the next batch once aborted", async () => {
    const { executor, target, writer } = await setup({ maxParallelWrites: 1 });
    const abort = new AbortController();
    abort.abort();
    const result = await executor.execute(target(), [createPod("p0")], abort.signal);
    assert.deepEqual([result.applied, result.skipped, writer.calls.length], [0, 1, 0]);
  });
});
