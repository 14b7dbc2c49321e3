/**
 * Coordinated multi-role updates (DESIGN §2.9, seed §4): start permits from proportional progress
 * (`maxSkew`) and dependency order, per ServingGroup. Pure integer arithmetic; the coordinator only
 * narrows what the role budgets and partitions already allow.
 *
 * Per participating role r in one group:
 * - `T_r` eligible instances (ordinal at or above the role partition, below its replicas);
 * - `R_r` new Ready capacity: instances at or above the partition running the update revision and
 *   available, surge instances included, at most `T_r` (surplus capacity is not progress). Counting
 *   surge lets a role whose last old instance must stay (teardown order below) reach full progress
 *   on its surge instance, so it never holds back the roles that depend on it;
 * - `I_r` eligible instances started but not yet ready at the update revision (permitted,
 *   replacing, creating), clamped to `T_r − R_r`;
 * - progress `R_r / T_r`; the baseline `b` is the active role with the least progress (compared by
 *   cross-multiplication, ties to spec order);
 * - `allowed_r = min(T_r, ceil((R_b·100 + skew·T_b) · T_r / (100·T_b)))` starts in total, so
 *   from zero at 10%, roles of 100, 50 and 10 instances may start 10, 5 and 1;
 * - quota `allowed_r − (R_r + I_r)` new starts now, including recovery and new surge instances;
 *   once `R_r = T_r` through surge, swapping an old instance for that capacity needs no start (it
 *   exposes nothing new), which lets a role that kept its last old instance for its dependents
 *   finish.
 *
 * Dependencies (`A dependsOn B`): new A starts only once every role in A's dependency closure has
 * new Ready capacity (surge included); a role others depend on may start before them (inner stages
 * first). Teardown is the reverse: while a dependent still has old instances, a role keeps at least
 * one old instance; when it has only one, it needs surge to build the new one beside it, and
 * without surge the rollout is blocked with a reason that names the role and the fix.
 */

/** What the coordinator needs to know about one participating role in one group. */
export interface RoleProgress {
  readonly role: string;
  /** `T_r`. */
  readonly eligible: number;
  /** `R_r`. */
  readonly readyNew: number;
  /** `I_r` before clamping. */
  readonly inFlight: number;
  /** Instances of any ordinal running the update revision and available (surge included). */
  readonly newCapacity: number;
  /** Instances still serving the old revision (any ordinal, partition-protected ones included). */
  readonly oldServing: number;
  /** The role's spec differs between its instances' revisions and the update revision. */
  readonly active: boolean;
  /** The role's resolved maxSurge. */
  readonly maxSurge: number;
}

export interface CoordinationConfig {
  /** `maxSkew` in percent, 1..100. */
  readonly maxSkewPercent: number;
  /** Role → roles it depends on (only participating roles). */
  readonly dependsOn: ReadonlyMap<string, readonly string[]>;
}

/** Per role: how many new starts are allowed now, and if none, why. */
export interface Permit {
  readonly quota: number;
  /**
   * The role's new Ready capacity already covers all its eligible instances (through surge), so
   * swapping an old instance for that capacity exposes nothing new and needs no start.
   */
  readonly fullProgress: boolean;
  /** Only when this role's old capacity must stay: at most this many old instances may be retired. */
  readonly retireLimit: number | undefined;
  readonly reason: string | undefined;
  /** The rollout cannot proceed for this role without a spec change. */
  readonly blocked: boolean;
}

function clampInFlight(progress: RoleProgress): number {
  return Math.max(0, Math.min(progress.inFlight, progress.eligible - progress.readyNew));
}

/** Integer ceiling of a/b for a ≥ 0, b > 0. */
function ceilDiv(a: number, b: number): number {
  return Math.floor((a + b - 1) / b);
}

/** The active role with the least progress R/T, ties to the earliest; undefined when none is active. */
export function baselineRole(roles: readonly RoleProgress[]): RoleProgress | undefined {
  let best: RoleProgress | undefined;
  for (const role of roles) {
    if (!role.active || role.eligible === 0) continue;
    if (best === undefined || role.readyNew * best.eligible < best.readyNew * role.eligible) best = role;
  }
  return best;
}

/** `allowed_r`: the total number of eligible instances of `role` that may have started. */
export function allowedStarts(role: RoleProgress, baseline: RoleProgress | undefined, maxSkewPercent: number): number {
  if (baseline === undefined || role.eligible === 0) return role.eligible;
  const numerator = (baseline.readyNew * 100 + maxSkewPercent * baseline.eligible) * role.eligible;
  return Math.min(role.eligible, ceilDiv(numerator, 100 * baseline.eligible));
}

/** Roles that (transitively) depend on `role`. */
function dependents(role: string, config: CoordinationConfig): Set<string> {
  const result = new Set<string>();
  const visit = (target: string): void => {
    for (const [candidate, targets] of config.dependsOn) {
      if (targets.includes(target) && !result.has(candidate)) {
        result.add(candidate);
        visit(candidate);
      }
    }
  };
  visit(role);
  return result;
}

/** Roles `role` (transitively) depends on. */
function closure(role: string, config: CoordinationConfig): Set<string> {
  const result = new Set<string>();
  const visit = (source: string): void => {
    for (const target of config.dependsOn.get(source) ?? []) {
      if (!result.has(target)) {
        result.add(target);
        visit(target);
      }
    }
  };
  visit(role);
  return result;
}

/** Why `role` may not start yet because of its dependencies, or undefined when it may. */
export function dependencyGate(role: RoleProgress, byName: ReadonlyMap<string, RoleProgress>, config: CoordinationConfig): string | undefined {
  if (role.readyNew > 0 || (config.dependsOn.get(role.role) ?? []).length === 0) return undefined;
  const upstream = [...dependents(role.role, config)];
  const started = (name: string) => {
    const other = byName.get(name);
    return other !== undefined && other.readyNew + clampInFlight(other) > 0;
  };
  // An inner stage may start first while every role that depends on it is still unstarted.
  if (upstream.length > 0 && !upstream.some(started)) return undefined;
  const missing = [...closure(role.role, config)].filter((name) => (byName.get(name)?.newCapacity ?? 0) === 0);
  return missing.length === 0 ? undefined : `waiting for new Ready capacity in ${missing.join(", ")} (dependencies of ${role.role})`;
}

/**
 * How many old instances of `role` may be retired now: while a role that depends on it still
 * serves old instances, one old instance stays.
 */
function retireLimit(role: RoleProgress, byName: ReadonlyMap<string, RoleProgress>, config: CoordinationConfig): number | undefined {
  const oldDependents = [...dependents(role.role, config)].filter((name) => (byName.get(name)?.oldServing ?? 0) > 0);
  return oldDependents.length > 0 ? Math.max(0, role.oldServing - 1) : undefined;
}

/** Start permits for every participating role of one group. */
export function startPermits(roles: readonly RoleProgress[], config: CoordinationConfig): Map<string, Permit> {
  const byName = new Map(roles.map((role) => [role.role, role]));
  const baseline = baselineRole(roles);
  const permits = new Map<string, Permit>();
  for (const role of roles) {
    const started = role.readyNew + clampInFlight(role);
    const skewQuota = Math.max(0, allowedStarts(role, baseline, config.maxSkewPercent) - started);
    const gate = dependencyGate(role, byName, config);
    const limit = retireLimit(role, byName, config);
    const stuck = limit === 0 && role.maxSurge === 0 && role.newCapacity === 0 && role.active && role.eligible > role.readyNew;
    const reason = stuck
      ? `role ${role.role} must keep an old instance while roles that depend on it still run old ones, and has no room to build a new one beside it: set maxSurge on role ${role.role} (e.g. 1), or remove the dependency on it`
      : (gate ?? (skewQuota === 0 && started < role.eligible ? `waiting for the least-progressed role ${baseline?.role ?? "?"} (maxSkew ${config.maxSkewPercent}%)` : undefined));
    const fullProgress = role.eligible > 0 && role.readyNew >= role.eligible;
    permits.set(role.role, { quota: gate === undefined ? skewQuota : 0, fullProgress, retireLimit: limit, reason, blocked: stuck });
  }
  return permits;
}
