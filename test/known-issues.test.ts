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
