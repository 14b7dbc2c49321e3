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
 *
 * The kept old instance caps a role without surge (and without an old instance below its partition
 * to keep instead) at `T − 1` of `T` until its dependents finish. When that cap leaves some role's
 * allowance short of what it must start, no wait ends it: the rollout is blocked, naming the
 * smallest maxSkew that finishes (`skewDeadlock`). A dependent's old instances below its partition
 * never go, so its dependencies keep their last old instance (and any surge beside it) until the
 * partition is lowered: the rollout says so and waits. Likewise a dependency whose every instance
 * is below its partition never gets new capacity: its dependents wait at the gate, told which
 * partition to lower.
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
  /** Of `oldServing`, those below the role partition: they never move. */
  readonly oldBelowPartition: number;
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
   * swapping an old instance for that capacity, or moving an unavailable one, exposes nothing new
   * and needs no start.
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
export function dependencyGate(
  role: RoleProgress,
  byName: ReadonlyMap<string, RoleProgress>,
  config: CoordinationConfig,
): string | undefined {
  if (role.readyNew > 0 || (config.dependsOn.get(role.role) ?? []).length === 0) return undefined;
  const upstream = [...dependents(role.role, config)];
  const started = (name: string) => {
    const other = byName.get(name);
    return other !== undefined && other.readyNew + clampInFlight(other) > 0;
  };
  // An inner stage may start first while every role that depends on it is still unstarted.
  if (upstream.length > 0 && !upstream.some(started)) return undefined;
  const missing = [...closure(role.role, config)].filter((name) => (byName.get(name)?.newCapacity ?? 0) === 0);
  if (missing.length === 0) return undefined;
  // A dependency whose every instance is below its partition gets no new capacity until it is lowered.
  const pinned = missing.filter(
    (name) => byName.get(name)?.eligible === 0 && (byName.get(name)?.oldBelowPartition ?? 0) > 0,
  );
  const way =
    pinned.length === 0
      ? ""
      : `; every instance of ${pinned.join(", ")} is below its partition: lower the partition of ${pinned.join(", ")}, or remove the dependency on it, to update ${role.role}`;
  return `waiting for new Ready capacity in ${missing.join(", ")} (dependencies of ${role.role})${way}`;
}

/**
 * How many old instances of `role` may be retired now: while a role that depends on it still
 * serves old instances, one old instance stays.
 */
function retireLimit(
  role: RoleProgress,
  byName: ReadonlyMap<string, RoleProgress>,
  config: CoordinationConfig,
): number | undefined {
  const oldDependents = [...dependents(role.role, config)].filter((name) => (byName.get(name)?.oldServing ?? 0) > 0);
  return oldDependents.length > 0 ? Math.max(0, role.oldServing - 1) : undefined;
}

/**
 * Whether `role` is capped at `T − 1` of `T` by the old instance it keeps for its dependents: it
 * has no surge to build that replacement beside it and no old instance below its partition to keep
 * instead. A role of one instance is left to the `stuck` rule: its dependents cannot even start.
 */
function heldShort(role: RoleProgress, byName: ReadonlyMap<string, RoleProgress>, config: CoordinationConfig): boolean {
  return (
    role.active &&
    role.eligible >= 2 &&
    role.maxSurge === 0 &&
    role.oldBelowPartition === 0 &&
    retireLimit(role, byName, config) !== undefined
  );
}

/** A deadlock of the skew bound against a kept old instance: `short` roles never get the starts they need. */
interface SkewDeadlock {
  /** The least-progressed held role, at its cap (`readyNew = T − 1`). */
  readonly held: RoleProgress;
  readonly short: readonly RoleProgress[];
}

/**
 * Plays the end of the rollout forward on counts at `maxSkewPercent`: held roles (`heldShort`)
 * reach `T − 1`, the others `T`, and a held role lets its last old instance go once none of its
 * dependents is held, short of its allowance, or keeps old instances below its partition. The
 * allowance of each role is taken against the least-progressed held role (the baseline then: every
 * other role is at or above it). Returns the roles left short when no held role can be released,
 * or undefined when the rollout finishes or only waits for a partition.
 */
function skewDeadlock(
  roles: readonly RoleProgress[],
  config: CoordinationConfig,
  maxSkewPercent: number,
): SkewDeadlock | undefined {
  const byName = new Map(roles.map((role) => [role.role, role]));
  let held = roles
    .filter((role) => heldShort(role, byName, config))
    .map((role) => ({ ...role, readyNew: role.eligible - 1 }));
  while (held.length > 0) {
    const baseline = baselineRole(held);
    const isHeld = (name: string) => held.some((role) => role.role === name);
    const short = roles.filter(
      (role) =>
        role.active && allowedStarts(role, baseline, maxSkewPercent) < role.eligible - (isHeld(role.role) ? 1 : 0),
    );
    const finishes = (name: string) =>
      !isHeld(name) && !short.some((role) => role.role === name) && (byName.get(name)?.oldBelowPartition ?? 0) === 0;
    const released = held.filter((role) => [...dependents(role.role, config)].every(finishes));
    if (released.length === 0)
      return short.length > 0 && baseline !== undefined ? { held: baseline, short } : undefined;
    held = held.filter((role) => !released.includes(role));
  }
  return undefined;
}

/** The smallest maxSkew (percent) above the configured one at which `skewDeadlock` finds none; 100 always does. */
function sufficientSkew(roles: readonly RoleProgress[], config: CoordinationConfig): number {
  for (let skew = config.maxSkewPercent + 1; skew < 100; skew++)
    if (skewDeadlock(roles, config, skew) === undefined) return skew;
  return 100;
}

/** Why `role` is left short by `deadlock`, with every fix. */
function deadlockReason(
  role: RoleProgress,
  deadlock: SkewDeadlock,
  roles: readonly RoleProgress[],
  config: CoordinationConfig,
): string {
  const { held } = deadlock;
  const allowed = allowedStarts(role, held, config.maxSkewPercent);
  return `role ${role.role} may start only ${allowed} of its ${role.eligible} instance(s) while role ${held.role} keeps an old instance for the roles that depend on it (${held.role} reaches at most ${held.readyNew} of ${held.eligible} without surge; maxSkew ${config.maxSkewPercent}%), so neither finishes: set maxSurge on role ${held.role} (e.g. 1), raise maxSkew to at least ${sufficientSkew(roles, config)}%, or remove the dependency on role ${held.role}`;
}

/**
 * Why `role` keeps its last old instance until a partition is lowered, or undefined: it is down to
 * that instance, and a role that depends on it runs old instances below its partition.
 */
function partitionHold(
  role: RoleProgress,
  limit: number | undefined,
  byName: ReadonlyMap<string, RoleProgress>,
  config: CoordinationConfig,
): string | undefined {
  if (limit !== 0 || !role.active) return undefined;
  const pinning = [...dependents(role.role, config)].filter((name) => (byName.get(name)?.oldBelowPartition ?? 0) > 0);
  if (pinning.length === 0) return undefined;
  const names = pinning.join(", ");
  return `keeps its last old instance (and any surge instance beside it) while role(s) ${names} that depend on it run old instances below their partition: lower the partition of ${names} to finish the rollout, or remove the dependency on role ${role.role}`;
}

/** Start permits for every participating role of one group. */
export function startPermits(roles: readonly RoleProgress[], config: CoordinationConfig): Map<string, Permit> {
  const byName = new Map(roles.map((role) => [role.role, role]));
  const baseline = baselineRole(roles);
  const deadlock = skewDeadlock(roles, config, config.maxSkewPercent);
  const permits = new Map<string, Permit>();
  for (const role of roles) {
    const started = role.readyNew + clampInFlight(role);
    const skewQuota = Math.max(0, allowedStarts(role, baseline, config.maxSkewPercent) - started);
    const gate = dependencyGate(role, byName, config);
    const limit = retireLimit(role, byName, config);
    const stuck =
      limit === 0 && role.maxSurge === 0 && role.newCapacity === 0 && role.active && role.eligible > role.readyNew;
    const short = deadlock !== undefined && deadlock.short.includes(role);
    const reason = stuck
      ? `role ${role.role} must keep an old instance while roles that depend on it still run old ones, and has no room to build a new one beside it: set maxSurge on role ${role.role} (e.g. 1), or remove the dependency on it`
      : short
        ? deadlockReason(role, deadlock, roles, config)
        : (partitionHold(role, limit, byName, config) ??
          gate ??
          (skewQuota === 0 && started < role.eligible
            ? `waiting for the least-progressed role ${baseline?.role ?? "?"} (maxSkew ${config.maxSkewPercent}%)`
            : undefined));
    const fullProgress = role.eligible > 0 && role.readyNew >= role.eligible;
    permits.set(role.role, {
      quota: gate === undefined ? skewQuota : 0,
      fullProgress,
      retireLimit: limit,
      reason,
      blocked: stuck || short,
    });
  }
  return permits;
}
