/**
 * Property loop for the explicit recreate (src/core/recreate.ts) on the idealized cluster: random
 * specs, strategies and budgets, a random unit (a group, or one role's instances in it), and
 * random controller crashes in the middle of a plan (only a prefix of its actions is applied, as
 * when the executor dies; the next plan starts from what the cluster shows, as a restarted
 * controller would). Checked: exactly the unit's pods at the request are replaced, each once;
 * no pod built since is touched; the budgets hold after every write; the request ends Done and
 * the system converges with zero writes; a second request (a new id) replaces the new pods once.
 * `TANDEM_PROPERTY_RUNS=N` runs more cases than CI's default.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import type { Action } from "../src/core/actions.ts";
import { plan } from "../src/core/plan.ts";
import { apply, availableInstances, idealCluster, label, observe } from "./ideal-cluster.ts";
import type { IdealCluster } from "./ideal-cluster.ts";

const SEED = 20261202;
const RUNS = Number(process.env.TANDEM_PROPERTY_RUNS ?? 100);
const NOW = Date.parse("2026-12-02T01:00:00Z");

const roleArb = (name: string) =>
  fc.record({
    name: fc.constant(name),
    replicas: fc.integer({ min: 1, max: 3 }),
    workerReplicas: fc.integer({ min: 0, max: 1 }),
    maxUnavailable: fc.integer({ min: 0, max: 2 }),
  });

const caseArb = fc.record({
  strategy: fc.constantFrom("ServingGroupRollingUpdate", "RoleRollingUpdate", "InPlaceUpdate"),
  replicas: fc.integer({ min: 1, max: 4 }),
  groupMaxUnavailable: fc.integer({ min: 0, max: 2 }),
  roles: fc
    .uniqueArray(fc.constantFrom("prefill", "decode"), { minLength: 1, maxLength: 2 })
    .chain((names) => fc.tuple(...names.map(roleArb))),
  group: fc.nat(),
  role: fc.option(fc.nat(), { nil: undefined }),
  crashes: fc.array(fc.record({ round: fc.integer({ min: 0, max: 20 }), keep: fc.nat() }), { maxLength: 5 }),
});
type Case = typeof caseArb extends fc.Arbitrary<infer T> ? T : never;

/** A role's maxUnavailable: its own under RoleRollingUpdate, else the default 1 (role budgets are that strategy's). */
function roleBudget(c: Case, r: Case["roles"][number]): number {
  return c.strategy === "RoleRollingUpdate" ? r.maxUnavailable : 1;
}

/** The group maxUnavailable: only ServingGroupRollingUpdate surges groups, elsewhere 0 would be invalid. */
function groupBudget(c: Case): number {
  return c.strategy === "ServingGroupRollingUpdate" ? c.groupMaxUnavailable : Math.max(1, c.groupMaxUnavailable);
}

function manifest(c: Case): Record<string, any> {
  const roleRolling = c.strategy === "RoleRollingUpdate";
  const roles = c.roles.map((r) => ({
    name: r.name,
    replicas: r.replicas,
    workerReplicas: r.workerReplicas,
    ...(roleRolling ? { maxUnavailable: r.maxUnavailable, maxSurge: r.maxUnavailable === 0 ? 1 : 0 } : {}),
    entryTemplate: { spec: { containers: [{ name: "c", image: `${r.name}:v1` }] } },
    ...(r.workerReplicas > 0
      ? { workerTemplate: { spec: { containers: [{ name: "c", image: `${r.name}:v1` }] } } }
      : {}),
  }));
  const maxUnavailable = groupBudget(c);
  const group = { maxUnavailable, maxSurge: maxUnavailable === 0 ? 1 : 0 };
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "m" },
    spec: {
      replicas: c.replicas,
      drain: { timeoutSeconds: 0 },
      rolloutStrategy: { type: c.strategy, rollingUpdateConfiguration: group },
      template: { roles },
    },
  };
}

/**
 * The budgets a recreate must keep: at most the group maxUnavailable groups down; and, where
 * it moves instances one by one (a role's, or a group's under RoleRollingUpdate), each role of
 * the group keeps `replicas − maxUnavailable` available.
 */
function checkBudgets(cluster: IdealCluster, c: Case, group: number, role: string | undefined): void {
  const counts = availableInstances(cluster, c.roles);
  const down = Array.from({ length: c.replicas }, (_, g) => g).filter((g) =>
    c.roles.some((r) => (counts.get(`${g}/${r.name}`) ?? 0) < r.replicas),
  );
  assert.ok(down.length <= groupBudget(c), `groups ${down.join(", ")} down at once`);
  if (role === undefined && c.strategy !== "RoleRollingUpdate") return;
  for (const r of c.roles)
    if (role === undefined || r.name === role)
      assert.ok(
        (counts.get(`${group}/${r.name}`) ?? 0) >= r.replicas - Math.min(roleBudget(c, r), r.replicas),
        `role ${r.name} of group ${group} below its budget`,
      );
}

/** Runs one request to its end with crashes mid-plan; returns the UIDs its own deletions hit. */
function carryOut(cluster: IdealCluster, c: Case, id: string, group: number, role: string | undefined): string[] {
  cluster.modelServing.metadata.annotations = {
    "tandem.dev/recreate": JSON.stringify({ id, group, ...(role === undefined ? {} : { role }) }),
  };
  const deleted: string[] = [];
  for (let round = 0; round < 120; round++) {
    const { actions } = plan(observe(cluster), NOW + round * 1000);
    if (actions.length === 0) break;
    const crash = c.crashes.find((found) => found.round === round);
    const applied: readonly Action[] = crash === undefined ? actions : actions.slice(0, crash.keep % actions.length);
    // Recovery may delete too (an instance created in part by a plan cut off is rebuilt): only
    // the recreate's own deletions count.
    for (const action of applied)
      if (action.type === "DeletePod" && action.reason === "Recreate") deleted.push(action.uid);
    apply(cluster, applied);
    checkBudgets(cluster, c, group, role);
  }
  assert.deepEqual(plan(observe(cluster), NOW + 200_000).actions, [], "converged with zero writes");
  assert.deepEqual(cluster.modelServing.status.recreate, {
    id,
    group,
    ...(role === undefined ? {} : { role }),
    phase: "Done",
  });
  return deleted;
}

function unitUids(cluster: IdealCluster, group: number, role: string | undefined): string[] {
  return [...cluster.pods.values()]
    .filter((pod) => label(pod, "group") === String(group) && (role === undefined || label(pod, "role") === role))
    .map((pod) => pod.metadata.uid ?? "")
    .sort();
}

/** The request's scope moves one role instance at a time (a role's, or a group's under RoleRollingUpdate). */
function instanceWise(c: Case, role: string | undefined): boolean {
  return role !== undefined || c.strategy === "RoleRollingUpdate";
}

/** Some unit of the request can never go: a zero group budget, or, instance-wise, a role in scope with maxUnavailable 0. */
function stalls(c: Case, role: string | undefined): boolean {
  return (
    groupBudget(c) === 0 ||
    (instanceWise(c, role) && c.roles.some((r) => (role === undefined || r.name === role) && roleBudget(c, r) === 0))
  );
}

/** The pod named belongs to a role in scope whose budget lets an instance go. */
function scopeHasBudget(c: Case, role: string | undefined, podName: string): boolean {
  const r = c.roles.find((found) => podName.split("-")[2] === found.name);
  return r !== undefined && (role === undefined || r.name === role) && roleBudget(c, r) > 0;
}

function runCase(c: Case): void {
  const cluster = idealCluster(manifest(c));
  for (let round = 0; round < 40 && plan(observe(cluster), NOW).actions.length > 0; round++)
    apply(cluster, plan(observe(cluster), NOW).actions);
  assert.equal(
    cluster.modelServing.status.conditions.find((found: { type: string }) => found.type === "Available")?.status,
    "True",
  );
  const group = c.group % c.replicas;
  const role = c.role === undefined ? undefined : c.roles[c.role % c.roles.length]?.name;
  const others = () =>
    [...cluster.pods.values()].filter((pod) => !unitUids(cluster, group, role).includes(pod.metadata.uid ?? ""));
  const outside = others()
    .map((pod) => pod.metadata.uid)
    .sort();
  if (stalls(c, role)) {
    // A zero budget lets no serving unit of the request go: it waits, says so, and deletes nothing.
    const unit = unitUids(cluster, group, role);
    cluster.modelServing.metadata.annotations = { "tandem.dev/recreate": JSON.stringify({ id: "r", group, role }) };
    for (let round = 0; round < 20; round++) {
      const { actions } = plan(observe(cluster), NOW + round * 1000);
      assert.ok(
        actions.every(
          (action) => action.type !== "DeletePod" || !unit.includes(action.uid) || scopeHasBudget(c, role, action.name),
        ),
      );
      apply(cluster, actions);
      checkBudgets(cluster, c, group, role);
    }
    assert.equal(cluster.modelServing.status.recreate.phase, "Replacing");
    assert.match(
      JSON.stringify(cluster.modelServing.status.conditions),
      /recreate r: .* waits for the (group|role) budget/,
    );
    return;
  }
  for (const id of ["first", "second"]) {
    const unit = unitUids(cluster, group, role);
    const deleted = carryOut(cluster, c, id, group, role);
    assert.deepEqual([...new Set(deleted)].sort(), unit, `${id}: exactly the unit's pods are replaced`);
    assert.equal(new Set(deleted).size, deleted.length, `${id}: each pod is deleted once`);
    assert.equal(unitUids(cluster, group, role).length, unit.length, `${id}: the unit is rebuilt whole`);
    assert.deepEqual(
      unitUids(cluster, group, role).filter((uid) => unit.includes(uid)),
      [],
      `${id}: no old pod is left`,
    );
    assert.deepEqual(
      others()
        .map((pod) => pod.metadata.uid)
        .sort(),
      outside,
      `${id}: nothing else is touched`,
    );
  }
}

describe("explicit recreate: properties (idealized cluster)", () => {
  it("replaces exactly the unit's pods once, within the budgets, across crashes mid-plan", () => {
    fc.assert(
      fc.property(caseArb, (c) => runCase(c)),
      { seed: SEED, numRuns: RUNS },
    );
  });
});
