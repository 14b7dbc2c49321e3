/**
 * Coordinated rollouts the scenario fuzz (`npm run fuzz -- --coordination`, 2026-12-01) found that
 * cannot complete as specified: the wait for RolloutComplete fails by design. What is tested is
 * that the status says why and how to unblock it, every invariant holds meanwhile, and the fix the
 * status names does finish the rollout.
 *
 * - A role without surge keeps its last old instance while a role that depends on it still runs
 *   old ones (DESIGN §2.9 teardown), so it stays at `T − 1` of `T`; when that leaves a dependent's
 *   maxSkew allowance short of its eligible count, neither finishes: condition RolloutBlocked
 *   names the roles, the smallest sufficient maxSkew, maxSurge, or removing the dependency
 *   (`skewDeadlock` in src/core/coordination.ts).
 * - A dependent's old instances below its role partition never go, so the role it depends on keeps
 *   its last old instance, and the surge instance built beside it, until the partition is lowered:
 *   condition Progressing stays True and says so (`partitionHold`), instead of "Converged".
 * - A dependency whose every instance is below its role partition gets no new capacity, so its
 *   dependents wait at the dependency gate: Progressing says which partition to lower.
 *
 * Rollouts the plain scenario fuzz found waiting for capacity that only more of it ends; the
 * status says so, and the run with that capacity (a node down from the start, back before the
 * failing wait) completes:
 * - Groups a scale-up added to a full cluster cannot be scheduled and take the group
 *   maxUnavailable, so the old groups' instances, which their role budget lets go, wait for the
 *   group budget: Progressing names the groups that take it and their unschedulable pods.
 * - Nothing is left to do and desired pods cannot be scheduled (a scale-up beside old, larger
 *   instances a role partition keeps): Progressing is WaitingForCapacity, not WaitingForPods.
 * - maxUnavailable 0 with no room for the surge: the budget wait counts the pods that cannot be
 *   scheduled and asks for capacity.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import type { Condition, ModelServingStatus } from "../src/api/schema.ts";
import { runScenario } from "../src/sim/runner.ts";
import { parseScenario } from "../src/sim/scenario.ts";
import type { Scenario } from "../src/sim/scenario.ts";

const DIR = join(import.meta.dirname, "expected-waits");

function read(file: string): { steps: Record<string, any>[] } & Record<string, unknown> {
  return JSON.parse(readFileSync(join(DIR, file), "utf8")) as { steps: Record<string, any>[] };
}

function parse(raw: unknown): Scenario {
  const parsed = parseScenario(raw);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
  return parsed.scenario;
}

/** Runs `file`: its RolloutComplete wait fails, every invariant holds; returns the final conditions by type. */
async function expectWait(file: string): Promise<Map<string, Condition>> {
  const report = await runScenario(parse(read(file)));
  assert.deepEqual(
    report.invariants.filter((result) => result.violations > 0),
    [],
  );
  const failed = report.steps.filter((step) => !step.ok);
  assert.equal(failed.length, 1);
  assert.match(failed[0]?.message ?? "", /^RolloutComplete not reached/);
  const status = report.final.status as ModelServingStatus | null;
  return new Map((status?.conditions ?? []).map((condition) => [condition.type, condition]));
}

/** `file` with `fix` applied to the spec of its last patch, as one more patch before its last RolloutComplete wait (the one that fails): that wait passes. */
async function expectFixed(file: string, fix: (spec: Record<string, any>) => void): Promise<void> {
  const raw = read(file);
  const waitIndex = raw.steps.findLastIndex((step) => step.wait?.for === "RolloutComplete");
  const lastPatch = structuredClone(raw.steps.slice(0, waitIndex).findLast((step) => step.patch !== undefined));
  assert.ok(lastPatch !== undefined);
  fix(lastPatch.patch.merge.spec);
  raw.steps.splice(waitIndex, 0, { wait: { for: "Seconds", timeoutSeconds: 600 } }, lastPatch);
  const report = await runScenario(parse(raw));
  assert.deepEqual(
    report.invariants.filter((result) => result.violations > 0),
    [],
  );
  assert.equal(report.verdict, "pass", JSON.stringify(report.steps.filter((step) => !step.ok)));
}

describe("coordinated rollouts that wait by design, saying why", () => {
  const skewFile = "dependent-short-of-skew-allowance-against-kept-old-instance.json";
  it(`prefill (3) dependsOn decode (2, no surge), maxSkew 10%: RolloutBlocked names 17%; at 17% it completes (fuzz-coordinated-382, ${skewFile})`, async () => {
    const conditions = await expectWait(skewFile);
    const blocked = conditions.get("RolloutBlocked");
    assert.equal(blocked?.status, "True");
    assert.equal(
      blocked.message,
      "The coordinated rollout cannot proceed: role prefill may start only 2 of its 3 instance(s) while role decode keeps an old instance for the roles that depend on it (decode reaches at most 1 of 2 without surge; maxSkew 10%), so neither finishes: set maxSurge on role decode (e.g. 1), raise maxSkew to at least 17%, or remove the dependency on role decode.",
    );
    assert.deepEqual(
      [conditions.get("Progressing")?.status, conditions.get("Progressing")?.reason],
      ["False", "RolloutBlocked"],
    );
    await expectFixed(skewFile, (spec) => {
      spec.rolloutStrategy.coordination.maxSkew = "17%";
    });
  });

  const partitionFile = "dependency-kept-old-for-dependent-below-role-partition.json";
  it(`prefill (partition 1) dependsOn decode (1, maxSurge 1): Progressing names the partition; lowered, it completes (fuzz-coordinated-209, ${partitionFile})`, async () => {
    const conditions = await expectWait(partitionFile);
    const progressing = conditions.get("Progressing");
    assert.deepEqual([progressing?.status, progressing?.reason], ["True", "RolloutWaiting"]);
    // Groups 0–1 are below the group partition; in groups 2–3 decode-0 (old) and decode-1 (surge) wait.
    assert.match(
      progressing?.message ?? "",
      /^group 3 role decode: keeps its last old instance \(and any surge instance beside it\) while role\(s\) prefill that depend on it run old instances below their partition: lower the partition of prefill to finish the rollout, or remove the dependency on role decode; group 2 role decode: /,
    );
    assert.equal(conditions.get("RolloutBlocked"), undefined);
    await expectFixed(partitionFile, (spec) => {
      spec.template.roles[0].partition = 0;
    });
  });

  const pinnedFile = "dependency-entirely-below-its-partition.json";
  it(`decode dependsOn prefill, every prefill instance below its partition: Progressing names the partition; lowered, it completes (fuzz-coordinated-438, ${pinnedFile})`, async () => {
    const conditions = await expectWait(pinnedFile);
    const progressing = conditions.get("Progressing");
    assert.deepEqual([progressing?.status, progressing?.reason], ["True", "RolloutWaiting"]);
    assert.match(
      progressing?.message ?? "",
      /^group \d role decode: waiting for new Ready capacity in prefill \(dependencies of decode\); every instance of prefill is below its partition: lower the partition of prefill, or remove the dependency on it, to update decode; /,
    );
    await expectFixed(pinnedFile, (spec) => {
      spec.template.roles[0].partition = 0;
    });
  });
});

/**
 * `file` on one node more, down from the start (past the node monitor's grace period, before
 * anything is scheduled: the run reaches the same wait) and back before the first RolloutComplete
 * wait after the last patch (the one that fails): that wait passes.
 */
async function expectFixedByCapacity(file: string): Promise<void> {
  const raw = read(file);
  const pool = (raw.cluster as { nodes: { name: string; count: number }[] }).nodes[0];
  assert.ok(pool !== undefined);
  const node = `${pool.name}-${pool.count}`;
  pool.count += 1;
  const lastPatch = raw.steps.findLastIndex((step) => step.patch !== undefined);
  const waitIndex = raw.steps.findIndex((step, index) => index > lastPatch && step.wait?.for === "RolloutComplete");
  raw.steps.splice(waitIndex, 0, { wait: { for: "Seconds", timeoutSeconds: 600 } }, { recoverNode: { name: node } });
  raw.steps.unshift({ failNode: { name: node } }, { advance: { seconds: 120 } });
  const report = await runScenario(parse(raw));
  assert.deepEqual(
    report.invariants.filter((result) => result.violations > 0),
    [],
  );
  assert.equal(report.verdict, "pass", JSON.stringify(report.steps.filter((step) => !step.ok)));
}

/** What the simulated scheduler says of a pod that needs one GPU when `nodes` have none free. */
function noGpu(pod: string, nodes: number): string {
  return `Pending (Unschedulable: 0/${nodes} nodes are available: pod default/${pod} needs 1 nvidia.com/gpu, at most 0 free on any schedulable node)`;
}

describe("rollouts that wait for capacity, saying so", () => {
  const budgetFile = "group-budget-taken-by-scaled-up-groups-without-capacity.json";
  it(`paused, replicas 2→4 in a full cluster, then an update: groups 0–1 wait for the group budget groups 2–3 take; with capacity it completes (fuzz-4921, ${budgetFile})`, async () => {
    const conditions = await expectWait(budgetFile);
    const progressing = conditions.get("Progressing");
    assert.deepEqual([progressing?.status, progressing?.reason], ["True", "RolloutWaiting"]);
    assert.equal(
      progressing?.message,
      "group(s) 0, 1 role decode: waiting for the group budget (rollingUpdateConfiguration.maxUnavailable 1), taken by group(s) 2, 3; 4 pod(s) of group(s) 2, 3 cannot be scheduled: add capacity for them. " +
        `Not Ready: decode-0 of group 2: m-2-decode-0-0 ${noGpu("m-2-decode-0-0", 2)}; decode-1 of group 2: m-2-decode-1-0 ${noGpu("m-2-decode-1-0", 2)}; decode-0 of group 3: m-3-decode-0-0 ${noGpu("m-3-decode-0-0", 2)}.`,
    );
    await expectFixedByCapacity(budgetFile);
  });

  const surgeFile = "surge-without-room-max-unavailable-0.json";
  it(`decode maxUnavailable 0 and maxSurge 1 in a full cluster: each group's surge decode cannot be scheduled, and the wait says to add capacity; with capacity it completes (fuzz-163, ${surgeFile})`, async () => {
    const conditions = await expectWait(surgeFile);
    const progressing = conditions.get("Progressing");
    assert.deepEqual([progressing?.status, progressing?.reason], ["True", "RolloutWaiting"]);
    const wait = (group: number) =>
      `group ${group} role decode: 2 of 2 instance(s) available with maxUnavailable 0: waiting for updated units to become Ready or for surge capacity (maxSurge 1); 1 pod(s) of group(s) ${group} cannot be scheduled: add capacity for them`;
    assert.ok((progressing?.message ?? "").startsWith(`${wait(1)}; ${wait(0)}. Not Ready: `), progressing?.message);
    await expectFixedByCapacity(surgeFile);
  });

  const scaleFile = "scale-up-beside-partition-kept-instances-beyond-capacity.json";
  it(`decode 1→3 per group beside decode-0 kept at its 2-pod revision by partition 1 (16 GPUs of 12): WaitingForCapacity; with capacity it completes (fuzz-10975, ${scaleFile})`, async () => {
    const conditions = await expectWait(scaleFile);
    const progressing = conditions.get("Progressing");
    assert.deepEqual([progressing?.status, progressing?.reason], ["True", "WaitingForCapacity"]);
    assert.equal(
      progressing?.message,
      "4 pod(s) cannot be scheduled and nothing left to do frees room for them: " +
        `decode-1 of group 2: m-2-decode-1-0 ${noGpu("m-2-decode-1-0", 3)}; decode-2 of group 2: m-2-decode-2-0 ${noGpu("m-2-decode-2-0", 3)}; decode-1 of group 3: m-3-decode-1-0 ${noGpu("m-3-decode-1-0", 3)}; and 1 more instance(s). Add capacity for them.`,
    );
    await expectFixedByCapacity(scaleFile);
  });
});
