import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { simulateText } from "./simulate.ts";

const FILE = "deploy/examples/scenarios/pod-deletion.yaml";
const text = readFileSync(join(import.meta.dirname, "../..", FILE), "utf8");

describe("tandem simulate", () => {
  it("prints one line per step, the invariants, the seed, the options and the replay command; exit 0", async () => {
    const { output, reportJson } = await simulateText(FILE, text);
    assert.equal(output.exitCode, 0, output.stdout);
    const lines = output.stdout.trimEnd().split("\n");
    assert.equal(lines[0], "scenario pod-deletion (seed 1)");
    assert.match(
      lines[1] ?? "",
      /^options: nodes gpu×2 \(8 GPUs\); timing scheduleSeconds 1, pullSeconds 20, startSeconds 60, terminationSeconds 5, nodeMonitorGraceSeconds 40, podEvictionSeconds 300; /,
    );
    assert.match(
      lines[2] ?? "",
      /^ {2}\[ 0\] apply +0\.000s → +0\.000s {2}ok {4}created ModelServing default\/llama-pd$/,
    );
    assert.match(lines[6] ?? "", /^ {2}\[ 4\] wait +\d+\.\d{3}s → +\d+\.\d{3}s {2}ok {4}Available after/);
    assert.match(lines.at(-4) ?? "", /^events: InstanceCreated \d+$/, "the controller's Events by reason");
    assert.match(lines.at(-3) ?? "", /^invariants: all 10 held/);
    assert.match(lines.at(-2) ?? "", /^verdict: pass after [\d.]+s simulated$/);
    assert.equal(lines.at(-1), `replay: tandem simulate ${FILE} --seed 1`);
    assert.equal(JSON.parse(reportJson ?? "{}").verdict, "pass");
  });

  it("--json prints the report, --seed overrides the scenario's seed", async () => {
    const { output, reportJson } = await simulateText(FILE, text, { json: true, seed: "5" });
    assert.equal(output.exitCode, 0);
    assert.equal(output.stdout, reportJson);
    assert.equal(JSON.parse(output.stdout).seed, 5);
  });

  it("exits 1 for a failed step and names it FAIL", async () => {
    const failing = text.replace(
      'deletePods: {selector: "tandem.dev/role=decode", count: 1}',
      "failNode: {name: gpu-7}",
    );
    const { output } = await simulateText(FILE, failing);
    assert.equal(output.exitCode, 1);
    assert.match(output.stdout, / FAIL {2}no node gpu-7; nodes are gpu-0, gpu-1\n/);
    assert.match(output.stdout, /2 later step\(s\) not run/);
    assert.match(output.stdout, /verdict: fail/);
  });

  it("exits 1 without running an invalid scenario or a bad seed", async () => {
    const invalid = await simulateText(
      FILE,
      text.replaceAll("wait: {for: Available, timeoutSeconds: 600}", "wait: {for: Ready, timeoutSeconds: 600}"),
    );
    assert.equal(invalid.output.exitCode, 1);
    assert.equal(invalid.output.stdout, "");
    assert.equal(invalid.reportJson, undefined);
    assert.equal(
      invalid.output.stderr,
      `${FILE}: steps[1].wait.for: must be one of "Available", "RolloutComplete", "Seconds"\n${FILE}: steps[4].wait.for: must be one of "Available", "RolloutComplete", "Seconds"\n`,
    );
    const seed = await simulateText(FILE, text, { seed: "x" });
    assert.equal(seed.output.exitCode, 1);
    assert.equal(seed.output.stderr, '--seed: must be an integer from 0 to 4294967295, not "x"\n');
  });
});
