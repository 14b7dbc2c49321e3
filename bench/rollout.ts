/**
 * `npm run bench -- rollout`: the rollout table (issue #21). Every shape of `rollout-cases.ts` is
 * rolled out by every strategy — Tandem's four and the two peers' behaviours replayed — in the
 * simulator, side by side in one run (virtual time, seed 1, no start jitter), and each is measured
 * against the physical limit its budgets allow (`src/sim/rollout-bound.ts`, as `tandem plan --timing` prints it): makespan ÷ lower bound, pods
 * created ÷ minimum, restarts of unchanged roles, API writes ÷ (creates + deletes + status
 * changes), lowest serving capacity ÷ desired. Each cell that misses its target is marked ✗.
 * How to read it: `docs/design/scenario-runner.md`, "Rollout table".
 */
import { runCase } from "./rollout-run.ts";
import type { CaseResult } from "./rollout-run.ts";
import { SHAPES, STRATEGIES, TIMING } from "./rollout-cases.ts";
import { TARGETS, judge } from "./rollout-judge.ts";
import type { Judged } from "./rollout-judge.ts";

const MISS = " ✗";

/** Runs every case in order and prints the table, its targets and notes. */
export async function benchRollout(): Promise<CaseResult[]> {
  const cpuBefore = process.cpuUsage();
  const results: CaseResult[] = [];
  for (const shape of SHAPES) for (const strategy of STRATEGIES) results.push(await runCase(shape, strategy));
  const cpu = process.cpuUsage(cpuBefore);
  for (const line of tableLines(results)) console.log(line);
  console.log(`  ${results.length} runs took ${((cpu.user + cpu.system) / 1e6).toFixed(1)} s of CPU`);
  return results;
}

/** The heading, the table, the targets and the notes, as printed. */
export function tableLines(results: readonly CaseResult[]): string[] {
  const header = [
    "shape",
    "strategy",
    "makespan ÷ bound",
    "pods ÷ minimum",
    "unchanged-role restarts",
    "writes ÷ needed",
    "capacity ÷ desired",
  ];
  return [
    `Rollout table: one run per cell in the simulator (virtual time, seed 1, no start jitter); a unit starts in ${TIMING.scheduleSeconds + TIMING.startSeconds} s (schedule ${TIMING.scheduleSeconds} + start ${TIMING.startSeconds}), a container restarts in ${TIMING.pullSeconds + TIMING.startSeconds} s, a pod terminates in ${TIMING.terminationSeconds} s`,
    `Targets: makespan ≤ ${TARGETS.makespanRatio} × bound; pods created = minimum; unchanged-role restarts = ${TARGETS.unchangedRestarts}; writes ≤ ${TARGETS.writesRatio} × needed; capacity never below the budget's floor.${MISS} marks a miss.`,
    "",
    ...aligned([header, ...results.map(row)]),
    "",
    ...notes(results),
  ];
}

function cell(judged: Judged, detail: string, digits = 2): string {
  const value = Number.isFinite(judged.value) ? judged.value.toFixed(digits) : "∞";
  return `${value}${judged.missed ? MISS : ""} (${detail})`;
}

function row(result: CaseResult): string[] {
  const { measures } = result;
  const judged = judge(measures);
  const seconds = (value: number) => value.toFixed(0);
  return [
    result.shape.name,
    `${result.strategy.label}${result.completed ? "" : " (did not finish)"}`,
    cell(judged.makespan, `${seconds(measures.makespanSeconds)} / ${seconds(measures.boundSeconds)} s`),
    cell(judged.pods, `${measures.podsCreated} / ${measures.minimumPods}`),
    `${measures.unchangedRestarts}${judged.unchangedRestarts.missed ? MISS : ""}`,
    cell(judged.writes, `${measures.writes} / ${measures.necessaryWrites}`),
    cell(judged.capacity, `${measures.lowestGroups} / ${measures.desiredGroups}, floor ${measures.floorGroups}`),
  ];
}

/** Rows of cells as lines, each column as wide as its widest cell. */
export function aligned(rows: readonly (readonly string[])[]): string[] {
  const widths: number[] = [];
  for (const cells of rows)
    cells.forEach((text, column) => (widths[column] = Math.max(widths[column] ?? 0, text.length)));
  return rows.map((cells) =>
    cells
      .map((text, column) => text.padEnd(widths[column] ?? 0))
      .join("  ")
      .trimEnd(),
  );
}

/** How each column is computed, the peers' replay, and what each run left unusual. */
function notes(results: readonly CaseResult[]): string[] {
  return [
    "Notes:",
    "- bound = what `tandem plan --timing` prints for the same specs (src/sim/rollout-bound.ts): per changed role (a lane; the groups under the group strategies) ⌈changed units ÷ units its budgets let move at once⌉ steps, the slowest lane deciding and a 3-role chain taking at least 3 steps; a step costs termination + unit start when the old unit goes first, a unit start with surge (plus one termination at the end), a container restart in place. StatefulSet: its changed pods one at a time, old pod first. Without surge the chain's outermost role also waits, in each batch of groups, for one start of its dependencies (the dependency gate).",
    "- units: groups under ServingGroupRollingUpdate, InPlaceUpdate and group recreate (Tandem budget 25% of the groups, peers 1 group); role instances under RoleRollingUpdate (1 per role and group, or surge 1 with maxUnavailable 0, in 25% of the groups at once); pods, one at a time, for StatefulSet.",
    "- pods ÷ minimum: pods created during the rollout ÷ pods of the role instances whose spec changes (in place: 0, nothing needs creating).",
    "- unchanged-role restarts: pods of roles whose spec did not change that the rollout created, plus their container restarts.",
    "- writes ÷ needed: the controller's API writes during the rollout ÷ its creates and deletes (pods, Services, revisions) + status changes (ModelServing status writes; the serving gate of each pod, opened once on a pod created, closed once on a pod deleted, closed and opened on a pod patched in place — a pod cannot be created with a status) + one image patch per pod updated in place. The drain mark (DESIGN §3.2), the release of the recovery finalizer (pod-tracking.md) and an in-place relabel go in the gate's write (a pod's status write takes its labels, annotations and finalizers too); what is left beyond is listed below.",
    "- capacity ÷ desired: fewest ServingGroups serving (the core's groupAvailable: every role at its desired count of available instances, surge counted) at the end of any instant of the rollout; floor = desired − the group maxUnavailable (StatefulSet: desired − 1, one pod down at a time).",
    "- peers: group recreate is Tandem's ServingGroupRollingUpdate with LWS's and Kthena's defaults (maxUnavailable 1, maxSurge 0) and no drain — the same mechanism, so the same pods go and come under the same budget; the writes are the replay's, not the peers'. StatefulSet is a peer plan (bench/peers/statefulset.ts) run by the real engine in place of the core; the simulator does not make the other ranks of a multi-node instance restart when one is replaced, so its restarts are a floor.",
    ...extraWrites(results),
    ...results.flatMap(exceptions),
  ];
}

/** The writes beyond the needed ones, by strategy over every shape: where the writes ratio goes. */
function extraWrites(results: readonly CaseResult[]): string[] {
  return STRATEGIES.map((strategy) => {
    const sum: Record<string, number> = {};
    for (const result of results)
      if (result.strategy.name === strategy.name)
        for (const [key, count] of Object.entries(result.extraWrites)) sum[key] = (sum[key] ?? 0) + count;
    const parts = Object.entries(sum)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, count]) => `${key} ${count}`);
    return `- writes beyond the needed, ${strategy.label}: ${parts.length === 0 ? "none" : parts.join(", ")}`;
  });
}

function exceptions(result: CaseResult): string[] {
  const label = `${result.shape.name}, ${result.strategy.label}`;
  const lines: string[] = [];
  if (result.failure !== undefined) lines.push(`- ${label}: did not finish: ${result.failure}`);
  if (result.brokenInvariants.length > 0)
    lines.push(`- ${label}: broke Tandem's invariants ${result.brokenInvariants.join(", ")}`);
  return lines;
}
