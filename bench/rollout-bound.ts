/**
 * The arithmetic of the rollout table (`bench/rollout.ts`): the lower bound of a rollout's makespan,
 * the ratios of the table's columns and whether each meets its target. Pure: no simulator here, so
 * a test checks it alone.
 *
 * The bound is what the budgets allow at best on the scenario's cluster timings: the changed units
 * move in steps of as many units as the budgets let move at once, and one step takes a unit's
 * replacement time. A role moves within its own budget, beside the other roles (a *lane*), so the
 * steps are those of the slowest lane; a dependency chain adds a floor of one step per stage (a
 * stage starts only once the one it depends on has new Ready capacity).
 */

/** How a strategy replaces a unit, which decides what one step costs. */
export type MoveKind = "delete-first" | "surge" | "in-place";

/** The cluster timings a step is made of, in seconds. */
export interface StepTiming {
  /** From a pod's creation to its Ready condition: scheduling, image pull, start. */
  readonly unitStartSeconds: number;
  /** From a container's restart with a new image to Ready: pull and start, no scheduling. */
  readonly containerStartSeconds: number;
  readonly terminationSeconds: number;
}

/** Units of one role (or of the whole group, under a group strategy) that change, and how many may move at once. */
export interface Lane {
  readonly changedUnits: number;
  readonly unitsAtOnce: number;
}

export interface BoundInput {
  readonly lanes: readonly Lane[];
  /** Stages that must start one after the other (a dependency chain's depth); 1 without dependencies. */
  readonly stages: number;
  readonly move: MoveKind;
  readonly timing: StepTiming;
}

/** ⌈changed ÷ at once⌉ of the slowest lane, at least `stages`. */
export function boundSteps(lanes: readonly Lane[], stages: number): number {
  let steps = stages;
  for (const { changedUnits, unitsAtOnce } of lanes) {
    if (changedUnits === 0) continue;
    if (!Number.isInteger(unitsAtOnce) || unitsAtOnce < 1)
      throw new Error(`unitsAtOnce must be a positive integer where units change, got ${unitsAtOnce}`);
    steps = Math.max(steps, Math.ceil(changedUnits / unitsAtOnce));
  }
  return steps;
}

/**
 * The makespan's lower bound in seconds. A delete-first step pays the old unit's termination, then
 * the new unit's start; a surge step only the start, and the last old unit's termination once at
 * the end; an in-place step restarts the containers (pull and start, no scheduling).
 */
export function boundSeconds({ lanes, stages, move, timing }: BoundInput): number {
  const steps = boundSteps(lanes, stages);
  const { unitStartSeconds, containerStartSeconds, terminationSeconds } = timing;
  switch (move) {
    case "delete-first":
      return steps * (terminationSeconds + unitStartSeconds);
    case "surge":
      return steps * unitStartSeconds + terminationSeconds;
    case "in-place":
      return steps * containerStartSeconds;
  }
}

/** The targets the table marks (issue #21). */
export const TARGETS = {
  /** makespan ≤ 1.05 × bound */
  makespanRatio: 1.05,
  /** pods created = minimum */
  podsRatio: 1,
  /** restarts of unchanged roles */
  unchangedRestarts: 0,
  /** API writes ≤ 1.2 × (creates + deletes + status changes) */
  writesRatio: 1.2,
} as const;

/** `part ÷ whole`, with 0 ÷ 0 = 1 (nothing needed, nothing done: on target). */
export function ratio(part: number, whole: number): number {
  if (whole === 0) return part === 0 ? 1 : Number.POSITIVE_INFINITY;
  return part / whole;
}

/** What one run measured, reduced to the columns. */
export interface Measures {
  readonly makespanSeconds: number;
  readonly boundSeconds: number;
  readonly podsCreated: number;
  readonly minimumPods: number;
  readonly unchangedRestarts: number;
  readonly writes: number;
  /** Creates + deletes + status changes (+ one image patch per pod updated in place). */
  readonly necessaryWrites: number;
  /** Fewest groups serving (`groupAvailable`) at the end of any instant of the rollout. */
  readonly lowestGroups: number;
  readonly desiredGroups: number;
  /** Groups the budget must keep serving: desired − maxUnavailable. */
  readonly floorGroups: number;
}

/** One column's value and whether it misses its target. */
export interface Judged {
  readonly value: number;
  readonly missed: boolean;
}

export interface Judgement {
  readonly makespan: Judged;
  readonly pods: Judged;
  readonly unchangedRestarts: Judged;
  readonly writes: Judged;
  /** Lowest capacity ÷ desired; missed when below floor ÷ desired. */
  readonly capacity: Judged;
}

/** The columns of a run and which targets they miss (a small tolerance absorbs float noise only). */
export function judge(measures: Measures): Judgement {
  const makespan = ratio(measures.makespanSeconds, measures.boundSeconds);
  const pods = ratio(measures.podsCreated, measures.minimumPods);
  const writes = ratio(measures.writes, measures.necessaryWrites);
  const capacity = ratio(measures.lowestGroups, measures.desiredGroups);
  const epsilon = 1e-9;
  return {
    makespan: { value: makespan, missed: makespan > TARGETS.makespanRatio + epsilon },
    pods: { value: pods, missed: Math.abs(pods - TARGETS.podsRatio) > epsilon },
    unchangedRestarts: {
      value: measures.unchangedRestarts,
      missed: measures.unchangedRestarts > TARGETS.unchangedRestarts,
    },
    writes: { value: writes, missed: writes > TARGETS.writesRatio + epsilon },
    capacity: { value: capacity, missed: measures.lowestGroups < measures.floorGroups },
  };
}
