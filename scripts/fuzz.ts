/**
 * `npm run fuzz -- [--from N] [--count N] [--seeds 1,2] [--faults] [--coordination] [--crash] [--gang] [--out DIR]`: runs the random
 * scenarios of generator seeds from..from+count-1 (src/sim/fuzz.ts; with `--faults`, the same
 * scenarios with node outages, controller restarts, pod deletions and rollbacks added, run with
 * failing API requests and dropped watches; with `--coordination`, with coordinated role updates
 * now and then; with `--crash`, with roles moved to crashing images and recovered now and then;
 * with `--gang`, with a gang policy now and then), each at every scenario seed given, with
 * every invariant checked. Prints one line per failing run (generator seed, scenario seed, the
 * violated invariants with their first message, or the failed step) and writes each failing
 * scenario to DIR (default .cache/fuzz) with its seed, so `tandem simulate DIR/fuzz-N-seed-S.json`
 * replays it. Each failure is named by kind (`Failure`): an invariant violated, a stall while the
 * status says Converged (a bug), or a wait whose reason the status gives (often expected: a
 * rollout that waits for capacity it cannot get, InPlaceIneligible); the last line counts them.
 * Exits 1 when any run failed.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { ModelServingStatus } from "../src/api/schema.ts";
import { fuzzChaos, fuzzScenario } from "../src/sim/fuzz.ts";
import { runScenario } from "../src/sim/runner.ts";
import { parseScenario } from "../src/sim/scenario.ts";

interface Options {
  readonly from: number;
  readonly count: number;
  readonly seeds: readonly number[];
  readonly faults: boolean;
  readonly coordination: boolean;
  readonly crash: boolean;
  readonly gang: boolean;
  readonly out: string;
}

const USAGE =
  "usage: npm run fuzz -- [--from N] [--count N] [--seeds 1,2] [--faults] [--coordination] [--crash] [--gang] [--out DIR]";

/** The options, or the exit code when there is nothing to run: 0 after `--help`, 2 for bad flags (said on stderr). */
function options(argv: readonly string[]): Options | number {
  try {
    const parsed = parseOptions(argv);
    if (!parsed.help) return parsed;
    console.log(USAGE);
    return 0;
  } catch (error) {
    console.error(`fuzz: ${error instanceof Error ? error.message : String(error)}\n${USAGE}`);
    return 2;
  }
}

function parseOptions(argv: readonly string[]): Options & { readonly help: boolean } {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      help: { type: "boolean", default: false },
      from: { type: "string", default: "1" },
      count: { type: "string", default: "100" },
      seeds: { type: "string", default: "1,2" },
      faults: { type: "boolean", default: false },
      coordination: { type: "boolean", default: false },
      crash: { type: "boolean", default: false },
      gang: { type: "boolean", default: false },
      out: { type: "string", default: ".cache/fuzz" },
    },
  });
  const integer = (name: string, text: string): number => {
    const value = Number(text);
    if (!Number.isSafeInteger(value) || value < 0)
      throw new Error(`--${name}: "${text}" is not a non-negative integer`);
    return value;
  };
  return {
    help: values.help,
    from: integer("from", values.from),
    count: integer("count", values.count),
    seeds: values.seeds.split(",").map((text) => integer("seeds", text)),
    faults: values.faults,
    coordination: values.coordination,
    crash: values.crash,
    gang: values.gang,
    out: values.out,
  };
}

/**
 * How a failed run ended. `violation`: an invariant broke. `stalled`: a wait failed while the
 * final status says Converged (nothing to do): the controller stopped short without saying why,
 * always a bug (fuzz-faults-coordinated-crash-gang-925). `waiting`: a wait failed and the status
 * says why (`reason`: the RolloutBlocked reason when set, else the Progressing one), which is
 * expected of a scenario that cannot finish (no capacity with maxUnavailable 0, InPlaceIneligible,
 * DependencyNeedsSurge, a partition that holds a dependency) and worth a look otherwise.
 */
interface Failure {
  readonly kind: "violation" | "stalled" | "waiting";
  readonly reason: string;
  readonly message: string;
}

/** Runs one generated scenario at one seed; how it failed, or undefined when it passed. */
async function failure(scenario: Record<string, unknown>, seed: number, faults: boolean): Promise<Failure | undefined> {
  const parsed = parseScenario(scenario);
  if (!parsed.ok)
    return { kind: "violation", reason: "generator bug", message: `generator bug: ${JSON.stringify(parsed.problems)}` };
  const report = await runScenario(parsed.scenario, { seed, ...(faults ? { chaos: fuzzChaos(parsed.scenario) } : {}) });
  const violated = report.invariants
    .filter((result) => result.violations > 0)
    .map((result) => `${result.name} at ${result.first?.t ?? "?"} s: ${result.first?.message ?? ""}`);
  const failedStep = report.steps.find((step) => !step.ok);
  if (violated.length === 0 && failedStep === undefined) return undefined;
  const message = [...violated, ...(failedStep === undefined ? [] : [`step: ${failedStep.message}`])].join("; ");
  if (violated.length > 0)
    return {
      kind: "violation",
      reason: report.invariants
        .filter((result) => result.violations > 0)
        .map((result) => result.name)
        .join(", "),
      message,
    };
  const conditions = (report.final.status as ModelServingStatus | null)?.conditions ?? [];
  const progressing = conditions.find((condition) => condition.type === "Progressing");
  const blocked = conditions.find((condition) => condition.type === "RolloutBlocked" && condition.status === "True");
  if (progressing?.status === "False" && progressing.reason === "Converged")
    return { kind: "stalled", reason: "Converged", message: `${message} (the status says Converged)` };
  const reason = blocked?.reason ?? progressing?.reason ?? "no Progressing condition";
  // What the status tells a person, so a sweep shows every wait is explained (cut: waits list many units).
  const said = (blocked ?? progressing)?.message ?? "";
  return {
    kind: "waiting",
    reason,
    message: `${message} (status: ${reason}: ${said.length > 240 ? `${said.slice(0, 240)}…` : said})`,
  };
}

/** One line for the failures of a sweep: how many of each kind, the waits by reason. */
function summary(runs: number, failures: readonly Failure[]): string {
  const count = (kind: Failure["kind"]) => failures.filter((each) => each.kind === kind).length;
  const reasons = new Map<string, number>();
  for (const each of failures)
    if (each.kind === "waiting") reasons.set(each.reason, (reasons.get(each.reason) ?? 0) + 1);
  const byReason = [...reasons]
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([reason, n]) => `${reason} ${n}`)
    .join(", ");
  return `${runs} runs, ${failures.length} failed: ${count("violation")} violated an invariant, ${count("stalled")} stalled while the status said Converged, ${count("waiting")} wait with the reason in the status${byReason === "" ? "" : ` (${byReason})`}`;
}

async function main(): Promise<number> {
  const parsed = options(process.argv.slice(2));
  if (typeof parsed === "number") return parsed;
  const { from, count, seeds, faults, coordination, crash, gang, out } = parsed;
  mkdirSync(out, { recursive: true });
  const failures: Failure[] = [];
  for (let generatorSeed = from; generatorSeed < from + count; generatorSeed++) {
    const scenario = fuzzScenario(generatorSeed, { faults, coordination, crash, gang });
    for (const seed of seeds) {
      const failed = await failure(scenario, seed, faults);
      if (failed === undefined) continue;
      failures.push(failed);
      const file = join(out, `${String(scenario["name"])}-seed-${seed}.json`);
      writeFileSync(file, `${JSON.stringify({ ...scenario, seed })}\n`);
      // A scenario file cannot hold the API and watch faults: the fuzz replays those runs exactly.
      const flags = [
        "--faults",
        ...(coordination ? ["--coordination"] : []),
        ...(crash ? ["--crash"] : []),
        ...(gang ? ["--gang"] : []),
      ].join(" ");
      const replay = faults
        ? `npm run fuzz -- ${flags} --from ${generatorSeed} --count 1 --seeds ${seed} (${file} without API faults: tandem simulate)`
        : `tandem simulate ${file}`;
      console.log(`${String(scenario["name"])} seed ${seed}: ${failed.kind}: ${failed.message}\n  replay: ${replay}`);
    }
  }
  console.log(summary(count * seeds.length, failures));
  return failures.length === 0 ? 0 : 1;
}

process.exitCode = await main();
