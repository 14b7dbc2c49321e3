/**
 * The rollout (DESIGN §2.1–2.5, seed §1–3): decides which units move to the update revision now,
 * by writing their durable records, and how many temporary surge units exist. The lifecycle then
 * makes the pods match. Pure.
 *
 * - ServingGroupRollingUpdate moves whole groups; RoleRollingUpdate moves the instances of roles
 *   whose role spec changed, and nothing else.
 * - Partition: units with ordinal below it never get a permit; groups count against the group
 *   partition, instances against their role's partition within each group.
 * - Budgets nest and hold at every instant: per role within each group, available instances stay
 *   ≥ replicas − maxUnavailable and all instances ≤ replicas + maxSurge; across groups, at most
 *   the group maxUnavailable are disrupted (have a role below its desired available count).
 * - A unit that is already unavailable (failed, missing, starting) costs no budget to move, so a
 *   failed outdated unit above the partition is rebuilt new; below the partition, or when paused,
 *   it is rebuilt at its recorded revision (recovery is never an unbudgeted upgrade).
 * - Surge units get ordinals above the desired ones, exist while outdated units remain or while
 *   they carry capacity the budgets need (the role's floor; a group's availability, see
 *   `holdSurge`), and are scaled down (drained) when the rollout no longer needs them; scaling
 *   one down below a role's desired count is a disruption like any other.
 */
import type { ResolvedBudget } from "../api/budgets.ts";
import { resolveGroupBudget, resolveRoleBudget, roleFloor } from "../api/budgets.ts";
import type { Role, UnitRecord } from "../api/schema.ts";
import { range } from "./health.ts";
import { compareStrings, getOrCreate } from "./maps.ts";
import type { InstanceState, InstanceStates, Layout, UnreadableUses } from "./instances.ts";
import { desiredInstanceStates, resolver } from "./instances.ts";
import type { Permit, RoleProgress } from "./coordination.ts";
import type { Ineligible } from "./inplace.ts";
import { groupIneligibility, readProgress } from "./inplace.ts";
import { startPermits } from "./coordination.ts";
import type { Model } from "./model.ts";
import { instancePodsOf, somePod } from "./model.ts";
import type { Revision } from "./pods.ts";
import type { Revisions } from "./revisions.ts";
import { sameRoleSpec } from "./role-hash.ts";
import type { OrdinalTable } from "./ordinals.ts";
import { groupLabel } from "./ordinals.ts";

/** The rollout's decision for this plan. */
export interface RolloutDecision {
  readonly layout: Layout;
  /** Records or the current revision changed: the status must be written before any pod action. */
  readonly recordsChanged: boolean;
  /** Why the rollout is waiting, for the Progressing condition; empty when it is not. */
  readonly waiting: readonly string[];
  /** Why the rollout cannot proceed without a spec change, for RolloutBlocked; empty when it can. */
  readonly blocked: readonly string[];
  /** Groups InPlaceUpdate refuses to move: their change is more than images (RolloutBlocked). */
  readonly ineligible: readonly Ineligible[];
  /**
   * The positions and ordinals after this plan's successions (`model.ordinals` when there is
   * none). A succession moves pods between positions: the plan writes it and acts on no pod until
   * the stored status shows it.
   */
  readonly ordinals: OrdinalTable;
  /** Some surge unit succeeded an outdated one in this plan. */
  readonly succeeded: boolean;
}

interface Scratch {
  readonly model: Model;
  readonly revisions: Revisions;
  readonly states: InstanceStates;
  readonly records: Map<string, UnitRecord>;
  readonly waiting: string[];
  /** Reasons the rollout cannot proceed without a spec change (condition RolloutBlocked). */
  readonly blocked: string[];
  readonly ineligible: Ineligible[];
  readonly unreadable: UnreadableUses;
  /** Record keys of surge instances kept at their revision this plan (`holdSurge`). */
  readonly held: Set<string>;
  /** The ordinals with this plan's successions; undefined until the first one. */
  ordinals: OrdinalTable | undefined;
}

function recordKey(record: { group: number; role?: string | undefined; instance?: number | undefined }): string {
  return record.role === undefined ? `${record.group}` : `${record.group}/${record.role}/${record.instance ?? 0}`;
}

/** Decides the layout for this plan from the stored one. */
export function planRollout(states: InstanceStates, base: Layout, unreadable: UnreadableUses): RolloutDecision {
  const { model, revisions } = states;
  const scratch: Scratch = {
    model,
    revisions,
    states,
    records: new Map(base.units.map((record) => [recordKey(record), record])),
    waiting: [],
    blocked: [],
    ineligible: [],
    unreadable,
    held: new Set(),
    ordinals: undefined,
  };
  const strategy = model.ms.spec.rolloutStrategy;
  withdrawPermitsBelowPartition(scratch, base);
  lapseServingPermits(scratch, base);
  const surge =
    strategy.type === "RoleRollingUpdate" ? planRoleRollout(scratch, base) : planGroupRollout(scratch, base);
  const promoted = promote(scratch, base, surge);
  const currentName = promoted ? revisions.update.name : base.currentName;
  // Promotion drops every record in the same write (docs/design/rollout.md): a record left from
  // another strategy or revision would otherwise shadow the new current revision.
  const units = promoted ? [] : compact(scratch, currentName, surge);
  const layout: Layout = { groups: surge.groups, instances: surge.instances, units, currentName };
  const recordsChanged = currentName !== base.currentName || !sameRecords(units, base.units);
  return {
    layout,
    recordsChanged,
    waiting: scratch.waiting,
    blocked: scratch.blocked,
    ineligible: scratch.ineligible,
    ordinals: scratch.ordinals ?? model.ordinals,
    succeeded: scratch.ordinals !== undefined,
  };
}

/**
 * A surge unit that serves at the update revision is the successor an outdated unit needs: the
 * highest surge position among `states` (one per unit, surge positions from `from`) that is
 * available, at the update revision and recorded there, not held and not already a successor this
 * plan (`taken`, positions). Taking its place costs no start (docs/design/succession.md).
 */
export function successorOf<T extends { readonly position: number; readonly serving: boolean }>(
  units: readonly T[],
  from: number,
  taken: ReadonlySet<number>,
): T | undefined {
  let found: T | undefined;
  for (const unit of units)
    if (unit.position >= from && unit.serving && !taken.has(unit.position) && (found?.position ?? -1) < unit.position)
      found = unit;
  return found;
}

/** The ordinals of this plan, copied from the model's at the first succession. */
function ordinalsToWrite(scratch: Scratch): OrdinalTable {
  scratch.ordinals ??= scratch.model.ordinals.copy();
  return scratch.ordinals;
}

/**
 * Surge instance `successor` of `role` in `group` takes the place of the outdated instance at
 * position `outdated` for good: its record goes with it, the outdated one is retired (drained and
 * deleted as surplus once the stored status shows the change).
 */
function succeedInstance(scratch: Scratch, group: number, role: string, outdated: number, successor: number): void {
  ordinalsToWrite(scratch).instanceScope(group, role).succeed(outdated, successor);
  permit(scratch, { group, role, instance: outdated, revision: scratch.revisions.update.name });
  scratch.records.delete(recordKey({ group, role, instance: successor }));
}

/** Surge group `successor` takes the place of the outdated group `outdated` for good (`succeedInstance`, for groups). */
function succeedGroup(scratch: Scratch, outdated: number, successor: number): void {
  ordinalsToWrite(scratch).succeedGroup(outdated, successor);
  permit(scratch, { group: outdated, revision: scratch.revisions.update.name });
  for (const [key, record] of [...scratch.records]) if (record.group === successor) scratch.records.delete(key);
}

/**
 * The two record lists serialize alike (what the stored status would show). Compared record by
 * record, skipping records kept as they are: most plans change none.
 */
function sameRecords(a: readonly UnitRecord[], b: readonly UnitRecord[]): boolean {
  return (
    a.length === b.length &&
    a.every((record, index) => record === b[index] || JSON.stringify(record) === JSON.stringify(b[index]))
  );
}

/**
 * Withdraws the permits a partition raised mid-rollout now covers (DESIGN §2.4, StatefulSet
 * semantics: the partition is read at every pass, and a move below it that has not begun does not
 * begin). A unit below a partition whose record names another revision than its live pods run goes
 * back to the revision they run; a drain begun for the move is then cancelled (DESIGN §3.6), and
 * a pod of it already deleted is rebuilt at that revision. Moves that can no longer be undone
 * finish at their record: a unit with no live pod (nothing shows what it ran; it is rebuilt at
 * its record, as recovery would, §2.5), one with a pod patched in place (`patchedInPlace`:
 * patching back would be a second restart), and, under the group strategies, where the unit is the
 * group, a group with an instance already at the record (moving it back would be a second move).
 */
function withdrawPermitsBelowPartition(scratch: Scratch, base: Layout): void {
  const spec = scratch.model.ms.spec;
  const groupPartition = Math.min(resolveGroupBudget(spec).partition, spec.replicas);
  const byRole = spec.rolloutStrategy.type === "RoleRollingUpdate";
  const rolePartitions = byRole && spec.template.roles.some((role) => resolveRoleBudget(role).partition > 0);
  // Most plans have no record or no partition: nothing to look at.
  if (scratch.records.size === 0 || (groupPartition === 0 && !rolePartitions)) return;
  const resolve = resolver(scratch.revisions, scratch.unreadable);
  const layout = layoutWith(scratch, base, { groups: spec.replicas, instances: (_group, role) => role.replicas });
  for (const group of range(rolePartitions ? spec.replicas : groupPartition)) {
    const states = desiredInstanceStates(scratch.states, layout, resolve, group);
    if (!byRole) withdrawGroupPermit(scratch, group, states);
    else
      for (const state of states)
        if (group < groupPartition || belowRolePartition(scratch, state)) withdrawInstancePermit(scratch, state);
  }
}

/**
 * A permit lapses when its unit serves as it is and its move has not begun: every instance of the
 * unit (the group under the group strategies) Ready, none marked for a drain or an in-place move,
 * none with a pod terminating. Such a permit was granted to the unit while it was unavailable, for
 * free; moving it now takes capacity, which only the budget may allow, so the budgeted pass of
 * this plan grants it again only if the budget lets it (fuzz-faults-810262: a group down with its
 * node got a free permit, served again before its pod could go — the deletion waited for a write
 * that failed — and was then replaced with maxUnavailable 0 while the surge group still started).
 * A permit the budget granted lapses too when its drain mark was not written yet, and the same
 * budget grants it again at once. A group that moved in part cannot go back; the instances of it
 * that are being replaced only for their older label stay instead (`keepUnchangedInstances`).
 */
function lapseServingPermits(scratch: Scratch, base: Layout): void {
  if (scratch.records.size === 0) return;
  const spec = scratch.model.ms.spec;
  const byRole = spec.rolloutStrategy.type === "RoleRollingUpdate";
  const resolve = resolver(scratch.revisions, scratch.unreadable);
  const layout = layoutWith(scratch, base, { groups: spec.replicas, instances: (_group, role) => role.replicas });
  const groups = new Set(
    [...scratch.records.values()].map((record) => record.group).filter((group) => group < spec.replicas),
  );
  for (const group of groups) {
    const states = desiredInstanceStates(scratch.states, layout, resolve, group);
    if (!byRole) {
      if (states.some((state) => state.replacing) && states.every(servesUnmoved))
        if (!withdrawGroupPermit(scratch, group, states)) keepUnchangedInstances(scratch, states);
      continue;
    }
    for (const state of states) if (state.replacing && servesUnmoved(state)) withdrawInstancePermit(scratch, state);
  }
}

/** Every pod of the instance is live and Ready, none marked or being deleted: no move of it has begun. */
function servesUnmoved(state: InstanceState): boolean {
  return state.health.ready && !state.health.marked && state.health.terminating.length === 0;
}

function belowRolePartition(scratch: Scratch, state: InstanceState): boolean {
  const role = scratch.model.roles.get(state.role);
  return role !== undefined && state.instance < resolveRoleBudget(role).partition;
}

/**
 * RoleRollingUpdate: the instance goes back to the revision its live pods run, if it may: not once
 * a pod of it is patched in place (its label still names the revision it ran; fuzz-10979: rebuilt
 * at that label, it was restarted twice and moved back below the partition).
 */
function withdrawInstancePermit(scratch: Scratch, state: InstanceState): void {
  if (!state.replacing || state.running === undefined || patchedInPlace(state)) return;
  scratch.records.set(recordKey(state), {
    group: state.group,
    role: state.role,
    instance: state.instance,
    revision: state.running.name,
  });
}

/**
 * The group strategies: the group goes back to the revision its live pods run, if it may; says
 * whether it went.
 */
function withdrawGroupPermit(scratch: Scratch, group: number, states: readonly InstanceState[]): boolean {
  const back = new Map<string, Revision>();
  const atRecord: InstanceState[] = [];
  for (const state of states) {
    if (state.running === undefined) continue;
    if (patchedInPlace(state)) return false;
    if (state.replacing) back.set(state.running.name, state.running);
    else atRecord.push(state);
  }
  const [revision] = back.values();
  if (back.size !== 1 || revision === undefined) return false;
  // An instance already at the group's record: the group has moved in part. In place, one whose
  // role spec did not change was left alone (its pods keep their label), and goes back as freely.
  const inPlace = scratch.model.ms.spec.rolloutStrategy.type === "InPlaceUpdate";
  if (
    atRecord.some(
      (state) =>
        !inPlace || state.running === undefined || !sameRoleSpec(state.running.data, revision.data, state.role),
    )
  )
    return false;
  permit(scratch, { group, revision: revision.name });
  return true;
}

/**
 * ServingGroupRollingUpdate over a group that moved in part and serves as it is: each instance
 * being replaced only because its pods' label is older than the group's record — they run the
 * record's role spec, as InPlaceUpdate leaves the pods of a role it does not change — is recorded
 * at the revision its pods run, so it serves as it is. Otherwise, after a switch from
 * InPlaceUpdate, every group the update had finished would be taken down at once, unbudgeted
 * (fuzz-10979: four groups with maxUnavailable 2). The group, outdated, is moved whole by a
 * budgeted permit of this plan or a later one, which drops these records (`permit`).
 */
function keepUnchangedInstances(scratch: Scratch, states: readonly InstanceState[]): void {
  for (const state of states) {
    const { running, target, role } = state;
    if (!state.replacing || running === undefined || !sameRoleSpec(running.data, target.data, role)) continue;
    scratch.records.set(recordKey(state), {
      group: state.group,
      role,
      instance: state.instance,
      revision: running.name,
    });
  }
}

/** A live pod of the instance has had its images patched in place (progress past `Draining`). */
function patchedInPlace(state: InstanceState): boolean {
  return (
    state.health.marked &&
    state.health.live.some((view) => (readProgress(view.pod)?.phase ?? "Draining") !== "Draining")
  );
}

interface Surge {
  readonly groups: number;
  readonly instances: (group: number, role: Role) => number;
}

function layoutWith(scratch: Scratch, base: Layout, surge: Surge): Layout {
  return { ...surge, units: [...scratch.records.values()], currentName: base.currentName };
}

/**
 * Records `record`. A record equal field by field to the one already there (most surge permits,
 * re-granted every plan) keeps that object, so `sameRecords` need not serialize it. Equal fields
 * serialize alike: stored records are parsed in the schema's key order, and permits are built in it.
 * A group record replaces the group's instance records (left by a RoleRollingUpdate before the
 * strategy changed): an instance record wins over its group's, so it would hold the unit back.
 */
function permit(scratch: Scratch, record: UnitRecord): void {
  const key = recordKey(record);
  const existing = scratch.records.get(key);
  if (
    existing === undefined ||
    existing.revision !== record.revision ||
    existing.role !== record.role ||
    existing.instance !== record.instance
  )
    scratch.records.set(key, record);
  if (record.role !== undefined) return;
  for (const [other, kept] of scratch.records)
    if (kept.group === record.group && kept.role !== undefined) scratch.records.delete(other);
}

/**
 * ServingGroupRollingUpdate and InPlaceUpdate: whole groups, group-level budgets and partition.
 * In place, a group whose pods cannot move to the update revision by an image change alone gets
 * no permit (it is refused, never recreated) and costs no budget.
 */
function planGroupRollout(scratch: Scratch, base: Layout): Surge {
  const { model, revisions } = scratch;
  const replicas = model.ms.spec.replicas;
  const budget = resolveGroupBudget(model.ms.spec);
  const resolve = resolver(revisions, scratch.unreadable);
  const statesOf = (layout: Layout, group: number) => desiredInstanceStates(scratch.states, layout, resolve, group);
  const probe = layoutWith(scratch, base, { groups: replicas, instances: (_group, role) => role.replicas });
  const roles = model.ms.spec.template.roles;
  const eligible = range(replicas).filter((group) => group >= budget.partition);
  const outdated = eligible.filter((group) => !statesOf(probe, group).every((state) => state.atUpdate));
  // Surge stays until every eligible group is updated and available again.
  const unfinished = eligible.filter((group) => {
    const states = statesOf(probe, group);
    return !groupAvailable(states, roles) || !states.every((state) => state.atUpdate);
  }).length;
  const paused = model.ms.spec.rolloutStrategy.paused;
  const existingSurge = Math.max(0, ...[...model.tree.keys()].map((group) => group + 1 - replicas));
  const unpermitted = outdated.filter((group) => statesOf(probe, group).some((state) => !state.targetsUpdate)).length;
  const availableBase = range(replicas).filter((group) => groupAvailable(statesOf(probe, group), roles)).length;
  const starved = eligible.some((group) =>
    statesOf(probe, group).some((state) => state.targetsUpdate && isStarved(state)),
  );
  const availableSurge = range(existingSurge).filter((group) =>
    groupAvailable(statesOf(probe, replicas + group), roles),
  );
  const firstStarvedSurge = range(existingSurge).find((group) => statesOf(probe, replicas + group).some(isStarved));
  const atUpdate =
    1 +
    (range(existingSurge).findLast((group) =>
      statesOf(probe, replicas + group).every((state) => state.targetsUpdate),
    ) ?? -1);
  const surgeGroups = surgeCount({
    paused,
    existing: existingSurge,
    atUpdate,
    maxSurge: budget.maxSurge,
    outdated: outdated.length,
    unfinished,
    availableBase,
    floor: replicas - budget.maxUnavailable,
    starved,
    availableSurge,
    firstStarvedSurge,
  });
  // Below the floor, desired groups below a partition raised mid-rollout may starve too: any desired group counts.
  const floorStarved =
    !paused &&
    unpermitted === 0 &&
    surgeGroups > 0 &&
    availableBase < replicas - budget.maxUnavailable &&
    range(replicas).some((group) => statesOf(probe, group).some(isStarved));
  if (floorStarved)
    scratch.waiting.push(starvedMessage(availableBase, replicas, budget, "ServingGroup(s)", surgeGroups));
  const held = holdSurgeGroups((group) => statesOf(probe, group), roles, {
    from: replicas,
    to: replicas + surgeGroups,
    short: replicas - budget.maxUnavailable - availableBase,
  });
  // Paused, nothing moves: surge units kept stay at their records.
  if (!paused)
    for (const group of range(surgeGroups))
      if (!held.has(replicas + group)) permit(scratch, { group: replicas + group, revision: revisions.update.name });
  if (!paused && outdated.length > 0) permitOutdatedGroups(scratch, base, outdated, replicas + surgeGroups, held);
  return { groups: replicas + surgeGroups, instances: roleSurgeKept(scratch, base, resolve) };
}

/**
 * Permits at the update revision for the `outdated` desired groups the group budget lets move now,
 * with `groups` groups standing (desired and surge); says what the rollout waits for when the
 * budget stops it.
 */
function permitOutdatedGroups(
  scratch: Scratch,
  base: Layout,
  outdated: readonly number[],
  groups: number,
  held: ReadonlySet<number>,
): void {
  const { model, revisions } = scratch;
  const replicas = model.ms.spec.replicas;
  const budget = resolveGroupBudget(model.ms.spec);
  const resolve = resolver(revisions, scratch.unreadable);
  const roles = model.ms.spec.template.roles;
  // Role surge instances a RoleRollingUpdate left count as the capacity they are (`roleSurgeKept`).
  const layout = layoutWith(scratch, base, {
    groups,
    instances: (group, role) => role.replicas + (group < replicas ? existingRoleSurge(model, group, role) : 0),
  });
  const statesOf = range(groups).map((group) => desiredInstanceStates(scratch.states, layout, resolve, group));
  const available = range(groups).filter((group) => groupAvailable(statesOf[group] ?? [], roles));
  let spare = available.length - (replicas - budget.maxUnavailable);
  // Surge groups that may succeed an outdated group: serving at the update revision, recorded there.
  const successors = range(groups).map((position) => ({
    position,
    serving:
      position >= replicas &&
      !held.has(position) &&
      available.includes(position) &&
      (statesOf[position] ?? []).every((state) => state.atUpdate && state.targetsUpdate) &&
      !(statesOf[position] ?? []).some((state) => state.instance >= (model.roles.get(state.role)?.replicas ?? 0)),
  }));
  const taken = new Set<number>();
  // Unavailable outdated groups first (moving them costs nothing), then from the highest ordinal.
  const order = movable(scratch, outdated, resolve).sort(
    (a, b) => Number(available.includes(a)) - Number(available.includes(b)) || b - a,
  );
  for (const group of order) {
    const free = !available.includes(group);
    if (!free && spare <= 0) break;
    const successor = successorOf(successors, replicas, taken);
    if (successor === undefined) permit(scratch, { group, revision: revisions.update.name });
    else {
      taken.add(successor.position);
      succeedGroup(scratch, group, successor.position);
    }
    if (!free) spare -= 1;
  }
  if (
    spare <= 0 &&
    order.some(
      (group) => available.includes(group) && scratch.records.get(`${group}`)?.revision !== revisions.update.name,
    )
  ) {
    const unavailable = range(groups).filter((group) => !available.includes(group));
    scratch.waiting.push(
      `${waitingMessage(available.length, replicas, budget, "ServingGroup(s)")}${unschedulableNote(model, unavailable)}`,
    );
  }
}

/**
 * Under a group strategy, the role surge instances a RoleRollingUpdate left (the strategy
 * switched mid-rollout) that stay: in a desired group without a permit at the update revision,
 * those that stand in for unavailable desired instances, as many as the role must keep
 * (`keepSurgeBelowPartition`): scaling them down would disrupt the group unbudgeted. A permitted
 * group is moved as a whole, its disruption budgeted, and keeps none. They keep their records
 * (nothing re-records them), so they serve as they are until the desired instances are back.
 */
function roleSurgeKept(
  scratch: Scratch,
  base: Layout,
  resolve: ReturnType<typeof resolver>,
): (group: number, role: Role) => number {
  const { model, revisions } = scratch;
  const kept = new Map<number, Map<string, number>>();
  const layout = layoutWith(scratch, base, {
    groups: model.ms.spec.replicas,
    instances: (group, role) => role.replicas + existingRoleSurge(model, group, role),
  });
  for (const [group, roles] of model.tree) {
    if (
      group < 0 ||
      group >= model.ms.spec.replicas ||
      scratch.records.get(`${group}`)?.revision === revisions.update.name
    )
      continue;
    if (!model.ms.spec.template.roles.some((role) => hasOrdinalFrom(roles.get(role.name), role.replicas))) continue;
    keepSurgeBelowPartition(scratch, group, desiredInstanceStates(scratch.states, layout, resolve, group), kept);
  }
  return (group, role) => role.replicas + (kept.get(group)?.get(role.name) ?? 0);
}

/**
 * The surge groups kept at their revision this plan (no permit at the update revision): while the
 * desired groups available fall `short` of the floor (replicas − maxUnavailable), the serving
 * surge groups in [`from`, `to`) make up for it, lowest ordinal first, and those among them that
 * run another revision than the update's are held. A new update arriving while the last one's
 * surge group stands in for groups being replaced would otherwise replace that group too, and the
 * group budget counts surge capacity: it would take one group more down than it allows. Held, it
 * serves until enough desired groups are back; then it is replaced or scaled down.
 */
function holdSurgeGroups(
  statesOf: (group: number) => InstanceState[],
  roles: readonly Role[],
  surge: { from: number; to: number; short: number },
): Set<number> {
  const held = new Set<number>();
  let short = surge.short;
  for (let group = surge.from; group < surge.to && short > 0; group++) {
    const states = statesOf(group);
    if (!groupAvailable(states, roles)) continue;
    short -= 1;
    if (!states.every((state) => state.atUpdate)) held.add(group);
  }
  return held;
}

/** The outdated groups the strategy may move: all, except in place those it must refuse. */
function movable(scratch: Scratch, outdated: readonly number[], resolve: ReturnType<typeof resolver>): number[] {
  const { model, revisions } = scratch;
  if (model.ms.spec.rolloutStrategy.type !== "InPlaceUpdate") return [...outdated];
  return outdated.filter((group) => {
    const refused = groupIneligibility(
      model,
      (name) => resolve(name, groupLabel(model.ordinals, group)),
      group,
      revisions.update,
    );
    scratch.ineligible.push(...refused);
    return refused.length === 0;
  });
}

/** A live pod of the unit is Pending because the scheduler cannot place it. */
function isStarved(state: InstanceState): boolean {
  return state.health.unschedulable;
}

/** What decides how many surge units exist at one level (groups, or one role in one group). */
export interface SurgeInputs {
  readonly paused: boolean;
  readonly existing: number;
  /**
   * The existing surge ordinals up to the highest one recorded at the update revision: the
   * rollout's own surge. Units left above a lowered replica count at another record are not.
   */
  readonly atUpdate: number;
  readonly maxSurge: number;
  /** Eligible units not running the update revision (permitted or not). */
  readonly outdated: number;
  /** Eligible units not yet updated and available. */
  readonly unfinished: number;
  /** Available units among the desired ones (surge excluded). */
  readonly availableBase: number;
  /** replicas − maxUnavailable. */
  readonly floor: number;
  /**
   * Some eligible unit with its permit (targeting the update revision) waits for capacity (a pod
   * the scheduler cannot place).
   */
  readonly starved: boolean;
  /** The surge units available now, by surge ordinal (0 is the first surge unit), ascending. */
  readonly availableSurge: readonly number[];
  /** The lowest surge ordinal with a pod the scheduler cannot place, if any. */
  readonly firstStarvedSurge: number | undefined;
}

/**
 * Surge units exist while eligible units are unfinished (up to maxSurge), so capacity never drops
 * while replacements start, and existing ones stay as far as the availability floor needs them
 * (the desired units below it may be ineligible: below a partition raised mid-rollout, rebuilt at
 * their recorded revision); only surge that serves now carries the floor. One exception breaks a
 * deadlock: while a unit with its permit (a replacement) cannot be scheduled, surge stays only as
 * far as the floor needs it, and none is added — otherwise a surge unit would hold the very
 * capacity (GPUs) the replacement needs, and the rollout would wait forever: also while old units
 * wait for their permits, whether for budget (fuzz-4145: their budget is the replacement's), for
 * the coordinator (fuzz-coordinated-69: maxSkew waits for the replacement's progress), or while
 * replacements and a surge unit, without gang placement, each hold part of what they need
 * (fuzz-faults-53). Nor is there surge beyond a surge unit that waits for capacity itself: one
 * waits at a time. Paused: none is added; the rollout's own existing surge stays (`atUpdate`).
 */
export function surgeCount(inputs: SurgeInputs): number {
  // No rollout (e.g. first creation, scale-up): never surge.
  if (inputs.outdated === 0 && inputs.existing === 0) return 0;
  const forFloor = surgeForFloor(inputs);
  const running = surgeWhileRunning(inputs, forFloor);
  // Paused, none is added: of what a running rollout keeps, only its own existing surge stays,
  // and what carries the floor. Units left above a lowered replica count are scaled down as at
  // any scale-down, never kept as surge (they would be moved to the update revision).
  return inputs.paused ? Math.min(running, Math.max(Math.min(inputs.atUpdate, inputs.existing), forFloor)) : running;
}

/** `surgeCount` of a rollout that is not paused, given the surge the floor needs. */
function surgeWhileRunning(inputs: SurgeInputs, forFloor: number): number {
  // No surge unit beyond one that waits for capacity: without gang placement, two surge units can
  // each hold part of what they need and neither start (fuzz-faults-53 with router traffic: room
  // for one surge group, maxSurge 2). The first one waits alone; the rest come once it is placed.
  const beyondStarved =
    inputs.firstStarvedSurge === undefined
      ? Number.POSITIVE_INFINITY
      : Math.max(inputs.firstStarvedSurge + 1, forFloor);
  if (!inputs.starved) return Math.min(Math.max(Math.min(inputs.maxSurge, inputs.unfinished), forFloor), beyondStarved);
  // Starved: a surge unit still starting would keep the capacity the replacements wait for as long
  // as they wait, below the floor (a deadlock); only the floor's surge stays.
  return forFloor;
}

/** The existing surge ordinals the availability floor needs: up to the serving ones it counts on. */
function surgeForFloor(inputs: SurgeInputs): number {
  const missing = Math.max(0, inputs.floor - inputs.availableBase);
  // Not capped by maxSurge: surge left beyond a maxSurge lowered mid-rollout may carry the floor.
  // Only surge that serves now carries it: the ordinals up to the serving ones the floor needs stay.
  // One that does not serve (still starting; a group above a lowered replicas whose roles were
  // scaled up) costs no budget to free, and kept it would be built up beyond the bound.
  const serving = inputs.availableSurge;
  const kept = Math.min(serving.length, missing);
  return kept === 0 ? 0 : Math.min(inputs.existing, (serving[kept - 1] ?? 0) + 1);
}

/** Every role of the group has at least its desired number of available instances. */
export function groupAvailable(states: readonly InstanceState[], roles: readonly Role[]): boolean {
  return roles.every((role) => {
    let available = 0;
    for (const state of states) if (state.role === role.name && state.available) available += 1;
    return available >= role.replicas;
  });
}

function waitingMessage(available: number, desired: number, budget: ResolvedBudget, unit: string): string {
  const surge = budget.maxSurge > 0 ? ` or for surge capacity (maxSurge ${budget.maxSurge})` : "";
  return `${available} of ${desired} ${unit} available with maxUnavailable ${budget.maxUnavailable}: waiting for updated units to become Ready${surge}`;
}

/**
 * Why a rollout waits when desired units starve below the floor while serving surge carries it
 * (`surgeCount`'s starved case, docs/design/rollout.md "Left open"; or units below a partition
 * rebuilt at their record): freeing the surge would break the budget, so only more capacity or a
 * larger maxUnavailable ends the wait. Without it the condition only listed the pending pods, as
 * if the wait would end by itself.
 */
function starvedMessage(
  availableBase: number,
  desired: number,
  budget: ResolvedBudget,
  unit: string,
  surge: number,
): string {
  return `${availableBase} of ${desired} desired ${unit} available with maxUnavailable ${budget.maxUnavailable}: the rest wait for capacity while ${surge} surge ${unit} carry the floor, and scaling those down would break the budget; add capacity or raise maxUnavailable`;
}

/**
 * Why a role instance its role budget lets go waits: replacing it would disrupt its group, and
 * the group maxUnavailable is taken by the groups `disrupted` (unavailable before this plan, or
 * disrupted by it). Naming only the role budget, as before, read as if the wait would end by
 * itself (fuzz-4921: groups a scale-up added to a full cluster took the budget, and their pods
 * could never be scheduled). When some of those groups wait for pods the scheduler cannot place,
 * the message counts those pods and asks for capacity (there, a larger maxUnavailable only moved
 * the wait: the old instances it let go freed GPUs that those pods took, and their replacements
 * waited in turn).
 */
function groupBudgetMessage(model: Model, disrupted: readonly number[], maxUnavailable: number): string {
  const holders = [...disrupted].sort((a, b) => a - b);
  const taken = `waiting for the group budget (rollingUpdateConfiguration.maxUnavailable ${maxUnavailable}), taken by group(s) ${holders.join(", ")}`;
  const note = unschedulableNote(model, holders);
  return note === "" ? `${taken} until they are available again` : `${taken}${note}`;
}

/**
 * "; N pod(s) of group(s) … cannot be scheduled: add capacity for them" when pods (of `role`, or
 * of any role) in `groups` wait for a node with room, surge included; "" when none does. A wait
 * on such pods does not end by itself.
 */
function unschedulableNote(model: Model, groups: readonly number[], role?: string): string {
  let pods = 0;
  const starved: number[] = [];
  for (const group of groups) {
    const roles = model.tree.get(group);
    const instances =
      roles === undefined ? [] : role === undefined ? instancePodsOf([roles]) : [...(roles.get(role)?.values() ?? [])];
    let inGroup = 0;
    for (const instance of instances)
      for (const view of instance.values()) if (view.facts.unschedulable && !view.facts.terminating) inGroup += 1;
    if (inGroup > 0) starved.push(group);
    pods += inGroup;
  }
  return pods === 0
    ? ""
    : `; ${pods} pod(s) of group(s) ${starved.join(", ")} cannot be scheduled: add capacity for them`;
}

/** RoleRollingUpdate: instances of changed roles, role budgets within each group, group disruption budget. */
function planRoleRollout(scratch: Scratch, base: Layout): Surge {
  const { model, revisions } = scratch;
  const spec = model.ms.spec;
  const groupBudget = resolveGroupBudget(spec);
  const resolve = resolver(revisions, scratch.unreadable);
  // group → role → surge instances; asked for every role of every group by each later pass.
  const surgeByGroup = new Map<number, Map<string, number>>();
  const surge: Surge = {
    groups: spec.replicas,
    instances: (group, role) => role.replicas + (surgeByGroup.get(group)?.get(role.name) ?? 0),
  };
  // States of every instance that may exist, surge ordinals included, so Ready surge capacity counts:
  // those beyond a maxSurge lowered mid-rollout too, which may carry capacity the budgets need.
  const stored = layoutWith(scratch, base, {
    groups: spec.replicas,
    instances: (group, role) =>
      role.replicas + Math.max(resolveRoleBudget(role).maxSurge, existingRoleSurge(model, group, role)),
  });
  holdSurge(scratch, stored, resolve);
  // Paused, nothing moves: surge instances are what their records say.
  const probe = spec.rolloutStrategy.paused ? stored : surgeAtUpdate(scratch, stored);
  const before = range(spec.replicas).map((group) => desiredInstanceStates(scratch.states, probe, resolve, group));
  // GPUs are one pool: a replacement waiting for capacity in one group is starved by surge in any.
  const starvedAnywhere = before.some((states) =>
    states.some(
      (state) =>
        state.targetsUpdate && isStarved(state) && state.instance < (model.roles.get(state.role)?.replicas ?? 0),
    ),
  );
  // The groups that take the group budget: unavailable before this plan, or disrupted by it.
  const disrupted = range(spec.replicas).filter((group) => !groupAvailable(before[group] ?? [], spec.template.roles));
  // Role → the groups where the group budget stopped it, said once per role after the last group.
  const budgetStopped = new Map<string, number[]>();
  const groupBudgetWait = (group: number, role: string) =>
    getOrCreate(budgetStopped, role, (): number[] => []).push(group);
  for (const group of range(spec.replicas).reverse()) {
    if (group < groupBudget.partition) {
      keepSurgeBelowPartition(scratch, group, before[group] ?? [], surgeByGroup);
      continue;
    }
    const states = before[group] ?? [];
    const permits = coordinationPermits(scratch, states);
    let groupDisrupted = !groupAvailable(states, spec.template.roles);
    for (const role of spec.template.roles) {
      // A group already disrupted (before or by an earlier role in this plan) costs no more budget.
      const limits = {
        paused: spec.rolloutStrategy.paused,
        mayDisrupt: () => groupDisrupted || disrupted.length < groupBudget.maxUnavailable,
        groupBudgetWait,
        permit: permits.get(role.name),
        starvedAnywhere,
      };
      const result = planRoleInGroup(scratch, group, role, states, limits);
      if (result.surge > 0)
        getOrCreate(surgeByGroup, group, () => new Map<string, number>()).set(role.name, result.surge);
      if (result.disruptedGroup && !groupDisrupted) {
        groupDisrupted = true;
        disrupted.push(group);
      }
    }
  }
  if (budgetStopped.size > 0) {
    const why = groupBudgetMessage(model, disrupted, groupBudget.maxUnavailable);
    // First: Progressing lists only the first few waits, and this one names what to do.
    const lines = [...budgetStopped].map(
      ([role, groups]) => `group(s) ${groups.sort((a, b) => a - b).join(", ")} role ${role}: ${why}`,
    );
    scratch.waiting.unshift(...lines);
  }
  return surge;
}

/**
 * `layout` with every surge ordinal of every group recorded at the update revision, as this plan
 * leaves each surge instance it keeps (`planRoleSurge`; those it does not keep are scaled down),
 * held ones excepted (`holdSurge`). A Ready surge instance of an earlier rollout then is what it is
 * about to be: replaced when the update builds its role otherwise, so never capacity that lets
 * the last old instance go.
 */
function surgeAtUpdate(scratch: Scratch, layout: Layout): Layout {
  const { model, revisions } = scratch;
  const records = new Map(layout.units.map((record) => [recordKey(record), record]));
  for (let group = 0; group < model.ms.spec.replicas; group++) {
    for (const role of model.ms.spec.template.roles) {
      for (let instance = role.replicas; instance < layout.instances(group, role); instance++) {
        const record: UnitRecord = { group, role: role.name, instance, revision: revisions.update.name };
        const key = recordKey(record);
        if (!scratch.held.has(key)) records.set(key, record);
      }
    }
  }
  return { ...layout, units: [...records.values()] };
}

/**
 * Holds (in `scratch.held`) the surge instances that serve at a role spec other than the update's
 * while their role in their group has fewer available desired instances than it must keep: as
 * many as it needs, lowest ordinal first. Moving such an instance to the update revision would
 * replace capacity the group cannot spare; held, it keeps its revision and serves until the
 * desired instances are back. A role must keep its floor (replicas − maxUnavailable); in a group
 * that is available now, surge included, each role keeps its desired count: the group budget
 * counts surge capacity, and letting it go would disrupt the group unbudgeted (the desired
 * instances it stands in for are unavailable, so their own moves cost no budget). One exception,
 * as in `surgeCount`: when a desired instance of the role waits for capacity (the surge may hold
 * it), only the floor is held, if the group budget lets the group go (`SurgeRelease`); otherwise
 * the rollout waits, and says why. `layout` has the stored records.
 */
function holdSurge(scratch: Scratch, layout: Layout, resolve: ReturnType<typeof resolver>): void {
  const { model } = scratch;
  const release = new SurgeRelease(scratch, layout, resolve);
  for (const [group, roles] of model.tree) {
    if (group < 0 || group >= model.ms.spec.replicas) continue;
    const surgeRoles = model.ms.spec.template.roles.filter((role) =>
      hasOrdinalFrom(roles.get(role.name), role.replicas),
    );
    if (surgeRoles.length === 0) continue;
    const states = desiredInstanceStates(scratch.states, layout, resolve, group);
    const serving = groupAvailable(states, model.ms.spec.template.roles);
    for (const role of surgeRoles) {
      const mine = states.filter((state) => state.role === role.name);
      const outdated = mine.filter((state) => state.instance >= role.replicas && state.available && !state.atUpdate);
      if (outdated.length === 0) continue;
      const availableDesired = mine.filter((state) => state.instance < role.replicas && state.available).length;
      const starved = mine.some((state) => state.instance < role.replicas && isStarved(state));
      // The group's budget is asked only when holding the desired count is what keeps the surge.
      const keepDesired = serving && availableDesired < role.replicas && !(starved && release.grant(group, role));
      const needed = (keepDesired ? role.replicas : roleFloor(role)) - availableDesired;
      for (const state of outdated.slice(0, Math.max(0, needed))) scratch.held.add(recordKey(state));
    }
  }
}

/**
 * The group budget for letting serving surge go so that starved desired instances get its
 * capacity (`holdSurge`): a group whose surge goes becomes unavailable, so at most the group
 * maxUnavailable less the groups unavailable now (surge counted, on the stored records) may, in
 * the order asked, each once. A refusal is a waiting reason.
 */
class SurgeRelease {
  readonly #scratch: Scratch;
  readonly #layout: Layout;
  readonly #resolve: ReturnType<typeof resolver>;
  /** Groups still allowed; counted at the first question (most plans ask none). */
  #left: number | undefined;
  readonly #granted = new Set<number>();

  constructor(scratch: Scratch, layout: Layout, resolve: ReturnType<typeof resolver>) {
    this.#scratch = scratch;
    this.#layout = layout;
    this.#resolve = resolve;
  }

  /** Whether `group`'s surge of `role` may go; a group once allowed stays allowed this plan. */
  grant(group: number, role: Role): boolean {
    if (this.#granted.has(group)) return true;
    const { model } = this.#scratch;
    this.#left ??= resolveGroupBudget(model.ms.spec).maxUnavailable - this.#unavailableNow();
    if (this.#left <= 0) {
      this.#scratch.waiting.push(
        `${groupLabel(model.ordinals, group)} role ${role.name}: surge instances serve while desired ones wait for capacity they may hold; letting them go would disrupt the group beyond the group maxUnavailable`,
      );
      return false;
    }
    this.#left -= 1;
    this.#granted.add(group);
    return true;
  }

  /** How many desired groups are unavailable now, surge counted (the stored records). */
  #unavailableNow(): number {
    const { model, states } = this.#scratch;
    const roles = model.ms.spec.template.roles;
    return range(model.ms.spec.replicas).filter(
      (group) => !groupAvailable(desiredInstanceStates(states, this.#layout, this.#resolve, group), roles),
    ).length;
  }
}

/**
 * In a group below the group partition (nothing moves there), keeps the surge ordinals its
 * serving surge instances need: the held ones (`holdSurge`), and the lowest available ones that
 * stand in for unavailable desired instances, as many as the role must keep — its desired count
 * while the group is available, else its floor (the partition may have been raised over a group
 * mid-update). They go once the desired instances are back; any other surge instance there is
 * scaled down. `states` are the group's, surge ordinals included.
 */
function keepSurgeBelowPartition(
  scratch: Scratch,
  group: number,
  states: readonly InstanceState[],
  surgeByGroup: Map<number, Map<string, number>>,
): void {
  const roles = scratch.model.ms.spec.template.roles;
  const serving = groupAvailable(states, roles);
  for (const role of roles) {
    const mine = states.filter((state) => state.role === role.name);
    let missing =
      (serving ? role.replicas : roleFloor(role)) -
      mine.filter((state) => state.instance < role.replicas && state.available).length;
    let standingIn = 0;
    for (const state of mine
      .filter((candidate) => candidate.instance >= role.replicas && candidate.available)
      .sort((a, b) => a.instance - b.instance)) {
      if (missing <= 0) break;
      standingIn = state.instance + 1 - role.replicas;
      missing -= 1;
    }
    const kept = Math.max(standingIn, heldSurgeCount(scratch, group, role));
    if (kept > 0) getOrCreate(surgeByGroup, group, () => new Map<string, number>()).set(role.name, kept);
  }
}

/** Some instance in `instances` has an ordinal of at least `from`; read without copying the keys (asked per role of every group). */
function hasOrdinalFrom(instances: ReadonlyMap<number, unknown> | undefined, from: number): boolean {
  for (const instance of instances?.keys() ?? []) if (instance >= from) return true;
  return false;
}

/**
 * How many surge ordinals of `role` in `group` exist: one past the highest ordinal with pods,
 * less the desired count (0 without surge).
 */
function existingRoleSurge(model: Model, group: number, role: Role): number {
  let existing = 0;
  for (const instance of model.tree.get(group)?.get(role.name)?.keys() ?? [])
    existing = Math.max(existing, instance + 1 - role.replicas);
  return existing;
}

/** How many surge ordinals of `role` in `group` must stay for the held ones among them (beyond a lowered maxSurge too). */
function heldSurgeCount(scratch: Scratch, group: number, role: Role): number {
  if (scratch.held.size === 0) return 0;
  let count = 0;
  const end = role.replicas + Math.max(resolveRoleBudget(role).maxSurge, existingRoleSurge(scratch.model, group, role));
  for (let instance = role.replicas; instance < end; instance++) {
    if (scratch.held.has(recordKey({ group, role: role.name, instance }))) count = instance + 1 - role.replicas;
  }
  return count;
}

/** Start permits of the coordinated roles of one group (an empty map without coordination). */
function coordinationPermits(scratch: Scratch, states: readonly InstanceState[]): Map<string, Permit> {
  const { model } = scratch;
  const coordination = model.ms.spec.rolloutStrategy.coordination;
  if (coordination === undefined) return new Map();
  const listed = coordination.roles ?? [];
  const participants = model.ms.spec.template.roles.filter((role) => listed.length === 0 || listed.includes(role.name));
  const progress = participants.map((role): RoleProgress => {
    const mine = states.filter((state) => state.role === role.name);
    const partition = resolveRoleBudget(role).partition;
    const eligible = mine.filter((state) => state.instance >= partition && state.instance < role.replicas);
    const newReady = (state: InstanceState) => state.atUpdate && state.available;
    return {
      role: role.name,
      eligible: eligible.length,
      // New Ready capacity, surge included, up to the eligible count (surplus is not progress).
      readyNew: Math.min(
        eligible.length,
        mine.filter((state) => state.instance >= partition && newReady(state)).length,
      ),
      inFlight: eligible.filter((state) => state.targetsUpdate && !newReady(state)).length,
      newCapacity: mine.filter(newReady).length,
      oldServing: mine.filter((state) => state.available && !state.atUpdate).length,
      oldBelowPartition: mine.filter((state) => state.instance < partition && state.available && !state.atUpdate)
        .length,
      active: eligible.some((state) => !state.atUpdate),
      maxSurge: resolveRoleBudget(role).maxSurge,
    };
  });
  const dependsOn = new Map(
    (coordination.dependencies ?? []).map((dependency) => [dependency.role, dependency.dependsOn]),
  );
  const permits = startPermits(progress, { maxSkewPercent: Number.parseInt(coordination.maxSkew, 10), dependsOn });
  for (const [role, permit] of permits) {
    if (permit.blocked && permit.reason !== undefined) scratch.blocked.push(permit.reason);
    else if (permit.reason !== undefined && progress.find((candidate) => candidate.role === role)?.active === true)
      scratch.waiting.push(
        `${states[0] === undefined ? "group ?" : groupLabel(scratch.model.ordinals, states[0].group)} role ${role}: ${permit.reason}`,
      );
  }
  return permits;
}

interface RoleLimits {
  readonly paused: boolean;
  /** Whether this role may take its group below desired capacity (the group disruption budget). */
  readonly mayDisrupt: () => boolean;
  /** Records that `mayDisrupt` said no to `role` in `group` (said in Progressing: `groupBudgetMessage`). */
  readonly groupBudgetWait: (group: number, role: string) => void;
  /** The coordinator's permit for this role, when it takes part in a coordination. */
  readonly permit: Permit | undefined;
  /** A desired unit with its permit, in any group, waits for capacity (see `surgeCount`). */
  readonly starvedAnywhere: boolean;
}

/**
 * Plans one role in one group: surge instances while outdated ones remain, and permits within the
 * role budget, the group disruption budget and the coordinator's quota (which counts every start:
 * permits for failed instances and new surge instances too). Returns the surge count and whether
 * this step newly disrupted the group.
 */
function planRoleInGroup(
  scratch: Scratch,
  group: number,
  role: Role,
  groupStates: readonly InstanceState[],
  limits: RoleLimits,
): { surge: number; disruptedGroup: boolean } {
  const { revisions } = scratch;
  const budget = resolveRoleBudget(role);
  const states = groupStates.filter((state) => state.role === role.name);
  const eligible = states.filter((state) => state.instance >= budget.partition && state.instance < role.replicas);
  const outdated = eligible.filter((state) => !state.atUpdate);
  let quota = limits.permit?.quota ?? Number.POSITIVE_INFINITY;
  const grant = (wanted: number) => {
    const granted = Math.min(wanted, quota);
    quota -= granted;
    return granted;
  };
  const planned = planRoleSurge(scratch, group, role, states, eligible, {
    paused: limits.paused,
    grant,
    mayDisrupt: limits.mayDisrupt,
    starvedAnywhere: limits.starvedAnywhere,
  });
  const { surge } = planned;
  if (limits.paused) return { surge, disruptedGroup: planned.disruptedGroup };
  // Surge instances scaled down now are no capacity to retire against.
  let available = states.filter((state) => state.available && state.instance < role.replicas + surge).length;
  let retirable = limits.permit?.retireLimit ?? Number.POSITIVE_INFINITY;
  let disruptedGroup = planned.disruptedGroup;
  // Surge instances kept this plan that may succeed an outdated one (`successorOf`).
  const successors = states
    .filter((state) => state.instance < role.replicas + surge)
    .map((state) => ({
      position: state.instance,
      serving: state.available && state.atUpdate && state.targetsUpdate && !scratch.held.has(recordKey(state)),
    }));
  const taken = new Set<number>();
  // Not yet permitted: unavailable ones first (moving them costs no budget), then highest ordinal.
  const candidates = outdated.filter((state) => !state.targetsUpdate);
  for (const state of candidates.sort((a, b) => Number(a.available) - Number(b.available) || b.instance - a.instance)) {
    const successor = successorOf(successors, role.replicas, taken);
    // Swapping an old instance for Ready surge capacity that already counts as full progress
    // exposes nothing new: no start needed. Nor does moving an unavailable one then: it takes no
    // capacity down, and its start would never come (the coordinator counts the surge as its
    // progress), so one recovering at an older update forever (an image that crashes) would hold
    // the rollout and the surge for good.
    // A successor takes the place with no start at all.
    const surgeBacked =
      successor !== undefined ||
      ((limits.permit?.fullProgress ?? false) && (!state.available || available - 1 >= role.replicas));
    if (quota <= 0 && !surgeBacked) break;
    if (state.available) {
      const belowDesired = available - 1 < role.replicas;
      const groupOk = !belowDesired || disruptedGroup || limits.mayDisrupt();
      if (available - 1 < roleFloor(role) || !groupOk) {
        if (available - 1 < roleFloor(role))
          scratch.waiting.push(
            `${groupLabel(scratch.model.ordinals, group)} role ${role.name}: ${waitingMessage(available, role.replicas, budget, "instance(s)")}${unschedulableNote(scratch.model, [group], role.name)}`,
          );
        else limits.groupBudgetWait(group, role.name);
        break;
      }
      if (retirable <= 0) break;
      retirable -= 1;
      available -= 1;
      if (belowDesired) disruptedGroup = true;
    }
    if (!surgeBacked) quota -= 1;
    if (successor === undefined)
      permit(scratch, { group, role: role.name, instance: state.instance, revision: revisions.update.name });
    else {
      taken.add(successor.position);
      succeedInstance(scratch, group, role.name, state.instance, successor.position);
    }
  }
  return { surge, disruptedGroup };
}

/**
 * Surge instances of one role in one group (see `surgeCount`); new ones need a start (`grant`
 * returns how many of the wanted new ones may start). Scaling surge down is a disruption when it
 * takes the role below its desired count of available instances: then it needs the group budget
 * (`mayDisrupt`), and without it the surge stays and the rollout waits (as when surge cannot be
 * scheduled: budgets hold at every instant). Returns the surge count and whether scaling down
 * disrupted the group.
 */
function planRoleSurge(
  scratch: Scratch,
  group: number,
  role: Role,
  states: readonly InstanceState[],
  eligible: readonly InstanceState[],
  limits: SurgeLimits,
): { surge: number; disruptedGroup: boolean } {
  const { model, revisions } = scratch;
  const maxSurge = resolveRoleBudget(role).maxSurge;
  const existing = existingRoleSurge(model, group, role);
  const { unpermitted, starvedDesired, ...counts } = roleSurgeCounts(role, states, eligible);
  const { availableBase } = counts;
  const floor = roleFloor(role);
  // A held instance stays however few are wanted: it carries the role's floor.
  const held = heldSurgeCount(scratch, group, role);
  // Any group's starved replacement counts: the surge of this one may hold its GPUs.
  let wanted = surgeCount({
    ...counts,
    paused: limits.paused,
    existing,
    maxSurge,
    floor,
    starved: limits.starvedAnywhere,
  });
  if (!limits.paused && unpermitted === 0 && starvedDesired && availableBase < floor && wanted > 0)
    scratch.waiting.push(
      `${groupLabel(scratch.model.ordinals, group)} role ${role.name}: ${starvedMessage(availableBase, role.replicas, resolveRoleBudget(role), "instance(s)", wanted)}`,
    );
  let disruptedGroup = false;
  if (Math.max(wanted, held) < existing && takesBelowDesired(role, states, Math.max(wanted, held))) {
    if (limits.mayDisrupt()) disruptedGroup = true;
    else {
      // As few as keep the role at its desired count: never more than exist, where `states` stop.
      while (wanted < existing && takesBelowDesired(role, states, wanted)) wanted += 1;
      scratch.waiting.push(
        `${groupLabel(scratch.model.ordinals, group)} role ${role.name}: keeping ${wanted} surge instance(s) serving: scaling them down would disrupt the group beyond the group maxUnavailable`,
      );
    }
  }
  const surge = Math.max(wanted <= existing ? wanted : existing + limits.grant(wanted - existing), held);
  // Paused, nothing moves: surge instances kept stay at their records.
  if (!limits.paused)
    for (const instance of range(surge)) {
      const record: UnitRecord = {
        group,
        role: role.name,
        instance: role.replicas + instance,
        revision: revisions.update.name,
      };
      if (!scratch.held.has(recordKey(record))) permit(scratch, record);
    }
  return { surge, disruptedGroup };
}

/**
 * The counts `surgeCount` takes for one role in one group, with `unpermitted` (eligible instances
 * without a permit at the update revision) and `starvedDesired` (any desired instance starved, below
 * the partition too: `starvedMessage`). One pass over each list, not a filter per count: this runs
 * for every role of every group.
 */
function roleSurgeCounts(role: Role, states: readonly InstanceState[], eligible: readonly InstanceState[]) {
  let unfinished = 0;
  let unpermitted = 0;
  let outdated = 0;
  for (const state of eligible) {
    if (!state.available || !state.atUpdate) unfinished += 1;
    if (!state.targetsUpdate) unpermitted += 1;
    if (!state.atUpdate) outdated += 1;
  }
  let availableBase = 0;
  // `states` come in ordinal order, so the surge ordinals do too.
  const availableSurge: number[] = [];
  let starvedDesired = false;
  let firstStarvedSurge: number | undefined;
  let atUpdate = 0;
  for (const state of states) {
    const desired = state.instance < role.replicas;
    if (desired && state.available) availableBase += 1;
    else if (state.available) availableSurge.push(state.instance - role.replicas);
    if (!desired && state.targetsUpdate) atUpdate = state.instance + 1 - role.replicas;
    if (isStarved(state)) {
      if (desired) starvedDesired = true;
      else firstStarvedSurge ??= state.instance - role.replicas;
    }
  }
  return {
    unfinished,
    unpermitted,
    outdated,
    availableBase,
    availableSurge,
    starvedDesired,
    firstStarvedSurge,
    atUpdate,
  };
}

interface SurgeLimits extends Pick<RoleLimits, "paused" | "mayDisrupt" | "starvedAnywhere"> {
  /** How many of `wanted` new surge instances may start now. */
  readonly grant: (wanted: number) => number;
}

/** Whether keeping only `kept` surge ordinals takes `role` from its desired count of available instances to fewer. */
function takesBelowDesired(role: Role, states: readonly InstanceState[], kept: number): boolean {
  const available = states.filter((state) => state.available).length;
  const after = states.filter((state) => state.available && state.instance < role.replicas + kept).length;
  return available >= role.replicas && after < role.replicas;
}

/**
 * The rollout is complete when every desired unit runs the update revision, all Ready, and no
 * surge unit is left: then the update revision becomes current.
 */
function promote(scratch: Scratch, base: Layout, surge: Surge): boolean {
  const { model, revisions } = scratch;
  // With the update current, records left at other revisions still have units to move (an
  // update back to the current revision mid-rollout); once every unit runs it, they go.
  if (base.currentName === revisions.update.name && base.units.length === 0) return false;
  // Retired units (negative positions) are surplus still there: the rollout is not complete.
  const noSurge = [...model.tree].every(
    ([group, roles]) =>
      group >= 0 &&
      group < model.ms.spec.replicas &&
      [...roles].every(([role, instances]) => {
        const spec = model.roles.get(role);
        return [...instances.keys()].every(
          (instance) => spec !== undefined && instance >= 0 && instance < spec.replicas,
        );
      }),
  );
  if (!noSurge || surge.groups > model.ms.spec.replicas) return false;
  const layout = layoutWith(scratch, base, {
    groups: model.ms.spec.replicas,
    instances: (_group, role) => role.replicas,
  });
  const unreadable: UnreadableUses = new Map();
  const resolve = resolver(revisions, unreadable);
  const expected = model.ms.spec.template.roles.reduce((sum, role) => sum + role.replicas, 0);
  // Every desired instance must be seen (none hidden behind an unreadable revision) and current.
  return range(model.ms.spec.replicas).every((group) => {
    const states = desiredInstanceStates(scratch.states, layout, resolve, group);
    return (
      unreadable.size === 0 &&
      states.length === expected &&
      states.every((state) => state.running !== undefined && state.health.ready && state.atUpdate)
    );
  });
}

/**
 * The records to keep: only where a unit's revision differs from the one it would have without
 * its record, and only for units that are desired or still have a pod not being deleted. A unit
 * no longer desired whose pods are all terminating is gone: its record would otherwise outlive it
 * and govern the unit a later scale-up creates at that ordinal (fuzz-crash-gang-435: a surge
 * instance scaled down after a rollback kept the crash revision's record, and the scale-up that
 * followed rebuilt it there). Without a record a group is at the current revision, and an
 * instance at its group's record, else the current revision: an instance record at the current
 * revision is kept under a group record of another one, or the group record would take the
 * instance back (fuzz-faults-coordinated-crash-gang-925: an update back to the current revision
 * right after an in-place rollback left a group record at the rolled-back revision, and every
 * permit and surge instance of the group fell back to it). Sorted, so equal decisions give equal
 * status.
 */
function compact(scratch: Scratch, currentName: string, surge: Surge): UnitRecord[] {
  const { model } = scratch;
  const lives = (record: UnitRecord): boolean => {
    const role = record.role === undefined ? undefined : model.roles.get(record.role);
    const desired =
      record.group < surge.groups &&
      (record.role === undefined ||
        (role !== undefined && (record.instance ?? 0) < surge.instances(record.group, role)));
    return desired || hasPodNotDeleted(model, record);
  };
  const groupRecorded = new Set<number>();
  for (const record of scratch.records.values())
    if (record.role === undefined && record.revision !== currentName && lives(record)) groupRecorded.add(record.group);
  const kept = [...scratch.records.values()].filter((record) => {
    if (record.role === undefined) return groupRecorded.has(record.group);
    return (record.revision !== currentName || groupRecorded.has(record.group)) && lives(record);
  });
  return kept.sort(
    (a, b) =>
      a.group - b.group || compareStrings(a.role ?? "", b.role ?? "") || (a.instance ?? -1) - (b.instance ?? -1),
  );
}

/** Some pod of the record's unit (its group, or its role instance) is not being deleted. */
function hasPodNotDeleted(model: Model, record: UnitRecord): boolean {
  const roles = model.tree.get(record.group);
  if (roles === undefined) return false;
  const instances =
    record.role === undefined ? instancePodsOf([roles]) : [roles.get(record.role)?.get(record.instance ?? 0)];
  return somePod(instances, (view) => !view.facts.terminating);
}
