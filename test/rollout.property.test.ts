/**
 * Property loops for rollouts on the idealized cluster: random specs, random updates, random
 * faults. Safety is checked after every plan; liveness (the rollout completes) once faults stop.
 * `TANDEM_PROPERTY_RUNS=N` runs more cases than CI's default.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { plan } from "../src/core/plan.ts";
import { decodeControllerRevision } from "../src/core/revision/controller-revision.ts";
import { roleHash } from "../src/core/role-hash.ts";
import { apply, availableInstances, idealCluster, label, observe } from "./ideal-cluster.ts";
import type { IdealCluster } from "./ideal-cluster.ts";

const SEED = 20261130;
const RUNS = Number(process.env.TANDEM_PROPERTY_RUNS ?? 300);
const NOW = Date.parse("2026-11-30T01:00:00Z");

const roleArb = (name: string) =>
  fc.record({
    name: fc.constant(name),
    replicas: fc.integer({ min: 1, max: 4 }),
    workerReplicas: fc.integer({ min: 0, max: 1 }),
    maxUnavailable: fc.integer({ min: 0, max: 2 }),
    maxSurge: fc.integer({ min: 0, max: 1 }),
    partition: fc.integer({ min: 0, max: 2 }),
  });

const caseArb = fc.record({
  strategy: fc.constantFrom("ServingGroupRollingUpdate", "RoleRollingUpdate", "InPlaceUpdate"),
  replicas: fc.integer({ min: 1, max: 4 }),
  groupMaxUnavailable: fc.integer({ min: 1, max: 2 }),
  groupMaxSurge: fc.integer({ min: 0, max: 1 }),
  groupPartition: fc.integer({ min: 0, max: 2 }),
  roles: fc
    .uniqueArray(fc.constantFrom("prefill", "decode", "encode"), { minLength: 1, maxLength: 3 })
    .chain((names) => fc.tuple(...names.map(roleArb))),
  changed: fc.array(fc.boolean(), { minLength: 3, maxLength: 3 }),
  faults: fc.array(
    fc.record({ round: fc.integer({ min: 0, max: 30 }), kind: fc.constantFrom("delete", "fail"), pick: fc.nat() }),
    { maxLength: 6 },
  ),
});
type Case = typeof caseArb extends fc.Arbitrary<infer T> ? T : never;

function manifest(c: Case): Record<string, any> {
  const roleRolling = c.strategy === "RoleRollingUpdate";
  const roles = c.roles.map((r) => ({
    name: r.name,
    replicas: r.replicas,
    workerReplicas: r.workerReplicas,
    entryTemplate: { spec: { containers: [{ name: "c", image: `${r.name}:v1` }] } },
    ...(r.workerReplicas > 0
      ? { workerTemplate: { spec: { containers: [{ name: "c", image: `${r.name}:v1` }] } } }
      : {}),
    // Role budgets apply only under RoleRollingUpdate; never both 0.
    ...(roleRolling
      ? { maxUnavailable: r.maxUnavailable, maxSurge: r.maxUnavailable === 0 ? 1 : r.maxSurge, partition: r.partition }
      : {}),
  }));
  // Neither RoleRollingUpdate nor InPlaceUpdate surges groups.
  const group =
    c.strategy === "ServingGroupRollingUpdate"
      ? { maxUnavailable: c.groupMaxUnavailable, maxSurge: c.groupMaxSurge, partition: c.groupPartition }
      : { maxUnavailable: c.groupMaxUnavailable, partition: c.groupPartition };
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "m" },
    spec: {
      replicas: c.replicas,
      drain: { timeoutSeconds: 0 },
      recoveryPolicy: "RoleRecreate",
      rolloutStrategy: { type: c.strategy, rollingUpdateConfiguration: group },
      template: { roles },
    },
  };
}

function groupAvailable(counts: Map<string, number>, c: Case, group: number): boolean {
  return c.roles.every((r) => (counts.get(`${group}/${r.name}`) ?? 0) >= r.replicas);
}

/** Budgets, checked only when no fault touched the cluster since the rollout began. */
function checkBudgets(cluster: IdealCluster, c: Case): void {
  const counts = availableInstances(cluster, c.roles);
  const groups = Array.from({ length: c.replicas }, (_, g) => g);
  if (c.strategy === "RoleRollingUpdate") {
    for (const g of groups)
      for (const r of c.roles)
        assert.ok(
          (counts.get(`${g}/${r.name}`) ?? 0) >= r.replicas - r.maxUnavailable,
          `group ${g} role ${r.name} below its budget`,
        );
    assert.ok(
      groups.filter((g) => !groupAvailable(counts, c, g)).length <= c.groupMaxUnavailable,
      "too many groups disrupted",
    );
  } else {
    const available = [...new Set([...cluster.pods.values()].map((p) => Number(label(p, "group"))))].filter((g) =>
      groupAvailable(counts, c, g),
    ).length;
    assert.ok(available >= c.replicas - c.groupMaxUnavailable, `only ${available} groups available`);
  }
}

/** Safety under faults: no unit above its surge bound, units below the partitions untouched by updates. */
function checkSafety(cluster: IdealCluster, c: Case, v1: string): void {
  const groups = new Set([...cluster.pods.values()].map((p) => Number(label(p, "group"))));
  assert.ok(
    Math.max(...groups) < c.replicas + (c.strategy === "ServingGroupRollingUpdate" ? c.groupMaxSurge : 0),
    "more groups than replicas + maxSurge",
  );
  for (const pod of cluster.pods.values()) {
    const group = Number(label(pod, "group"));
    const role = c.roles.find((r) => r.name === label(pod, "role"))!;
    const instance = Number(label(pod, "instance").split("-").at(-1));
    const protectedUnit = group < c.groupPartition || (c.strategy === "RoleRollingUpdate" && instance < role.partition);
    // Below the partition a unit keeps what it runs: its revision (group strategy) or its role
    // spec (role strategy, where an unchanged role may be rebuilt from an equal newer revision).
    if (protectedUnit && c.strategy !== "RoleRollingUpdate")
      assert.equal(label(pod, "revision"), v1, `${pod.metadata.name} below the partition left ${v1}`);
    if (protectedUnit && c.strategy === "RoleRollingUpdate")
      assert.equal(
        pod.spec.containers[0]?.image,
        `${role.name}:v1`,
        `${pod.metadata.name} below the partition was updated`,
      );
    if (c.strategy === "RoleRollingUpdate")
      assert.ok(
        instance < role.replicas + (role.maxUnavailable === 0 ? 1 : role.maxSurge),
        `${pod.metadata.name} beyond replicas + maxSurge`,
      );
  }
}

function runCase(c: Case): void {
  const cluster = idealCluster(manifest(c));
  for (let round = 0; round < 40 && plan(observe(cluster), NOW).actions.length > 0; round++)
    apply(cluster, plan(observe(cluster), NOW).actions);
  const v1: string = cluster.modelServing.status.currentRevision;
  const uidsBefore = [...cluster.pods.values()].map((p) => p.metadata.uid).sort();
  c.roles.forEach((r, index) => {
    if (c.changed[index] !== true && index > 0) return;
    const role = cluster.modelServing.spec.template.roles[index];
    role.entryTemplate = { spec: { containers: [{ name: "c", image: `${r.name}:v2` }] } };
  });
  let faulted = false;
  for (let round = 0; round < 200; round++) {
    const { actions } = plan(observe(cluster), NOW + round * 1000);
    apply(cluster, actions);
    for (const fault of c.faults.filter((f) => f.round === round)) {
      const pods = [...cluster.pods.values()];
      const victim = pods[fault.pick % Math.max(1, pods.length)];
      if (victim === undefined) continue;
      faulted = true;
      if (fault.kind === "delete") cluster.pods.delete(victim.metadata.name);
      else victim.status = { ...victim.status, phase: "Failed" };
    }
    checkSafety(cluster, c, v1);
    if (!faulted) checkBudgets(cluster, c);
    if (actions.length === 0 && round > Math.max(0, ...c.faults.map((f) => f.round))) break;
  }
  // Liveness: faults have stopped; every unit the rollout may move runs the update revision.
  const status = cluster.modelServing.status;
  const stored = decodeControllerRevision(cluster.revisions.get(status.updateRevision));
  assert.ok(stored.ok, "the update revision is stored");
  const update = stored.revision.data;
  const changedRoles = new Set(
    c.roles.filter((_, index) => index === 0 || c.changed[index] === true).map((r) => r.name),
  );
  for (const pod of cluster.pods.values()) {
    const group = Number(label(pod, "group"));
    const role = c.roles.find((r) => r.name === label(pod, "role"))!;
    const instance = Number(label(pod, "instance").split("-").at(-1));
    const movable = group >= c.groupPartition && (c.strategy !== "RoleRollingUpdate" || instance >= role.partition);
    if (!movable) continue;
    const why = `${pod.metadata.name} still old after faults stopped (${JSON.stringify(status.conditions)})`;
    if (c.strategy === "ServingGroupRollingUpdate") assert.equal(label(pod, "revision"), status.updateRevision, why);
    // In place, a role the update leaves unchanged keeps its label: its role hash tells what it runs.
    if (c.strategy === "InPlaceUpdate") assert.equal(label(pod, "role-hash"), roleHash(update, role.name), why);
    if (pod.metadata.name.endsWith("-0"))
      assert.equal(pod.spec.containers[0]?.image, `${role.name}:${changedRoles.has(role.name) ? "v2" : "v1"}`, why);
  }
  assert.deepEqual(plan(observe(cluster), NOW + 10_000_000).actions, [], "not converged");
  // In place, an image-only update without faults keeps every pod.
  if (c.strategy === "InPlaceUpdate" && !faulted)
    assert.deepEqual(
      [...cluster.pods.values()].map((p) => p.metadata.uid).sort(),
      uidsBefore,
      "an in-place update recreated pods",
    );
}

describe("rollout properties (idealized cluster)", () => {
  it("budgets and partitions hold after every plan; every rollout completes once faults stop", () => {
    fc.assert(fc.property(caseArb, runCase), { seed: SEED, numRuns: RUNS });
  });
});
