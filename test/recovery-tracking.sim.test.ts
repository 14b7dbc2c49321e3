/**
 * Recovery of whole lost instances (docs/design/pod-tracking.md), in the simulated cluster: the
 * recovery finalizer tells a single-pod instance deleted by someone else from one never created,
 * so ServingGroupRecreate rebuilds its whole group, also across a controller crash after any
 * number of its writes; a role scale-up rebuilds nothing; RoleRecreate and None keep to the one
 * instance and the one pod.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { FINALIZER_RECOVERY } from "../src/api/wellknown.ts";
import { Controller } from "../src/engine/controller.ts";
import { ApiError } from "../src/engine/ports.ts";
import type { ClusterWriter, DeleteOptions, JsonObject, KubeObject, ObjectRef } from "../src/engine/ports.ts";
import { SimCluster } from "../src/sim/cluster.ts";
import type { SimInformer } from "../src/sim/informer.ts";
import type { PodRecord, Report } from "../src/sim/report.ts";
import { plan as corePlan } from "../src/core/plan.ts";
import type { PlanFunction } from "../src/engine/reconciler.ts";
import { runScenario } from "../src/sim/runner.ts";
import { parseScenario } from "../src/sim/scenario.ts";

const gpu = (image: string, gpus = 1) => ({
  spec: { containers: [{ name: "vllm", image, resources: { limits: { "nvidia.com/gpu": String(gpus) } } }] },
});
const roles = (prefill: number) => [
  { name: "prefill", replicas: prefill, entryTemplate: gpu("vllm:v1") },
  { name: "decode", replicas: 1, entryTemplate: gpu("vllm:v1", 2) },
];

/** Two groups of two single-pod prefill instances and one decode. */
function modelServing(recoveryPolicy: string): Record<string, unknown> {
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "m" },
    spec: { replicas: 2, recoveryPolicy, drain: { timeoutSeconds: 0 }, template: { roles: roles(2) } },
  };
}

const timing = { scheduleSeconds: 1, pullSeconds: 5, startSeconds: 10, terminationSeconds: 2 };
const nodes = { name: "gpu", count: 4, gpus: 8 };
const ready = { wait: { for: "Available", timeoutSeconds: 900 } };
const settle = { advance: { seconds: 120 } };
const groupPods = (group: number, prefill = 2) =>
  [`m-${group}-decode-0-0`, ...Array.from({ length: prefill }, (_, j) => `m-${group}-prefill-${j}-0`)].sort();

async function play(policy: string, steps: unknown[], pool = nodes): Promise<Report> {
  const parsed = parseScenario({
    name: "tracking",
    seed: 3,
    cluster: { nodes: [pool], timing },
    steps: [{ apply: modelServing(policy) }, ready, ...steps],
  });
  assert.ok(parsed.ok, JSON.stringify(parsed.ok ? [] : parsed.problems));
  const report = await runScenario(parsed.scenario);
  assert.equal(report.verdict, "pass", JSON.stringify(report.steps.filter((step) => !step.ok)));
  return report;
}

/** Names whose UID differs between two snapshots (or that appear in only one). */
function changed(before: readonly PodRecord[], after: readonly PodRecord[]): string[] {
  const old = new Map(before.map((pod) => [pod.name, pod.uid]));
  return after
    .filter((pod) => old.get(pod.name) !== pod.uid)
    .map((pod) => pod.name)
    .sort();
}

const deleteOnePrefill = {
  deletePods: { selector: "tandem.dev/group=1,tandem.dev/role=prefill,tandem.dev/instance=prefill-0", count: 1 },
};

describe("recovery of lost whole instances", () => {
  for (const [policy, expected] of [
    ["ServingGroupRecreate", groupPods(1)],
    ["RoleRecreate", ["m-1-prefill-0-0"]],
    ["None", ["m-1-prefill-0-0"]],
  ] as const) {
    it(`a deleted single-pod prefill instance under ${policy} rebuilds ${policy === "ServingGroupRecreate" ? "its whole group, the other group untouched" : "only that pod"}`, async () => {
      const report = await play(policy, [
        { snapshot: "before" },
        deleteOnePrefill,
        ready,
        settle,
        { snapshot: "after" },
      ]);
      assert.deepEqual(changed(report.snapshots["before"] ?? [], report.snapshots["after"] ?? []), expected);
      assert.equal(report.metrics.podsCreated.total, 6 + expected.length, "each rebuilt pod created once");
      assert.ok(report.final.pods.every((pod) => pod.ready));
    });
  }

  it("a node failure under ServingGroupRecreate rebuilds each group with a pod on the node, whole, and no other", async () => {
    // The same seed places the pods alike: find a node with pods of one group only.
    // Small nodes: each holds a decode or two prefill pods, and nothing is left to the other group.
    const small = { name: "gpu", count: 8, gpus: 2 };
    const placed = (await play("ServingGroupRecreate", [{ snapshot: "before" }], small)).snapshots["before"] ?? [];
    const byNode = Map.groupBy(placed, (pod) => pod.node ?? "");
    const [node, hosted] =
      [...byNode].find(
        ([, pods]) => new Set(pods.map((pod) => pod.group)).size === 1 && pods.some((pod) => pod.role === "prefill"),
      ) ?? [];
    assert.ok(node !== undefined && hosted !== undefined, "some node hosts prefill pods of a single group");
    const hit = hosted[0]?.group ?? -1;
    const report = await play(
      "ServingGroupRecreate",
      [
        { snapshot: "before" },
        { failNode: { name: node } },
        { advance: { seconds: 400 } },
        ready,
        settle,
        { snapshot: "after" },
      ],
      small,
    );
    assert.deepEqual(changed(report.snapshots["before"] ?? [], report.snapshots["after"] ?? []), groupPods(hit));
    assert.ok((report.snapshots["after"] ?? []).every((pod) => pod.node !== node && pod.ready));
  });

  it("a role scale-up (prefill 2 → 3) under ServingGroupRecreate creates the new instances and rebuilds nothing", async () => {
    const scaleUp = { patch: { name: "m", merge: { spec: { template: { roles: roles(3) } } } } };
    const report = await play("ServingGroupRecreate", [
      { snapshot: "before" },
      scaleUp,
      ready,
      settle,
      { snapshot: "after" },
    ]);
    assert.deepEqual(changed(report.snapshots["before"] ?? [], report.snapshots["after"] ?? []), [
      "m-0-prefill-2-0",
      "m-1-prefill-2-0",
    ]);
    assert.equal(report.metrics.podsDeleted.total, 0);
  });

  it("a lost single-pod instance mid-rollout: the group rebuilt for it is the fault's, not charged to the rollout's budgets", async () => {
    const rolling = (image: string) => [
      { name: "prefill", replicas: 2, entryTemplate: gpu("vllm:v1") },
      { name: "decode", replicas: 1, maxSurge: 1, maxUnavailable: 0, entryTemplate: gpu(image, 2) },
    ];
    const spec = {
      replicas: 2,
      recoveryPolicy: "ServingGroupRecreate",
      drain: { timeoutSeconds: 5 },
      rolloutStrategy: { type: "RoleRollingUpdate" },
      template: { roles: rolling("vllm:v1") },
    };
    const steps = [
      { apply: { apiVersion: "tandem.dev/v1alpha1", kind: "ModelServing", metadata: { name: "m" }, spec } },
      ready,
      { snapshot: "before" },
      { patch: { name: "m", merge: { spec: { template: { roles: rolling("vllm:v2") } } } } },
      { advance: { seconds: 3 } },
      { deletePods: { selector: "tandem.dev/group=1,tandem.dev/instance=prefill-0", count: 1 } },
      { wait: { for: "RolloutComplete", timeoutSeconds: 1200 } },
      { snapshot: "after" },
    ];
    const parsed = parseScenario({ name: "lost-mid-rollout", seed: 3, cluster: { nodes: [nodes], timing }, steps });
    assert.ok(parsed.ok);
    const report = await runScenario(parsed.scenario);
    assert.deepEqual(
      report.invariants.filter((invariant) => invariant.violations > 0),
      [],
    );
    assert.equal(report.verdict, "pass", JSON.stringify(report.steps.filter((step) => !step.ok)));
    const rebuilt = changed(report.snapshots["before"] ?? [], report.snapshots["after"] ?? []);
    assert.ok(
      ["m-1-prefill-0-0", "m-1-prefill-1-0"].every((name) => rebuilt.includes(name)),
      `group 1's prefill rebuilt with it: ${rebuilt.join(", ")}`,
    );
    assert.ok(!rebuilt.some((name) => name.startsWith("m-0-prefill")), "group 0's prefill untouched");
  });

  it("every pod the controller creates holds the recovery finalizer; its own deletions do not wait for it", async () => {
    const report = await play("ServingGroupRecreate", [
      { patch: { name: "m", merge: { spec: { replicas: 1 } } } },
      settle,
      { snapshot: "after" },
    ]);
    assert.deepEqual((report.snapshots["after"] ?? []).map((pod) => pod.name).sort(), groupPods(0));
    assert.equal(report.metrics.podsDeleted.total, 3);
  });
});

/**
 * A writer that lets `allowed` writes through once armed, then refuses every other (a controller
 * that crashed right after its `allowed`-th write: nothing after it reaches the server).
 */
class CrashingWriter implements ClusterWriter {
  readonly #inner: ClusterWriter;
  #allowed: number | undefined;
  /** Writes let through since arming. */
  passed = 0;
  crashed = false;

  constructor(inner: ClusterWriter) {
    this.#inner = inner;
  }

  arm(allowed: number | undefined): void {
    this.#allowed = allowed;
    this.passed = 0;
  }

  #gate(): void {
    if (this.#allowed === undefined) return;
    if (this.passed >= this.#allowed) {
      this.crashed = true;
      throw new ApiError("ServerError", "the controller crashed");
    }
    this.passed++;
  }

  create<K extends KubeObject["kind"]>(object: KubeObject<K>): Promise<KubeObject<K>> {
    this.#gate();
    return this.#inner.create(object);
  }
  update<K extends KubeObject["kind"]>(object: KubeObject<K>): Promise<KubeObject<K>> {
    this.#gate();
    return this.#inner.update(object);
  }
  patch<K extends KubeObject["kind"]>(ref: ObjectRef<K>, mergePatch: JsonObject): Promise<KubeObject<K>> {
    this.#gate();
    return this.#inner.patch(ref, mergePatch);
  }
  patchStatus<K extends KubeObject["kind"]>(ref: ObjectRef<K>, mergePatch: JsonObject): Promise<KubeObject<K>> {
    this.#gate();
    return this.#inner.patchStatus(ref, mergePatch);
  }
  delete(ref: ObjectRef, options?: DeleteOptions): Promise<void> {
    this.#gate();
    return this.#inner.delete(ref, options);
  }
}

interface Running {
  readonly controller: Controller;
  readonly informer: SimInformer;
  readonly unhook: () => void;
}

function startController(cluster: SimCluster, writer: ClusterWriter): Running {
  const informer = cluster.reader();
  const controller = new Controller({
    reader: informer,
    writer,
    clock: cluster.clock.onEpoch(),
    recorder: cluster.recorder(),
    rng: cluster.rng("controller"),
  });
  controller.start();
  return { controller, informer, unhook: cluster.onSettle(() => controller.idle()) };
}

async function stopController(running: Running): Promise<void> {
  running.unhook();
  await running.controller.stop();
  running.informer.stop();
}

const podUids = (cluster: SimCluster) =>
  new Map(cluster.server.stored("Pod").map((pod) => [pod.metadata.name, pod.metadata.uid ?? ""]));
const isReady = (pod: KubeObject) =>
  pod.metadata.deletionTimestamp === undefined &&
  (pod.status?.["conditions"] as { type: string; status: string }[] | undefined)?.some(
    (c) => c.type === "Ready" && c.status === "True",
  ) === true;

/**
 * Deletes m-1-prefill-0-0 of a converged ServingGroupRecreate ModelServing; the controller crashes
 * after `crashAfter` of its writes (none when undefined), stays down `downMs`, and a new one (no
 * memory) takes over. Returns what the recovery did.
 */
async function recoverAcrossCrash(crashAfter: number | undefined, downMs: number) {
  const cluster = new SimCluster({ seed: 9, nodes: [nodes], timing });
  const writer = new CrashingWriter(cluster.writer());
  let running = startController(cluster, writer);
  await cluster
    .writer("user")
    .create({ ...modelServing("ServingGroupRecreate"), metadata: { name: "m", namespace: "default" } } as never);
  const allReady = () => {
    const pods = cluster.server.stored("Pod");
    return pods.length === 6 && pods.every(isReady);
  };
  assert.ok(await cluster.waitFor(allReady, 900_000), "converged before the fault");
  await cluster.advance(30_000);
  const before = podUids(cluster);
  const events = cluster.events().length;
  const writesBefore = cluster.server.apiWrites({ client: "controller" });
  writer.arm(crashAfter);
  const victim = cluster.server.get({ kind: "Pod", namespace: "default", name: "m-1-prefill-0-0" });
  await cluster
    .writer("chaos")
    .delete({ kind: "Pod", namespace: "default", name: "m-1-prefill-0-0" }, { uid: victim.metadata.uid ?? "" });
  if (crashAfter !== undefined) {
    assert.ok(await cluster.waitFor(() => writer.crashed, 900_000), `the controller reached write ${crashAfter + 1}`);
    await cluster.advance(downMs);
    await stopController(running);
    writer.arm(undefined);
    running = startController(cluster, writer);
  }
  const rebuilt = () => allReady() && groupPods(1).every((name) => podUids(cluster).get(name) !== before.get(name));
  const recovered = await cluster.waitFor(rebuilt, 900_000);
  await cluster.advance(120_000);
  const recoveryWrites = cluster.server.apiWrites({ client: "controller" }) - writesBefore;
  // One reconcile of the converged system by a restarted controller writes nothing.
  await stopController(running);
  const writesAtRestart = cluster.server.apiWrites({ client: "controller" });
  running = startController(cluster, writer);
  await cluster.advance(10_000);
  const writesAfterRestart = cluster.server.apiWrites({ client: "controller" }) - writesAtRestart;
  await stopController(running);
  const after = podUids(cluster);
  const finalizers = cluster.server.stored("Pod").map((pod) => pod.metadata.finalizers ?? []);
  cluster.stop();
  const since = cluster.events().slice(events);
  return { recovered, before, after, since, recoveryWrites, writesAfterRestart, finalizers, passed: writer.passed };
}

describe("ServingGroupRecreate recovery of a lost instance across a controller crash after any write", () => {
  it("crashing after each write of the recovery (and restarting at once or 10 s later): the group is rebuilt exactly once, nothing else moves", async () => {
    const baseline = await recoverAcrossCrash(undefined, 0);
    assert.ok(baseline.recovered, "the uninterrupted recovery finishes");
    const writes = baseline.recoveryWrites;
    assert.ok(writes >= 4, `the recovery takes several writes (${writes})`);
    for (let crashAfter = 0; crashAfter < writes; crashAfter++) {
      for (const downMs of [0, 10_000]) {
        const run = await recoverAcrossCrash(crashAfter, downMs);
        const label = `crash after write ${crashAfter} of ${writes}, down ${downMs} ms`;
        assert.ok(run.recovered, `${label}: group 1 rebuilt and every pod Ready`);
        for (const name of groupPods(0))
          assert.equal(run.after.get(name), run.before.get(name), `${label}: ${name} untouched`);
        for (const name of groupPods(1))
          assert.notEqual(run.after.get(name), run.before.get(name), `${label}: ${name} rebuilt`);
        const created = run.since
          .filter((event) => event.type === "PodCreated")
          .map((event) => event.pod)
          .sort();
        assert.deepEqual(created, groupPods(1), `${label}: each pod of group 1 created once, nothing else`);
        const deleted = run.since
          .filter((event) => event.type === "PodDeleted")
          .map((event) => event.pod)
          .sort();
        assert.deepEqual(deleted, groupPods(1), `${label}: each old pod of group 1 deleted once, nothing else`);
        assert.equal(run.writesAfterRestart, 0, `${label}: a restart on the converged system writes nothing`);
        assert.ok(
          run.finalizers.every((list) => list.includes(FINALIZER_RECOVERY)),
          `${label}: every pod tracked`,
        );
      }
    }
  });
});

describe("ServingGroupRecreate recovery of a lost instance with a restart at every instant the controller writes", () => {
  /** The deletion scenario, with `restart` (seconds after the deletion) a controller restart. */
  function scenario(restartAfterSeconds: number | undefined) {
    const restart =
      restartAfterSeconds === undefined
        ? []
        : [{ advance: { seconds: restartAfterSeconds } }, { restartController: {} }];
    const parsed = parseScenario({
      name: "restart-every-instant",
      seed: 3,
      cluster: { nodes: [nodes], timing },
      steps: [
        { apply: modelServing("ServingGroupRecreate") },
        ready,
        { snapshot: "before" },
        deleteOnePrefill,
        ...restart,
        ready,
        settle,
        { snapshot: "after" },
      ],
    });
    assert.ok(parsed.ok);
    return parsed.scenario;
  }

  it("the group is rebuilt exactly once, every invariant holds, nothing else moves", async () => {
    // The instants (seconds after the deletion) at which the uninterrupted recovery plans writes.
    const instants: number[] = [];
    let deletedAtMs: number | undefined;
    const recording: PlanFunction = (observed, nowMs) => {
      const planned = corePlan(observed, nowMs);
      const lost = observed.pods.some(
        (pod) => pod.metadata.name === "m-1-prefill-0-0" && pod.metadata.deletionTimestamp !== undefined,
      );
      if (lost) deletedAtMs ??= nowMs;
      if (deletedAtMs !== undefined && planned.actions.length > 0) instants.push(nowMs - deletedAtMs);
      return planned;
    };
    const baseline = await runScenario(scenario(undefined), { plan: recording });
    assert.equal(baseline.verdict, "pass");
    const distinct = [...new Set(instants)].sort((a, b) => a - b);
    assert.ok(distinct.length >= 3, `the recovery writes at several instants: ${distinct.join(", ")}`);
    // The deletion reached the controller one informer lag after it happened; restart just
    // before each instant it writes at and just after.
    const lagMs = 100;
    const restarts = [...new Set(distinct.flatMap((ms) => [ms + lagMs - 1, ms + lagMs + 1]))];
    for (const ms of restarts) {
      const report = await runScenario(scenario(ms / 1000));
      const label = `restart ${ms} ms after the deletion`;
      assert.equal(report.verdict, "pass", `${label}: ${JSON.stringify(report.steps.filter((step) => !step.ok))}`);
      assert.deepEqual(
        report.invariants.filter((invariant) => invariant.violations > 0),
        [],
        label,
      );
      assert.deepEqual(
        changed(report.snapshots["before"] ?? [], report.snapshots["after"] ?? []),
        groupPods(1),
        `${label}: group 1 rebuilt, group 0 kept`,
      );
      assert.equal(report.metrics.podsCreated.total, 9, `${label}: each pod of group 1 created once`);
      assert.equal(report.metrics.podsDeleted.total, 3, `${label}: each old pod of group 1 deleted once`);
    }
  });
});
