/**
 * `npm run bench`: simulator speed in simulated seconds per wall second, for the creation and a
 * decode-image rollout of N ServingGroups of 2 prefill + 1 decode instance (entry + 3 workers),
 * run by the real controller and checked by every invariant. Runs a 10-group and a 100-group
 * scenario side by side in one process, so their ratio is comparable on any machine; the target
 * is ≥ 1,000× for 100 groups. Wall-clock time is read here only (never in src/).
 *
 * Two controller configurations are measured:
 * - **default**: the controller as in production and in `tandem simulate` (every event makes its
 *   key ready at once), so the reports are the ones the tests and users see;
 * - **coalesced**: `minReconcileIntervalMs` = `COALESCE_MS` (a key is planned at most once per
 *   that much virtual time), which bounds plans per simulated second; its reports differ (every
 *   invariant is still checked, and the verdict is printed).
 *
 * Each run also prints the wall time spent inside the core's `plan` and what is left without it
 * (the simulated cluster, the engine, the checker): the speed the run would have were plans free,
 * an upper bound on what planner work alone can gain.
 *
 * Then the incremental-planning figures (`bench/incremental.ts`): plan CPU per changed group at 30
 * and 300 groups and the growth exponent of total CPU from 10 to 300 groups, by process CPU time.
 * `npm run bench -- incremental` runs only that one.
 *
 * Then the rollout table (`bench/rollout.ts`): every strategy, Tandem's and the peers' replayed,
 * on four shapes, against the lower bound their budgets allow. `npm run bench -- rollout` runs
 * only that one.
 *
 * Then the router benchmark (`bench/router.ts`): Tandem's router against the engine directly,
 * nginx and SGLang's router, side by side. `npm run bench -- router` runs only that one,
 * `npm run bench -- SMALL LARGE` only the simulator's.
 */
import { performance } from "node:perf_hooks";
import { plan } from "../src/core/plan.ts";
import type { Observed } from "../src/core/observed.ts";
import { runScenario } from "../src/sim/runner.ts";
import { benchIncremental } from "./incremental.ts";
import { benchRollout } from "./rollout.ts";
import { benchRouter } from "./router.ts";
import { benchScenario } from "./scenario.ts";

const TARGET_RATIO = 1000;
/** The coalesced configuration's `minReconcileIntervalMs`. */
const COALESCE_MS = 1000;

interface Measured {
  groups: number;
  config: string;
  verdict: string;
  simulatedSeconds: number;
  wallSeconds: number;
  ratio: number;
  pods: number;
  plans: number;
  /** Wall time spent inside the core's `plan`, part of `wallSeconds`. */
  planSeconds: number;
}

async function measure(groups: number, minReconcileIntervalMs: number): Promise<Measured> {
  const config = minReconcileIntervalMs === 0 ? "default" : `coalesced ${minReconcileIntervalMs} ms`;
  let plans = 0;
  let planMs = 0;
  // The core's own `plan`, timed: what planning costs against everything else (the simulated
  // cluster, the engine, the checker), measured in the same run.
  const timedPlan = (observed: Observed, nowMs: number) => {
    const planStarted = performance.now();
    const result = plan(observed, nowMs);
    planMs += performance.now() - planStarted;
    plans++;
    return result;
  };
  const started = performance.now();
  const report = await runScenario(benchScenario(groups), { minReconcileIntervalMs, plan: timedPlan });
  const wallSeconds = (performance.now() - started) / 1000;
  const pods = report.metrics.podsCreated.total;
  return {
    groups,
    config,
    verdict: report.verdict,
    simulatedSeconds: report.simulatedSeconds,
    wallSeconds,
    ratio: report.simulatedSeconds / wallSeconds,
    pods,
    plans,
    planSeconds: planMs / 1000,
  };
}

function print(result: Measured): Measured {
  console.log(
    `${String(result.groups).padStart(3)} groups, ${result.config}: ${result.verdict}, ${result.pods} pods created, ${result.simulatedSeconds.toFixed(0)} s simulated in ${result.wallSeconds.toFixed(2)} s wall = ${result.ratio.toFixed(1)}× real time`,
  );
  const restSeconds = result.wallSeconds - result.planSeconds;
  console.log(
    `      ${result.plans} plans took ${result.planSeconds.toFixed(2)} s (${((100 * result.planSeconds) / result.wallSeconds).toFixed(0)} %, ${((1000 * result.planSeconds) / result.plans).toFixed(2)} ms a plan); the rest (simulated cluster, engine, checker) ${restSeconds.toFixed(2)} s = ${(result.simulatedSeconds / restSeconds).toFixed(0)}× real time were plans free`,
  );
  return result;
}

/** Measures both sizes under one configuration and prints how the larger scales against the smaller. */
async function compare(smallGroups: number, largeGroups: number, minReconcileIntervalMs: number): Promise<Measured> {
  const small = print(await measure(smallGroups, minReconcileIntervalMs));
  const large = print(await measure(largeGroups, minReconcileIntervalMs));
  console.log(
    `  ${largeGroups} groups run at ${(large.ratio / small.ratio).toFixed(2)}× the speed of ${smallGroups} groups (same process, same machine)`,
  );
  return large;
}

/** `npm run bench -- SMALL LARGE` picks other sizes (default 10 and 100 groups) and skips the router's. */
async function benchSimulator(smallGroups: number, largeGroups: number): Promise<void> {
  for (const minReconcileIntervalMs of [0, COALESCE_MS]) {
    const large = await compare(smallGroups, largeGroups, minReconcileIntervalMs);
    const verdict = large.ratio >= TARGET_RATIO ? "target met" : "target missed";
    console.log(
      `  ${verdict}: ${large.ratio.toFixed(1)}× real time for ${largeGroups} groups, ${large.config} (target ≥ ${TARGET_RATIO}× for 100 groups)`,
    );
  }
}

const [first, second] = process.argv.slice(2);
const sections = ["router", "rollout", "incremental"];
if (first === undefined || !sections.includes(first)) await benchSimulator(Number(first ?? 10), Number(second ?? 100));
if (first === undefined || first === "incremental")
  await benchIncremental({ smallest: 10, small: 30, large: 300 }, benchScenario, plan);
if (first === undefined || first === "rollout") await benchRollout();
if (first === undefined || first === "router") await benchRouter();
