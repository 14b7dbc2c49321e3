/**
 * `tandem simulate FILE [--seed N] [--json] [--out REPORT.json]` (DESIGN §6, contract): runs a
 * scenario in virtual time against the real controller and exits 0 when every step succeeded and
 * no invariant was violated, 1 otherwise (also for an invalid scenario, which runs nothing).
 *
 * Output: by default one line per step (simulated start → end, ok/FAIL, message) and under it a
 * line per role it created or deleted pods of or ended request legs of, the totals by role, the
 * final status and its conditions, the controller's Events, the invariant summary, a verdict line
 * that says how many legs were lost and whether an `expect` step bounds them, the seed, the
 * derived cluster options and the replay command (`simulate-story.ts`); `--json` prints the
 * report instead; `--out` writes the report (2-space JSON, trailing newline) in either case.
 */
import { writeFile } from "node:fs/promises";
import type { Command } from "commander";
import { quote } from "../api/problems.ts";
import { DEFAULT_TIMING } from "../sim/cluster.ts";
import type { Report } from "../sim/report.ts";
import { runScenario } from "../sim/runner.ts";
import { parseScenarioText } from "../sim/scenario.ts";
import type { Scenario } from "../sim/scenario.ts";
import type { CommandOutput } from "./io.ts";
import { emit, fail, writeErrorText } from "./io.ts";
import { finalLines, roleColumnWidth, roleTotalLines, stepActivityLines, verdictLine } from "./simulate-story.ts";
import { readSource } from "./validate.ts";

export interface SimulateOptions {
  /** `--seed` as typed; overrides the scenario's seed. */
  readonly seed?: string | undefined;
  readonly json?: boolean | undefined;
}

export interface SimulateResult {
  readonly output: CommandOutput;
  /** The report as written by `--out` (absent when the scenario did not run). */
  readonly reportJson?: string;
}

/** Parses and runs the scenario in `text` (read from `file`); pure apart from virtual time. */
export async function simulateText(file: string, text: string, options: SimulateOptions = {}): Promise<SimulateResult> {
  const seed = parseSeed(options.seed);
  if (typeof seed === "string") return { output: fail(`--seed: ${seed}\n`) };
  const parsed = parseScenarioText(text);
  if (!parsed.ok)
    return { output: fail(parsed.problems.map((found) => `${file}: ${found.path}: ${found.reason}\n`).join("")) };
  const report = await runScenario(parsed.scenario, { seed });
  const reportJson = `${JSON.stringify(report, null, 2)}\n`;
  const exitCode = report.verdict === "pass" ? 0 : 1;
  const stdout = options.json === true ? reportJson : humanReport(file, parsed.scenario, report);
  return { output: { exitCode, stdout, stderr: "" }, reportJson };
}

function parseSeed(value: string | undefined): number | undefined | string {
  if (value === undefined) return undefined;
  if (!/^(0|[1-9][0-9]{0,9})$/.test(value) || Number(value) > 0xffffffff)
    return `must be an integer from 0 to 4294967295, not ${quote(value)}`;
  return Number(value);
}

/** The default, human output. */
export function humanReport(file: string, scenario: Scenario, report: Report): string {
  const lines = [`scenario ${report.scenario} (seed ${report.seed})`, `options: ${derivedOptions(scenario)}`];
  const width = roleColumnWidth(report);
  for (const step of report.steps) {
    const span = `${step.startedAt.toFixed(3).padStart(10)}s → ${step.endedAt.toFixed(3).padStart(10)}s`;
    lines.push(
      `  [${String(step.index).padStart(2)}] ${step.kind.padEnd(17)} ${span}  ${step.ok ? "ok  " : "FAIL"}  ${step.message}`,
    );
    lines.push(...stepActivityLines(step, "         ", width));
  }
  const skipped = scenario.steps.length - report.steps.length;
  if (skipped > 0) lines.push(`  ${skipped} later step(s) not run: the run stops at the first failed step`);
  lines.push(...roleTotalLines(report));
  const requests = report.metrics.requests;
  if (requests !== undefined) {
    lines.push(
      `requests (every leg): ${requests.total} total, ${requests.ok} ok, ${requests.failed} failed (${requests.incompatible} incompatible), ${requests.cut} cut, ${requests.inFlight} in flight at the end`,
    );
  }
  lines.push(...finalLines(report), ...eventLines(report.controllerEvents));
  const violated = report.invariants.filter((result) => result.violations > 0);
  if (violated.length === 0)
    lines.push(
      `invariants: all ${report.invariants.length} held (${report.invariants.map((result) => result.name).join(", ")})`,
    );
  for (const result of violated)
    lines.push(
      `invariant ${result.name}: ${result.violations} violation(s), first at ${result.first?.t ?? "?"}s: ${result.first?.message ?? ""}`,
    );
  lines.push(verdictLine(scenario, report));
  lines.push(`replay: tandem simulate ${file} --seed ${report.seed}`);
  return lines.map((line) => `${line}\n`).join("");
}

/** The controller's Events counted by reason, then each Warning (a few), as `kubectl get events` would show them. */
function eventLines(events: Report["controllerEvents"]): string[] {
  const counts = new Map<string, number>();
  for (const event of events) counts.set(event.reason, (counts.get(event.reason) ?? 0) + event.count);
  const warnings = events.filter((event) => event.type === "Warning");
  const shown = warnings
    .slice(0, MAX_WARNINGS_SHOWN)
    .map(
      (event) =>
        `  Warning ${event.reason} at ${event.first}s${event.count > 1 ? ` (×${event.count}, last ${event.last}s)` : ""} ${event.object}: ${event.message}`,
    );
  const more =
    warnings.length > MAX_WARNINGS_SHOWN
      ? [`  and ${warnings.length - MAX_WARNINGS_SHOWN} more Warning(s): tandem simulate --json shows controllerEvents`]
      : [];
  return [
    `events: ${[...counts].map(([reason, count]) => `${reason} ${count}`).join(", ") || "none"}`,
    ...shown,
    ...more,
  ];
}

const MAX_WARNINGS_SHOWN = 5;

/** The cluster the scenario runs on, with every default filled in. */
function derivedOptions(scenario: Scenario): string {
  const { nodes, timing, images, router } = scenario.cluster;
  const pools = (nodes ?? [{ name: "gpu", count: 4, gpus: 8 }])
    .map((pool) => `${pool.name}×${pool.count} (${pool.gpus} GPUs)`)
    .join(", ");
  const effective = { ...DEFAULT_TIMING, ...timing };
  const timings = Object.entries(effective)
    .map(([key, value]) => `${key} ${value}`)
    .join(", ");
  const imageList = Object.keys(images ?? {})
    .sort()
    .join(", ");
  const replicas = router?.replicas ?? 1;
  const traffic =
    router === undefined
      ? "no router"
      : `router ${router.requestsPerSecond} req/s × ${router.requestSeconds}s${replicas > 1 ? `, ${replicas} replicas` : ""}`;
  return `nodes ${pools}; timing ${timings}; jitter 10%; informer lag 100ms; images with overrides: ${imageList === "" ? "none" : imageList}; ${traffic}`;
}

/** `output` once the report is written to `out`; a write error is added to it (exit 1), the run's output kept. */
export async function writeReport(out: string, reportJson: string, output: CommandOutput): Promise<CommandOutput> {
  try {
    await writeFile(out, reportJson, "utf8");
    return output;
  } catch (error) {
    return {
      exitCode: 1,
      stdout: output.stdout,
      stderr: `${output.stderr}--out: cannot write ${out}: ${writeErrorText(out, error)}\n`,
    };
  }
}

export function registerSimulate(program: Command): void {
  program
    .command("simulate")
    .description(
      "Run a scenario in virtual time against the real controller; exit 1 if a step failed or an invariant was violated.",
    )
    .argument("<file>", "scenario YAML (DESIGN §6)")
    .option("--seed <n>", "seed of every random stream (overrides the scenario's)")
    .option("--json", "print the JSON report instead of the summary")
    .option("--out <report>", "also write the JSON report to this file")
    .action(async (file: string, options: SimulateOptions & { out?: string }) => {
      const source = await readSource(file);
      if (typeof source.text !== "string") {
        emit(fail(`${file}: cannot read: ${source.text.error}\n`));
        return;
      }
      const result = await simulateText(file, source.text, options);
      emit(
        options.out === undefined || result.reportJson === undefined
          ? result.output
          : await writeReport(options.out, result.reportJson, result.output),
      );
    });
}
