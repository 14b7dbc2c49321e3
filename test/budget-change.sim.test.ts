/**
 * Budgets changed mid-rollout (found by the scenario fuzz, 2026-11-30): a lower group or role
 * `maxUnavailable`, or a switch from InPlaceUpdate to RoleRollingUpdate, while disruptions are
 * under way. The controller cannot undo those; the checker tolerates them until they recover
 * (`UnderWay` in src/core/invariants.ts) and still catches any new disruption beyond the new budget.
 * Before the checker knew this, each scenario here failed at the instant of the change.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { plan as corePlan } from "../src/core/plan.ts";
import type { PlanFunction } from "../src/engine/reconciler.ts";
import { runScenario } from "../src/sim/runner.ts";
import { parseScenario } from "../src/sim/scenario.ts";
import type { Scenario } from "../src/sim/scenario.ts";

const DIR = join(import.meta.dirname, "budget-change");

function load(file: string): Scenario {
  const parsed = parseScenario(JSON.parse(readFileSync(join(DIR, file), "utf8")) as unknown);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
  return parsed.scenario;
}

const SCENARIOS: Readonly<Record<string, string>> = {
  "group-budget-lowered.json": "the group maxUnavailable lowered from 2 to 1 while two groups are being replaced",
  "role-budget-lowered.json": "a role's maxUnavailable lowered while its instances are being replaced",
  "inplace-to-role-rolling.json": "InPlaceUpdate → RoleRollingUpdate while an in-place restart is under way",
  "inplace-to-role-rolling-scale-up.json": "as above, with two more groups in the same change",
};

describe("budgets changed mid-rollout", () => {
  for (const [file, what] of Object.entries(SCENARIOS)) {
    it(`${what}: the rollout completes and every invariant holds (${file})`, async () => {
      const report = await runScenario(load(file), { seed: 1 });
      assert.deepEqual(report.invariants.filter((result) => result.violations > 0), []);
      assert.equal(report.verdict, "pass", JSON.stringify(report.steps.filter((step) => !step.ok)));
    });
  }

  it("catches a controller that keeps planning with the budget it had before the change", async () => {
    // The controller is shown maxUnavailable 2 throughout: after the change to 1 it goes on
    // replacing two groups at a time, beyond what was under way at the change.
    const stale: PlanFunction = (observed, nowMs) => {
      const stored = observed.modelServing as { spec: { rolloutStrategy: { rollingUpdateConfiguration: Record<string, unknown> } } };
      const strategy = stored.spec.rolloutStrategy;
      const spec = { ...stored.spec, rolloutStrategy: { ...strategy, rollingUpdateConfiguration: { ...strategy.rollingUpdateConfiguration, maxUnavailable: 2 } } };
      return corePlan({ ...observed, modelServing: { ...stored, spec } }, nowMs);
    };
    const report = await runScenario(load("group-budget-lowered.json"), { seed: 1, plan: stale });
    assert.equal(report.verdict, "fail");
    const budget = report.invariants.find((result) => result.name === "groupBudget");
    assert.ok((budget?.violations ?? 0) > 0);
    assert.match(budget?.first?.message ?? "", /^m: 2 ServingGroup\(s\) unavailable \(groups \d, \d\) with maxUnavailable 1$/);
  });
});
