import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { runTandem } from "../../test/cli-process.ts";
import { simulateText } from "./simulate.ts";

const FILE = "deploy/examples/scenarios/pod-deletion.yaml";
const text = readFileSync(join(import.meta.dirname, "../..", FILE), "utf8");

describe("tandem simulate", () => {
  it("prints one line per step with what it did by role under it, the totals by role, the final status, the invariants, the seed, the options and the replay command; exit 0", async () => {
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
    const wait = lines.findIndex((line) => line.startsWith("  [ 4] wait"));
    assert.match(lines[wait] ?? "", /^ {2}\[ 4\] wait +\d+\.\d{3}s → +\d+\.\d{3}s {2}ok {4}Available after/);
    assert.equal(
      lines[wait + 1],
      "         decode   pods created 1, deleted 1",
      "the deleted decode pod went and its replacement came while the wait ran",
    );
    assert.match(lines[wait + 2] ?? "", /^ {2}\[ 5\] snapshot /);
    const byRole = lines.indexOf("by role:");
    assert.deepEqual(lines.slice(byRole + 1, byRole + 3), [
      "  decode   pods created 3, deleted 1",
      "  prefill  pods created 4",
    ]);
    assert.match(
      lines[byRole + 3] ?? "",
      /^final: revision llama-pd-[0-9a-f]{10} \(current and update\); 2 of 2 ServingGroups Ready; prefill 4 of 4 instances Ready, 4 updated; decode 2 of 2 instances Ready, 2 updated$/,
    );
    assert.deepEqual(lines.slice(byRole + 4, byRole + 6), [
      "  Available True (AllGroupsReady): All 2 ServingGroup(s) are Ready.",
      "  Progressing False (Converged): Nothing to do: the observed pods match the spec.",
    ]);
    assert.match(lines.at(-4) ?? "", /^events: InstanceCreated \d+$/, "the controller's Events by reason");
    assert.match(lines.at(-3) ?? "", /^invariants: all 10 held/);
    assert.match(lines.at(-2) ?? "", /^verdict: pass after [\d.]+s simulated$/, "no traffic, nothing more to say");
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

describe("tandem simulate: the verdict line says what it does not cover", () => {
  const TRAFFIC = "deploy/examples/scenarios/decode-update-under-traffic.yaml";
  const traffic = readFileSync(join(import.meta.dirname, "../..", TRAFFIC), "utf8");
  /** The scenario with pods deleted while they serve, cutting requests. */
  const noDrain = traffic.replace("drain: {timeoutSeconds: 30}", "drain: {timeoutSeconds: 0}");
  /** Each step of the scenario's list, as written (`  - kind:` and what follows, up to the next one). */
  const stepTexts = (scenario: string) =>
    scenario.slice(scenario.indexOf("steps:\n") + "steps:\n".length).split(/(?=^ {2}- )/m);
  const without = (scenario: string, drop: (step: string) => boolean) =>
    `${scenario.slice(0, scenario.indexOf("steps:\n"))}steps:\n${stepTexts(scenario)
      .filter((step) => !drop(step))
      .join("")}`;
  const requestsExpect = (step: string) => step.startsWith("  - expect:") && step.includes("requests:");
  const verdict = (stdout: string) => stdout.split("\n").find((line) => line.startsWith("verdict: ")) ?? "";

  it("nothing lost: says so, with the legs still in flight", async () => {
    const { output } = await simulateText(TRAFFIC, traffic);
    assert.equal(output.exitCode, 0, output.stdout);
    assert.match(
      verdict(output.stdout),
      /^verdict: pass after [\d.]+s simulated; no request leg failed or was cut \(\d+ legs, \d+ still in flight at the end\)$/,
    );
    assert.match(
      output.stdout,
      /\nrequests \(every leg\): \d+ total, \d+ ok, 0 failed \(0 incompatible\), 0 cut, \d+ in flight at the end\n/,
    );
  });

  it("losses an expect step bounds: within or beyond its bounds", async () => {
    const beyond = await simulateText(TRAFFIC, noDrain);
    assert.equal(beyond.output.exitCode, 1);
    assert.match(
      beyond.output.stdout,
      /\n {2}\[10\] expect .* FAIL {2}expect failed: requests\.cut is (\d+), expected at most 0\n/,
    );
    const cut = /requests\.cut is (\d+)/.exec(beyond.output.stdout)?.[1];
    assert.match(
      verdict(beyond.output.stdout),
      new RegExp(
        `^verdict: fail after [\\d.]+s simulated; ${cut} of \\d+ request legs \\(\\d+\\.\\d %\\) failed or were cut, beyond the bounds of expect step \\[10\\]$`,
      ),
    );
    assert.match(
      beyond.output.stdout,
      new RegExp(`\\n {9}decode {3}pods created 4, deleted 4; requests \\d+ ok, ${cut} cut\\n`),
      "the step that cut them, by role",
    );
    const within = await simulateText(
      TRAFFIC,
      noDrain.replace(
        "requests: {failed: 0, cut: 0}\n      podsCreated: {prefill: 4, decode: 8}",
        `requests: {failed: 0, cut: ${cut}}\n      podsCreated: {prefill: 4, decode: 8}`,
      ),
    );
    assert.equal(within.output.exitCode, 0, within.output.stdout);
    assert.match(
      verdict(within.output.stdout),
      new RegExp(
        `^verdict: pass after [\\d.]+s simulated; ${cut} of \\d+ request legs \\(\\d+\\.\\d %\\) failed or were cut, within the bounds of expect step \\[10\\]$`,
      ),
    );
  });

  it("losses after the last expect step on requests: how many of them", async () => {
    const lastDropped = stepTexts(noDrain).filter(requestsExpect).at(-1);
    const { output } = await simulateText(
      TRAFFIC,
      without(noDrain, (step) => step === lastDropped),
    );
    assert.equal(output.exitCode, 0, output.stdout);
    assert.match(
      verdict(output.stdout),
      /^verdict: pass after [\d.]+s simulated, but (\d+) of \d+ request legs \(\d+\.\d %\) failed or were cut, \1 of them after the last expect step on requests \(\[4\]\), which no step bounds$/,
    );
  });

  it("losses nothing bounds: a pass that says how many legs were lost and how to guard them (as a process: stdout, stderr, exit code)", async (t) => {
    const dir = mkdtempSync(join(tmpdir(), "tandem-simulate-"));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, "unguarded.yaml");
    writeFileSync(file, without(noDrain, requestsExpect));
    const result = await runTandem(["simulate", file], { timeoutMs: 60_000 });
    assert.deepEqual({ code: result.code, stderr: result.stderr }, { code: 0, stderr: "" }, result.stdout);
    assert.match(
      verdict(result.stdout),
      /^verdict: pass after [\d.]+s simulated, but \d+ of \d+ request legs \(\d+\.\d %\) failed or were cut and no expect step bounds them \(add one with requests: \{failed: 0, cut: 0\} to fail the run on them\)$/,
    );
  });
});
