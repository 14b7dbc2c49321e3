/**
 * The lower bound of a rollout's makespan (issue #21): ⌈changed units ÷ units the budgets let move
 * at once⌉ × unit start time. A *unit* is what the strategy replaces: a ServingGroup under
 * ServingGroupRollingUpdate and InPlaceUpdate, a role instance under RoleRollingUpdate. Pure
 * arithmetic over the spec and the cluster's timing, no simulation: it is what no controller
 * could beat under these budgets, to compare a played makespan with.
 */
import { resolveGroupBudget, resolveRoleBudget } from "../api/budgets.ts";
import type { ModelServing, Role } from "../api/schema.ts";
import { revisionData } from "../core/revision/projection.ts";
import { sameRevisionData, sameRoleSpec } from "../core/role-hash.ts";
import { DEFAULT_TIMING } from "./cluster.ts";
import type { ScenarioCluster } from "./scenario.ts";

export interface RolloutBound {
  readonly unit: "group" | "instance";
  /** The roles whose spec changes (every role of a changed group under the group strategies). */
  readonly roles: readonly string[];
  /** Units at or above the partitions whose spec changes. */
  readonly changedUnits: number;
  /** Units the budgets let move at once (maxUnavailable plus maxSurge, nested for role instances). */
  readonly atOnce: number;
  /** ⌈changedUnits ÷ atOnce⌉. */
  readonly waves: number;
  /** Seconds one unit takes to start: scheduling (not in place), the image pull and the start. */
  readonly unitStartSeconds: number;
  readonly boundSeconds: number;
}

/** The bound of the rollout from `before` to `after` (same runtime parameters) on `cluster`. */
export function rolloutBound(before: ModelServing, after: ModelServing, cluster: ScenarioCluster): RolloutBound {
  const spec = after.spec;
  const from = revisionData(before);
  const to = revisionData(after);
  const group = resolveGroupBudget(spec);
  const groups = spec.replicas - Math.min(group.partition, spec.replicas);
  const byRole = spec.rolloutStrategy.type === "RoleRollingUpdate";
  const changed = byRole
    ? spec.template.roles.filter((role) => !sameRoleSpec(from, to, role.name))
    : sameRevisionData(from, to)
      ? []
      : spec.template.roles;
  const changedUnits = byRole
    ? groups * changed.reduce((sum, role) => sum + eligible(role), 0)
    : changed.length > 0
      ? groups
      : 0;
  const surge = spec.rolloutStrategy.type === "InPlaceUpdate" ? 0 : group.maxSurge;
  const atOnce = Math.max(
    1,
    byRole ? roleUnitsAtOnce(changed, groups, group.maxUnavailable) : Math.min(groups, group.maxUnavailable + surge),
  );
  const waves = Math.ceil(changedUnits / atOnce);
  const unitStartSeconds = startSeconds(changed, cluster, spec.rolloutStrategy.type !== "InPlaceUpdate");
  const roles = changed.map((role) => role.name);
  return {
    unit: byRole ? "instance" : "group",
    roles,
    changedUnits,
    atOnce,
    waves,
    unitStartSeconds,
    boundSeconds: waves * unitStartSeconds,
  };
}

function eligible(role: Role): number {
  return role.replicas - Math.min(resolveRoleBudget(role).partition, role.replicas);
}

/**
 * Role instances that may move at once over all groups: a surge instance disrupts nothing, so each
 * role's surge goes in every group; the instances beyond it take their group down and so move in
 * at most the group maxUnavailable groups at once.
 */
function roleUnitsAtOnce(roles: readonly Role[], groups: number, groupMaxUnavailable: number): number {
  return roles.reduce((sum, role) => {
    const budget = resolveRoleBudget(role);
    const surge = Math.min(eligible(role), budget.maxSurge);
    const replaced = Math.min(eligible(role) - surge, budget.maxUnavailable);
    return sum + groups * surge + Math.min(groups, groupMaxUnavailable) * replaced;
  }, 0);
}

/** The slowest changed container's image: pull (per-image override) plus start, plus scheduling. */
function startSeconds(roles: readonly Role[], cluster: ScenarioCluster, scheduled: boolean): number {
  const timing = { ...DEFAULT_TIMING, ...cluster.timing };
  const images = roles.flatMap((role) =>
    [role.entryTemplate, ...(role.workerTemplate === undefined ? [] : [role.workerTemplate])].flatMap((template) =>
      template.spec.containers.map((container) => container.image),
    ),
  );
  const slowest = Math.max(
    0,
    ...images.map((image) => {
      const behaviour = cluster.images?.[image];
      return (behaviour?.pullSeconds ?? timing.pullSeconds) + (behaviour?.startSeconds ?? timing.startSeconds);
    }),
  );
  return (scheduled ? timing.scheduleSeconds : 0) + slowest;
}
