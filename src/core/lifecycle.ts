/**
 * The serving lifecycle (DESIGN §2.5): make the pods match a `Layout` — create units whole at
 * their target revision, replace units whose pods run another revision (drained), scale groups
 * and role instances down (highest ordinal first, drained), and recover failures by
 * `recoveryPolicy`. Which units exist and at which revision is decided elsewhere (the layout, by
 * the rollout); this module only executes it. Pure: appends actions to a `Work` accumulator.
 */
import { LABEL_REVISION, LABEL_ROLE_HASH } from "../api/wellknown.ts";
import type { Action } from "./actions.ts";
import { cancelDrain, openGate, planDrainedDeletion, podList } from "./drain.ts";
import type { DrainStep, DrainWait } from "./drain.ts";
import { recordEvent } from "./events.ts";
import { instanceHealth, podFailure, range } from "./health.ts";
import { instanceId, serviceName } from "./identity.ts";
import type { InstanceState, InstanceStates, Layout, UnreadableUses } from "./instances.ts";
import { desiredInstanceStates, expectedPods, resolver } from "./instances.ts";
import type { Ineligible } from "./inplace.ts";
import { isInPlaceRestart, movesInPlace, planInPlace, readProgress } from "./inplace.ts";
import type { InstancePods, Model, PodView } from "./model.ts";
import type { Role } from "../api/schema.ts";
import { groupLabel, ordinalsOf, positionOf, unitLabel } from "./ordinals.ts";
import type { UnitPlace } from "./ordinals.ts";
import { buildPod, buildService } from "./pods.ts";
import type { Revision } from "./pods.ts";
import { roleHash, sameRevisionData, sameRoleSpec } from "./role-hash.ts";
import { deletePod, releasePods, trackPod } from "./tracking.ts";
import { recreateKey } from "./recreate.ts";
import { groupAvailable } from "./rollout.ts";
import { resolveGroupBudget, resolveRoleBudget, roleFloor } from "../api/budgets.ts";

/** What planning accumulates: actions in order, when to look again, and why it waits. */
export interface Work {
  readonly actions: Action[];
  recheckAtMs: number | undefined;
  /** Units that cannot be acted on because a revision they depend on is unreadable. */
  readonly unreadable: UnreadableUses;
  /** Instances an in-place update must leave alone: their change is more than images. */
  readonly ineligible: Ineligible[];
  /** Units whose drain still waits (for routers or the settle), for status. */
  readonly drainWaits: DrainWait[];
  /**
   * Why retired units stay that only capacity or a larger maxUnavailable can end (a successor
   * waits for capacity while they carry the floor), for status (Progressing, RolloutWaiting).
   */
  readonly retiredWaits: string[];
}

export function newWork(): Work {
  return {
    actions: [],
    recheckAtMs: undefined,
    unreadable: new Map(),
    ineligible: [],
    drainWaits: [],
    retiredWaits: [],
  };
}

/** Adds a drain step's actions, recheck and wait to `work`. */
function addDrainStep(work: Work, step: DrainStep): void {
  work.actions.push(...step.actions);
  recheckAt(work, step.recheckAtMs);
  if (step.wait !== undefined) work.drainWaits.push(step.wait);
}

export function recheckAt(work: Work, atMs: number | undefined): void {
  if (atMs !== undefined) work.recheckAtMs = work.recheckAtMs === undefined ? atMs : Math.min(work.recheckAtMs, atMs);
}

interface Context {
  readonly model: Model;
  readonly nowMs: number;
  readonly work: Work;
  /** Resolves a revision name for `label`, reporting an unreadable one. */
  readonly resolve: (name: string, label: string) => Revision | undefined;
  /** Roles whose pods a RoleRollingUpdate in progress changes (`rolloutChangedRoles`). */
  readonly changedRoles: ReadonlySet<string>;
  /** The current revision when `changedRoles` has any (`movedByRollout` compares with it). */
  readonly current: Revision | undefined;
  /** The layout's current revision (events say why a unit is created or removed). */
  readonly currentName: string;
  readonly recreate: LifecycleRecreate;
}

/** The instances an explicit recreate replaces now (src/core/recreate.ts), and why, for events. */
export interface LifecycleRecreate {
  /** `recreateKey`s. */
  readonly replaceNow: ReadonlySet<string>;
  readonly why: string;
}

/**
 * Plans creation, replacement, scaling and recovery for every group under `layout`; returns the
 * desired instances' states. A Service is kept while its instance is desired with workers or
 * still has pods (workers being drained still resolve their entry).
 */
export function planLifecycle(
  states: InstanceStates,
  layout: Layout,
  nowMs: number,
  work: Work,
  recreate: LifecycleRecreate,
): InstanceState[] {
  const { model, revisions } = states;
  const resolve = resolver(revisions, work.unreadable);
  // Only ServingGroupRecreate asks which roles the rollout changes (`movedByRollout`).
  const changedRoles =
    model.ms.spec.recoveryPolicy === "ServingGroupRecreate" ? rolloutChangedRoles(model, revisions, layout) : NO_ROLES;
  const currentLookup = changedRoles.size > 0 ? revisions.lookup(layout.currentName) : undefined;
  const context = {
    model,
    nowMs,
    work,
    resolve,
    changedRoles,
    current: currentLookup?.ok === true ? currentLookup.revision : undefined,
    currentName: layout.currentName,
    recreate,
  };
  const desiredServices = new Set<string>();
  const statesOf = (group: number) => desiredInstanceStates(states, layout, resolve, group);
  const retiredGroupsGo = retiredGroupMayGo(model, layout, statesOf);
  if (!retiredGroupsGo) noteStarvedRetiredGroups(context, layout, statesOf);
  for (const [group, roles] of [...model.tree].reverse()) {
    // A retired group (negative position) has a successor: it is surplus like one beyond the layout.
    if (group >= layout.groups || (group < 0 && retiredGroupsGo))
      scaleDown(
        context,
        [...roles.values()].flatMap((instances) => [...instances.values()]),
        groupLabel(model.ordinals, group),
        group < 0 ? "succeeded by a surge group" : undefined,
      );
  }
  const desired: InstanceState[] = [];
  for (const group of range(layout.groups)) {
    const groupStates = statesOf(group);
    scaleDownRoles(context, layout, group, groupStates);
    planGroup(context, group, groupStates);
    desired.push(...groupStates);
    for (const state of groupStates)
      if (expectedPods(state.target, state.role) > 1)
        desiredServices.add(instanceServiceName(model, state.group, state.role, state.instance, state.pods));
  }
  deleteUnneededServices(context, desiredServices);
  return desired;
}

/**
 * Deletes every Service neither in `desired` (the names of desired instances with workers) nor of
 * an instance that still has pods. A Service whose labels name its instance is looked up in the
 * tree (its name is that instance's, and no other instance's); one whose labels and name disagree
 * is matched by name against the Service names of every instance with pods.
 */
function deleteUnneededServices(context: Context, desired: ReadonlySet<string>): void {
  const { model, work } = context;
  let namesWithPods: ReadonlySet<string> | undefined;
  for (const [name, { service, instance }] of model.services) {
    // The name first: most Services are desired, and their objects need not be read.
    if (desired.has(name)) continue;
    const uid = service.metadata.uid;
    if (uid === undefined) continue;
    const hasPods =
      instance === undefined
        ? (namesWithPods ??= serviceNamesWithPods(model)).has(name)
        : hasInstance(model, positionOf(model.ordinals, instance));
    if (!hasPods) work.actions.push({ type: "DeleteService", name, uid });
  }
}

function hasInstance(model: Model, at: UnitPlace): boolean {
  return model.tree.get(at.group)?.get(at.role)?.has(at.instance) === true;
}

/** The Service names of every instance with pods (the tree holds only instances with pods). */
function serviceNamesWithPods(model: Model): Set<string> {
  const names = new Set<string>();
  for (const [group, roles] of model.tree) {
    for (const [role, instances] of roles)
      for (const [instance, pods] of instances) names.add(instanceServiceName(model, group, role, instance, pods));
  }
  return names;
}

/**
 * The name of an instance's Service: its entry pod's name when that pod exists (a pod is placed
 * only when its name is the one its identity gives, so the two are equal), else built from the
 * ordinals of its pods or, without pods, those of its position; reusing the pod's name spares
 * building the same string on every plan.
 */
function instanceServiceName(
  model: Model,
  group: number,
  role: string,
  instance: number,
  pods: InstancePods | undefined,
): string {
  const entry = pods?.get(0)?.pod.metadata.name;
  if (entry !== undefined) return entry;
  // Pods carry their ordinals; a position without pods has the ones new pods would get.
  const some = pods?.values().next().value;
  const physical = some?.id ?? ordinalsOf(model.ordinals, { group, role, instance });
  // A position still waiting for its ordinal has no Service yet: no name to keep.
  return physical === undefined ? "" : serviceName(model.owner.name, physical.group, role, physical.instance);
}

/** Deletes units no longer desired, drained; their lost pods need no recovery and are released. */
function scaleDown(context: Context, units: readonly InstancePods[], label: string, cause?: string): void {
  const pods = units.flatMap((pods) => [...pods.values()]);
  const step = planDrainedDeletion(
    pods,
    context.model.drain,
    "ScaleDown",
    `${label} (${cause ?? scaleDownCause(context, pods)})`,
    context.nowMs,
  );
  addDrainStep(context.work, step);
  releasePods(
    pods.filter((view) => view.facts.lost),
    context.work.actions,
  );
}

/**
 * Why a unit beyond the spec goes: surge units are built at the update revision and exist only
 * while a rollout is in progress, so a unit at another revision than the current one during a
 * rollout is taken for surge (a unit the rollout moved and a scale-down then removes is too:
 * docs/design/events.md, Known limits).
 */
function scaleDownCause(context: Context, pods: readonly PodView[]): string {
  const rolling =
    context.model.ms.status?.updateRevision !== undefined &&
    context.model.ms.status.updateRevision !== context.currentName;
  return rolling && pods.some((view) => view.revision !== undefined && view.revision !== context.currentName)
    ? "surge no longer needed"
    : "scale-down";
}

/**
 * Whether retired groups may be drained now: the groups the layout keeps that are available
 * (surge included) reach the group floor without them. A succession counted the outdated group's
 * capacity as gone, but its successor may fail or be deleted before the retired group drains
 * (fuzz-4171): then the retired group serves on, surplus, until the floor is back.
 */
function retiredGroupMayGo(model: Model, layout: Layout, statesOf: (group: number) => InstanceState[]): boolean {
  if (![...model.tree.keys()].some((group) => group < 0)) return true;
  const roles = model.ms.spec.template.roles;
  const available = range(layout.groups).filter((group) => groupAvailable(statesOf(group), roles)).length;
  return available >= model.ms.spec.replicas - resolveGroupBudget(model.ms.spec).maxUnavailable;
}

/**
 * Scales down, highest ordinal first, the instances of `group` the layout no longer wants
 * (`groupStates` are the ones it keeps). A retired instance (negative position) has a successor:
 * it is surplus like one beyond the layout, drained once its role in the group keeps its floor
 * without it (`retiredGroupMayGo`, per role). A scale-down never takes a role in the group below
 * `replicas` available by itself: while kept instances are not yet available (one being rebuilt
 * when the spec shrinks the role), as many serving unwanted instances as they lack stay, lowest
 * ordinal first, and go once the kept ones serve (fuzz-faults-coordinated-crash-gang-388).
 */
function scaleDownRoles(context: Context, layout: Layout, group: number, groupStates: readonly InstanceState[]): void {
  for (const [role, instances] of context.model.tree.get(group) ?? []) {
    const spec = context.model.roles.get(role);
    const wanted = spec === undefined ? 0 : layout.instances(group, spec);
    const keptAvailable = groupStates.filter((state) => state.role === role && state.available).length;
    // retiredGo is true without a spec; a role without a spec holds nothing back.
    const retiredGo = spec === undefined || keptAvailable >= roleFloor(spec);
    let lacking = spec === undefined ? 0 : spec.replicas - keptAvailable;
    // Usually none is unwanted: collect them before reversing rather than copying every instance.
    const unwanted: [number, InstancePods][] = [];
    const held: number[] = [];
    // Ascending: retired instances (which carry the role while they stay) come first.
    for (const entry of instances) {
      const [instance, pods] = entry;
      const serving = lacking > 0 && spec !== undefined && serves(spec, pods);
      if (instance < 0) {
        if (retiredGo) unwanted.push(entry);
        else if (serving) lacking -= 1;
      } else if (instance >= wanted) {
        if (serving) {
          lacking -= 1;
          held.push(instance);
        } else unwanted.push(entry);
      }
    }
    if (spec !== undefined) {
      const retired = retiredGo ? [] : [...instances.keys()].filter((instance) => instance < 0);
      noteStarvedKept(context, group, spec, retired, groupStates, "retired");
      noteStarvedKept(context, group, spec, held, groupStates, "held");
    }
    for (const [instance, pods] of unwanted.reverse())
      if (instance < 0)
        scaleDown(
          context,
          [pods],
          unitLabel(context.model.ordinals, { group, role, instance }),
          "succeeded by a surge instance",
        );
      else scaleDown(context, [pods], unitLabel(context.model.ordinals, { group, role, instance }));
  }
}

/** Whether an instance of `role` serves: every pod of its spec's count present, Ready and not draining. */
function serves(role: Role, pods: InstancePods): boolean {
  const health = instanceHealth(pods, 1 + role.workerReplicas);
  return health.ready && !health.draining;
}

/**
 * The starved case of instances a scale-down keeps (docs/design/succession.md): retired ones stay
 * because their role in `group` is below its floor without them, held ones (`scaleDownRoles`)
 * because it is below `replicas`, and a desired instance of the role waits for a node with room —
 * the GPUs they hold among them, so the wait does not end by itself. Says so, as `starvedMessage`
 * does for surge; a desired instance merely starting says nothing.
 */
function noteStarvedKept(
  context: Context,
  group: number,
  role: Role,
  kept: readonly number[],
  groupStates: readonly InstanceState[],
  kind: "retired" | "held",
): void {
  const states = groupStates.filter((state) => state.role === role.name);
  if (kept.length === 0 || !states.some((state) => state.health.unschedulable)) return;
  const { ordinals } = context.model;
  const units = kept.map((instance) => unitLabel(ordinals, { group, role: role.name, instance })).join(", ");
  const available = states.filter((state) => state.available).length;
  const message =
    kind === "retired"
      ? starvedRetiredMessage(available, role.replicas, resolveRoleBudget(role).maxUnavailable, "instance(s)", units)
      : `${available} of ${role.replicas} desired instance(s) available: the rest wait for capacity while ${units}, beyond the spec and due to go, keep the group available; add capacity`;
  context.work.retiredWaits.push(`${groupLabel(ordinals, group)} role ${role.name}: ${message}`);
}

/** `noteStarvedRetired` for retired groups: the desired groups below the group floor, one starved. */
function noteStarvedRetiredGroups(
  context: Context,
  layout: Layout,
  statesOf: (group: number) => InstanceState[],
): void {
  const { model } = context;
  const states = range(layout.groups).map(statesOf);
  if (!states.some((group) => group.some((state) => state.health.unschedulable))) return;
  const roles = model.ms.spec.template.roles;
  const available = states.filter((group) => groupAvailable(group, roles)).length;
  const retired = [...model.tree.keys()].filter((group) => group < 0);
  const units = retired.map((group) => groupLabel(model.ordinals, group)).join(", ");
  const { maxUnavailable } = resolveGroupBudget(model.ms.spec);
  context.work.retiredWaits.push(
    starvedRetiredMessage(available, model.ms.spec.replicas, maxUnavailable, "ServingGroup(s)", units),
  );
}

/** Why retired units stay while desired ones starve (the retired ones named by `retired`). */
function starvedRetiredMessage(
  available: number,
  desired: number,
  maxUnavailable: number,
  unit: string,
  retired: string,
): string {
  return `${available} of ${desired} desired ${unit} available with maxUnavailable ${maxUnavailable}: the rest wait for capacity while the retired unit(s) ${retired}, succeeded and due to go, carry the floor, and draining them would break the budget; add capacity or raise maxUnavailable`;
}

/**
 * Under ServingGroupRecreate a failed instance rebuilds its whole group, except an instance a
 * RoleRollingUpdate in progress has moved (or built as surge): that one is rebuilt alone, as the
 * rollout replaced it alone (the group strategies move, and so rebuild, whole groups). Its
 * failure may be the update's own (an image that crashes), and rebuilding the group would take
 * the group's other instances down beyond their budgets, once more on every crash, and hand them
 * free permits to the crashing revision (unavailable units move first): the crash would spread to
 * every group instead of the rollout stalling.
 */
function planGroup(context: Context, group: number, states: readonly InstanceState[]): void {
  const broken =
    context.model.ms.spec.recoveryPolicy === "ServingGroupRecreate"
      ? states.filter(
          (state) =>
            !context.recreate.replaceNow.has(recreateKey(state)) &&
            hasFailed(context, state) &&
            !movedByRollout(context, state),
        )
      : [];
  if (broken.length > 0) {
    const why = broken
      .map((state) => `${instanceId(state.role, state.instance)}: ${describeFailure(context, state)}`)
      .join("; ");
    const live = states.flatMap((state) => state.health.live);
    deleteForRecovery(context, live, `group ${group} failed (${why}); rebuilding the group`);
    // Lost pods keep the group broken until none of its pods lives: then the rebuild cannot be
    // undone (a restart sees a group with nothing to keep) and they are released.
    for (const state of states) {
      releaseStrays(context, state);
      if (live.length === 0) releaseLost(context, state);
    }
    return;
  }
  for (const state of states) planInstance(context, state);
}

/**
 * A rollout moved the instance's pods, for a role the rollout in progress changes: they run the
 * update revision's spec for it, or one the current revision does not build (an update since
 * rolled back moved them there, and they crash on it while their move back waits for a permit:
 * fuzz-faults-coordinated-crash-gang-2229 rebuilt the whole group for it, taking the role's last
 * available instance down with it).
 */
function movedByRollout(context: Context, state: InstanceState): boolean {
  if (!context.changedRoles.has(state.role)) return false;
  // An instance whose pods are all lost ran what their label names.
  const lostLabel = state.running === undefined ? state.health.lost[0]?.revision : undefined;
  const runs =
    state.running ?? (lostLabel === undefined ? undefined : context.resolve(lostLabel, instanceLabel(context, state)));
  if (runs === undefined) return false;
  return (
    state.atUpdate || (context.current !== undefined && !sameRoleSpec(runs.data, context.current.data, state.role))
  );
}

/**
 * The roles whose pods a RoleRollingUpdate in progress changes (by their own spec): those whose
 * spec differs between the update revision and the current one or one a unit record names (an
 * update back to the current revision moves the units recorded elsewhere). None under the group
 * strategies or when no rollout is in progress; an unreadable revision adds none (its units are
 * recovered as the policy says, nothing guessed).
 */
function rolloutChangedRoles(
  model: Model,
  revisions: InstanceStates["revisions"],
  layout: Layout,
): ReadonlySet<string> {
  const { update } = revisions;
  if (model.ms.spec.rolloutStrategy.type !== "RoleRollingUpdate") return NO_ROLES;
  const from = new Set([layout.currentName, ...layout.units.map((record) => record.revision)]);
  from.delete(update.name);
  const changed = new Set<string>();
  for (const name of from) {
    const found = revisions.lookup(name);
    if (!found.ok) continue;
    for (const role of model.ms.spec.template.roles)
      if (!sameRoleSpec(found.revision.data, update.data, role.name)) changed.add(role.name);
  }
  return changed.size === 0 ? NO_ROLES : changed;
}

const NO_ROLES: ReadonlySet<string> = new Set();

/**
 * An instance is broken when a pod has failed or is lost (deleted by someone else: the recovery
 * finalizer tells it from one the controller deleted, and from one never created), or when a pod
 * is missing or being deleted while another has already started (a partially created instance
 * whose pods are all still pending is just being created, e.g. by a controller that restarted
 * mid-creation). An instance being replaced is not broken: its pods go away on purpose.
 */
function isBroken(context: Context, state: InstanceState): boolean {
  // In place, the pods of a unit being moved stay: their failures are recovered like any other.
  if (state.replacing && !isInPlace(context)) return false;
  if (hasFailed(context, state)) return true;
  const { health } = state;
  const incomplete = health.absent.length > 0 || health.terminating.length > 0;
  return incomplete && health.live.some((view) => view.facts.started);
}

/**
 * The instance failed: a pod of it failed or is lost. Only this rebuilds a group under
 * ServingGroupRecreate. An instance that is merely incomplete lacks pods the controller deleted
 * itself — the tracking finalizer shows every other deletion as lost — such as a replacement
 * undone midway by a rollback after its first pod went (fuzz-faults-crash-gang-830135: the whole
 * group was rebuilt, below the role budget). The controller never treats its own deletions as
 * failures (DESIGN §2.5), so such an instance is rebuilt alone.
 */
function hasFailed(context: Context, state: InstanceState): boolean {
  if (state.replacing && !isInPlace(context)) return false;
  return state.health.lost.length > 0 || failedPods(context, state.health.live).length > 0;
}

function failedPods(context: Context, pods: readonly PodView[]): PodView[] {
  const graceSeconds = context.model.ms.spec.template.restartGracePeriodSeconds;
  const failed: PodView[] = [];
  // A loop, not `filter`: asked for every desired instance on every plan.
  for (const view of pods) {
    // Restarts onto a new image in place are judged by the in-place verification (a bad image
    // stalls the update; it is not recovered by recreating the pod).
    // Only a marked pod can carry in-place progress.
    if (view.facts.marked && isInPlaceRestart(view.pod)) continue;
    const verdict = podFailure(view.facts, graceSeconds, context.nowMs);
    if (verdict.failed) failed.push(view);
    else recheckAt(context.work, verdict.recheckAtMs);
  }
  return failed;
}

function planInstance(context: Context, state: InstanceState): void {
  const { work, nowMs, model } = context;
  const { health } = state;
  const inPlace = isInPlace(context);
  // Images patched in place by an update the user switched away from: the user asked for pods to
  // be replaced, so they are.
  // Only a marked pod can carry in-place progress (most instances have none: nothing to parse).
  const abandoned =
    !inPlace &&
    health.marked &&
    health.live.some((view) => (readProgress(view.pod)?.phase ?? "Draining") !== "Draining");
  releaseStrays(context, state);
  // An explicit recreate replaces the instance whatever the strategy: in place too, which is
  // what it is for (seed §5); it is rebuilt at its target like any replacement.
  const recreating = context.recreate.replaceNow.has(recreateKey(state));
  if ((state.replacing && !inPlace) || abandoned || recreating) {
    // The replacement rebuilds the instance anyway: a loss needs nothing more.
    releaseLost(context, state);
    const why = recreating
      ? context.recreate.why
      : abandoned && !state.replacing
        ? "in-place update abandoned"
        : `replacing ${state.running?.name ?? "?"} with ${state.target.name}`;
    const reason = recreating ? "Recreate" : "Update";
    addDrainStep(
      work,
      planDrainedDeletion(health.live, model.drain, reason, `${instanceLabel(context, state)} (${why})`, nowMs),
    );
    return;
  }
  for (const view of health.extra) work.actions.push(deletePod(view, "Orphan"));
  if (isBroken(context, state)) {
    const policy = model.ms.spec.recoveryPolicy;
    const victims = policy === "None" ? failedPods(context, health.live) : health.live;
    deleteForRecovery(
      context,
      victims,
      `${instanceLabel(context, state)} failed (${describeFailure(context, state)}); ${policy === "None" ? "replacing the failed pods" : "rebuilding the instance"}`,
    );
    // Under None a lost pod is its own unit, refilled once its object goes; else the instance is,
    // and the rebuild cannot be undone once none of its pods lives.
    if (policy === "None" || health.live.length === 0) releaseLost(context, state);
    if (policy === "None") createAbsent(context, state);
    return;
  }
  createAbsent(context, state);
  const lookup = (name: string) => context.resolve(name, instanceLabel(context, state));
  if (inPlace && movesInPlace(health.live, state.target, state.role, lookup)) {
    const step = planInPlace({ model, nowMs, lookup }, state, health.live, state.target);
    addDrainStep(work, step);
    work.ineligible.push(...step.ineligible);
    // Refused, the instance stays at what it runs and serves: a drain begun for a move that will
    // not come (a replacement under the strategy before, an in-place move not patched yet) is
    // undone below, or its pods would stay out of service for good (fuzz-faults-crash-97). A pod
    // already patched keeps its progress mark: it tells what the pod runs.
    if (
      step.ineligible.length === 0 ||
      !health.live.every((view) => (readProgress(view.pod)?.phase ?? "Draining") === "Draining")
    )
      return;
  }
  for (const view of health.live) {
    const cancel = cancelDrain(view, nowMs);
    const open = openGate(view, nowMs);
    if (cancel.length + open.length > 0) work.actions.push(...cancel, ...open);
    // Another write to the pod in this plan would make this one a Conflict: it waits a plan.
    else if (!view.facts.tracked) work.actions.push(trackPod(view));
  }
  relabelUnchanged(context, state);
}

/**
 * Under ServingGroupRollingUpdate, relabels at the instance's target the live pods that run what
 * it builds under an older revision label (a role a RoleRollingUpdate or an InPlaceUpdate left
 * unchanged before the switch; `computeState` counts them as running the target). The group
 * strategy compares whole revisions, so the label must say what the pod runs: left, a rollout
 * with nothing to move would never show its pods at the update revision. A label write, never a
 * restart. (Under RoleRollingUpdate and InPlaceUpdate such labels are what the strategy leaves:
 * neither writes to the pods of a role an update does not change.)
 *
 * Each pod is judged by its own label, not by the entry's: a relabel whose write failed for one
 * pod (the entry's went through) is retried, where judging the instance by its entry would call it
 * done and leave that pod at the old label for good (fuzz-faults-coordinated-crash-gang-920).
 */
function relabelUnchanged(context: Context, state: InstanceState): void {
  const { running, target } = state;
  if (
    running === undefined ||
    state.replacing ||
    context.model.ms.spec.rolloutStrategy.type !== "ServingGroupRollingUpdate"
  )
    return;
  let labels: Record<string, string> | undefined;
  for (const view of state.health.live) {
    if (view.revision === undefined || view.revision === target.name) continue;
    const own =
      view.revision === running.name ? running : context.resolve(view.revision, instanceLabel(context, state));
    // An equal revision under another name (re-hashed by a newer controller) is left alone, as
    // ever; a pod whose role spec differs is not relabelled (only a replacement can move it).
    if (
      own === undefined ||
      sameRevisionData(own.data, target.data) ||
      !sameRoleSpec(own.data, target.data, state.role)
    )
      continue;
    if (labels === undefined) {
      const hash = roleHash(target.data, state.role);
      labels = { [LABEL_REVISION]: target.name, ...(hash === undefined ? {} : { [LABEL_ROLE_HASH]: hash }) };
    }
    context.work.actions.push({
      type: "AnnotatePod",
      name: view.pod.metadata.name,
      uid: view.uid,
      annotations: {},
      labels,
    });
  }
}

/** How messages and unreadable-revision reports name the instance; built only when one is written. */
function instanceLabel(context: Context, state: InstanceState): string {
  return unitLabel(context.model.ordinals, state);
}

function isInPlace(context: Context): boolean {
  return context.model.ms.spec.rolloutStrategy.type === "InPlaceUpdate";
}

function deleteForRecovery(context: Context, victims: readonly PodView[], message: string): void {
  if (victims.length === 0) return;
  context.work.actions.push(
    recordEvent(
      "Recovering",
      `recoveryPolicy ${context.model.ms.spec.recoveryPolicy}: ${message}; deleting ${podList(victims)}.`,
    ),
  );
  // Dead or broken pods serve nothing: no drain (DESIGN §3.4).
  for (const view of victims) context.work.actions.push(deletePod(view, "Recovery"));
}

/** Releases the instance's lost pods: the controller has acted on their loss. */
function releaseLost(context: Context, state: InstanceState): void {
  releasePods(state.health.lost, context.work.actions);
}

/** Releases lost pods beyond the instance's expected count: they were going anyway. */
function releaseStrays(context: Context, state: InstanceState): void {
  const { health } = state;
  // Usually nothing terminates: no search.
  if (health.terminating.length > health.lost.length)
    releasePods(
      health.terminating.filter((view) => view.facts.lost && !health.lost.includes(view)),
      context.work.actions,
    );
}

function describeFailure(context: Context, state: InstanceState): string {
  const failed = failedPods(context, state.health.live).map(
    (view) => `${view.pod.metadata.name} ${view.pod.status?.phase === "Failed" ? "failed" : "keeps restarting"}`,
  );
  const gone = [
    ...state.health.terminating.map((view) => view.pod.metadata.name),
    ...state.health.absent.map((index) => `pod ${index}`),
  ];
  return [...failed, ...(gone.length > 0 ? [`lost ${gone.join(", ")}`] : [])].join(", ");
}

/**
 * Creates the instance's pods that have no pod at all (a terminating pod still holds its name),
 * at the revision its live pods run, or at its target when nothing runs.
 */
function createAbsent(context: Context, state: InstanceState): void {
  const { model, work } = context;
  // An instance whose every pod is going (replaced, or rebuilt by recovery) is created whole once
  // they are gone: pods created beside terminating ones would start while the others are missing,
  // which is a broken instance, rebuilt again, and so on.
  if (state.health.absent.length === 0 || (state.health.live.length === 0 && state.health.terminating.length > 0))
    return;
  const revision = state.running ?? state.target;
  // The ordinals its pods get; a position whose ordinal a retired unit still holds waits for it.
  const physical = ordinalsOf(model.ordinals, state);
  if (physical === undefined) return;
  if (state.health.live.length === 0 && state.health.terminating.length === 0) {
    work.actions.push(
      recordEvent(
        "InstanceCreated",
        `Creating ${instanceLabel(context, state)} at revision ${revision.name} (${creationCause(context, state)}).`,
      ),
    );
  }
  if (
    expectedPods(revision, state.role) > 1 &&
    !model.services.has(serviceName(model.owner.name, physical.group, state.role, physical.instance))
  ) {
    work.actions.push({
      type: "CreateService",
      service: buildService(model.owner, physical.group, state.role, physical.instance),
    });
  }
  for (const index of state.health.absent) {
    const pod = buildPod(model.owner, revision, { ...physical, index });
    if (pod !== undefined) work.actions.push({ type: "CreatePod", pod });
  }
}

/**
 * Why an instance with no pod is created, as far as the observation tells (docs/design/events.md):
 * beyond the spec it is surge; in the first plan of a new generation (or of a new ModelServing),
 * a scale-up; at a revision other than the current one, the rollout replacing it. Otherwise its
 * earlier pods are gone, which nothing observed tells apart: lost, deleted by recovery (a
 * Recovering event came first), or replaced by a rollout back to the current revision (an
 * InstanceDeleted event came first).
 */
function creationCause(context: Context, state: InstanceState): string {
  const { model } = context;
  if (state.group >= model.ms.spec.replicas || state.instance >= (model.roles.get(state.role)?.replicas ?? 0))
    return `surge for the rollout to ${state.target.name}`;
  if (model.ms.status?.observedGeneration !== model.generation) return "scale-up";
  if (state.target.name !== context.currentName) return `replacement for the rollout to ${state.target.name}`;
  return "its earlier pods are gone: lost, recovered, or replaced by a rollout back to this revision";
}
