import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Pod } from "../api/kube.ts";
import type { Action } from "./actions.ts";
import { deepFreeze } from "./frozen.ts";
import { plan } from "./plan.ts";
import { apply, converge, idealCluster, observe, readyPod, unschedulablePod } from "../../test/ideal-cluster.ts";

const NOW = Date.parse("2026-11-30T01:00:00Z");

function pod(image = "vllm:v1") {
  return { spec: { containers: [{ name: "vllm", image }] } };
}

function manifest(spec: Record<string, any> = {}) {
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "llm" },
    spec: {
      replicas: 2,
      drain: { timeoutSeconds: 0 },
      template: {
        roles: [
          { name: "prefill", replicas: 1, entryTemplate: pod() },
          { name: "decode", replicas: 1, workerReplicas: 1, entryTemplate: pod(), workerTemplate: pod() },
        ],
      },
      ...spec,
    },
  };
}

const types = (actions: readonly Action[]) => actions.map((action) => action.type);
const createdPods = (actions: readonly Action[]) =>
  actions.flatMap((a) => (a.type === "CreatePod" ? [a.pod.metadata.name] : []));
const deletedPods = (actions: readonly Action[]) => actions.flatMap((a) => (a.type === "DeletePod" ? [a.name] : []));
const podNames = (cluster: ReturnType<typeof idealCluster>) => [...cluster.pods.keys()].sort();

describe("plan: creation", () => {
  it("records the revision first, then creates every pod and Service, then writes status", () => {
    const cluster = idealCluster(manifest());
    const { actions } = plan(observe(cluster), NOW);
    assert.equal(actions[0]?.type, "CreateRevision");
    assert.deepEqual(createdPods(actions), [
      "llm-0-prefill-0-0",
      "llm-0-decode-0-0",
      "llm-0-decode-0-1",
      "llm-1-prefill-0-0",
      "llm-1-decode-0-0",
      "llm-1-decode-0-1",
    ]);
    assert.deepEqual(
      actions.flatMap((a) => (a.type === "CreateService" ? [a.service.metadata.name] : [])),
      ["llm-0-decode-0-0", "llm-1-decode-0-0"],
    );
    const status = actions.find((a) => a.type === "WriteStatus");
    assert.ok(status?.type === "WriteStatus");
    assert.equal(status.status.currentRevision, status.status.updateRevision);
    assert.equal(status.status.replicas, 0, "counts never exceed reality: nothing exists yet");
    assert.equal(types(actions).at(-1), "WriteStatus");
  });

  it("converges, opens the serving gates, and then plans nothing at all", () => {
    const cluster = idealCluster(manifest());
    const all = converge(cluster, NOW);
    assert.ok(all.some((a) => a.type === "SetPodCondition" && a.condition.status === "True"));
    assert.deepEqual(plan(observe(cluster), NOW + 60_000).actions, []);
    const status = cluster.modelServing.status;
    assert.equal(status.replicas, 2);
    assert.equal(status.readyReplicas, 2);
    assert.equal(status.updatedReplicas, 2);
    assert.deepEqual(status.roles, [
      { name: "prefill", replicas: 2, ready: 2, updated: 2 },
      { name: "decode", replicas: 2, ready: 2, updated: 2 },
    ]);
    assert.equal(status.labelSelector, "tandem.dev/modelserving=llm,tandem.dev/entry=true,tandem.dev/role=prefill");
    assert.deepEqual(
      status.conditions.map((c: any) => [c.type, c.status, c.reason]),
      [
        ["Available", "True", "AllGroupsReady"],
        ["Progressing", "False", "Converged"],
      ],
    );
  });
});

describe("plan: scaling", () => {
  it("scales groups 2 → 4 → 1, removing the highest groups", () => {
    const cluster = idealCluster(manifest());
    converge(cluster, NOW);
    cluster.modelServing.spec.replicas = 4;
    converge(cluster, NOW);
    assert.equal(podNames(cluster).length, 12);
    cluster.modelServing.spec.replicas = 1;
    converge(cluster, NOW);
    assert.deepEqual(podNames(cluster), ["llm-0-decode-0-0", "llm-0-decode-0-1", "llm-0-prefill-0-0"]);
    assert.deepEqual([...cluster.services.keys()], ["llm-0-decode-0-0"]);
  });

  it("keeps a Service while its instance has pods, one whose labels disagree with its name too, and deletes both after", () => {
    const twoDecode = manifest({ drain: { timeoutSeconds: 60 } });
    twoDecode.spec.template.roles[1]!.replicas = 2;
    const cluster = idealCluster(twoDecode);
    converge(cluster, NOW);
    // Labels that no longer name the instance: this Service is matched by its name instead.
    cluster.services.get("llm-1-decode-1-0")!.metadata.labels = {};
    cluster.modelServing.spec.replicas = 1;
    const drainStarts = plan(observe(cluster), NOW);
    apply(cluster, drainStarts.actions);
    const draining = plan(observe(cluster), NOW + 1_000);
    assert.equal(deletedPods(draining.actions).length, 0);
    for (const { actions } of [drainStarts, draining])
      assert.ok(!types(actions).includes("DeleteService"), "deleted the Service of an instance that still has pods");
    converge(cluster, NOW + 60_000);
    assert.deepEqual([...cluster.services.keys()].sort(), ["llm-0-decode-0-0", "llm-0-decode-1-0"]);
  });

  it("scales a role 1 → 3 → 1 in every group and keeps every other pod", () => {
    const cluster = idealCluster(manifest());
    converge(cluster, NOW);
    const uidsBefore = new Map([...cluster.pods].map(([name, p]) => [name, p.metadata.uid]));
    cluster.modelServing.spec.template.roles[0].replicas = 3;
    converge(cluster, NOW);
    assert.equal(podNames(cluster).filter((n) => n.includes("prefill")).length, 6);
    cluster.modelServing.spec.template.roles[0].replicas = 1;
    converge(cluster, NOW);
    assert.deepEqual(new Map([...cluster.pods].map(([name, p]) => [name, p.metadata.uid])), uidsBefore);
  });

  /**
   * Prefill at `replicas` per group, an image update under ServingGroupRollingUpdate with group 0
   * below the partition (group 1 moves and keeps its permit), `rebuilt` applied to group 1's new
   * prefill-0, then prefill shrunk to 1 with no group allowed unavailable; converged.
   */
  function shrunkWhileRebuilt(replicas: number, rebuilt: (pod: Pod) => void): ReturnType<typeof idealCluster> {
    const cluster = idealCluster(
      manifest({
        rolloutStrategy: {
          type: "ServingGroupRollingUpdate",
          rollingUpdateConfiguration: { maxUnavailable: 1, maxSurge: 0, partition: 1 },
        },
      }),
    );
    cluster.modelServing.spec.template.roles[0].replicas = replicas;
    converge(cluster, NOW);
    cluster.modelServing.spec.template.roles[0].entryTemplate = pod("vllm:v2");
    converge(cluster, NOW);
    rebuilt(cluster.pods.get("llm-1-prefill-0-0")!);
    cluster.modelServing.spec.template.roles[0].replicas = 1;
    cluster.modelServing.spec.rolloutStrategy.rollingUpdateConfiguration = {
      maxUnavailable: 0,
      maxSurge: 1,
      partition: 1,
    };
    converge(cluster, NOW);
    return cluster;
  }

  it("a role scale-down in a group the rollout rebuilt keeps as many serving instances beyond the spec as the kept ones lack, until those serve (fuzz 388)", () => {
    // Its prefill-0 is still starting when the role shrinks.
    const cluster = shrunkWhileRebuilt(3, (starting) => {
      starting.status!.conditions = starting.status!.conditions!.map((c) =>
        c.type === "ContainersReady" || c.type === "Ready" ? { ...c, status: "False" } : c,
      );
    });
    const starting = cluster.pods.get("llm-1-prefill-0-0")!;
    const prefill = () => podNames(cluster).filter((name) => name.includes("prefill"));
    assert.deepEqual(
      prefill(),
      ["llm-0-prefill-0-0", "llm-1-prefill-0-0", "llm-1-prefill-1-0"],
      "prefill-1 serves for group 1",
    );
    cluster.pods.set("llm-1-prefill-0-0", readyPod(starting, true));
    converge(cluster, NOW);
    assert.deepEqual(prefill(), ["llm-0-prefill-0-0", "llm-1-prefill-0-0"]);
  });

  it("says so when the instance a scale-down keeps waits for capacity while the held one serves", () => {
    // Its prefill-0 cannot be placed when the role shrinks.
    const cluster = shrunkWhileRebuilt(2, (pending) => {
      pending.status = unschedulablePod(pending).status;
    });
    assert.ok(cluster.pods.has("llm-1-prefill-1-0"), "held: draining it would leave group 1 without prefill");
    const progressing = cluster.modelServing.status.conditions.find((c: any) => c.type === "Progressing");
    assert.match(
      progressing.message,
      /group 1 role prefill: 0 of 1 desired instance\(s\) available: the rest wait for capacity while prefill-1 of group 1, beyond the spec and due to go, keep the group available; add capacity/,
    );
  });

  it("drains before a scale-down deletion and waits for the router's confirmation or the timeout", () => {
    const cluster = idealCluster(manifest({ drain: { timeoutSeconds: 60 } }));
    cluster.routers = [{ id: "router-a", scope: { all: true }, liveUntilMs: Infinity }];
    converge(cluster, NOW);
    cluster.modelServing.spec.replicas = 1;
    const first = plan(observe(cluster), NOW);
    assert.ok(!types(first.actions).includes("DeletePod"));
    // One action per pod: the gate closed, then the mark, which also releases the pod (its
    // deletion after the wait needs no release of its own).
    assert.ok(
      first.actions.some(
        (a) =>
          a.type === "AnnotatePod" &&
          a.name === "llm-1-prefill-0-0" &&
          a.annotations["tandem.dev/draining"] === "2026-11-30T01:00:00.000Z" &&
          a.gate?.condition.status === "False" &&
          a.release?.finalizers.length === 0,
      ),
    );
    assert.equal(first.requeueAfterMs, 2_000, "the settle ends first");
    apply(cluster, first.actions);
    assert.equal(
      plan(observe(cluster), NOW + 2_000).requeueAfterMs,
      58_000,
      "then the timeout, router-a not having confirmed",
    );
    // The router confirms decode's entry but not prefill's: still waiting.
    cluster.pods.get("llm-1-decode-0-0")!.metadata.annotations!["drained.tandem.dev/router-a"] = "true";
    assert.ok(!types(plan(observe(cluster), NOW + 30_000).actions).includes("DeletePod"));
    cluster.pods.get("llm-1-prefill-0-0")!.metadata.annotations!["drained.tandem.dev/router-a"] = "true";
    const acked = plan(observe(cluster), NOW + 30_000);
    assert.deepEqual(deletedPods(acked.actions), ["llm-1-decode-0-0", "llm-1-decode-0-1", "llm-1-prefill-0-0"]);
    assert.ok(
      acked.actions.every((a) => a.type !== "DeletePod" || a.release === undefined),
      "released with the mark: the deletions release nothing",
    );
  });

  it("while a drain waits, Progressing says DrainWaiting: the pods, the routers awaited, the timeout (not 'surge or extra pod')", () => {
    const cluster = idealCluster(manifest({ drain: { timeoutSeconds: 60 } }));
    cluster.routers = [
      { id: "router-a", scope: { all: true }, liveUntilMs: Infinity },
      { id: "router-b", scope: { all: false, namespaces: ["other"] }, liveUntilMs: Infinity },
    ];
    converge(cluster, NOW);
    cluster.modelServing.spec.replicas = 1;
    apply(cluster, plan(observe(cluster), NOW).actions);
    const progressing = () => {
      const { actions } = plan(observe(cluster), NOW + 3_000);
      apply(cluster, actions);
      return cluster.modelServing.status.conditions.find((c: any) => c.type === "Progressing");
    };
    const waiting = progressing();
    assert.equal(waiting.reason, "DrainWaiting");
    assert.equal(waiting.status, "True");
    assert.equal(
      waiting.message,
      "A drain waits before the pods are disrupted: group 1 (scale-down): pod(s) llm-1-decode-0-0, llm-1-prefill-0-0, awaiting router(s) router-a; timeout at 2026-11-30T01:01:00Z.",
    );
    assert.deepEqual(
      plan(observe(cluster), NOW + 4_000).actions,
      [],
      "computed from observation: the same again, nothing to write",
    );
    cluster.routers = [];
    assert.equal(
      deletedPods(plan(observe(cluster), NOW + 3_000).actions).length,
      3,
      "router-a gone: the settle is over, the group goes",
    );
  });

  it("looks again at the next deadline of an entry still draining, never at one already past (regression: a plan every instant)", () => {
    const cluster = idealCluster(manifest({ drain: { timeoutSeconds: 60 } }));
    cluster.routers = [{ id: "router-a", scope: { all: true }, liveUntilMs: Infinity }];
    converge(cluster, NOW);
    cluster.modelServing.spec.replicas = 1;
    apply(cluster, plan(observe(cluster), NOW).actions);
    // Marked 90 s ago (timed out); the decode entry was marked now and waits for its ack.
    cluster.pods.get("llm-1-prefill-0-0")!.metadata.annotations!["tandem.dev/draining"] = "2026-11-30T00:58:30Z";
    const next = plan(observe(cluster), NOW + 3_000);
    assert.ok(!types(next.actions).includes("DeletePod"));
    assert.equal(next.requeueAfterMs, 57_000);
  });

  it("deletes after the drain timeout with a DrainTimeout event, and cancels a drain no longer needed", () => {
    const cluster = idealCluster(manifest({ drain: { timeoutSeconds: 60 } }));
    cluster.routers = [{ id: "router-a", scope: { all: true }, liveUntilMs: Infinity }];
    converge(cluster, NOW);
    cluster.modelServing.spec.replicas = 1;
    apply(cluster, plan(observe(cluster), NOW).actions);
    const late = plan(observe(cluster), NOW + 60_000);
    assert.ok(late.actions.some((a) => a.type === "RecordEvent" && a.reason === "DrainTimeout"));
    assert.equal(late.actions.filter((a) => a.type === "DeletePod").length, 3);
    cluster.modelServing.spec.replicas = 2;
    const cancel = plan(observe(cluster), NOW + 1_000);
    assert.ok(cancel.actions.some((a) => a.type === "AnnotatePod" && a.annotations["tandem.dev/draining"] === null));
    assert.ok(
      cancel.actions.some((a) => a.type === "AnnotatePod" && a.gate?.condition.status === "True"),
      "in one write",
    );
  });
});

describe("plan: recovery", () => {
  function failEntry(recoveryPolicy: string) {
    const cluster = idealCluster(manifest({ recoveryPolicy }));
    converge(cluster, NOW);
    const before = new Map([...cluster.pods].map(([name, p]) => [name, p.metadata.uid]));
    // Deleted by someone else: the tracking finalizer keeps it, terminating (lost).
    cluster.pods.get("llm-1-decode-0-0")!.metadata.deletionTimestamp = "2026-11-30T00:59:00Z";
    const { actions } = plan(observe(cluster), NOW);
    apply(cluster, actions);
    converge(cluster, NOW);
    const changed = [...cluster.pods]
      .filter(([name, p]) => before.get(name) !== p.metadata.uid)
      .map(([name]) => name)
      .sort();
    return { actions, changed };
  }

  it("RoleRecreate rebuilds only the failed instance", () => {
    const { actions, changed } = failEntry("RoleRecreate");
    assert.deepEqual(changed, ["llm-1-decode-0-0", "llm-1-decode-0-1"]);
    assert.ok(actions.some((a) => a.type === "RecordEvent" && a.reason === "Recovering"));
  });

  it("ServingGroupRecreate rebuilds the whole group and nothing else", () => {
    assert.deepEqual(failEntry("ServingGroupRecreate").changed, [
      "llm-1-decode-0-0",
      "llm-1-decode-0-1",
      "llm-1-prefill-0-0",
    ]);
  });

  /** ServingGroupRecreate under RoleRollingUpdate: decode moved to an image that crashes in group 1 (the first the rollout moves), its pods crashing. */
  function decodeCrashingInGroup1() {
    const cluster = idealCluster(
      manifest({ recoveryPolicy: "ServingGroupRecreate", rolloutStrategy: { type: "RoleRollingUpdate" } }),
    );
    converge(cluster, NOW);
    const decode = cluster.modelServing.spec.template.roles[1];
    cluster.modelServing.spec.template.roles[1] = {
      ...decode,
      entryTemplate: pod("vllm:bad"),
      workerTemplate: pod("vllm:bad"),
    };
    for (
      let round = 0;
      round < 10 && ![...cluster.pods.values()].some((p) => p.spec.containers[0]?.image === "vllm:bad");
      round++
    )
      apply(cluster, plan(observe(cluster), NOW).actions);
    const moved = [...cluster.pods.values()].filter((p) => p.spec.containers[0]?.image === "vllm:bad");
    assert.deepEqual(
      moved.map((p) => p.metadata.name),
      ["llm-1-decode-0-0", "llm-1-decode-0-1"],
      "one group's decode moved first (group maxUnavailable 1)",
    );
    for (const crashing of moved) {
      crashing.status!.containerStatuses![0]!.restartCount = 1;
      crashing.status!.containerStatuses![0]!.ready = false;
      crashing.status!.conditions = crashing.status!.conditions!.map((c) =>
        c.type === "ContainersReady" || c.type === "Ready" ? { ...c, status: "False" } : c,
      );
    }
    return { cluster, decode };
  }

  it("ServingGroupRecreate rebuilds alone an instance the rollout in progress moved: its crash does not take the group's other roles down", () => {
    const { cluster } = decodeCrashingInGroup1();
    const prefillUid = cluster.pods.get("llm-1-prefill-0-0")!.metadata.uid;
    const recovery = plan(observe(cluster), NOW).actions;
    assert.deepEqual(deletedPods(recovery), ["llm-1-decode-0-0", "llm-1-decode-0-1"]);
    apply(cluster, recovery);
    apply(cluster, plan(observe(cluster), NOW).actions);
    const rebuilt = ["llm-1-decode-0-0", "llm-1-decode-0-1"].map(
      (name) => cluster.pods.get(name)?.spec.containers[0]?.image,
    );
    assert.deepEqual(rebuilt, ["vllm:bad", "vllm:bad"], "rebuilt at its record, the update revision");
    assert.equal(cluster.pods.get("llm-1-prefill-0-0")!.metadata.uid, prefillUid, "prefill kept");
  });

  it("ServingGroupRecreate rebuilds alone an instance an update since rolled back moved, crashing while its move back waits (paused): the group's other roles stay (fuzz-faults-coordinated-crash-gang-2229: the whole group was rebuilt, taking decode's last available instance down)", () => {
    const { cluster, decode } = decodeCrashingInGroup1();
    cluster.modelServing.spec.template.roles[1] = decode;
    cluster.modelServing.spec.rolloutStrategy = { type: "RoleRollingUpdate", paused: true };
    const prefillUid = cluster.pods.get("llm-1-prefill-0-0")!.metadata.uid;
    const recovery = plan(observe(cluster), NOW).actions;
    assert.deepEqual(deletedPods(recovery), ["llm-1-decode-0-0", "llm-1-decode-0-1"]);
    apply(cluster, recovery);
    assert.equal(cluster.pods.get("llm-1-prefill-0-0")!.metadata.uid, prefillUid, "prefill kept");
  });

  it("None recreates only the missing pod", () => {
    assert.deepEqual(failEntry("None").changed, ["llm-1-decode-0-0"]);
  });

  it("a crash-looping pod fails only after restartGracePeriodSeconds, measured from the pod", () => {
    const cluster = idealCluster(
      manifest({ template: { ...manifest().spec.template, restartGracePeriodSeconds: 30 } }),
    );
    converge(cluster, NOW);
    const crashing = cluster.pods.get("llm-0-prefill-0-0")!;
    crashing.status!.containerStatuses![0]!.restartCount = 2;
    crashing.status!.conditions = crashing.status!.conditions!.map((c) =>
      c.type === "ContainersReady" ? { ...c, status: "False", lastTransitionTime: "2026-11-30T01:00:00Z" } : c,
    );
    const early = plan(observe(cluster), NOW + 10_000);
    assert.ok(!types(early.actions).includes("DeletePod"));
    assert.equal(early.requeueAfterMs, 20_000);
    const late = plan(observe(cluster), NOW + 30_000);
    assert.deepEqual(deletedPods(late.actions), ["llm-0-prefill-0-0"]);
  });

  it("a recovery deletion is guarded by the resourceVersion the plan saw, tracked or released (fuzz-faults-910035: a delete retried on a stale cache took a pod Ready again for the broken one, below the role budget)", () => {
    const cluster = idealCluster(manifest());
    converge(cluster, NOW);
    const crashing = cluster.pods.get("llm-0-prefill-0-0")!;
    crashing.status!.containerStatuses![0]!.restartCount = 1;
    crashing.status!.conditions = crashing.status!.conditions!.map((c) =>
      c.type === "ContainersReady" || c.type === "Ready" ? { ...c, status: "False" } : c,
    );
    crashing.metadata.resourceVersion = "7";
    const guards = () =>
      plan(observe(cluster), NOW).actions.flatMap((a) =>
        a.type === "DeletePod" ? [[a.reason, a.resourceVersion, a.release !== undefined]] : [],
      );
    assert.deepEqual(guards(), [["Recovery", "7", true]], "tracked: released, then deleted as observed");
    // An earlier attempt's release went through, its deletion failed: the retry is guarded as well.
    crashing.metadata.finalizers = [];
    assert.deepEqual(guards(), [["Recovery", "7", false]]);
  });

  it("an instance whose every pod is terminating is created whole once they are gone, never beside them", () => {
    const cluster = idealCluster(manifest());
    converge(cluster, NOW);
    // The worker is gone already; the entry still terminates (a slower node): nothing is created.
    cluster.pods.delete("llm-1-decode-0-1");
    cluster.pods.get("llm-1-decode-0-0")!.metadata.deletionTimestamp = "2026-11-30T01:00:00Z";
    const waiting = plan(observe(cluster), NOW).actions;
    assert.deepEqual(createdPods(waiting), []);
    const written = waiting.find((a) => a.type === "WriteStatus");
    const progressing =
      written?.type === "WriteStatus" ? written.status.conditions?.find((c) => c.type === "Progressing") : undefined;
    assert.deepEqual(
      [progressing?.status, progressing?.reason, progressing?.message],
      ["True", "WaitingForPods", "Waiting for pods: decode-0 of group 1: old pods still terminating."],
      "not Converged",
    );
    cluster.pods.delete("llm-1-decode-0-0");
    assert.deepEqual(createdPods(plan(observe(cluster), NOW).actions), ["llm-1-decode-0-0", "llm-1-decode-0-1"]);
  });

  it("a unit record lasts while its unit is desired or has a pod not being deleted, not beyond (fuzz-crash-gang-435)", () => {
    const cluster = idealCluster(manifest({ rolloutStrategy: { type: "RoleRollingUpdate" } }));
    converge(cluster, NOW);
    const first = cluster.modelServing.status.currentRevision as string;
    cluster.modelServing.spec.template.roles[1].entryTemplate = pod("vllm:v2");
    converge(cluster, NOW);
    assert.notEqual(cluster.modelServing.status.currentRevision, first);
    // Group 1: decode-0 (desired) and a decode-1 no longer desired (a surge scaled down), both
    // recorded at the first revision and with every pod terminating.
    for (const index of [0, 1]) {
      const desired = cluster.pods.get(`llm-1-decode-0-${index}`)!;
      const extra = structuredClone(desired);
      extra.metadata = {
        ...extra.metadata,
        name: `llm-1-decode-1-${index}`,
        uid: `uid-decode-1-${index}`,
        labels: { ...extra.metadata.labels, "tandem.dev/instance": "decode-1" },
      };
      cluster.pods.set(extra.metadata.name, extra);
      for (const terminating of [desired, extra]) terminating.metadata.deletionTimestamp = "2026-11-30T01:00:00Z";
    }
    const record = (instance: number) => ({ group: 1, role: "decode", instance, revision: first });
    cluster.modelServing.status.units = [record(0), record(1)];
    // A role partition keeps decode-0 at its record (unavailable, it would otherwise move for free).
    cluster.modelServing.spec.template.roles[1].partition = 1;
    const written = plan(observe(cluster), NOW).actions.filter((a) => a.type === "WriteStatus");
    assert.deepEqual(written.at(-1)?.type === "WriteStatus" ? written.at(-1)?.status.units : "none", [record(0)]);
  });

  it("a partially created instance whose pods are all pending is completed, not rebuilt", () => {
    const cluster = idealCluster(manifest());
    const first = plan(observe(cluster), NOW);
    // The controller stopped after creating only the decode entry of group 0.
    apply(
      cluster,
      first.actions.filter((a) => a.type !== "CreatePod" || a.pod.metadata.name === "llm-0-decode-0-0"),
    );
    const entry = cluster.pods.get("llm-0-decode-0-0")!;
    entry.status = { phase: "Pending", conditions: [] };
    const next = plan(observe(cluster), NOW);
    assert.ok(!types(next.actions).includes("DeletePod"));
    assert.ok(next.actions.some((a) => a.type === "CreatePod" && a.pod.metadata.name === "llm-0-decode-0-1"));
  });
});

describe("plan: invalid input", () => {
  it("reports an invalid spec in a condition and changes nothing else", () => {
    const cluster = idealCluster(manifest({ replicas: -1 }));
    const { actions } = plan(observe(cluster), NOW);
    assert.deepEqual(types(actions), ["WriteStatus"]);
    const write = actions[0];
    assert.ok(write?.type === "WriteStatus");
    const condition = write.status.conditions?.[0];
    assert.equal(condition?.reason, "InvalidSpec");
    assert.match(condition.message ?? "", /spec\.replicas: must be 0 or more/);
  });

  it("reports a pod template nested 20,000 deep (as read from the cluster: parsed JSON, deep-frozen) as invalid instead of overflowing the stack", () => {
    const depth = 20_000;
    const stored = manifest() as {
      spec: { template: { roles: { entryTemplate: { spec: Record<string, unknown> } }[] } };
    };
    const entry = stored.spec.template.roles[0]?.entryTemplate.spec ?? {};
    entry["extra"] = JSON.parse(`${'{"x":'.repeat(depth)}1${"}".repeat(depth)}`);
    const { actions } = plan(
      { modelServing: deepFreeze(stored), pods: [], services: [], revisions: [], routers: [] },
      NOW,
    );
    assert.deepEqual(types(actions), ["WriteStatus"]);
    const write = actions[0];
    assert.ok(write?.type === "WriteStatus");
    const condition = write.status.conditions?.[0];
    assert.equal(condition?.reason, "InvalidSpec");
    assert.match(
      condition.message ?? "",
      /spec\.template\.roles\[0\]\.entryTemplate\.spec\.extra(\.x){93}: nests objects and lists more than 100 levels deep/,
    );
  });
});
