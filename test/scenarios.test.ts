/**
 * Every shipped scenario passes: each step succeeds and every invariant holds, on the real engine
 * and core in the simulated cluster. Scenario-specific expectations follow.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { runScenario } from "../src/sim/runner.ts";
import { parseScenarioText } from "../src/sim/scenario.ts";
import type { Report } from "../src/sim/report.ts";

const DIR = join(import.meta.dirname, "../deploy/examples/scenarios");

async function run(file: string): Promise<Report> {
  const parsed = parseScenarioText(readFileSync(join(DIR, file), "utf8"));
  assert.ok(parsed.ok, JSON.stringify(parsed.ok ? [] : parsed.problems));
  return runScenario(parsed.scenario);
}

describe("shipped scenarios", () => {
  for (const file of readdirSync(DIR)
    .filter((name) => name.endsWith(".yaml"))
    .sort()) {
    it(`${file} passes with every invariant held`, async () => {
      const report = await run(file);
      const failed = report.steps.find((step) => !step.ok);
      assert.equal(
        report.verdict,
        "pass",
        failed?.message ?? JSON.stringify(report.invariants.filter((result) => result.violations > 0)),
      );
    });
  }

  it("pd-kv-format-update: with pairing SameGroup instead, its last expect fails on the requests a decode refused", async () => {
    const text = readFileSync(join(DIR, "pd-kv-format-update.yaml"), "utf8").replace(
      "pairing: SameRevision",
      "pairing: SameGroup",
    );
    const parsed = parseScenarioText(text);
    assert.ok(parsed.ok);
    const report = await runScenario(parsed.scenario);
    const last = report.steps.at(-1);
    assert.equal(last?.kind, "expect");
    assert.match(
      last.message,
      /^expect failed: requests\.failed is (\d+), expected at most 0; requests\.incompatible is \1, expected at most 0$/,
    );
  });

  it("decode-image-update: zero prefill pods created or deleted during the decode update", async () => {
    const report = await run("decode-image-update.yaml");
    const before = report.snapshots["before"] ?? [];
    const after = report.snapshots["after"] ?? [];
    const prefill = (pods: typeof before) =>
      pods
        .filter((pod) => pod.role === "prefill")
        .map((pod) => pod.uid)
        .sort();
    assert.deepEqual(prefill(after), prefill(before));
    assert.ok(
      after.filter((pod) => pod.role === "decode").every((pod) => pod.images.every((image) => image === "vllm:v2")),
    );
  });

  it("pod-deletion: the report shows the pod deleted, re-created and Ready again, with times", async () => {
    const report = await run("pod-deletion.yaml");
    const types = report.events.filter((event) => event.role === "decode").map((event) => event.type);
    for (const type of ["PodDeleted", "PodCreated", "PodReady"])
      assert.ok(types.includes(type as never), `no ${type} event`);
    assert.ok(report.events.every((event) => typeof event.t === "number"));
  });
});
