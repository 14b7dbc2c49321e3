/**
 * A pure model of a coordinated rollout in one ServingGroup, without a cluster: each step admits
 * what the coordinator (`startPermits`, the same function the controller decides with) and the
 * role budgets allow, then assumes every started instance becomes Ready before the next step.
 * The coordinator's tests use it to check skew, dependency and teardown properties over many
 * random role graphs, which playing each in the simulator would make slow. It is no longer what
 * `tandem plan` prints: that table is the controller's own sequence, played in the simulator
 * (`src/sim/rollout-preview.ts`). Pure.
 */
import type { CoordinationConfig, RoleProgress } from "./coordination.ts";
import { startPermits } from "./coordination.ts";

export interface PreviewRole {
  readonly role: string;
  /** Eligible instances (replicas above the role partition). */
  readonly eligible: number;
  /** Old instances below the partition: they keep serving and never move. */
  readonly protected: number;
  readonly maxUnavailable: number;
  readonly maxSurge: number;
}

/**
 * One step, per role: new instances started (cumulative, surge included, at most the eligible
 * count), new Ready capacity at the end of the step (the coordinator's progress numerator, surge
 * included, at most the eligible count), and old instances still serving.
 */
export interface PreviewStep {
  readonly started: Readonly<Record<string, number>>;
  readonly ready: Readonly<Record<string, number>>;
  readonly old: Readonly<Record<string, number>>;
}

export interface Preview {
  readonly steps: readonly PreviewStep[];
  /** Why the rollout cannot complete, when it cannot. */
  readonly blocked: string | undefined;
}

interface RoleState {
  /** Old instances replaced by new Ready ones. */
  readyNew: number;
  /** Ready surge instances. */
  surgeReady: number;
}

function progressOf(role: PreviewRole, state: RoleState): RoleProgress {
  return {
    role: role.role,
    eligible: role.eligible,
    readyNew: Math.min(role.eligible, state.readyNew + state.surgeReady),
    inFlight: 0,
    newCapacity: state.readyNew + state.surgeReady,
    oldServing: role.protected + role.eligible - state.readyNew,
    oldBelowPartition: role.protected,
    active: state.readyNew < role.eligible,
    maxSurge: role.maxSurge,
  };
}

/** Simulates the rollout step by step, at most `maxSteps` steps. */
export function previewCoordinatedRollout(
  roles: readonly PreviewRole[],
  config: CoordinationConfig,
  maxSteps = 1000,
): Preview {
  const states = new Map(roles.map((role) => [role.role, { readyNew: 0, surgeReady: 0 }]));
  const steps: PreviewStep[] = [];
  for (let step = 0; step < maxSteps; step++) {
    if (roles.every((role) => states.get(role.role)?.readyNew === role.eligible)) return { steps, blocked: undefined };
    const permits = startPermits(
      roles.map((role) => progressOf(role, states.get(role.role) ?? { readyNew: 0, surgeReady: 0 })),
      config,
    );
    const started: Record<string, number> = {};
    for (const role of roles) {
      const state = states.get(role.role) ?? { readyNew: 0, surgeReady: 0 };
      const permit = permits.get(role.role);
      const remaining = role.eligible - state.readyNew;
      let quota = remaining === 0 ? 0 : (permit?.quota ?? 0);
      // New surge instances first (they are starts too), then replacements: up to maxUnavailable
      // beyond the Ready surge capacity, and never past the retire limit.
      const newSurge = Math.min(Math.max(0, role.maxSurge - state.surgeReady), remaining, quota);
      quota -= newSurge;
      const retirable = Math.min(remaining, permit?.retireLimit ?? remaining);
      // Swaps backed by Ready surge capacity that is already full progress need no start; others
      // take a start and the budget.
      const swapped = permit?.fullProgress === true ? Math.min(state.surgeReady, retirable) : 0;
      const replaced = swapped + Math.min(quota, retirable - swapped, role.maxUnavailable + state.surgeReady - swapped);
      started[role.role] = Math.min(role.eligible, state.readyNew + replaced + state.surgeReady + newSurge);
      state.readyNew += replaced;
      state.surgeReady = state.readyNew === role.eligible ? 0 : state.surgeReady + newSurge;
    }
    const after = roles.map((role) => progressOf(role, states.get(role.role) ?? { readyNew: 0, surgeReady: 0 }));
    steps.push({
      started,
      ready: Object.fromEntries(after.map((p) => [p.role, p.readyNew])),
      old: Object.fromEntries(after.map((p) => [p.role, p.oldServing])),
    });
    const progressed = steps.length < 2 || JSON.stringify(steps.at(-1)) !== JSON.stringify(steps.at(-2));
    if (!progressed) {
      // A wait's reason does not name its role (the controller prefixes group and role); a block's does.
      const waiting = [...permits].find(([, permit]) => permit.reason !== undefined);
      const reason =
        [...permits.values()].find((permit) => permit.blocked)?.reason ??
        (waiting === undefined ? undefined : `role ${waiting[0]}: ${waiting[1].reason}`);
      return { steps: steps.slice(0, -1), blocked: reason ?? "no role can start: check maxUnavailable and maxSurge" };
    }
  }
  return { steps, blocked: `not complete after ${maxSteps} steps` };
}
