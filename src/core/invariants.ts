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
import type { ModelServing, OrdinalEntry, Role, UnitRecord } from "../api/schema.ts";
import { resolveGroupBudget, resolveRoleBudget, roleFloor } from "../api/budgets.ts";
import {
  ANNOTATION_DRAINING,
  ANNOTATION_IN_PLACE,
  LABEL_ENTRY,
  LABEL_GROUP,
  LABEL_INSTANCE,
  LABEL_MODEL_SERVING,
  LABEL_REVISION,
  LABEL_ROLE_HASH,
  SERVING_GATE,
} from "../api/wellknown.ts";
import { DRAIN_SETTLE_MS, DRAIN_WAITING_REASON, DRAINING_REASON } from "./drain.ts";
import { drainingSinceMs, isPodReady, isTerminating, podCondition } from "./health.ts";
import { drainConfirmations } from "../api/router-lease.ts";
import { instanceId, parsePodIdentity } from "./identity.ts";
import { readProgress } from "./inplace.ts";
import { recreatePending } from "./recreate.ts";
import type { PodIdentity } from "./identity.ts";
import { buildPod } from "./pods.ts";
import { OrdinalTable, positionOf } from "./ordinals.ts";
import type { Revision } from "./pods.ts";
import { roleHash } from "./role-hash.ts";

/** The invariants the simulator checks, by name (the report's `invariants[].name`). */
export const INVARIANT_NAMES = [
  "noDuplicatePods",
  "podsMatchTheirRevision",
  "groupBudget",
  "roleBudget",
  "partitionHolds",
  "surgeBound",
  "drainHonoured",
  "pauseHolds",
  "settledWithinBound",
  "convergedMatchesPods",
] as const;
export type InvariantName = (typeof INVARIANT_NAMES)[number];

/** Decoded revisions by name (what `decodeControllerRevision` gives), for one ModelServing. */
export type RevisionsByName = ReadonlyMap<string, Revision>;

/** A pod of a ModelServing placed in its unit tree. */
export interface PlacedPod {
  readonly pod: Pod;
  /** Its place: group and instance positions (docs/design/succession.md). */
  readonly id: PodIdentity;
  /** The ordinals its name and labels carry, where they differ from `id`. */
  readonly physical?: PodIdentity;
}

/** The pods a ModelServing controls (controller owner reference by uid) whose identity parses. */
export function placedPods(ms: ModelServing, pods: readonly Pod[]): PlacedPod[] {
  return pods.flatMap((pod) => placePod(ms, pod) ?? []);
}

/**
 * `placedPods` of one pod: the pod in `ms`'s unit tree, or undefined when `ms` does not control it
 * or its identity does not parse. Depends only on `ms`'s name, uid and `status.ordinals` (the
 * positions of its ordinals), never on its spec. A retired unit sits at a negative position.
 */
export function placePod(ms: ModelServing, pod: Pod): PlacedPod | undefined {
  if (pod.metadata.labels?.[LABEL_MODEL_SERVING] !== ms.metadata.name) return undefined;
  if (
    !(pod.metadata.ownerReferences ?? []).some(
      (reference) => reference.controller === true && reference.uid === ms.metadata.uid,
    )
  )
    return undefined;
  const id = parsePodIdentity(ms.metadata.name, pod.metadata.name, pod.metadata.labels);
  if (id === undefined) return undefined;
  const ordinals = ms.status?.ordinals;
  if (ordinals === undefined || ordinals.length === 0) return { pod, id };
  // Judged where the controller places it: by position (docs/design/succession.md).
  return { pod, id: { ...positionOf(ordinalTableOf(ordinals), id), index: id.index }, physical: id };
}

/** `OrdinalTable.read` per stored `status.ordinals` list (a WeakMap: every pod of a status shares one). */
const ORDINAL_TABLES = new WeakMap<readonly OrdinalEntry[], OrdinalTable>();

function ordinalTableOf(entries: readonly OrdinalEntry[]): OrdinalTable {
  let table = ORDINAL_TABLES.get(entries);
  if (table === undefined) {
    table = OrdinalTable.read(entries);
    ORDINAL_TABLES.set(entries, table);
  }
  return table;
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
    const key = claimedIdentity(pod);
    if (key === undefined) continue;
    const other = seen.get(key);
    if (other !== undefined) violations.push(`pods ${other} and ${pod.metadata.name} are both live as ${key}`);
    else seen.set(key, pod.metadata.name);
  }
  return violations;
}

/**
 * The identity a pod claims for `noDuplicatePods` (`<namespace>/<modelserving>/<group>/<instance>/<worker index>`),
 * or undefined when it claims none (not live, or not a ModelServing's pod).
 */
export function claimedIdentity(pod: Pod): string | undefined {
  const labels = pod.metadata.labels ?? {};
  const owner = labels[LABEL_MODEL_SERVING];
  if (owner === undefined || !isLive(pod)) return undefined;
  const index = pod.spec.containers[0]?.env?.find((variable) => variable.name === "WORKER_INDEX")?.value ?? "?";
  return `${pod.metadata.namespace ?? ""}/${owner}/${labels[LABEL_GROUP] ?? "?"}/${labels[LABEL_INSTANCE] ?? "?"}/${index}`;
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
export function podsMatchTheirRevision(
  ms: ModelServing,
  placed: readonly PlacedPod[],
  revisions: RevisionsByName,
): string[] {
  return placed.flatMap((entry) => revisionMismatch(ms, entry, revisions) ?? []);
}

/** The name of the revision a pod's spec must be built from (see `podsMatchTheirRevision`). */
export function specRevisionName(pod: Pod): string {
  const progress = readProgress(pod);
  return progress !== undefined && progress.phase !== "Draining"
    ? progress.to
    : (pod.metadata.labels?.[LABEL_REVISION] ?? "");
}

/**
 * `podsMatchTheirRevision`'s verdict on one pod: its violation message, or undefined when its
 * spec is what `revisions[specRevisionName(pod)]` builds for it. A function of `ms`'s name,
 * namespace and uid, that revision, the pod's identity and its spec only.
 */
export function revisionMismatch(
  ms: ModelServing,
  { pod, id, physical }: PlacedPod,
  revisions: RevisionsByName,
): string | undefined {
  const name = specRevisionName(pod);
  const revision = revisions.get(name);
  if (revision === undefined) return `pod ${pod.metadata.name} names revision "${name}", which does not exist`;
  const owner = { name: ms.metadata.name, namespace: ms.metadata.namespace ?? "default", uid: ms.metadata.uid ?? "" };
  // Built under the ordinals it carries: its name, labels and ENTRY_ADDRESS are theirs.
  const built = buildPod(owner, revision, physical ?? id);
  if (built === undefined || !sameWhenSerialized(built.spec, comparedSpec(pod)))
    return `pod ${pod.metadata.name}: spec differs from what revision ${name} builds`;
  return undefined;
}

/** Whether `revisionMismatch` sees the same spec in both pods: equal as JSON, `nodeName` aside. */
export function sameComparedSpec(a: Pod, b: Pod): boolean {
  return a.spec === b.spec || sameWhenSerialized(comparedSpec(a), comparedSpec(b));
}

/** The part of a pod's spec `podsMatchTheirRevision` compares: all but `nodeName`, which the scheduler sets. */
function comparedSpec(pod: Pod): Omit<Pod["spec"], "nodeName"> {
  const { nodeName: _node, ...compared } = pod.spec; // eslint-disable-line @typescript-eslint/no-unused-vars -- set by the scheduler
  return compared;
}

/**
 * Whether `a` and `b` serialize to the same JSON once object keys are sorted (what comparing
 * `JSON.stringify` of key-sorted copies says), without building either: objects compare by the
 * keys JSON keeps (values neither undefined, functions nor symbols), arrays item by item (those
 * values are `null` there), anything else by its JSON text.
 */
function sameWhenSerialized(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    for (let index = 0; index < a.length; index++)
      if (!sameWhenSerialized(inArray(a[index]), inArray(b[index]))) return false;
    return true;
  }
  if (isObject(a) && isObject(b)) {
    if (keptKeyCount(a) !== keptKeyCount(b)) return false;
    for (const key of Object.keys(a)) {
      if (
        keptInObject(a[key]) &&
        !(Object.hasOwn(b, key) && keptInObject(b[key]) && sameWhenSerialized(a[key], b[key]))
      )
        return false;
    }
    return true;
  }
  if (isObject(a) || isObject(b)) return false;
  // Two different strings never write the same JSON text (the common case: no text to build).
  if (typeof a === "string" && typeof b === "string") return false;
  return JSON.stringify(a) === JSON.stringify(b);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null;
}

/** How many of `object`'s own keys JSON writes. */
function keptKeyCount(object: Record<string, unknown>): number {
  let count = 0;
  for (const key of Object.keys(object)) if (keptInObject(object[key])) count += 1;
  return count;
}

/** JSON leaves out of objects what it cannot write. */
function keptInObject(value: unknown): boolean {
  return value !== undefined && typeof value !== "function" && typeof value !== "symbol";
}

/** JSON writes `null` in arrays for what it cannot write. */
function inArray(value: unknown): unknown {
  return keptInObject(value) ? value : null;
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
function expectedPodCount(
  revisions: RevisionsByName,
  revisionName: string | undefined,
  role: Role | undefined,
  roleName: string,
): number {
  const revision = revisionName === undefined ? undefined : revisions.get(revisionName);
  const versioned = revision?.data.roles.find((candidate) => candidate.name === roleName);
  return 1 + (versioned?.workerReplicas ?? role?.workerReplicas ?? 0);
}

/** Every expected pod of the instance is live, Ready and not draining. */
export function instanceAvailable(
  pods: readonly PlacedPod[] | undefined,
  role: Role | undefined,
  revisions: RevisionsByName,
): boolean {
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

/** Available instances per `<group>/<role>` (`countKey`), any ordinal (surge instances count as capacity). */
export type AvailableCounts = ReadonlyMap<string, number>;

/** The key of `(group, role)` in `AvailableCounts`. */
export function countKey(group: number, role: string): string {
  return `${group}/${role}`;
}

/** The group and role a `countKey` names. */
export function ofCountKey(key: string): { group: number; role: string } {
  const slash = key.indexOf("/");
  return { group: Number(key.slice(0, slash)), role: key.slice(slash + 1) };
}

/**
 * Counts available instances per group and role in one pass over the instances; with `within`,
 * only the instances inside those limits (`withinSurgeLimits`).
 */
export function availableCounts(
  ms: ModelServing,
  byUnit: ReadonlyMap<string, readonly PlacedPod[]>,
  revisions: RevisionsByName,
  within?: SurgeLimits,
): AvailableCounts {
  const roles = new Map(ms.spec.template.roles.map((role) => [role.name, role]));
  const counts = new Map<string, number>();
  for (const pods of byUnit.values()) {
    const id = pods[0]?.id;
    if (
      id === undefined ||
      (within !== undefined && !withinSurgeLimits(within, id)) ||
      !instanceAvailable(pods, roles.get(id.role), revisions)
    )
      continue;
    const key = countKey(id.group, id.role);
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

/** Every role of the group has at least its desired number of available instances. */
export function groupAvailable(ms: ModelServing, group: number, counts: AvailableCounts): boolean {
  return ms.spec.template.roles.every((role) => (counts.get(countKey(group, role.name)) ?? 0) >= role.replicas);
}

/** Groups with at least one available instance of some role, ascending. */
function groupsWithCapacity(counts: AvailableCounts): number[] {
  return [...new Set([...counts.keys()].map((key) => ofCountKey(key).group))].sort((a, b) => a - b);
}

// ---------------------------------------------------------------------------------------------
// Budgets (judged by the checker only while a rollout is under way, see src/sim/checker.ts)

/**
 * Disruptions already under way when the budgets a ModelServing is judged against changed (a
 * lower `maxUnavailable`, a strategy switch that starts judging `roleBudget`, a scale that lowers
 * a percentage): the controller cannot undo them, so `groupBudget` and `roleBudget` tolerate them
 * until they recover, while no new disruption may start beyond the new budget.
 */
export interface UnderWay {
  /** Groups unavailable at the change and not available since. */
  readonly groups: ReadonlySet<number>;
  /** `countKey` → for a role pair below its floor at the change, the most instances available since. */
  readonly roleFloors: ReadonlyMap<string, number>;
}

export const NOTHING_UNDER_WAY: UnderWay = { groups: new Set(), roleFloors: new Map() };

/**
 * The judged groups below `replicas` that `groupBudget` counts as unavailable, ascending: not
 * `groupAvailable`, or without capacity (`groupsWithCapacity`). An available group has the count
 * key of each role with desired instances, so only a spec without one needs the keys read.
 */
function missingGroups(ms: ModelServing, counts: AvailableCounts, judged: ReadonlySet<number>): number[] {
  const withCapacity = ms.spec.template.roles.some((role) => role.replicas >= 1)
    ? undefined
    : new Set(groupsWithCapacity(counts));
  const counted = (group: number) => groupAvailable(ms, group, counts) && (withCapacity?.has(group) ?? true);
  // A retired group (negative position) is surplus: its successor is the group judged.
  return [...judged].filter((group) => group >= 0 && group < ms.spec.replicas && !counted(group)).sort((a, b) => a - b);
}

/** Each role's floor, `replicas − maxUnavailable`, by role name. */
function roleFloors(ms: ModelServing): Map<string, number> {
  return new Map(ms.spec.template.roles.map((role) => [role.name, roleFloor(role)]));
}

/**
 * What the budgets of `ms` would count as disrupted now, over the judged groups and role pairs:
 * recorded when those budgets change (see `UnderWay`).
 */
export function disruptionsUnderWay(
  ms: ModelServing,
  counts: AvailableCounts,
  judged: { readonly groups: ReadonlySet<number>; readonly roles: ReadonlySet<string> },
): UnderWay {
  const floors = roleFloors(ms);
  const belowFloor = new Map<string, number>();
  for (const key of judged.roles) {
    const { group, role } = ofCountKey(key);
    const available = counts.get(key) ?? 0;
    const floor = floors.get(role);
    if (floor !== undefined && available < floor && group >= 0 && group < ms.spec.replicas)
      belowFloor.set(key, available);
  }
  return { groups: new Set(missingGroups(ms, counts, judged.groups)), roleFloors: belowFloor };
}

/**
 * `underWay` after the counts moved: a group that is available again leaves; a role pair keeps
 * the most instances available since (a recovered instance may not be disrupted again) and leaves
 * once it reaches its floor. Returns `underWay` itself when nothing changed.
 */
export function stillUnderWay(ms: ModelServing, counts: AvailableCounts, underWay: UnderWay): UnderWay {
  const missing = new Set(missingGroups(ms, counts, underWay.groups));
  const floors = roleFloors(ms);
  const roleFloorsNow = new Map<string, number>();
  let changed = missing.size !== underWay.groups.size;
  for (const [key, most] of underWay.roleFloors) {
    const { group, role } = ofCountKey(key);
    const available = Math.max(most, counts.get(key) ?? 0);
    // A pair of a group scaled away, or of a role gone, leaves too.
    const floor = group < ms.spec.replicas ? (floors.get(role) ?? 0) : 0;
    if (available < floor) roleFloorsNow.set(key, available);
    changed ||= available !== most || available >= floor;
  }
  return changed ? { groups: missing, roleFloors: roleFloorsNow } : underWay;
}

/**
 * groupBudget (DESIGN §2.2): at most the group `maxUnavailable` of the desired groups are
 * disrupted. Available groups are counted over every group index, surge groups included (new
 * capacity replaces old), so the rule is `replicas − min(replicas, available groups) ≤
 * maxUnavailable`. Only groups in `judged` (groups that had been available; never one still being
 * created) count as unavailable. Groups still `underWay` since the budget changed raise the limit
 * to their number, no further.
 */
export function groupBudget(
  ms: ModelServing,
  counts: AvailableCounts,
  judged: ReadonlySet<number>,
  underWay: UnderWay = NOTHING_UNDER_WAY,
): string[] {
  const budget = resolveGroupBudget(ms.spec);
  const missing = missingGroups(ms, counts, judged);
  const limit = Math.max(budget.maxUnavailable, missing.filter((group) => underWay.groups.has(group)).length);
  // No more groups than the missing ones are unavailable: within the budget, the available groups need no count.
  if (missing.length <= limit) return [];
  const available = groupsWithCapacity(counts).filter((group) => groupAvailable(ms, group, counts)).length;
  const unavailable = Math.min(missing.length, ms.spec.replicas - Math.min(ms.spec.replicas, available));
  if (unavailable <= limit) return [];
  const tolerated = limit > budget.maxUnavailable ? ` (${limit} already under way when the budget changed)` : "";
  return [
    `${ms.metadata.name}: ${unavailable} ServingGroup(s) unavailable (groups ${missing.join(", ")}) with maxUnavailable ${budget.maxUnavailable}${tolerated}`,
  ];
}

/**
 * roleBudget (DESIGN §2.2): in each group, each role keeps at least `replicas − maxUnavailable`
 * available instances (surge instances count). Only `(group, role)` pairs in `judged` (that had
 * reached their desired available count) are judged. A pair still `underWay` since the budget
 * changed keeps at least the most instances it has had available since.
 */
export function roleBudget(
  ms: ModelServing,
  counts: AvailableCounts,
  judged: ReadonlySet<string>,
  underWay: UnderWay = NOTHING_UNDER_WAY,
): string[] {
  const violations: string[] = [];
  if (judged.size === 0) return violations;
  // Each role's floor once, not per group.
  const floors = ms.spec.template.roles.map((role) => ({ role, floor: roleFloor(role) }));
  for (let group = 0; group < ms.spec.replicas; group++) {
    for (const { role, floor } of floors) {
      const key = countKey(group, role.name);
      if (!judged.has(key)) continue;
      const available = counts.get(key) ?? 0;
      const since = underWay.roleFloors.get(key);
      if (since !== undefined && since < floor) {
        if (available < since)
          violations.push(
            `${ms.metadata.name}: group ${group} role ${role.name}: ${available} available instance(s), fewer than the ${since} available since the budget changed (floor ${floor})`,
          );
      } else if (available < floor) {
        violations.push(
          `${ms.metadata.name}: group ${group} role ${role.name}: ${available} available instance(s), fewer than ${floor} (replicas ${role.replicas} − maxUnavailable)`,
        );
      }
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
  const limits = surgeLimits(ms);
  const violations = new Set<string>();
  for (const entry of placed) {
    const violation = surgeViolation(limits, entry);
    if (violation !== undefined) violations.add(violation);
  }
  return [...violations];
}

/** What `surgeBound` holds a ModelServing's pods to: its name and group and instance limits. */
export interface SurgeLimits {
  readonly name: string;
  /** `replicas + maxSurge` of groups. */
  readonly groupLimit: number;
  /** `role.replicas + role.maxSurge` per role the spec has. */
  readonly instanceLimits: ReadonlyMap<string, number>;
}

/** The limits `surgeBound` holds `ms`'s pods to, from its spec's replicas and surge budgets. */
export function surgeLimits(ms: ModelServing): SurgeLimits {
  const instanceLimits = new Map(
    ms.spec.template.roles.map((role) => [role.name, role.replicas + resolveRoleBudget(role).maxSurge]),
  );
  return {
    name: ms.metadata.name,
    groupLimit: ms.spec.replicas + resolveGroupBudget(ms.spec).maxSurge,
    instanceLimits,
  };
}

/**
 * Instance `(group, role, instance)` lies inside `limits`: capacity the spec lets the controller
 * keep. An instance beyond them (above a role's new count after a scale-down, say) is scaled down
 * whatever it serves.
 */
export function withinSurgeLimits(
  limits: SurgeLimits,
  { group, role, instance }: { group: number; role: string; instance: number },
): boolean {
  const limit = limits.instanceLimits.get(role);
  return group < limits.groupLimit && limit !== undefined && instance < limit;
}

/** `surgeBound`'s verdict on one pod: its violation message, or undefined when it is within bounds. */
export function surgeViolation(limits: SurgeLimits, { pod, id }: PlacedPod): string | undefined {
  // A retired unit (negative position, docs/design/succession.md) is on its way out like a
  // draining one, from the succession on; its ordinals were below the bound when it was built.
  if (!isLive(pod) || isDraining(pod) || id.group < 0 || id.instance < 0) return undefined;
  const limit = limits.instanceLimits.get(id.role);
  if (id.group >= limits.groupLimit)
    return `${limits.name}: group ${id.group} exists beyond replicas + maxSurge = ${limits.groupLimit}`;
  if (limit === undefined)
    return `${limits.name}: group ${id.group} has pods of role ${id.role}, which the spec does not have`;
  if (id.instance >= limit)
    return `${limits.name}: ${instanceId(id.role, id.instance)} of group ${id.group} exists beyond replicas + maxSurge = ${limit}`;
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// drainHonoured (judged per pod write, by the checker, outside fault windows)

/**
 * `drainHonoured` on one write to a pod (`before` → `after`, `after` undefined when it is gone)
 * at `nowMs`: a drain the controller began is honoured (DESIGN §3.5). An entry pod marked draining
 * while it served (its serving gate False with reason "Draining", as the controller sets it when
 * it marks a serving pod) whose containers still run is deleted, or restarted in place (a container
 * image changes), only once `drain.timeoutSeconds` have passed since the mark, or once the settle
 * (`DRAIN_SETTLE_MS`) has passed and every router of `mustConfirm` has confirmed it
 * (`drained.tandem.dev/<router-id>`). `mustConfirm` are the routers the judge knows to have been
 * live, without a gap, since the mark or earlier and still live, whose scope covers the pod's
 * namespace: a router registered after the mark confirms it as soon as it syncs, and the
 * controller, whose cache lags, need not have seen it. The message names the pod, or undefined
 * when the write honours it.
 *
 * It judges only drains: a pod deleted while serving with no drain begun is a recovery when its
 * unit is broken (dead units serve nothing, DESIGN §3.6), which the stored pods alone cannot tell
 * from a skipped drain. Faults (pods deleted by others, nodes lost) are not the controller's: the
 * checker does not judge writes in a fault window.
 */
export function drainViolation(
  before: Pod,
  after: Pod | undefined,
  drain: { readonly timeoutSeconds: number; readonly mustConfirm: readonly string[] },
  nowMs: number,
): string | undefined {
  if (isTerminating(before) || !disrupts(before, after)) return undefined;
  const markedAtMs = drainingSinceMs(before);
  if (markedAtMs === undefined || before.metadata.labels?.[LABEL_ENTRY] !== "true") return undefined;
  if (
    podCondition(before, SERVING_GATE)?.reason !== DRAINING_REASON ||
    podCondition(before, "ContainersReady")?.status !== "True"
  )
    return undefined;
  const deadlineMs = markedAtMs + drain.timeoutSeconds * 1000;
  if (nowMs >= deadlineMs) return undefined;
  const confirmed = drainConfirmations(before.metadata.annotations);
  const missing = drain.mustConfirm.filter((id) => !confirmed.includes(id));
  const settled = nowMs >= markedAtMs + DRAIN_SETTLE_MS;
  if (settled && missing.length === 0) return undefined;
  const what = after === undefined || isTerminating(after) ? "deleted" : "restarted in place";
  const why = settled
    ? `router(s) ${missing.join(", ")} had not confirmed`
    : `${(nowMs - markedAtMs) / 1000}s after the mark, within the ${DRAIN_SETTLE_MS / 1000}s settle`;
  return `${before.metadata.name} ${what} ${(deadlineMs - nowMs) / 1000}s before its drain timed out (marked ${before.metadata.annotations?.[ANNOTATION_DRAINING] ?? ""}, drain.timeoutSeconds ${drain.timeoutSeconds}): ${why}`;
}

/** The write deletes the pod or changes a container's image (an in-place restart). */
function disrupts(before: Pod, after: Pod | undefined): boolean {
  if (after === undefined || isTerminating(after)) return true;
  const images = new Map(before.spec.containers.map((container) => [container.name, container.image]));
  return after.spec.containers.some(
    (container) => images.has(container.name) && images.get(container.name) !== container.image,
  );
}

// ---------------------------------------------------------------------------------------------
// partitionHolds (the checker remembers each unit's role hash across time)

/**
 * Whether instance `(group, role, instance)` is below a partition: a desired instance (a surge one
 * is temporary, built at the update revision, and never what a partition holds) whose group is
 * below the group partition or (RoleRollingUpdate, as in the core's rollout) whose ordinal is
 * below its role's.
 */
export function belowPartition(ms: ModelServing, group: number, role: string, instance: number): boolean {
  const spec = ms.spec.template.roles.find((candidate) => candidate.name === role);
  // A retired unit (negative position) is surplus, succeeded at or above the partition.
  if (spec === undefined || instance >= spec.replicas || instance < 0 || group < 0) return false;
  if (group < resolveGroupBudget(ms.spec).partition) return true;
  return ms.spec.rolloutStrategy.type === "RoleRollingUpdate" && instance < resolveRoleBudget(spec).partition;
}

/** A live instance below a partition and the role hashes its pods carry. */
export interface PartitionedUnit {
  readonly group: number;
  readonly role: string;
  readonly instance: number;
  /** What its first live pod runs (`runningRoleHash`). */
  readonly hash: string;
  /**
   * The distinct role hashes its live pods run, `hash` first: more than one only while a move is
   * under way (in place, one pod of an instance is patched before another) or when pods disagree.
   */
  readonly hashes: readonly string[];
  /** Every live pod of it is Ready, serving (not draining) and not moving in place: no move is under way. */
  readonly settled: boolean;
}

/**
 * Every live instance below a partition with the role hashes of what its pods run
 * (`runningRoleHash`), by `unitKey`. Pods of one instance that disagree are no violation by
 * themselves: an in-place move under way as the partition came may finish, one pod at a time; the
 * checker holds each hash to what the instance may run (src/sim/checker.ts, `partitionHashes`).
 */
export function partitionedUnits(
  ms: ModelServing,
  placed: readonly PlacedPod[],
  revisions: RevisionsByName,
): Map<string, PartitionedUnit> {
  const units = new Map<string, PartitionedUnit>();
  for (const entry of placed) {
    if (!inPartition(ms, entry)) continue;
    const { pod, id } = entry;
    const key = unitKey(id.group, id.role, id.instance);
    const hash = runningRoleHash(pod, id.role, revisions);
    const settled = podSettled(pod);
    const known = units.get(key);
    if (known === undefined)
      units.set(key, { group: id.group, role: id.role, instance: id.instance, hash, hashes: [hash], settled });
    else if (!known.hashes.includes(hash) || (known.settled && !settled))
      units.set(key, {
        ...known,
        hashes: known.hashes.includes(hash) ? known.hashes : [...known.hashes, hash],
        settled: known.settled && settled,
      });
  }
  return units;
}

/**
 * pauseHolds (DESIGN §2, "paused"): while a pause the controller has observed lasts, nothing moves
 * to another revision, as if a partition covered every unit — like `partitionedUnits`, but pod by
 * pod (keyed `<unitKey>#<pod index>`), over every live pod, surge included: an instance may be
 * mid-move when the pause comes (in place, one pod patched before the other), and the move may
 * finish. The checker holds each pod to the hashes it ran when the pause was first seen (or the
 * one its record named then), and a pod first seen later to its instance's record then.
 */
export function pausedPods(placed: readonly PlacedPod[], revisions: RevisionsByName): Map<string, PartitionedUnit> {
  const pods = new Map<string, PartitionedUnit>();
  for (const { pod, id } of placed) {
    if (!isLive(pod)) continue;
    const hash = runningRoleHash(pod, id.role, revisions);
    pods.set(`${unitKey(id.group, id.role, id.instance)}#${id.index}`, {
      group: id.group,
      role: id.role,
      instance: id.instance,
      hash,
      hashes: [hash],
      settled: podSettled(pod),
    });
  }
  return pods;
}

/** Ready, serving (not draining) and not moving in place: no move of the pod is under way. */
function podSettled(pod: Pod): boolean {
  return isPodReady(pod) && !isDraining(pod) && pod.metadata.annotations?.[ANNOTATION_IN_PLACE] === undefined;
}

/**
 * The role hash of the role spec a pod runs: its label, except past an in-place patch, where the
 * spec already is the target's and the label follows only at the finish (`specRevisionName`); an
 * unknown target leaves the label.
 */
function runningRoleHash(pod: Pod, role: string, revisions: RevisionsByName): string {
  const label = pod.metadata.labels?.[LABEL_ROLE_HASH] ?? "";
  const name = specRevisionName(pod);
  if (name === pod.metadata.labels?.[LABEL_REVISION]) return label;
  const revision = revisions.get(name);
  return (revision === undefined ? undefined : roleHash(revision.data, role)) ?? label;
}

/**
 * What a stored status claims when its condition Progressing, computed for the current generation,
 * is False: "Converged" (nothing to do: the pods match the spec) or "settled" (paused, blocked:
 * nothing to do until the spec changes); undefined when it claims work or is not current.
 * `settledWithinBound` holds a settled claim to the surge limits with nothing tolerated beyond
 * them, and a Converged one to no unit beyond the desired; `convergedMatchesPods` holds a
 * Converged claim to the pods (`rolloutPending`, `availablePending`: every unit the rollout may
 * update runs the update revision and is available, every desired group available, nothing
 * draining, no surge). The checker gives the controller time to see what changed before a
 * contradiction counts.
 */
export function settledClaim(ms: ModelServing): "Converged" | "settled" | undefined {
  const progressing = ms.status?.conditions?.find((condition) => condition.type === "Progressing");
  if (
    progressing?.status !== "False" ||
    progressing.observedGeneration !== ms.metadata.generation ||
    ms.status?.observedGeneration !== ms.metadata.generation
  )
    return undefined;
  return progressing.reason === "Converged" ? "Converged" : "settled";
}

/**
 * pauseHolds as the controller's runtime assert on its own plan (`plan` refuses one that breaks
 * it): while the spec is paused, no unit gets a record at the update revision that the stored
 * records did not give it already (no record: the current revision; an instance is also covered by
 * its group's record). Nothing is held while the update revision is the current one. Returns what
 * would move.
 */
export function pauseBroken(
  paused: boolean,
  stored: { readonly units?: readonly UnitRecord[]; readonly currentRevision?: string },
  planned: { readonly units: readonly UnitRecord[]; readonly update: string },
): string[] {
  const { update } = planned;
  if (!paused || stored.currentRevision === undefined || stored.currentRevision === update) return [];
  const atUpdate = new Set(
    (stored.units ?? [])
      .filter((record) => record.revision === update)
      .map((record) => `${record.group}/${record.role ?? ""}/${record.instance ?? ""}`),
  );
  const moved = planned.units.filter(
    (record) =>
      record.revision === update &&
      !atUpdate.has(`${record.group}/${record.role ?? ""}/${record.instance ?? ""}`) &&
      !atUpdate.has(`${record.group}//`),
  );
  return moved.map(
    (record) =>
      `${record.role === undefined ? `group ${record.group}` : `${instanceId(record.role, record.instance ?? 0)} of group ${record.group}`} would be recorded at the update revision ${update} while the rollout is paused`,
  );
}

/** The pod counts in `partitionedUnits`: it is live and its instance is below a partition. */
export function inPartition(ms: ModelServing, { pod, id }: PlacedPod): boolean {
  return isLive(pod) && belowPartition(ms, id.group, id.role, id.instance);
}

// ---------------------------------------------------------------------------------------------
// Liveness: what a wait is still waiting for

const MAX_REASONS = 5;

function limited(reasons: string[]): string[] {
  return reasons.length <= MAX_REASONS
    ? reasons
    : [...reasons.slice(0, MAX_REASONS), `and ${reasons.length - MAX_REASONS} more`];
}

/** All `reasons` found, `limited`; or, when the caller set a `limit`, exactly the ones found (no count of the rest). */
function limitedTo(reasons: string[], limit: number): string[] {
  return limit === Number.POSITIVE_INFINITY ? limited(reasons) : reasons;
}

/**
 * Why the ModelServing is not Available: the stored condition Available is not True for the
 * current generation, or (observed truth) some desired group lacks available instances.
 */
export function availablePending(
  ms: ModelServing,
  placed: readonly PlacedPod[],
  revisions: RevisionsByName,
  limit?: number,
): string[] {
  return availablePendingFor(ms, availableCounts(ms, podsByInstance(placed), revisions), limit);
}

/**
 * `availablePending` from the available instance counts (`availableCounts`) of `ms`'s pods. With
 * `limit`, the first `limit` reasons only, found without looking further.
 */
export function availablePendingFor(
  ms: ModelServing,
  counts: AvailableCounts,
  limit = Number.POSITIVE_INFINITY,
): string[] {
  const reasons: string[] = [];
  const condition = ms.status?.conditions?.find((candidate) => candidate.type === "Available");
  const generation = ms.metadata.generation ?? 0;
  if (condition?.status !== "True")
    reasons.push(
      `${ms.metadata.name}: condition Available is ${condition?.status ?? "absent"}${condition?.message === undefined ? "" : ` (${condition.message})`}`,
    );
  else if (condition.observedGeneration !== undefined && condition.observedGeneration !== generation)
    reasons.push(
      `${ms.metadata.name}: condition Available is for generation ${condition.observedGeneration}, not ${generation}`,
    );
  for (let group = 0; group < ms.spec.replicas && reasons.length < limit; group++) {
    for (const role of ms.spec.template.roles) {
      const available = counts.get(countKey(group, role.name)) ?? 0;
      if (
        available < role.replicas &&
        reasons.push(
          `${ms.metadata.name}: group ${group} role ${role.name}: ${available} of ${role.replicas} instance(s) available`,
        ) >= limit
      )
        break;
    }
  }
  return limitedTo(reasons, limit);
}

/**
 * Why the rollout is not complete (DESIGN §6 `RolloutComplete`): the status is for an older
 * generation; a unit at or above the partitions does not run the update revision or is not Ready;
 * a surge unit is left; or a pod is draining. Under RoleRollingUpdate "runs the update revision"
 * means its role hash equals the update revision's for its role (unchanged roles keep older
 * revision labels); under the group strategies the revision label must be the update revision.
 * Role partitions apply under RoleRollingUpdate only, as in the core's rollout.
 */
export function rolloutPending(
  ms: ModelServing,
  placed: readonly PlacedPod[],
  revisions: RevisionsByName,
  limit?: number,
): string[] {
  const byUnit = podsByInstance(placed);
  return rolloutPendingFrom(
    ms,
    revisions,
    {
      surgeAndDrain: (limit) => placed.flatMap((entry) => surgeOrDrainReason(ms, entry) ?? []).slice(0, limit),
      instanceReason: (where, update) =>
        instanceRolloutReason(
          ms,
          where,
          byUnit.get(unitKey(where.group, where.role.name, where.instance)) ?? [],
          update,
        ),
    },
    limit,
  );
}

/** An instance of the spec: group, role and ordinal. */
export interface InstanceOf {
  readonly group: number;
  readonly role: Role;
  readonly instance: number;
}

/** An update revision and the role hash of one of its roles (`roleHash(update.data, role)`). */
export interface UpdateOfRole {
  readonly revision: Revision;
  readonly hash: string | undefined;
}

/**
 * What `rolloutPendingFrom` reads about the pods: a whole pod list (`rolloutPending`) or an index
 * kept up to date as pods change (the simulator's checker), giving the same answers.
 */
export interface RolloutEvidence {
  /** `surgeOrDrainReason` of every placed pod that has one, in the pods' stored order: the first `limit`. */
  surgeAndDrain(limit: number): readonly string[];
  /** `instanceRolloutReason` of the instance with its placed pods (stored order). */
  instanceReason(where: InstanceOf, update: UpdateOfRole): string | undefined;
}

/**
 * `rolloutPending` with the pods read through `evidence`. With `limit`, the first `limit` reasons
 * only: no instance is looked at once that many are found (whether any is left is the same).
 */
export function rolloutPendingFrom(
  ms: ModelServing,
  revisions: RevisionsByName,
  evidence: RolloutEvidence,
  limit = Number.POSITIVE_INFINITY,
): string[] {
  const status = ms.status ?? {};
  const generation = ms.metadata.generation ?? 0;
  if (status.observedGeneration !== generation)
    return [
      `${ms.metadata.name}: status.observedGeneration ${status.observedGeneration ?? "absent"} is not generation ${generation}`,
    ];
  const update = status.updateRevision === undefined ? undefined : revisions.get(status.updateRevision);
  if (update === undefined)
    return [`${ms.metadata.name}: update revision ${status.updateRevision ?? "(none)"} is not readable`];
  const reasons = [...recreatePending(ms), ...evidence.surgeAndDrain(limit)];
  if (reasons.length < limit) reasons.push(...unitsPending(ms, update, evidence, limit - reasons.length));
  // The pods are done; the status must say so too, or a report's final status would not agree.
  if (reasons.length === 0) reasons.push(...statusPending(ms));
  return limitedTo(reasons, limit);
}

/**
 * Why the stored status does not agree yet that a rollout whose pods are done is complete: with
 * nothing held back by a partition or a pause, the update revision must be current and
 * Progressing must claim no work (status False, computed for this generation); with units held,
 * Progressing must at least not claim pods being acted on.
 */
function statusPending(ms: ModelServing): string[] {
  const status = ms.status ?? {};
  const progressing = status.conditions?.find((condition) => condition.type === "Progressing");
  const name = ms.metadata.name;
  const held =
    ms.spec.rolloutStrategy.paused ||
    resolveGroupBudget(ms.spec).partition > 0 ||
    (ms.spec.rolloutStrategy.type === "RoleRollingUpdate" &&
      ms.spec.template.roles.some((role) => resolveRoleBudget(role).partition > 0));
  if (!held && status.currentRevision !== status.updateRevision)
    return [
      `${name}: status.currentRevision ${status.currentRevision ?? "(none)"} is not the update revision ${status.updateRevision ?? "(none)"} yet`,
    ];
  if (progressing === undefined || progressing.observedGeneration !== ms.metadata.generation)
    return [`${name}: condition Progressing is not computed for generation ${ms.metadata.generation ?? 0} yet`];
  // A drain that waits is work under way too (it said Reconciling before it had its own reason).
  const claimsWork = held
    ? progressing.reason === "Reconciling" || progressing.reason === DRAIN_WAITING_REASON
    : progressing.status !== "False";
  return claimsWork
    ? [
        `${name}: condition Progressing still says ${progressing.reason ?? progressing.status}: ${progressing.message ?? ""}`,
      ]
    : [];
}

/** Why one placed pod keeps the rollout from completing: it is a surge or extra pod, or it is draining. */
export function surgeOrDrainReason(ms: ModelServing, { pod, id }: PlacedPod): string | undefined {
  const role = ms.spec.template.roles.find((candidate) => candidate.name === id.role);
  if (id.group >= ms.spec.replicas || role === undefined || id.instance >= role.replicas)
    return `${ms.metadata.name}: surge or extra pod ${pod.metadata.name} is still there`;
  if (id.group < 0 || id.instance < 0)
    return `${ms.metadata.name}: retired pod ${pod.metadata.name} (succeeded by a surge unit) is still there`;
  if (isDraining(pod)) return `${ms.metadata.name}: pod ${pod.metadata.name} is draining`;
  return undefined;
}

/**
 * The desired instances at or above the partitions, in (group, role, ordinal) order, with their
 * reasons: the first `limit` of them.
 */
function unitsPending(ms: ModelServing, update: Revision, evidence: RolloutEvidence, limit: number): string[] {
  const reasons: string[] = [];
  const byRole = ms.spec.rolloutStrategy.type === "RoleRollingUpdate";
  // Per role once: its first ordinal judged, and its hash (computed at its first use, never for
  // a role no group reaches).
  const roles = ms.spec.template.roles.map((role) => ({
    role,
    from: byRole ? resolveRoleBudget(role).partition : 0,
    update: undefined as UpdateOfRole | undefined,
  }));
  for (let group = resolveGroupBudget(ms.spec).partition; group < ms.spec.replicas; group++) {
    for (const each of roles) {
      const { role, from } = each;
      each.update ??= { revision: update, hash: roleHash(update.data, role.name) };
      for (let instance = from; instance < role.replicas; instance++) {
        const reason = evidence.instanceReason({ group, role, instance }, each.update);
        if (reason !== undefined && reasons.push(reason) >= limit) return reasons;
      }
    }
  }
  return reasons;
}

/**
 * Why one desired instance keeps the rollout from completing: a pod of it does not run the update
 * revision, or it is not available under it. `pods` are the instance's placed pods in stored order.
 */
export function instanceRolloutReason(
  ms: ModelServing,
  { group, role, instance }: InstanceOf,
  pods: readonly PlacedPod[],
  update: UpdateOfRole,
): string | undefined {
  // RoleRollingUpdate and InPlaceUpdate leave the pods of a role an update does not change at
  // their older revision label: their role hash tells what they run. ServingGroupRollingUpdate
  // relabels such pods (`relabelUnchanged` in lifecycle.ts), so its label tells.
  const { type } = ms.spec.rolloutStrategy;
  const byRoleHash = type === "RoleRollingUpdate" || type === "InPlaceUpdate";
  const { revision, hash } = update;
  const label = (): string => `${ms.metadata.name}: ${instanceId(role.name, instance)} of group ${group}`;
  const outdated = pods.find((entry) =>
    byRoleHash
      ? entry.pod.metadata.labels?.[LABEL_ROLE_HASH] !== hash
      : entry.pod.metadata.labels?.[LABEL_REVISION] !== revision.name,
  );
  if (outdated !== undefined)
    return `${label()}: pod ${outdated.pod.metadata.name} runs revision ${outdated.pod.metadata.labels?.[LABEL_REVISION] ?? "?"}, not ${revision.name}`;
  if (!instanceAvailable(pods, role, new Map([[revision.name, revision]])))
    return `${label()}: not available (${pods.length === 0 ? "no pods" : "pods missing, not Ready or draining"})`;
  return undefined;
}
