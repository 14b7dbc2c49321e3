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
 * replays it. Exits 1 when any run failed. Expected failures are reported too: a rollout that
 * waits for capacity it cannot get, InPlaceIneligible.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
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

function options(argv: readonly string[]): Options {
  const { values } = parseArgs({ args: [...argv], options: { from: { type: "string", default: "1" }, count: { type: "string", default: "100" }, seeds: { type: "string", default: "1,2" }, faults: { type: "boolean", default: false }, coordination: { type: "boolean", default: false }, crash: { type: "boolean", default: false }, gang: { type: "boolean", default: false }, out: { type: "string", default: ".cache/fuzz" } } });
  const integer = (name: string, text: string): number => {
    const value = Number(text);
    if (!Number.isSafeInteger(value) || value < 0) throw new Error(`--${name}: "${text}" is not a non-negative integer`);
    return value;
  };
  return { from: integer("from", values.from), count: integer("count", values.count), seeds: values.seeds.split(",").map((text) => integer("seeds", text)), faults: values.faults, coordination: values.coordination, crash: values.crash, gang: values.gang, out: values.out };
}

/** Runs one generated scenario at one seed; the failure line, or undefined when it passed. */
async function failure(scenario: Record<string, unknown>, seed: number, faults: boolean): Promise<string | undefined> {
  const parsed = parseScenario(scenario);
  if (!parsed.ok) return `generator bug: ${JSON.stringify(parsed.problems)}`;
  const report = await runScenario(parsed.scenario, { seed, ...(faults ? { chaos: fuzzChaos(parsed.scenario) } : {}) });
  const violated = report.invariants.filter((result) => result.violations > 0).map((result) => `${result.name} at ${result.first?.t ?? "?"} s: ${result.first?.message ?? ""}`);
  const failedStep = report.steps.find((step) => !step.ok);
  if (violated.length === 0 && failedStep === undefined) return undefined;
  return [...violated, ...(failedStep === undefined ? [] : [`step: ${failedStep.message}`])].join("; ");
}

async function main(): Promise<number> {
  const { from, count, seeds, faults, coordination, crash, gang, out } = options(process.argv.slice(2));
  mkdirSync(out, { recursive: true });
  let failed = 0;
  for (let generatorSeed = from; generatorSeed < from + count; generatorSeed++) {
    const scenario = fuzzScenario(generatorSeed, { faults, coordination, crash, gang });
    for (const seed of seeds) {
      const message = await failure(scenario, seed, faults);
      if (message === undefined) continue;
      failed += 1;
      const file = join(out, `${String(scenario["name"])}-seed-${seed}.json`);
      writeFileSync(file, `${JSON.stringify({ ...scenario, seed })}\n`);
      // A scenario file cannot hold the API and watch faults: the fuzz replays those runs exactly.
      const flags = ["--faults", ...(coordination ? ["--coordination"] : []), ...(crash ? ["--crash"] : []), ...(gang ? ["--gang"] : [])].join(" ");
      const replay = faults ? `npm run fuzz -- ${flags} --from ${generatorSeed} --count 1 --seeds ${seed} (${file} without API faults: tandem simulate)` : `tandem simulate ${file}`;
      console.log(`${String(scenario["name"])} seed ${seed}: ${message}\n  replay: ${replay}`);
    }
  }
  console.log(`${count * seeds.length} runs, ${failed} failed`);
  return failed === 0 ? 0 : 1;
}

process.exitCode = await main();
