/**
 * Rollback (DESIGN §2.8, seed §3): write a revision's versioned fields into a spec and keep every
 * runtime parameter, so the normal rollout carries the rollback out under the current budgets.
 */
import type { ModelServingSpec, Role } from "../../api/index.ts";
import type { RevisionData, RevisionRole } from "./format.ts";
import { compareStrings } from "../maps.ts";

/**
 * A copy of `spec` with `data`'s versioned fields: `schedulerName`, `plugins` and, per role,
 * `entryTemplate`, `workerReplicas`, `workerTemplate`. Runtime fields stay: replicas, budgets,
 * partition, recovery, drain, rollout strategy, history limit, gang policy and restart grace
 * period. Roles in both keep their replicas, role-level budgets and position; roles only in `data`
 * are appended in name order with `replicas: 1`; roles absent from `data` are removed along with
 * their entries in `gangPolicy.minRoleReplicas` and `rolloutStrategy.coordination`. The caller
 * validates the result. Neither argument is modified, and the result shares no objects with them.
 */
export function applyRevision(spec: ModelServingSpec, data: RevisionData): ModelServingSpec {
  const result = structuredClone(spec);
  result.schedulerName = data.schedulerName;
  if (data.plugins === undefined) delete result.plugins;
  else result.plugins = structuredClone(data.plugins);
  result.template.roles = mergeRoles(result.template.roles, data.roles);
  const roleNames = new Set(data.roles.map((role) => role.name));
  removeFromGangPolicy(result.template, roleNames);
  removeFromCoordination(result.rolloutStrategy, roleNames);
  return result;
}

/** Kept roles in their current order, then the revision's new roles in name order. */
function mergeRoles(current: Role[], versioned: readonly RevisionRole[]): Role[] {
  const byName = new Map(versioned.map((role) => [role.name, role]));
  const kept = current.filter((role) => byName.has(role.name));
  const keptNames = new Set(kept.map((role) => role.name));
  for (const role of kept) {
    delete role.workerTemplate; // a revision without workers' template must not inherit the current one
    Object.assign(role, versionedFields(byName.get(role.name) as RevisionRole));
  }
  const added = versioned
    .filter((role) => !keptNames.has(role.name))
    .sort((a, b) => compareStrings(a.name, b.name))
    .map((role): Role => ({ name: role.name, replicas: 1, ...versionedFields(role) }));
  return [...kept, ...added];
}

/** Deep copies of the revision's versioned role fields, so the spec never aliases immutable data. */
function versionedFields(versioned: RevisionRole): Pick<Role, "entryTemplate" | "workerReplicas" | "workerTemplate"> {
  return {
    entryTemplate: structuredClone(versioned.entryTemplate),
    workerReplicas: versioned.workerReplicas,
    ...(versioned.workerTemplate === undefined ? {} : { workerTemplate: structuredClone(versioned.workerTemplate) }),
  };
}

function removeFromGangPolicy(template: ModelServingSpec["template"], roleNames: ReadonlySet<string>): void {
  const gangPolicy = template.gangPolicy;
  if (gangPolicy?.minRoleReplicas === undefined) return;
  gangPolicy.minRoleReplicas = Object.fromEntries(
    Object.entries(gangPolicy.minRoleReplicas).filter(([role]) => roleNames.has(role)),
  );
}

/**
 * Removes roles that no longer exist from the coordination. When fewer than two participating
 * roles remain, the coordination is dropped: it needs two roles to compare progress, and an
 * emptied explicit list would otherwise mean "all roles", the opposite of what was written.
 */
function removeFromCoordination(strategy: ModelServingSpec["rolloutStrategy"], roleNames: ReadonlySet<string>): void {
  const coordination = strategy.coordination;
  if (coordination === undefined) return;
  const explicit = coordination.roles !== undefined && coordination.roles.length > 0;
  if (explicit) coordination.roles = coordination.roles?.filter((role) => roleNames.has(role));
  if ((explicit ? (coordination.roles?.length ?? 0) : roleNames.size) < 2) {
    delete strategy.coordination;
    return;
  }
  if (coordination.dependencies === undefined) return;
  const dependencies = coordination.dependencies
    .filter((dependency) => roleNames.has(dependency.role))
    .map((dependency) => ({ ...dependency, dependsOn: dependency.dependsOn.filter((role) => roleNames.has(role)) }))
    .filter((dependency) => dependency.dependsOn.length > 0);
  if (dependencies.length > 0) coordination.dependencies = dependencies;
  else delete coordination.dependencies;
}
