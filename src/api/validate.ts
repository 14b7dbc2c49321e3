/**
 * Semantic validation: the rules of the ModelServing API that span fields and cannot be said in
 * the schema (DESIGN §1, README "Validation rules"). Input is a structurally valid, defaulted
 * object; output is every problem found, each naming the field path and the reason in plain words.
 */
import { resolveGroupBudget, resolveRoleBudget } from "./budgets.ts";
import type { PathSegment, Problem } from "./problems.ts";
import { problem, quote } from "./problems.ts";
import type { Container, Coordination, ModelServing, PodTemplateSpec, Role } from "./schema.ts";
import { DNS1035_LABEL, DNS1035_REASON } from "./schema.ts";
import {
  CONTROLLER_ENV,
  MAX_LABEL_VALUE_LENGTH,
  MAX_MODEL_SERVING_NAME_LENGTH,
  RESERVED_PREFIX,
  isReservedTemplateKey,
} from "./wellknown.ts";

const SPEC = ["spec"] as const;
const ROLES = ["spec", "template", "roles"] as const;
const STRATEGY = ["spec", "rolloutStrategy"] as const;
const GROUP_CONFIG = [...STRATEGY, "rollingUpdateConfiguration"] as const;
const COORDINATION = [...STRATEGY, "coordination"] as const;
const ROLE_BUDGET_FIELDS = ["maxUnavailable", "maxSurge", "partition"] as const;

/** Returns every semantic problem of `ms`; an empty list means valid. */
export function validateModelServing(ms: ModelServing): Problem[] {
  return [
    ...validateName(ms),
    ...validateRoleNames(ms.spec.template.roles),
    ...ms.spec.template.roles.flatMap((role, index) => validateRoleTemplates(role, index)),
    ...validateGroupBudget(ms),
    ...ms.spec.template.roles.flatMap((role, index) => validateRoleBudget(ms, role, index)),
    ...validateCoordination(ms),
    ...validateGangPolicy(ms),
    ...validatePlugins(ms),
  ];
}

function validateName(ms: ModelServing): Problem[] {
  const name = ms.metadata.name;
  if (!DNS1035_LABEL.test(name)) {
    return [problem(["metadata", "name"], DNS1035_REASON)];
  }
  if (name.length > MAX_MODEL_SERVING_NAME_LENGTH) {
    return [
      problem(
        ["metadata", "name"],
        `must be at most ${MAX_MODEL_SERVING_NAME_LENGTH} characters (it has ${name.length}): revision names "<name>-<hash>" are label values of at most ${MAX_LABEL_VALUE_LENGTH}`,
      ),
    ];
  }
  const longest = longestPodName(ms);
  if (longest !== undefined && longest.name.length > MAX_LABEL_VALUE_LENGTH) {
    return [
      problem(
        ["metadata", "name"],
        `with role "${longest.role}" the generated pod name "${longest.name}" has ${longest.name.length} characters, more than ${MAX_LABEL_VALUE_LENGTH}: shorten metadata.name or the role name`,
      ),
    ];
  }
  return [];
}

/** The longest pod name `<ms>-<g>-<role>-<j>-<k>` the spec generates, with its role. */
function longestPodName(ms: ModelServing): { name: string; role: string } | undefined {
  let longest: { name: string; role: string } | undefined;
  const lastGroup = Math.max(ms.spec.replicas - 1, 0);
  for (const role of ms.spec.template.roles) {
    const name = `${ms.metadata.name}-${lastGroup}-${role.name}-${Math.max(role.replicas - 1, 0)}-${role.workerReplicas}`;
    if (longest === undefined || name.length > longest.name.length) longest = { name, role: role.name };
  }
  return longest;
}

function validateRoleNames(roles: readonly Role[]): Problem[] {
  const problems: Problem[] = [];
  const firstIndex = new Map<string, number>();
  roles.forEach((role, index) => {
    const first = firstIndex.get(role.name);
    if (first === undefined) firstIndex.set(role.name, index);
    else
      problems.push(
        problem(
          [...ROLES, index, "name"],
          `duplicates spec.template.roles[${first}].name "${role.name}": role names must be unique`,
        ),
      );
  });
  return problems;
}

function validateRoleTemplates(role: Role, index: number): Problem[] {
  const rolePath = [...ROLES, index];
  const problems = validatePodTemplate(role.entryTemplate, [...rolePath, "entryTemplate"]);
  if (role.workerTemplate !== undefined) {
    problems.push(...validatePodTemplate(role.workerTemplate, [...rolePath, "workerTemplate"]));
  } else if (role.workerReplicas > 0) {
    problems.push(
      problem(
        [...rolePath, "workerTemplate"],
        `is required when workerReplicas is more than 0 (it is ${role.workerReplicas})`,
      ),
    );
  }
  return problems;
}

function validatePodTemplate(template: PodTemplateSpec, path: readonly PathSegment[]): Problem[] {
  const problems: Problem[] = [];
  for (const field of ["labels", "annotations"] as const) {
    for (const key of Object.keys(template.metadata?.[field] ?? {})) {
      if (isReservedTemplateKey(field, key))
        problems.push(
          problem(
            [...path, "metadata", field, key],
            `uses the prefix ${RESERVED_PREFIX}, which is reserved for the controller`,
          ),
        );
    }
  }
  const seen = new Map<string, string>();
  for (const list of ["containers", "initContainers"] as const) {
    (template.spec[list] ?? []).forEach((container, index) => {
      const containerPath = [...path, "spec", list, index];
      const first = seen.get(container.name);
      if (first !== undefined)
        problems.push(
          problem([...containerPath, "name"], `duplicates ${first}: container names must be unique within a pod`),
        );
      else seen.set(container.name, `${list}[${index}].name ${quote(container.name)}`);
      problems.push(...validateContainer(container, containerPath));
    });
  }
  return problems;
}

function validateContainer(container: Container, path: readonly PathSegment[]): Problem[] {
  return (container.env ?? []).flatMap((env, index) =>
    (CONTROLLER_ENV as readonly string[]).includes(env.name)
      ? [
          problem(
            [...path, "env", index, "name"],
            `${env.name} is set by the controller (${CONTROLLER_ENV.join(", ")}); remove it from the template`,
          ),
        ]
      : [],
  );
}

function validateGroupBudget(ms: ModelServing): Problem[] {
  const type = ms.spec.rolloutStrategy.type;
  const budget = resolveGroupBudget(ms.spec);
  const updatableGroups = ms.spec.replicas - budget.partition;
  const problems: Problem[] = [];
  if (type !== "ServingGroupRollingUpdate" && budget.maxSurge > 0) {
    const hint =
      type === "RoleRollingUpdate"
        ? "set maxSurge on the roles instead"
        : "in-place updates keep their pods, so there is nothing to surge";
    problems.push(problem([...GROUP_CONFIG, "maxSurge"], `applies only to ServingGroupRollingUpdate; ${hint}`));
  }
  if (updatableGroups <= 0 || budget.maxUnavailable > 0) return problems;
  if (type === "ServingGroupRollingUpdate" && budget.maxSurge === 0) {
    problems.push(
      problem(
        GROUP_CONFIG,
        `maxUnavailable and maxSurge both resolve to 0 for ${ms.spec.replicas} group(s), so no group could ever be updated: raise one of them`,
      ),
    );
  } else if (type !== "ServingGroupRollingUpdate") {
    problems.push(
      problem(
        [...GROUP_CONFIG, "maxUnavailable"],
        `resolves to 0 for ${ms.spec.replicas} group(s), so no group could ever be disrupted to update it under ${type}: raise it`,
      ),
    );
  }
  return problems;
}

function validateRoleBudget(ms: ModelServing, role: Role, index: number): Problem[] {
  const type = ms.spec.rolloutStrategy.type;
  const rolePath = [...ROLES, index];
  if (type !== "RoleRollingUpdate") {
    const groupHint =
      type === "InPlaceUpdate"
        ? "InPlaceUpdate takes group-level budgets only; use"
        : "ServingGroupRollingUpdate replaces whole groups; use";
    return ROLE_BUDGET_FIELDS.filter((field) => role[field] !== undefined).map((field) =>
      problem(
        [...rolePath, field],
        `applies only to rolloutStrategy.type RoleRollingUpdate; ${groupHint} spec.rolloutStrategy.rollingUpdateConfiguration.${field}`,
      ),
    );
  }
  const budget = resolveRoleBudget(role);
  if (role.replicas - budget.partition > 0 && budget.maxUnavailable === 0 && budget.maxSurge === 0) {
    return [
      problem(
        rolePath,
        `maxUnavailable and maxSurge both resolve to 0 for ${role.replicas} instance(s) of role "${role.name}", so none could ever be updated: raise one of them`,
      ),
    ];
  }
  return [];
}

function validateCoordination(ms: ModelServing): Problem[] {
  const coordination = ms.spec.rolloutStrategy.coordination;
  if (coordination === undefined) return [];
  if (ms.spec.rolloutStrategy.type !== "RoleRollingUpdate") {
    return [
      problem(
        COORDINATION,
        `applies only to rolloutStrategy.type RoleRollingUpdate (it is ${ms.spec.rolloutStrategy.type})`,
      ),
    ];
  }
  const roleNames = new Set(ms.spec.template.roles.map((role) => role.name));
  const problems: Problem[] = [];
  if (coordination.maxSkew === "0%")
    problems.push(
      problem([...COORDINATION, "maxSkew"], "must be more than 0%: with no skew allowed no role could ever start"),
    );
  const participants = coordinationParticipants(coordination, roleNames, problems);
  if (participants.size < 2) {
    const where =
      coordination.roles === undefined || coordination.roles.length === 0 ? COORDINATION : [...COORDINATION, "roles"];
    problems.push(problem(where, `must include at least 2 roles to coordinate (it includes ${participants.size})`));
  }
  problems.push(...validateDependencies(coordination, participants));
  return problems;
}

/** The participating roles: the listed ones that exist, or every role when none is listed. */
function coordinationParticipants(
  coordination: Coordination,
  roleNames: ReadonlySet<string>,
  problems: Problem[],
): Set<string> {
  const listed = coordination.roles ?? [];
  if (listed.length === 0) return new Set(roleNames);
  const participants = new Set<string>();
  listed.forEach((name, index) => {
    const path = [...COORDINATION, "roles", index];
    if (!roleNames.has(name)) problems.push(problem(path, `names no role in spec.template.roles (${quote(name)})`));
    else if (participants.has(name)) problems.push(problem(path, `lists role ${quote(name)} twice`));
    else participants.add(name);
  });
  return participants;
}

function validateDependencies(coordination: Coordination, participants: ReadonlySet<string>): Problem[] {
  const problems: Problem[] = [];
  const edges = new Map<string, string[]>();
  (coordination.dependencies ?? []).forEach((dependency, index) => {
    const path = [...COORDINATION, "dependencies", index];
    const roleProblem = participantProblem(dependency.role, participants);
    if (roleProblem !== undefined) problems.push(problem([...path, "role"], roleProblem));
    else if (edges.has(dependency.role))
      problems.push(
        problem(
          [...path, "role"],
          `lists the dependencies of role ${quote(dependency.role)} a second time; merge them into one entry`,
        ),
      );
    const targets: string[] = [];
    dependency.dependsOn.forEach((target, targetIndex) => {
      const targetPath = [...path, "dependsOn", targetIndex];
      const targetProblem =
        target === dependency.role
          ? `role ${quote(target)} cannot depend on itself`
          : participantProblem(target, participants);
      if (targetProblem !== undefined) problems.push(problem(targetPath, targetProblem));
      else targets.push(target);
    });
    if (roleProblem === undefined && !edges.has(dependency.role)) edges.set(dependency.role, targets);
  });
  const cycle = findCycle(edges);
  if (cycle !== undefined)
    problems.push(problem([...COORDINATION, "dependencies"], `form a cycle: ${cycle.join(" -> ")}`));
  return problems;
}

function participantProblem(name: string, participants: ReadonlySet<string>): string | undefined {
  return participants.has(name)
    ? undefined
    : `names role ${quote(name)}, which does not take part in the coordination (see spec.rolloutStrategy.coordination.roles and spec.template.roles)`;
}

/** The first dependency cycle found (in listing order), as `[a, b, …, a]`, or undefined. */
export function findCycle(edges: ReadonlyMap<string, readonly string[]>): string[] | undefined {
  const done = new Set<string>();
  const visit = (node: string, stack: string[]): string[] | undefined => {
    const open = stack.indexOf(node);
    if (open >= 0) return [...stack.slice(open), node];
    if (done.has(node)) return undefined;
    stack.push(node);
    for (const next of edges.get(node) ?? []) {
      const cycle = visit(next, stack);
      if (cycle !== undefined) return cycle;
    }
    stack.pop();
    done.add(node);
    return undefined;
  };
  for (const node of edges.keys()) {
    const cycle = visit(node, []);
    if (cycle !== undefined) return cycle;
  }
  return undefined;
}

function validateGangPolicy(ms: ModelServing): Problem[] {
  const minimums = ms.spec.template.gangPolicy?.minRoleReplicas ?? {};
  const path = [...SPEC, "template", "gangPolicy", "minRoleReplicas"];
  return Object.entries(minimums).flatMap(([name, minimum]) => {
    const role = ms.spec.template.roles.find((candidate) => candidate.name === name);
    if (role === undefined) return [problem([...path, name], `names no role in spec.template.roles (${quote(name)})`)];
    if (minimum > role.replicas)
      return [
        problem([...path, name], `is ${minimum}, more than the ${role.replicas} replica(s) of role ${quote(name)}`),
      ];
    return [];
  });
}

function validatePlugins(ms: ModelServing): Problem[] {
  const roleNames = new Set(ms.spec.template.roles.map((role) => role.name));
  return (ms.spec.plugins ?? []).flatMap((plugin, pluginIndex) =>
    (plugin.scope?.roles ?? []).flatMap((name, index) =>
      roleNames.has(name)
        ? []
        : [
            problem(
              [...SPEC, "plugins", pluginIndex, "scope", "roles", index],
              `names no role in spec.template.roles (${quote(name)})`,
            ),
          ],
    ),
  );
}
