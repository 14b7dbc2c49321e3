/**
 * Controller and checker issues a scenario fuzz found in the simulator (2026-11-30) that are not
 * fixed yet: every scenario in known-issues/ fails today (an invariant violated, or a rollout that
 * never completes), and each test here asserts that it still does, with its diagnosis in the
 * test's name. So the reproductions stay with the code, and a fix cannot land unnoticed: when a
 * scenario starts to pass, its test fails, and the scenario moves to fuzz-regressions/ (an
 * ordinary test that it passes) and leaves this list.
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { runScenario } from "../src/sim/runner.ts";
import { parseScenario } from "../src/sim/scenario.ts";

const DIR = join(import.meta.dirname, "known-issues");

/** Scenario file → what goes wrong and where the cause probably is. */
const ISSUES: Readonly<Record<string, string>> = {};

describe("known issues (each still fails)", () => {
  it("lists every scenario in known-issues/", () => {
    // Git keeps no empty directory: without open issues there is none.
    const files = existsSync(DIR) ? readdirSync(DIR).filter((file) => file.endsWith(".json")) : [];
    assert.deepEqual(files.sort(), Object.keys(ISSUES).sort());
  });

  for (const [file, diagnosis] of Object.entries(ISSUES)) {
    it(`${file} — ${diagnosis}`, async () => {
      const parsed = parseScenario(JSON.parse(readFileSync(join(DIR, file), "utf8")) as unknown);
      assert.ok(parsed.ok, JSON.stringify(parsed.ok ? [] : parsed.problems));
      const report = await runScenario(parsed.scenario);
      assert.equal(
        report.verdict,
        "fail",
        `${file} passes now: move it to test/fuzz-regressions/ (and its line here to fuzz-regressions.sim.test.ts)`,
      );
    });
  }
});
