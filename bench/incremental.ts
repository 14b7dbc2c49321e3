/**
 * Incremental-planning figures (issue #22 item 1), printed by `npm run bench` and alone by
 * `npm run bench -- incremental`: for the bench scenario at several sizes, the process CPU time of
 * the whole run and of `plan`, and how many ServingGroups change between consecutive plans (a
 * group changed when the set of pod objects the informer hands over for it differs from the
 * previous plan's; unchanged pods keep their object identity in the informer cache). From them:
 * plan CPU per changed group at a small and a large size side by side, and the growth exponent of
 * total CPU against pods created. CPU time is read here only (never in src/).
 */
import type { Pod } from "../src/api/kube.ts";
import { parsePodIdentity } from "../src/core/identity.ts";
import type { Observed } from "../src/core/observed.ts";
import type { Plan } from "../src/core/actions.ts";
import { runScenario } from "../src/sim/runner.ts";
import type { Scenario } from "../src/sim/scenario.ts";

/** What one run measured. */
export interface IncrementalMeasured {
  readonly groups: number;
  readonly pods: number;
  readonly plans: number;
  /** Sum over plans of the groups whose pods changed since the previous plan. */
  readonly changedGroups: number;
  /** Per plan, the changed groups (for the median). */
  readonly changedPerPlan: readonly number[];
  readonly totalCpuSeconds: number;
  readonly planCpuSeconds: number;
}

type PlanFunction = (observed: Observed, nowMs: number) => Plan;

function cpuSeconds(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1e6;
}

/** Group ordinal → the pods of that group, for one observation. */
function podsByGroup(owner: string, pods: readonly Pod[]): Map<number, Set<Pod>> {
  const groups = new Map<number, Set<Pod>>();
  for (const pod of pods) {
    const id = parsePodIdentity(owner, pod.metadata.name, pod.metadata.labels);
    const group = id?.group ?? -1;
    let set = groups.get(group);
    if (set === undefined) groups.set(group, (set = new Set()));
    set.add(pod);
  }
  return groups;
}

function changedGroupCount(before: Map<number, Set<Pod>>, after: Map<number, Set<Pod>>): number {
  let changed = 0;
  for (const group of new Set([...before.keys(), ...after.keys()])) {
    const a = before.get(group);
    const b = after.get(group);
    if (a === undefined || b === undefined || a.size !== b.size || [...a].some((pod) => !b.has(pod))) changed++;
  }
  return changed;
}

/** Runs `scenario` (one ModelServing named `owner`) with `plan` timed by process CPU time. */
export async function measureIncremental(
  groups: number,
  scenario: Scenario,
  owner: string,
  plan: PlanFunction,
): Promise<IncrementalMeasured> {
  let planCpu = 0;
  // The bench's own grouping of pods, not part of the run's cost.
  let overheadCpu = 0;
  let previous = new Map<number, Set<Pod>>();
  const changedPerPlan: number[] = [];
  const timed: PlanFunction = (observed, nowMs) => {
    const counting = cpuSeconds();
    const current = podsByGroup(owner, observed.pods);
    changedPerPlan.push(changedGroupCount(previous, current));
    previous = current;
    const started = cpuSeconds();
    overheadCpu += started - counting;
    const result = plan(observed, nowMs);
    planCpu += cpuSeconds() - started;
    return result;
  };
  const started = cpuSeconds();
  const report = await runScenario(scenario, { plan: timed });
  const totalCpuSeconds = cpuSeconds() - started - overheadCpu;
  if (report.verdict !== "pass") throw new Error(`bench-${groups}: verdict ${report.verdict}`);
  return {
    groups,
    pods: report.metrics.podsCreated.total,
    plans: changedPerPlan.length,
    changedGroups: changedPerPlan.reduce((sum, count) => sum + count, 0),
    changedPerPlan,
    totalCpuSeconds,
    planCpuSeconds: planCpu,
  };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

/** One line per run. */
export function printIncremental(result: IncrementalMeasured): void {
  const perChangedMs = (1000 * result.planCpuSeconds) / Math.max(1, result.changedGroups);
  console.log(
    `${String(result.groups).padStart(3)} groups: ${result.pods} pods, ${result.totalCpuSeconds.toFixed(2)} CPU s in all, ${result.plans} plans ${result.planCpuSeconds.toFixed(2)} CPU s; changed groups per plan mean ${(result.changedGroups / Math.max(1, result.plans)).toFixed(1)}, median ${median(result.changedPerPlan)}; plan CPU per changed group ${perChangedMs.toFixed(3)} ms`,
  );
}

/** Targets of issue #22 item 1. */
const PER_CHANGED_GROUP_RATIO_TARGET = 1.3;
const GROWTH_EXPONENT_TARGET = 1.05;

/**
 * Measures `sizes` (smallest first; the per-changed-group comparison uses `small` and `large`)
 * in one process and prints each run, plan CPU per changed group at `small` and `large` groups
 * side by side, and the growth exponent of total CPU against pods created from the smallest to
 * the largest size: log(cpu ratio) / log(pods ratio).
 */
export async function benchIncremental(
  sizes: { smallest: number; small: number; large: number },
  scenarioOf: (groups: number) => Scenario,
  plan: PlanFunction,
): Promise<void> {
  console.log("Incremental planning (process CPU time; issue #22 item 1)");
  const runs = new Map<number, IncrementalMeasured>();
  const run = (groups: number): IncrementalMeasured => {
    const measured = runs.get(groups);
    if (measured === undefined) throw new Error(`no run of ${groups} groups`);
    return measured;
  };
  for (const groups of new Set([sizes.smallest, sizes.small, sizes.large])) {
    const result = await measureIncremental(groups, scenarioOf(groups), "bench", plan);
    printIncremental(result);
    runs.set(groups, result);
  }
  const perChanged = (groups: number) => run(groups).planCpuSeconds / Math.max(1, run(groups).changedGroups);
  const ratio = perChanged(sizes.large) / perChanged(sizes.small);
  console.log(
    `  plan CPU per changed group: ${(1000 * perChanged(sizes.large)).toFixed(3)} ms at ${sizes.large} groups vs ${(1000 * perChanged(sizes.small)).toFixed(3)} ms at ${sizes.small} = ${ratio.toFixed(2)}× (target ≤ ${PER_CHANGED_GROUP_RATIO_TARGET}×: ${ratio <= PER_CHANGED_GROUP_RATIO_TARGET ? "met" : "missed"})`,
  );
  const first = run(sizes.smallest);
  const last = run(sizes.large);
  const exponent = Math.log(last.totalCpuSeconds / first.totalCpuSeconds) / Math.log(last.pods / first.pods);
  console.log(
    `  total CPU ${first.totalCpuSeconds.toFixed(2)} s → ${last.totalCpuSeconds.toFixed(2)} s for ${first.pods} → ${last.pods} pods: growth exponent ${exponent.toFixed(2)} (target ≤ ${GROWTH_EXPONENT_TARGET}: ${exponent <= GROWTH_EXPONENT_TARGET ? "met" : "missed"})`,
  );
}
