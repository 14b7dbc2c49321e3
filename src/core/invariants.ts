/**
 * Named predicates over observed objects (DESIGN §5 "invariants"): pure functions shared by
 * tests, the simulator's checker (`src/sim/checker.ts`) and, later, runtime asserts.
 *
 * Safety predicates return violation messages (empty when the property holds). Liveness helpers
 * (`availablePending`, `rolloutPending`) return the reasons a ModelServing is not yet where a wait
 * wants it, for people reading a failed step. Everything is judged from the objects as stored
 * (pods with their labels, conditions and annotations; the ModelServing with its status), never
 * from the controller's memory.
 *
 * Units and availability are defined as the core defines them (docs/design/controller-model.md):
 * an instance `(group, role, j)` is *available* when every pod it should have (1 + workerReplicas
 * of the revision its pods were built from) is live, Ready and not draining.
 */
import type { Pod } from "../api/kube.ts";
import type { ModelServing, Role } from "../api/schema.ts";
import { resolveGroupBudget, resolveRoleBudget } from "../api/budgets.ts";
import { ANNOTATION_DRAINING, LABEL_GROUP, LABEL_INSTANCE, LABEL_MODEL_SERVING, LABEL_REVISION, LABEL_ROLE_HASH } from "../api/wellknown.ts";
import { isPodReady, isTerminating } from "./health.ts";
import { instanceId, parsePodIdentity } from "./identity.ts";
import { readProgress } from "./inplace.ts";
import type { PodIdentity } from "./identity.ts";
import { buildPod } from "./pods.ts";
import type { Revision } from "./pods.ts";
import { roleHash } from "./role-hash.ts";

/** The invariants the simulator checks, by name (the report's `invariants[].name`). */
export const INVARIANT_NAMES = ["noDuplicatePods", "podsMatchTheirRevision", "groupBudget", "roleBudget", "partitionHolds", "surgeBound"] as const;
export type InvariantName = (typeof INVARIANT_NAMES)[number];

/** Decoded revisions by name (what `decodeControllerRevision` gives), for one ModelServing. */
export type RevisionsByName = ReadonlyMap<string, Revision>;

/** A pod of a ModelServing placed in its unit tree. */
export interface PlacedPod {
  readonly pod: Pod;
  readonly id: PodIdentity;
}

/** The pods a ModelServing controls (controller owner reference by uid) whose identity parses. */
export function placedPods(ms: ModelServing, pods: readonly Pod[]): PlacedPod[] {
  const uid = ms.metadata.uid;
  return pods.flatMap((pod) => {
    if (pod.metadata.labels?.[LABEL_MODEL_SERVING] !== ms.metadata.name) return [];
    if (!(pod.metadata.ownerReferences ?? []).some((reference) => reference.controller === true && reference.uid === uid)) return [];
    const id = parsePodIdentity(ms.metadata.name, pod.metadata.name, pod.metadata.labels);
    return id === undefined ? [] : [{ pod, id }];
  });
}

export function isDraining(pod: Pod): boolean {
  return pod.metadata.annotations?.[ANNOTATION_DRAINING] !== undefined;
}

function isLive(pod: Pod): boolean {
  return !isTerminating(pod);
}

// ---------------------------------------------------------------------------------------------
// noDuplicatePods

/**
 * No two live pods claim the same identity. Identity comes from the labels
 * (`modelserving`, `group`, `instance`) and the `WORKER_INDEX` env of the first container, not
 * from the name (names are unique on the server by construction), so a pod built under a wrong
 * name is caught too.
 */
export function noDuplicatePods(pods: readonly Pod[]): string[] {
  const seen = new Map<string, string>();
  const violations: string[] = [];
  for (const pod of pods) {
    const labels = pod.metadata.labels ?? {};
    const owner = labels[LABEL_MODEL_SERVING];
    if (owner === undefined || !isLive(pod)) continue;
    const index = pod.spec.containers[0]?.env?.find((variable) => variable.name === "WORKER_INDEX")?.value ?? "?";
    const key = `${pod.metadata.namespace ?? ""}/${owner}/${labels[LABEL_GROUP] ?? "?"}/${labels[LABEL_INSTANCE] ?? "?"}/${index}`;
    const other = seen.get(key);
    if (other !== undefined) violations.push(`pods ${other} and ${pod.metadata.name} are both live as ${key}`);
    else seen.set(key, pod.metadata.name);
  }
  return violations;
}

// ---------------------------------------------------------------------------------------------
// podsMatchTheirRevision

/**
 * Each pod's spec is what its revision builds (`buildPod`), ignoring the fields others set after
 * creation (`nodeName` by the scheduler). The revision is the pod's label, except during an
 * in-place update past its patch (progress phase `Patched` or `Stalled`, `core/inplace.ts`): then
 * the spec already is the target's and the label follows at the finish. A pod whose revision is
 * unknown is a violation.
 */
export function podsMatchTheirRevision(ms: ModelServing, placed: readonly PlacedPod[], revisions: RevisionsByName): string[] {
  const owner = { name: ms.metadata.name, namespace: ms.metadata.namespace ?? "default", uid: ms.metadata.uid ?? "" };
  const violations: string[] = [];
  for (const { pod, id } of placed) {
    const progress = readProgress(pod);
    const name = progress !== undefined && progress.phase !== "Draining" ? progress.to : (pod.metadata.labels?.[LABEL_REVISION] ?? "");
    const revision = revisions.get(name);
    if (revision === undefined) {
      violations.push(`pod ${pod.metadata.name} names revision "${name}", which does not exist`);
      continue;
    }
    const built = buildPod(owner, revision, id);
    const { nodeName: _node, ...actual } = pod.spec; // eslint-disable-line @typescript-eslint/no-unused-vars -- set by the scheduler
    if (built === undefined || JSON.stringify(sortKeys(built.spec)) !== JSON.stringify(sortKeys(actual))) {
      violations.push(`pod ${pod.metadata.name}: spec differs from what revision ${name} builds`);
    }
  }
  return violations;
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (typeof value !== "object" || value === null) return value;
  return Object.fromEntries(Object.keys(value).sort().map((key) => [key, sortKeys((value as Record<string, unknown>)[key])]));
}

// ---------------------------------------------------------------------------------------------
// Availability of instances and groups

/** Instance key `<group>/<role>-<j>`. */
export function unitKey(group: number, role: string, instance: number): string {
  return `${group}/${instanceId(role, instance)}`;
}

/** The pods of each instance, by `unitKey`. */
export function podsByInstance(placed: readonly PlacedPod[]): Map<string, PlacedPod[]> {
  const byUnit = new Map<string, PlacedPod[]>();
  for (const entry of placed) {
    const key = unitKey(entry.id.group, entry.id.role, entry.id.instance);
    const list = byUnit.get(key);
    if (list === undefined) byUnit.set(key, [entry]);
    else list.push(entry);
  }
  return byUnit;
}

/**
 * Workers each pod of `role` should have under `revisions[name]`; the spec's role when the
 * revision is unknown.
 */
function expectedPodCount(revisions: RevisionsByName, revisionName: string | undefined, role: Role | undefined, roleName: string): number {
  const revision = revisionName === undefined ? undefined : revisions.get(revisionName);
  const versioned = revision?.data.roles.find((candidate) => candidate.name === roleName);
  return 1 + (versioned?.workerReplicas ?? role?.workerReplicas ?? 0);
}

/** Every expected pod of the instance is live, Ready and not draining. */
export function instanceAvailable(pods: readonly PlacedPod[] | undefined, role: Role | undefined, revisions: RevisionsByName): boolean {
  const live = (pods ?? []).filter((entry) => isLive(entry.pod));
  if (live.length === 0) return false;
  const roleName = live[0]?.id.role ?? "";
  const expected = expectedPodCount(revisions, live[0]?.pod.metadata.labels?.[LABEL_REVISION], role, roleName);
  for (let index = 0; index < expected; index++) {
    const entry = live.find((candidate) => candidate.id.index === index);
    if (entry === undefined || !isPodReady(entry.pod) || isDraining(entry.pod)) return false;
  }
  return true;
}

/** Available instances per `<group>/<role>`, any ordinal (surge instances count as capacity). */
export type AvailableCounts = ReadonlyMap<string, number>;

/** Counts available instances per group and role in one pass over the instances. */
export function availableCounts(ms: ModelServing, byUnit: ReadonlyMap<string, readonly PlacedPod[]>, revisions: RevisionsByName): AvailableCounts {
  const roles = new Map(ms.spec.template.roles.map((role) => [role.name, role]));
  const counts = new Map<string, number>();
  for (const pods of byUnit.values()) {
    const id = pods[0]?.id;
    if (id === undefined || !instanceAvailable(pods, roles.get(id.role), revisions)) continue;
    const key = `${id.group}/${id.role}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

/** Every role of the group has at least its desired number of available instances. */
export function groupAvailable(ms: ModelServing, group: number, counts: AvailableCounts): boolean {
  return ms.spec.template.roles.every((role) => (counts.get(`${group}/${role.name}`) ?? 0) >= role.replicas);
}

/** Groups with at least one available instance of some role, ascending. */
function groupsWithCapacity(counts: AvailableCounts): number[] {
  return [...new Set([...counts.keys()].map((key) => Number(key.slice(0, key.indexOf("/")))))].sort((a, b) => a - b);
}

// ---------------------------------------------------------------------------------------------
// Budgets (judged by the checker only while a rollout is under way, see src/sim/checker.ts)

/**
 * groupBudget (DESIGN §2.2): at most the group `maxUnavailable` of the desired groups are
 * disrupted. Available groups are counted over every group index, surge groups included (new
 * capacity replaces old), so the rule is `replicas − min(replicas, available groups) ≤
 * maxUnavailable`. Only groups in `judged` (groups that had been available; never one still being
 * created) count as unavailable.
 */
export function groupBudget(ms: ModelServing, counts: AvailableCounts, judged: ReadonlySet<number>): string[] {
  const budget = resolveGroupBudget(ms.spec);
  const available = groupsWithCapacity(counts).filter((group) => groupAvailable(ms, group, counts));
  const missing = [...judged].filter((group) => group < ms.spec.replicas && !available.includes(group)).sort((a, b) => a - b);
  const unavailable = Math.min(missing.length, ms.spec.replicas - Math.min(ms.spec.replicas, available.length));
  if (unavailable <= budget.maxUnavailable) return [];
  return [`${ms.metadata.name}: ${unavailable} ServingGroup(s) unavailable (groups ${missing.join(", ")}) with maxUnavailable ${budget.maxUnavailable}`];
}

/**
 * roleBudget (DESIGN §2.2): in each group, each role keeps at least `replicas − maxUnavailable`
 * available instances (surge instances count). Only `(group, role)` pairs in `judged` (that had
 * reached their desired available count) are judged.
 */
export function roleBudget(ms: ModelServing, counts: AvailableCounts, judged: ReadonlySet<string>): string[] {
  const violations: string[] = [];
  for (let group = 0; group < ms.spec.replicas; group++) {
    for (const role of ms.spec.template.roles) {
      if (!judged.has(`${group}/${role.name}`)) continue;
      const floor = role.replicas - resolveRoleBudget(role).maxUnavailable;
      const available = counts.get(`${group}/${role.name}`) ?? 0;
      if (available < floor) violations.push(`${ms.metadata.name}: group ${group} role ${role.name}: ${available} available instance(s), fewer than ${floor} (replicas ${role.replicas} − maxUnavailable)`);
    }
  }
  return violations;
}

/**
 * surgeBound (DESIGN §2.3): live pods that are not draining sit in groups below
 * `replicas + maxSurge` and, within each group, in instances below `role.replicas +
 * role.maxSurge`, of roles the spec has. Draining units are on their way out (scale-down or
 * replacement) and are not capacity the controller keeps.
 */
export function surgeBound(ms: ModelServing, placed: readonly PlacedPod[]): string[] {
  const groupLimit = ms.spec.replicas + resolveGroupBudget(ms.spec).maxSurge;
  const roles = new Map(ms.spec.template.roles.map((role) => [role.name, role]));
  const violations = new Set<string>();
  for (const { pod, id } of placed) {
    if (!isLive(pod) || isDraining(pod)) continue;
    const role = roles.get(id.role);
    if (id.group >= groupLimit) violations.add(`${ms.metadata.name}: group ${id.group} exists beyond replicas + maxSurge = ${groupLimit}`);
    else if (role === undefined) violations.add(`${ms.metadata.name}: group ${id.group} has pods of role ${id.role}, which the spec does not have`);
    else {
      const limit = role.replicas + resolveRoleBudget(role).maxSurge;
      if (id.instance >= limit) violations.add(`${ms.metadata.name}: ${instanceId(id.role, id.instance)} of group ${id.group} exists beyond replicas + maxSurge = ${limit}`);
    }
  }
  return [...violations];
}

// ---------------------------------------------------------------------------------------------
// partitionHolds (the checker remembers each unit's role hash across time)

/**
 * Whether instance `(group, role, instance)` is below a partition: its group is below the group
 * partition or (RoleRollingUpdate, as in the core's rollout) its ordinal is below its role's.
 */
export function belowPartition(ms: ModelServing, group: number, role: string, instance: number): boolean {
  if (group < resolveGroupBudget(ms.spec).partition) return true;
  if (ms.spec.rolloutStrategy.type !== "RoleRollingUpdate") return false;
  const spec = ms.spec.template.roles.find((candidate) => candidate.name === role);
  return spec !== undefined && instance < resolveRoleBudget(spec).partition;
}

/** A live instance below a partition and the role hash its pods carry. */
export interface PartitionedUnit {
  readonly group: number;
  readonly role: string;
  readonly instance: number;
  readonly hash: string;
}

/**
 * Every live instance below a partition with its pods' role hash, by `unitKey`; instances whose
 * live pods disagree are listed in `mixed` (a violation of partitionHolds by itself).
 */
export function partitionedUnits(ms: ModelServing, placed: readonly PlacedPod[]): { units: Map<string, PartitionedUnit>; mixed: string[] } {
  const units = new Map<string, PartitionedUnit>();
  const mixed: string[] = [];
  for (const { pod, id } of placed) {
    if (!isLive(pod) || !belowPartition(ms, id.group, id.role, id.instance)) continue;
    const key = unitKey(id.group, id.role, id.instance);
    const hash = pod.metadata.labels?.[LABEL_ROLE_HASH] ?? "";
    const known = units.get(key);
    if (known !== undefined && known.hash !== hash) mixed.push(`${ms.metadata.name} ${key}: pods of role hashes ${known.hash} and ${hash}`);
    else units.set(key, { group: id.group, role: id.role, instance: id.instance, hash });
  }
  return { units, mixed };
}

// ---------------------------------------------------------------------------------------------
// Liveness: what a wait is still waiting for

const MAX_REASONS = 5;

function limited(reasons: string[]): string[] {
  return reasons.length <= MAX_REASONS ? reasons : [...reasons.slice(0, MAX_REASONS), `and ${reasons.length - MAX_REASONS} more`];
}

/**
 * Why the ModelServing is not Available: the stored condition Available is not True for the
 * current generation, or (observed truth) some desired group lacks available instances.
 */
export function availablePending(ms: ModelServing, placed: readonly PlacedPod[], revisions: RevisionsByName): string[] {
  const reasons: string[] = [];
  const condition = ms.status?.conditions?.find((candidate) => candidate.type === "Available");
  const generation = ms.metadata.generation ?? 0;
  if (condition?.status !== "True") reasons.push(`${ms.metadata.name}: condition Available is ${condition?.status ?? "absent"}${condition?.message === undefined ? "" : ` (${condition.message})`}`);
  else if (condition.observedGeneration !== undefined && condition.observedGeneration !== generation) reasons.push(`${ms.metadata.name}: condition Available is for generation ${condition.observedGeneration}, not ${generation}`);
  const counts = availableCounts(ms, podsByInstance(placed), revisions);
  for (let group = 0; group < ms.spec.replicas; group++) {
    for (const role of ms.spec.template.roles) {
      const available = counts.get(`${group}/${role.name}`) ?? 0;
      if (available < role.replicas) reasons.push(`${ms.metadata.name}: group ${group} role ${role.name}: ${available} of ${role.replicas} instance(s) available`);
    }
  }
  return limited(reasons);
}

/**
 * Why the rollout is not complete (DESIGN §6 `RolloutComplete`): the status is for an older
 * generation; a unit at or above the partitions does not run the update revision or is not Ready;
 * a surge unit is left; or a pod is draining. Under RoleRollingUpdate "runs the update revision"
 * means its role hash equals the update revision's for its role (unchanged roles keep older
 * revision labels); under the group strategies the revision label must be the update revision.
 * Role partitions apply under RoleRollingUpdate only, as in the core's rollout.
 */
export function rolloutPending(ms: ModelServing, placed: readonly PlacedPod[], revisions: RevisionsByName): string[] {
  const status = ms.status ?? {};
  const generation = ms.metadata.generation ?? 0;
  if (status.observedGeneration !== generation) return [`${ms.metadata.name}: status.observedGeneration ${status.observedGeneration ?? "absent"} is not generation ${generation}`];
  const update = status.updateRevision === undefined ? undefined : revisions.get(status.updateRevision);
  if (update === undefined) return [`${ms.metadata.name}: update revision ${status.updateRevision ?? "(none)"} is not readable`];
  const reasons = [...surgeAndDrainPending(ms, placed), ...unitsPending(ms, podsByInstance(placed), update)];
  return limited(reasons);
}

function surgeAndDrainPending(ms: ModelServing, placed: readonly PlacedPod[]): string[] {
  const roles = new Map(ms.spec.template.roles.map((role) => [role.name, role]));
  const reasons: string[] = [];
  for (const { pod, id } of placed) {
    const role = roles.get(id.role);
    if (id.group >= ms.spec.replicas || role === undefined || id.instance >= role.replicas) reasons.push(`${ms.metadata.name}: surge or extra pod ${pod.metadata.name} is still there`);
    else if (isDraining(pod)) reasons.push(`${ms.metadata.name}: pod ${pod.metadata.name} is draining`);
  }
  return reasons;
}

function unitsPending(ms: ModelServing, byUnit: ReadonlyMap<string, readonly PlacedPod[]>, update: Revision): string[] {
  const reasons: string[] = [];
  const byRole = ms.spec.rolloutStrategy.type === "RoleRollingUpdate";
  const singleRevision = new Map([[update.name, update]]);
  for (let group = resolveGroupBudget(ms.spec).partition; group < ms.spec.replicas; group++) {
    for (const role of ms.spec.template.roles) {
      const hash = roleHash(update.data, role.name);
      for (let instance = byRole ? resolveRoleBudget(role).partition : 0; instance < role.replicas; instance++) {
        const pods = byUnit.get(unitKey(group, role.name, instance)) ?? [];
        const label = `${ms.metadata.name}: ${instanceId(role.name, instance)} of group ${group}`;
        const outdated = pods.find((entry) => (byRole ? entry.pod.metadata.labels?.[LABEL_ROLE_HASH] !== hash : entry.pod.metadata.labels?.[LABEL_REVISION] !== update.name));
        if (outdated !== undefined) reasons.push(`${label}: pod ${outdated.pod.metadata.name} runs revision ${outdated.pod.metadata.labels?.[LABEL_REVISION] ?? "?"}, not ${update.name}`);
        else if (!instanceAvailable(pods, role, singleRevision)) reasons.push(`${label}: not available (${pods.length === 0 ? "no pods" : "pods missing, not Ready or draining"})`);
      }
    }
  }
  return reasons;
}
