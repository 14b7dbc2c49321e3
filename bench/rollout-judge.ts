/**
 * The judgement of the rollout table (`bench/rollout.ts`): the ratios of the table's columns and
 * whether each meets its target. Pure: no simulator here, so a test checks it alone. The bound
 * the makespan is measured against is `src/sim/rollout-bound.ts`, the one `tandem plan --timing`
 * prints.
 */

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
  /**
   * Creates + deletes + status changes — ModelServing status writes and the serving-gate
   * transitions each pod needs (`gateTransitions` in rollout-run.ts) — + one image patch per pod
   * updated in place.
   */
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
