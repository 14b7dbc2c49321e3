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
import { benchRollout } from "./rollout.ts";
import { benchRouter } from "./router.ts";
import { parseScenario } from "../src/sim/scenario.ts";
import type { Scenario } from "../src/sim/scenario.ts";

const TARGET_RATIO = 1000;
/** The coalesced configuration's `minReconcileIntervalMs`. */
const COALESCE_MS = 1000;

const container = (image: string) => ({
  spec: { containers: [{ name: "vllm", image, resources: { limits: { "nvidia.com/gpu": "1" } } }] },
});

function roles(image: string): unknown[] {
  return [
    { name: "prefill", replicas: 2, entryTemplate: container("vllm:v1") },
    {
      name: "decode",
      replicas: 1,
      maxUnavailable: 0,
      maxSurge: 1,
      workerReplicas: 3,
      entryTemplate: container(image),
      workerTemplate: container(image),
    },
  ];
}

/** N groups need 6 GPUs each, plus room for one surge decode instance (4 GPUs) per group in flight. */
function scenario(groups: number): Scenario {
  const result = parseScenario({
    name: `bench-${groups}-groups`,
    cluster: { nodes: [{ name: "gpu", count: Math.ceil((groups * 10) / 8), gpus: 8 }] },
    steps: [
      {
        apply: {
          apiVersion: "tandem.dev/v1alpha1",
          kind: "ModelServing",
          metadata: { name: "bench" },
          spec: {
            replicas: groups,
            drain: { timeoutSeconds: 0 },
            rolloutStrategy: { type: "RoleRollingUpdate", rollingUpdateConfiguration: { maxUnavailable: "10%" } },
            template: { roles: roles("vllm:v1") },
          },
        },
      },
      { wait: { for: "Available", timeoutSeconds: 3600 } },
      { patch: { name: "bench", merge: { spec: { template: { roles: roles("vllm:v2") } } } } },
      { wait: { for: "RolloutComplete", timeoutSeconds: 36_000 } },
    ],
  });
  if (!result.ok) throw new Error(JSON.stringify(result.problems));
  return result.scenario;
}

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
  const report = await runScenario(scenario(groups), { minReconcileIntervalMs, plan: timedPlan });
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
if (first !== "router" && first !== "rollout") await benchSimulator(Number(first ?? 10), Number(second ?? 100));
if (first === undefined || first === "rollout") await benchRollout();
if (first === undefined || first === "router") await benchRouter();
