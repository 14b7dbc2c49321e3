/**
 * Controller and checker issues a scenario fuzz found in the simulator (2026-11-30) that are not
 * fixed yet: every scenario in known-issues/ fails today (an invariant violated, or a rollout that
 * never completes), and each test here asserts that it still does, with its diagnosis in the
 * test's name. So the reproductions stay with the code, and a fix cannot land unnoticed: when a
 * scenario starts to pass, its test fails, and the scenario moves to fuzz-regressions/ (an
 * ordinary test that it passes) and leaves this list.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { runScenario } from "../src/sim/runner.ts";
import { parseScenario } from "../src/sim/scenario.ts";

const DIR = join(import.meta.dirname, "known-issues");

/** Scenario file → what goes wrong and where the cause probably is. */
const ISSUES: Readonly<Record<string, string>> = {
  "C1-partition-raised-inflight-intermediate-revision.json":
    "partitionHolds: a partition raised while permits are in flight is not honoured; group 0 ends on an intermediate revision with status Converged (semantics to decide: cancel unstarted permits below the partition, or exempt them in the checker)",
  "C2-partition-raised-inflight-inplace.json": "partitionHolds: as C1, in place (a pod only draining is still patched)",
  "C3-partition-raised-inflight-rr.json": "partitionHolds: as C1, under RoleRollingUpdate",
  "D2-strategy-switch-drops-role-surge-everywhere.json":
    "groupBudget: RoleRollingUpdate → InPlaceUpdate (the role's maxSurge back to its default 0) while role surge instances serve: they lie beyond the new bound and go in every group at once (as D1)",
  "D1-max-surge-removed-while-surge-carries-floor.json":
    "roleBudget and groupBudget (scenario seed 2): a role's maxSurge removed while its surge instances carry the floor; holdSurge sees only ordinals below replicas + maxSurge, so they are scaled down (semantics to decide: keep a held surge instance beyond the new maxSurge, which surgeBound would then have to allow, or accept the disruption as the user's)",
  "D3-max-surge-lowered-while-surge-carries-groups.json":
    "groupBudget at 66.4 s (both scenario seeds): prefill's maxSurge lowered from 2 to 1 (and the group maxUnavailable from 2 to 1) while groups 1 and 2 serve prefill only through surge instances prefill-2 and prefill-3 (their desired ones still starting); prefill-3 lies beyond the new bound, which the planner's states stop at, so it is scaled down in both groups at once, unbudgeted (as D1)",
  "U2-undiagnosed-group-budget-fuzz-10177.json":
    "groupBudget at 36.7 s: 2 groups unavailable with maxUnavailable 1; first look: a switch from RoleRollingUpdate to ServingGroupRollingUpdate drops role surge instances in several groups at once while the group rollout starts (as D2)",
  "U3-undiagnosed-group-budget-fuzz-12105.json":
    "groupBudget at 112.6 s: 3 groups unavailable with maxUnavailable 1; first look: after a RoleRollingUpdate that changed prefill only, a switch to ServingGroupRollingUpdate drains the unchanged decode pods of every group at once (under a group strategy a pod's revision label must be the update revision, so RR's unchanged-role pods all look outdated)",
  "U4-switch-rr-to-group-paused-drains-unchanged-role.json":
    "groupBudget at 132.7 s (seeds 1 and 2): 3 groups unavailable with maxUnavailable 1; the cause of U3, while paused: after a RoleRollingUpdate of prefill only (promoted; decode pods keep their first revision's label), a switch to ServingGroupRollingUpdate makes every decode pod differ from the current revision as a whole (`sameSpec` in instances.ts), so the lifecycle replaces them in all groups at once, outside the rollout's permits and its pause (fuzz-12198)",
};

describe("known issues (each still fails)", () => {
  it("lists every scenario in known-issues/", () => {
    assert.deepEqual(readdirSync(DIR).filter((file) => file.endsWith(".json")).sort(), Object.keys(ISSUES).sort());
  });

  for (const [file, diagnosis] of Object.entries(ISSUES)) {
    it(`${file} — ${diagnosis}`, async () => {
      const parsed = parseScenario(JSON.parse(readFileSync(join(DIR, file), "utf8")) as unknown);
      assert.ok(parsed.ok, JSON.stringify(parsed.ok ? [] : parsed.problems));
      const report = await runScenario(parsed.scenario);
      assert.equal(report.verdict, "fail", `${file} passes now: move it to test/fuzz-regressions/ (and its line here to fuzz-regressions.sim.test.ts)`);
    });
  }
});
