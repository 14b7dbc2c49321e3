/**
 * The text `tandem plan` prints: a header naming the strategy and what changes, one row per step
 * (the instant some units start), the totals, and with `--timing` the makespan beside the bound.
 * Units are named compactly: groups and ordinals as ranges (`g0-3`, `decode 0-2 @ g1`).
 */
import type { ModelServing } from "../api/schema.ts";
import type { PricedLane, RolloutBound } from "../sim/rollout-bound.ts";
import type { PlayedRollout } from "../sim/rollout-preview.ts";
import type { Capacity, RolloutStep, StartKind, UnitStart } from "../sim/rollout-steps.ts";
import { ordinalOf } from "../sim/rollout-steps.ts";

/** `0-3,5` for [0, 1, 2, 3, 5]. */
export function ranges(values: readonly number[]): string {
  const sorted = [...new Set(values)].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let index = 0; index < sorted.length;) {
    let end = index;
    while (end + 1 < sorted.length && (sorted[end + 1] ?? 0) === (sorted[end] ?? 0) + 1) end++;
    parts.push(end === index ? `${sorted[index]}` : `${sorted[index]}-${sorted[end]}`);
    index = end + 1;
  }
  return parts.join(",");
}

const KIND_ORDER: readonly StartKind[] = ["surge", "recreate", "new", "in-place"];

/** Whole groups (group strategies): `g7-9 (recreate)`; role instances: `decode 0 @ g0-3 (surge)`. */
function describeUnits(units: readonly (Omit<UnitStart, "kind"> & { kind?: StartKind })[], byGroup: boolean): string {
  const parts: string[] = [];
  for (const kind of [...KIND_ORDER, undefined]) {
    const own = units.filter((unit) => unit.kind === kind);
    if (own.length === 0) continue;
    const suffix = kind === undefined ? "" : ` (${kind})`;
    if (byGroup) {
      parts.push(`g${ranges(own.map((unit) => unit.group))}${suffix}`);
      continue;
    }
    for (const [role, ordinalsByGroup] of byRole(own)) {
      const buckets = new Map<string, number[]>();
      for (const [group, ordinals] of ordinalsByGroup) {
        const key = ranges(ordinals);
        buckets.set(key, [...(buckets.get(key) ?? []), group]);
      }
      for (const [ordinals, groups] of buckets) parts.push(`${role} ${ordinals} @ g${ranges(groups)}${suffix}`);
    }
  }
  return parts.join("; ");
}

/** role → group → ordinals, roles in the order first seen. */
function byRole(units: readonly Omit<UnitStart, "kind">[]): Map<string, Map<number, number[]>> {
  const roles = new Map<string, Map<number, number[]>>();
  for (const unit of units) {
    const groups = roles.get(unit.role) ?? new Map<number, number[]>();
    roles.set(unit.role, groups);
    groups.set(unit.group, [...(groups.get(unit.group) ?? []), ordinalOf(unit.instance)]);
  }
  return roles;
}

/** `groups 3/4; decode 7/8` — serving groups, then the changed roles' serving instances. */
function describeCapacity(capacity: Capacity, ms: ModelServing, roles: readonly string[]): string {
  const parts = [`groups ${capacity.groups}/${ms.spec.replicas}`];
  for (const role of ms.spec.template.roles)
    if (roles.includes(role.name))
      parts.push(`${role.name} ${capacity.roles[role.name] ?? 0}/${ms.spec.replicas * role.replicas}`);
  return parts.join("; ");
}

function strategyLine(ms: ModelServing): string {
  const strategy = ms.spec.rolloutStrategy;
  const coordination = strategy.coordination;
  const coordinated = coordination === undefined ? "" : ` (coordinated, maxSkew ${coordination.maxSkew})`;
  return `ModelServing/${ms.metadata.name}: ${strategy.type}${coordinated}, ${ms.spec.replicas} group(s)`;
}

/** The step table of the idealised play, with the unit start cycle it was played at. */
export function renderPlan(ms: ModelServing, played: PlayedRollout, bound: RolloutBound, cycleSeconds: number): string {
  const byGroup = ms.spec.rolloutStrategy.type !== "RoleRollingUpdate";
  const out = [
    strategyLine(ms),
    `changed: ${bound.changedUnits} ${bound.unit}(s) at or above the partitions${byLane(bound, "changedUnits")}; the budgets let ${bound.atOnce} move at once${byLane(bound, "unitsAtOnce")}`,
    `played by the controller in the simulator: room for every pod, each unit starting in ${cycleSeconds}s, no faults`,
  ];
  const rows = played.steps.map((step, index) => [
    String(index + 1),
    step.atSeconds.toFixed(1),
    describeUnits(step.starts, byGroup) + retiredText(step, byGroup),
    String(byGroup ? step.surgeGroups : step.surge),
    describeCapacity(step.floor, ms, byGroup ? [] : bound.roles),
  ]);
  out.push(...table(["step", "at (s)", "starts (g = group)", "surge", "lowest serving"], rows));
  out.push(summary(played, bound, byGroup));
  return `${out.join("\n")}\n`;
}

function retiredText(step: RolloutStep, byGroup: boolean): string {
  return step.retired.length === 0 ? "" : `; removed: ${describeUnits(step.retired, byGroup)}`;
}

function summary(played: PlayedRollout, bound: RolloutBound, byGroup: boolean): string {
  const starts = played.steps.reduce(
    (sum, step) => sum + (byGroup ? new Set(step.starts.map((start) => start.group)).size : step.starts.length),
    0,
  );
  const totals = `${starts} ${bound.unit} start(s) for ${bound.changedUnits} changed, ${played.podsCreated} pod(s) created, ${played.podsDeleted} deleted`;
  if (played.complete) return `complete after ${played.steps.length} step(s): ${totals}`;
  return `blocked after ${played.steps.length} step(s) (${totals}): ${played.reason ?? "the rollout did not complete"}`;
}

/** ` (prefill 8, decode 4)`: a count per role lane, when there are role lanes. */
function byLane(bound: RolloutBound, count: "changedUnits" | "unitsAtOnce"): string {
  const parts = bound.lanes.flatMap((lane) => (lane.role === undefined ? [] : [`${lane.role} ${lane[count]}`]));
  return parts.length === 0 ? "" : ` (${parts.join(", ")})`;
}

/** `8 step(s) × (5s termination + 91s unit start) + 20s first pull`: what the lane's steps cost. */
function priceText(lane: PricedLane): string {
  const { scheduleSeconds, startSeconds, pullSeconds, terminationSeconds } = lane.timing;
  const pull = pullSeconds > 0 ? ` + ${pullSeconds}s first pull` : "";
  const unitStart = `${scheduleSeconds + startSeconds}s unit start`;
  const gate =
    lane.gate === undefined
      ? ""
      : ` + ${lane.gate.waits} dependency wait(s) × ${lane.gate.seconds}s (its dependencies' new Ready capacity first, per batch of groups)`;
  switch (lane.move) {
    case "delete-first":
      return `${lane.steps} step(s) × (${terminationSeconds}s termination + ${unitStart})${pull}${gate}`;
    case "surge":
      return `${lane.steps} surge step(s) × ${unitStart}${pull} + ${terminationSeconds}s last termination`;
    case "in-place":
      return `${lane.steps} step(s) × ${startSeconds}s container start${pull}`;
  }
}

/** `set by decode: ⌈4 changed instance(s) ÷ 4 at once⌉ = 1 surge step(s) × …`, or the chain's floor. */
function boundText(bound: RolloutBound): string {
  const decided = bound.decidedBy;
  if (decided === undefined) return ": nothing above the partitions changes";
  const { lane } = decided;
  const cost = priceText(lane);
  if (decided.stageFloor)
    return `set by the ${bound.stages}-stage dependency chain (cheapest: ${lane.role ?? ""}): ${cost}`;
  const steps = `⌈${lane.changedUnits} changed ${bound.unit}(s) ÷ ${lane.unitsAtOnce} at once⌉ = ${cost}`;
  return lane.role === undefined ? ` = ${steps}` : `, set by ${lane.role}: ${steps}`;
}

/** `--timing`: the played makespan, the bound and their ratio. */
export function renderTiming(label: string, played: PlayedRollout, bound: RolloutBound): string {
  const ratio = bound.boundSeconds === 0 ? "n/a" : (played.makespanSeconds / bound.boundSeconds).toFixed(2);
  const makespan = played.complete
    ? `${played.makespanSeconds}s`
    : `not complete after ${played.makespanSeconds}s (${played.reason ?? "the rollout did not complete"})`;
  return [
    `timing on ${label}:`,
    `  estimated makespan ${makespan}`,
    `  lower bound ${bound.boundSeconds}s${boundText(bound)}`,
    `  makespan ÷ bound ${ratio}`,
    "",
  ].join("\n");
}

/** Left-aligned columns, the last one unpadded. */
function table(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]?.length ?? 0)));
  const line = (row: readonly string[]) =>
    row
      .map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column] ?? 0)))
      .join("  ")
      .trimEnd();
  return [line(header), ...rows.map(line)];
}
