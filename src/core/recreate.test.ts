import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Action } from "./actions.ts";
import { plan } from "./plan.ts";
import { apply, deleteByOthers, idealCluster, observe } from "../../test/ideal-cluster.ts";
import type { IdealCluster } from "../../test/ideal-cluster.ts";

const NOW = Date.parse("2026-12-02T01:00:00Z");

const template = (image: string) => ({ spec: { containers: [{ name: "vllm", image }] } });

/** Three groups of prefill ×1 and decode ×2 (one worker each); no drain wait. */
function manifest(type: string, extra: Record<string, unknown> = {}) {
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "llm" },
    spec: {
      replicas: 3,
      drain: { timeoutSeconds: 0 },
      rolloutStrategy: { type },
      template: {
        roles: [
          { name: "prefill", replicas: 1, entryTemplate: template("vllm:v1") },
          {
            name: "decode",
            replicas: 2,
            workerReplicas: 1,
            entryTemplate: template("vllm:v1"),
            workerTemplate: template("vllm:v1"),
          },
        ],
      },
      ...extra,
    },
  };
}

/** Plans and applies until a plan is empty, one second apart; returns every action. */
function run(cluster: IdealCluster, rounds = 40, each?: (actions: readonly Action[]) => void): Action[] {
  const all: Action[] = [];
  for (let round = 0; round < rounds; round++) {
    const { actions } = plan(observe(cluster), NOW + round * 1000);
    if (actions.length === 0) return all;
    each?.(actions);
    apply(cluster, actions);
    all.push(...actions);
  }
  throw new Error("no convergence");
}

function converged(type = "ServingGroupRollingUpdate", extra: Record<string, unknown> = {}): IdealCluster {
  const cluster = idealCluster(manifest(type, extra));
  run(cluster);
  return cluster;
}

function request(cluster: IdealCluster, value: unknown): void {
  const annotations = cluster.modelServing.metadata.annotations ?? {};
  cluster.modelServing.metadata.annotations = {
    ...annotations,
    "tandem.dev/recreate": typeof value === "string" ? value : JSON.stringify(value),
  };
}

const uidsOf = (cluster: IdealCluster, group?: number, role?: string) =>
  [...cluster.pods.values()]
    .filter(
      (pod) =>
        (group === undefined || pod.metadata.labels?.["tandem.dev/group"] === String(group)) &&
        (role === undefined || pod.metadata.labels?.["tandem.dev/role"] === role),
    )
    .map((pod) => pod.metadata.uid ?? "")
    .sort();
const events = (actions: readonly Action[]) => actions.flatMap((a) => (a.type === "RecordEvent" ? [a.reason] : []));
const deleted = (actions: readonly Action[]) =>
  actions.flatMap((a) => (a.type === "DeletePod" ? [`${a.name} ${a.reason}`] : []));
const condition = (cluster: IdealCluster, type: string) =>
  cluster.modelServing.status.conditions.find((c: { type: string }) => c.type === type);

describe("explicit recreate: a whole group", () => {
  it("is recorded with its pods before any is touched, replaces exactly them once, and ends Done", () => {
    const cluster = converged();
    const group1 = uidsOf(cluster, 1);
    const others = [...uidsOf(cluster, 0), ...uidsOf(cluster, 2)];
    request(cluster, { id: "r1", group: 1 });
    const first = plan(observe(cluster), NOW).actions;
    const barrier = first[0];
    assert.ok(barrier?.type === "WriteStatus" && barrier.barrier, "the first action is the barrier status write");
    assert.deepEqual(barrier.status.recreate, { id: "r1", group: 1, phase: "Replacing", pods: group1 });
    assert.deepEqual(
      deleted(first).map((line) => line.split(" ")[1]),
      group1.map(() => "Recreate"),
      "the group goes at once (the group is the unit of this strategy)",
    );
    apply(cluster, first);
    const rest = run(cluster);
    assert.deepEqual(
      uidsOf(cluster, 1).filter((uid) => group1.includes(uid)),
      [],
      "every old pod of group 1 is gone",
    );
    assert.equal(uidsOf(cluster, 1).length, group1.length, "rebuilt whole");
    assert.deepEqual([...uidsOf(cluster, 0), ...uidsOf(cluster, 2)], others, "the other groups keep their pods");
    assert.deepEqual(cluster.modelServing.status.recreate, { id: "r1", group: 1, phase: "Done" });
    assert.deepEqual(
      events([...first, ...rest]).filter((reason) => reason.startsWith("Recreate")),
      ["RecreateStarted", "RecreateCompleted"],
    );
    assert.deepEqual(deleted(rest), [], "nothing more is deleted");
    assert.deepEqual(plan(observe(cluster), NOW + 60_000).actions, [], "converged: zero writes, also after a restart");
    assert.equal(condition(cluster, "Progressing").reason, "Converged");
  });

  it("a second request with the same id does nothing; a new id replaces the group once more", () => {
    const cluster = converged();
    request(cluster, { id: "r1", group: 2 });
    run(cluster);
    const afterFirst = uidsOf(cluster, 2);
    request(cluster, { id: "r1", group: 2 });
    assert.deepEqual(plan(observe(cluster), NOW).actions, []);
    request(cluster, { id: "r2", group: 2 });
    const second = run(cluster);
    assert.equal(deleted(second).length, afterFirst.length);
    assert.deepEqual(
      uidsOf(cluster, 2).filter((uid) => afterFirst.includes(uid)),
      [],
      "the pods built after the first request are replaced by the second",
    );
    assert.deepEqual(cluster.modelServing.status.recreate, { id: "r2", group: 2, phase: "Done" });
  });

  it("waits for the group budget while another group is down, says so, and goes once it is back", () => {
    const cluster = converged();
    // A pod of group 0 lost: that group is down, maxUnavailable 1 is taken.
    deleteByOthers(cluster, "llm-0-prefill-0-0");
    cluster.pods.get("llm-0-prefill-0-0")!.status!.conditions = [];
    const group2 = uidsOf(cluster, 2);
    request(cluster, { id: "r1", group: 2 });
    const first = plan(observe(cluster), NOW).actions;
    assert.ok(
      deleted(first).every((line) => !line.startsWith("llm-2")),
      `group 2 waits: ${deleted(first).join(", ")}`,
    );
    apply(cluster, first);
    assert.equal(cluster.modelServing.status.recreate.phase, "Replacing");
    assert.deepEqual(cluster.modelServing.status.recreate.pods, group2);
    const progressing = condition(cluster, "Progressing");
    assert.match(
      progressing.message,
      /recreate r1: group 2 waits for the group budget: 2 of 3 ServingGroup\(s\) available with maxUnavailable 1/,
    );
    const rest = run(cluster);
    assert.equal(deleted(rest).filter((line) => line.startsWith("llm-2")).length, group2.length);
    assert.equal(cluster.modelServing.status.recreate.phase, "Done");
  });
});

describe("explicit recreate: one role's instances", () => {
  it("under RoleRollingUpdate replaces decode instances one at a time (maxUnavailable 1), prefill untouched", () => {
    const cluster = converged("RoleRollingUpdate");
    const prefill = uidsOf(cluster, 0, "prefill");
    const decode = uidsOf(cluster, 0, "decode");
    request(cluster, { id: "r1", group: 0, role: "decode" });
    const batches: string[][] = [];
    run(cluster, 40, (actions) => {
      const names = deleted(actions).map((line) => line.split(" ")[0]!);
      if (names.length > 0) batches.push([...new Set(names.map((name) => name.split("-").slice(0, 4).join("-")))]);
    });
    assert.deepEqual(
      batches,
      [["llm-0-decode-1"], ["llm-0-decode-0"]],
      "highest ordinal first, one instance at a time",
    );
    assert.deepEqual(uidsOf(cluster, 0, "prefill"), prefill);
    assert.deepEqual(
      uidsOf(cluster, 0, "decode").filter((uid) => decode.includes(uid)),
      [],
    );
    assert.deepEqual(cluster.modelServing.status.recreate, { id: "r1", group: 0, role: "decode", phase: "Done" });
  });

  it("a whole-group request under RoleRollingUpdate goes instance by instance within each role's budget", () => {
    const cluster = converged("RoleRollingUpdate");
    request(cluster, { id: "r1", group: 1 });
    const first = plan(observe(cluster), NOW).actions;
    const instances = [...new Set(deleted(first).map((line) => line.split("-").slice(2, 4).join("-")))];
    assert.deepEqual(instances, ["prefill-0", "decode-1"], "prefill's only instance (maxUnavailable 1) and one decode");
    apply(cluster, first);
    run(cluster);
    assert.equal(cluster.modelServing.status.recreate.phase, "Done");
  });
});

describe("explicit recreate: requests that do not fit", () => {
  for (const [what, value, message] of [
    [
      "a group out of range",
      { id: "r1", group: 3 },
      /asks for group 3, but there is no ServingGroup 3: its ServingGroups are 0\.\.2/,
    ],
    [
      "an unknown role",
      { id: "r1", group: 0, role: "encode" },
      /asks for role encode, but there is no role "encode": its roles are prefill, decode/,
    ],
    ["a value that is not JSON", "group 1", /tandem\.dev\/recreate is not JSON: "group 1"/],
    ["a missing id", { group: 1 }, /id must be a non-empty string/],
  ] as const) {
    it(`${what} is refused once with a Warning event and touches nothing`, () => {
      const cluster = converged();
      const before = uidsOf(cluster);
      request(cluster, value);
      const actions = run(cluster);
      assert.deepEqual(deleted(actions), []);
      assert.deepEqual(events(actions), ["RecreateRejected"]);
      assert.equal(cluster.modelServing.status.recreate.phase, "Rejected");
      assert.match(cluster.modelServing.status.recreate.message, message);
      assert.deepEqual(uidsOf(cluster), before);
      cluster.modelServing.spec.replicas = 4;
      cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
      run(cluster);
      assert.equal(cluster.modelServing.status.recreate.phase, "Rejected", "a later scale-up does not revive it");
    });
  }
});

describe("explicit recreate: the in-place recovery it is for (seed §5)", () => {
  it("a group stalled on an image that fails in place is rebuilt by replacement; nothing else is recreated", () => {
    const cluster = idealCluster(manifest("InPlaceUpdate"));
    run(cluster);
    cluster.badImages.add("vllm:v2");
    const decode = cluster.modelServing.spec.template.roles[1];
    decode.entryTemplate = template("vllm:v2");
    decode.workerTemplate = template("vllm:v2");
    cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
    const stalling = run(cluster);
    assert.ok(events(stalling).includes("InPlaceVerifyFailed"), "group 2 stalls in place");
    assert.deepEqual(deleted(stalling), [], "never recreated by itself");
    const group2 = uidsOf(cluster, 2);
    request(cluster, { id: "fix-2", group: 2 });
    const recreating = run(cluster);
    assert.equal(deleted(recreating).filter((line) => line.endsWith("Recreate")).length, group2.length);
    assert.ok(
      deleted(recreating).every((line) => line.startsWith("llm-2")),
      "only group 2 is deleted",
    );
    const rebuilt = [...cluster.pods.values()].filter((pod) => pod.metadata.labels?.["tandem.dev/group"] === "2");
    assert.ok(rebuilt.every((pod) => pod.metadata.annotations?.["tandem.dev/inplace"] === undefined));
    assert.ok(
      rebuilt
        .filter((pod) => pod.metadata.labels?.["tandem.dev/role"] === "decode")
        .every((pod) => pod.spec.containers[0]!.image === "vllm:v2"),
      "rebuilt at the revision recorded for the group (the update)",
    );
    assert.equal(cluster.modelServing.status.recreate.phase, "Done");
    assert.ok(
      events(recreating).includes("InPlaceVerifyFailed"),
      "the rollout goes on in place and the next group stalls",
    );
  });
});
