/**
 * Status (DESIGN §1, §2.11): computed from observation only, so counts never exceed reality, and
 * stable, so a converged system computes exactly the stored status and writes nothing.
 * Conditions keep their lastTransitionTime until their status changes.
 */
import { resolveGroupBudget, resolveRoleBudget } from "../api/budgets.ts";
import type { Condition, ModelServingStatus, OrdinalEntry } from "../api/schema.ts";
import type { Action } from "./actions.ts";
import { LABEL_ENTRY, LABEL_MODEL_SERVING, LABEL_ROLE } from "../api/wellknown.ts";
import type { OrdinalTable } from "./ordinals.ts";
import { unitLabel } from "./ordinals.ts";
import { DRAIN_SETTLE_MS, DRAIN_WAITING_REASON, rfc3339 } from "./drain.ts";
import type { DrainWait } from "./drain.ts";
import { PAUSED_REASON } from "./events.ts";
import { podCondition, range } from "./health.ts";
import { getOrCreate } from "./maps.ts";
import type { InstanceState, Layout, UnreadableUses } from "./instances.ts";
import type { Ineligible } from "./inplace.ts";
import { ineligibleCondition } from "./inplace.ts";
import type { Work } from "./lifecycle.ts";
import type { GroupPods, Model, PodView } from "./model.ts";
import { instancePodsOf, somePod } from "./model.ts";
import type { Revisions } from "./revisions.ts";

/** A condition as computed, before its transition time is settled. */
export interface ConditionState {
  readonly type: string;
  readonly status: "True" | "False";
  readonly reason: string;
  readonly message: string;
}

/** The instances of one desired group that planning saw, with per-instance verdicts. */
interface GroupVerdict {
  readonly ready: boolean;
  readonly updated: boolean;
  readonly disrupted: boolean;
}

const MAX_LISTED = 3;

/** The instance's pods all exist and run the update revision's role spec. */
export function isUpdated(state: InstanceState): boolean {
  return state.running !== undefined && state.health.complete && state.atUpdate;
}

/** Computes the full status for this observation; `conditions` are settled against the stored ones. */
export function computeStatus(
  model: Model,
  revisions: Revisions,
  layout: Layout,
  desired: readonly InstanceState[],
  rollout: {
    readonly waiting: readonly string[];
    readonly blocked: readonly string[];
    readonly ineligible: readonly Ineligible[];
  },
  work: Work,
  nowMs: number,
): ModelServingStatus {
  const { ms } = model;
  const verdicts = groupVerdicts(model, desired);
  const readyGroups = verdicts.filter((verdict) => verdict.ready).length;
  const ineligible = [...rollout.ineligible, ...work.ineligible];
  // A refused in-place change blocks the rollout as much as a coordination dead end does.
  const blocked =
    ineligible.length === 0
      ? rollout.blocked
      : [
          ...rollout.blocked,
          "InPlaceUpdate cannot make this change (condition RolloutBlocked, reason InPlaceIneligible, says how to apply it)",
        ];
  const progressing = progressingCondition(model, work, { waiting: rollout.waiting, blocked }, desired, () =>
    hasTerminatingPod(model),
  );
  const conditions: ConditionState[] = [
    availableCondition(model, desired, readyGroups),
    progressing.reason === "Converged" ? (pausedCondition(model, revisions, desired) ?? progressing) : progressing,
  ];
  // Each group's coordinator gives its own reasons, often the same ones: each is said once.
  if (rollout.blocked.length > 0)
    conditions.push(
      listCondition("RolloutBlocked", "DependencyNeedsSurge", "The coordinated rollout cannot proceed", [
        ...new Set(rollout.blocked),
      ]),
    );
  if (ineligible.length > 0)
    conditions.push({ type: "RolloutBlocked", status: "True", ...ineligibleCondition(ineligible) });
  if (work.unreadable.size > 0)
    conditions.push(
      listCondition(
        "RevisionUnreadable",
        "RevisionUnreadable",
        "Paused what depends on an unreadable revision",
        unreadableLines(work.unreadable),
      ),
    );
  const firstRole = ms.spec.template.roles[0]?.name ?? "";
  return {
    observedGeneration: model.generation,
    replicas: [...model.tree.values()].filter(hasLivePod).length,
    readyReplicas: readyGroups,
    availableReplicas: verdicts.filter((verdict) => verdict.ready && !verdict.disrupted).length,
    updatedReplicas: verdicts.filter((verdict) => verdict.updated).length,
    currentRevision: layout.currentName,
    updateRevision: revisions.update.name,
    collisionCount: revisions.collisionCount,
    // The first role's entry pods: one per instance (instance ordinals need not start at 0,
    // docs/design/succession.md), so one per group when that role has one instance per group.
    labelSelector: `${LABEL_MODEL_SERVING}=${model.owner.name},${LABEL_ENTRY}=true,${LABEL_ROLE}=${firstRole}`,
    roles: ms.spec.template.roles.map((role) => roleStatus(role.name, desired)),
    conditions: settleConditions(ms.status?.conditions ?? [], conditions, model.generation, nowMs),
    ...(layout.units.length > 0 ? { units: [...layout.units] } : {}),
    ...ordinalsField(model.ordinals),
  };
}

/** `status.ordinals` of `table`: only when some position's ordinal differs from its number. */
export function ordinalsField(table: OrdinalTable): { ordinals?: OrdinalEntry[] } {
  const entries = table.entries();
  return entries.length > 0 ? { ordinals: entries } : {};
}

/** Some pod of the group is not being deleted. */
function hasLivePod(roles: GroupPods): boolean {
  return somePod(instancePodsOf([roles]), (view) => !view.facts.terminating);
}

/** Some pod of the ModelServing is being deleted (its capacity is about to be free). */
function hasTerminatingPod(model: Model): boolean {
  return somePod(instancePodsOf(model.tree.values()), (view) => view.facts.terminating);
}

/** Instance counts of one role among the desired instances. */
function roleStatus(
  role: string,
  desired: readonly InstanceState[],
): { name: string; replicas: number; ready: number; updated: number } {
  let replicas = 0;
  let ready = 0;
  let updated = 0;
  for (const instance of desired) {
    if (instance.role !== role) continue;
    if (instance.health.live.length > 0) replicas += 1;
    if (instance.health.ready) ready += 1;
    if (isUpdated(instance)) updated += 1;
  }
  return { name: role, replicas, ready, updated };
}

/** Per desired group: Ready by capacity (every role has its desired count of Ready instances, surge included). */
function groupVerdicts(model: Model, desired: readonly InstanceState[]): GroupVerdict[] {
  const roles = model.ms.spec.template.roles;
  // The first role of each name, as a search in spec order finds.
  const replicasOf = new Map<string, number>();
  for (const role of roles) if (!replicasOf.has(role.name)) replicasOf.set(role.name, role.replicas);
  const baseCount = roles.reduce((sum, role) => sum + role.replicas, 0);
  const byGroup = new Map<number, InstanceState[]>();
  for (const state of desired) getOrCreate(byGroup, state.group, (): InstanceState[] => []).push(state);
  return range(model.ms.spec.replicas).map((group) => {
    let base = 0;
    let updated = true;
    let disrupted = false;
    const readyByRole = new Map<string, number>();
    for (const state of byGroup.get(group) ?? []) {
      if (state.instance < (replicasOf.get(state.role) ?? 0)) {
        base += 1;
        if (!isUpdated(state)) updated = false;
      }
      if (state.health.ready) readyByRole.set(state.role, (readyByRole.get(state.role) ?? 0) + 1);
      if (state.health.draining) disrupted = true;
    }
    return {
      ready: roles.every((role) => (readyByRole.get(role.name) ?? 0) >= role.replicas),
      updated: updated && base === baseCount,
      disrupted,
    };
  });
}

function availableCondition(model: Model, desired: readonly InstanceState[], readyGroups: number): ConditionState {
  const wanted = model.ms.spec.replicas;
  if (readyGroups >= wanted)
    return {
      type: "Available",
      status: "True",
      reason: "AllGroupsReady",
      message: `All ${wanted} ServingGroup(s) are Ready.`,
    };
  const waiting = desired.filter((instance) => !instance.health.ready);
  const listed = waiting
    .slice(0, MAX_LISTED)
    .map((instance) => `${unitLabel(model.ordinals, instance)}: ${whyNotReady(instance)}`);
  const more = waiting.length > MAX_LISTED ? `; and ${waiting.length - MAX_LISTED} more instance(s)` : "";
  return {
    type: "Available",
    status: "False",
    reason: "GroupsNotReady",
    message: `${readyGroups} of ${wanted} ServingGroup(s) are Ready. Waiting for ${listed.join("; ")}${more}.`,
  };
}

/** The most telling reason an instance is not Ready, from its pods' status. */
function whyNotReady(instance: InstanceState): string {
  const { health } = instance;
  if (health.live.length === 0) return health.terminating.length > 0 ? "old pods still terminating" : "no pods yet";
  if (!health.complete) return `${health.absent.length + health.terminating.length} pod(s) missing`;
  const notReady = health.live.find((view) => !view.facts.ready);
  return notReady === undefined ? "pods Ready" : `${notReady.pod.metadata.name} ${podState(notReady)}`;
}

function podState(view: PodView): string {
  const scheduled = podCondition(view.pod, "PodScheduled");
  if (scheduled?.status === "False")
    return `Pending (${scheduled.reason ?? "Unscheduled"}${scheduled.message !== undefined ? `: ${scheduled.message}` : ""})`;
  const statuses = view.pod.status?.containerStatuses ?? [];
  const waiting = statuses.find((status) => status.state?.waiting !== undefined)?.state?.waiting?.reason;
  // Ready containers behind the serving gate a drain closed: the controller holds it out of
  // service, which "not Ready" alone would hide (fuzz-faults-crash-97 stalled so, unexplained).
  const heldOut = view.facts.containersReady && view.facts.drainingSinceMs !== undefined;
  const state =
    waiting ?? `${view.pod.status?.phase ?? "Pending"}, ${heldOut ? "draining (out of service)" : "not Ready"}`;
  // Between two crashes a pod reads Running: its restarts say it is crash-looping.
  const restarts = statuses.reduce((sum, status) => sum + status.restartCount, 0);
  return restarts > 0 ? `${state}, ${restarts} restart(s)` : state;
}

/**
 * A hint when a pod the rollout waits for crash-loops: it will not become Ready by waiting. Only
 * the kubelet's own verdict counts (a container waiting in CrashLoopBackOff): a restart alone is
 * no crash (an in-place image patch restarts its container on purpose, a node outage every
 * container of the node). Which revision brought the crash is not claimed: the pods of an
 * instance moving back after a rollback crash on the image they are leaving.
 */
function crashHint(desired: readonly InstanceState[]): string {
  const crashing = desired.some((state) => !state.health.ready && state.health.live.some(crashLooping));
  return crashing
    ? " A pod keeps crashing (CrashLoopBackOff): fix its image or configuration, or roll back if an update brought it (tandem rollout undo)."
    : "";
}

function crashLooping(view: PodView): boolean {
  const statuses = view.pod.status?.containerStatuses ?? [];
  // A loop, not `some`: stored pods are frozen, and V8 takes a slow path for `some` on frozen arrays.
  for (let index = 0; index < statuses.length; index++)
    if (statuses[index]?.state?.waiting?.reason === "CrashLoopBackOff") return true;
  return false;
}

/** How each kind of action reads in the Progressing message. */
const ACTION_PHRASES: Readonly<Partial<Record<Action["type"], string>>> = {
  CreateRevision: "recording the update revision",
  AdvanceRevision: "re-using an older revision",
  DeleteRevision: "collecting old revision(s)",
  CreatePod: "creating pod(s)",
  DeletePod: "deleting pod(s)",
  AnnotatePod: "updating drain marks",
  PatchPodImages: "patching container images in place",
  SetPodCondition: "updating serving gate(s)",
  CreateService: "creating Service(s)",
  DeleteService: "deleting Service(s)",
};

function progressingCondition(
  model: Model,
  work: Work,
  rollout: { readonly waiting: readonly string[]; readonly blocked: readonly string[] },
  desired: readonly InstanceState[],
  terminating: () => boolean,
): ConditionState {
  const rolloutWaiting = rollout.waiting;
  const counts = new Map<string, number>();
  for (const action of work.actions) {
    const phrase = ACTION_PHRASES[action.type];
    if (phrase !== undefined) counts.set(phrase, (counts.get(phrase) ?? 0) + 1);
  }
  // A drain holding units out of traffic is the most telling reason nothing is written.
  if (counts.size === 0 && work.drainWaits.length > 0) return drainWaitingCondition(work.drainWaits);
  if (rolloutWaiting.length > 0) {
    const detail = notReadyDetail(model, pendingInstances(desired));
    return {
      type: "Progressing",
      status: "True",
      reason: "RolloutWaiting",
      message: `${rolloutWaiting.slice(0, MAX_LISTED).join("; ")}${detail === "" ? "" : `. Not Ready: ${detail}`}.${crashHint(desired)}`,
    };
  }
  if (counts.size === 0 && work.recheckAtMs === undefined) {
    // Nothing to write, but pods are not Ready yet: say what they wait for rather than "converged".
    const pending = pendingInstances(desired);
    // Capacity alone would not finish a blocked rollout (it needs a spec change first). Whether a
    // pod is terminating is asked last: it looks at every pod.
    if (rollout.blocked.length === 0 && desired.some((state) => state.health.unschedulable) && !terminating())
      return capacityCondition(model, desired);
    if (pending.length > 0) {
      // An instance rebuilt (a crash recovered) has only terminating pods until they are gone.
      const what = pending.every((state) => state.health.complete)
        ? "Every pod exists; waiting for them to become Ready"
        : "Waiting for pods";
      return {
        type: "Progressing",
        status: "True",
        reason: "WaitingForPods",
        message: `${what}: ${notReadyDetail(model, pending)}.${crashHint(desired)}`,
      };
    }
    // A blocked rollout has nothing to do either, but it has not converged (RolloutBlocked says why).
    if (rollout.blocked.length > 0)
      return {
        type: "Progressing",
        status: "False",
        reason: "RolloutBlocked",
        message: `Nothing can be done until the spec changes: ${rollout.blocked[0]}.`,
      };
    return {
      type: "Progressing",
      status: "False",
      reason: "Converged",
      message: "Nothing to do: the observed pods match the spec.",
    };
  }
  const summary = [...counts].map(([phrase, count]) => `${phrase}: ${count}`).join("; ");
  return {
    type: "Progressing",
    status: "True",
    reason: "Reconciling",
    message: summary === "" ? "Waiting for pods to drain or for a restart grace period to end." : `${summary}.`,
  };
}

/**
 * Progressing while drains wait (DESIGN §3.5): for each unit (at most a few), its entry pods, the
 * live routers it awaits (or the settle after the mark, when none is left to confirm), and when
 * its timeout falls. Computed from observation only: the marks, confirmations and router liveness.
 */
function drainWaitingCondition(waits: readonly DrainWait[]): ConditionState {
  const lines = waits.slice(0, MAX_LISTED).map((wait) => {
    const awaiting =
      wait.routers.length > 0
        ? `awaiting router(s) ${wait.routers.join(", ")}`
        : `the ${DRAIN_SETTLE_MS / 1000}s settle after the mark (no live router left to confirm)`;
    // Whole seconds, rounded up: the time shown is never before the timeout.
    return `${wait.unitLabel}: pod(s) ${wait.pods.join(", ")}, ${awaiting}; timeout at ${rfc3339(Math.ceil(wait.timeoutAtMs / 1000) * 1000)}`;
  });
  const more = waits.length > MAX_LISTED ? `; and ${waits.length - MAX_LISTED} more unit(s)` : "";
  return {
    type: "Progressing",
    status: "True",
    reason: DRAIN_WAITING_REASON,
    message: `A drain waits before the pods are disrupted: ${lines.join("; ")}${more}.`,
  };
}

/**
 * Progressing for a paused rollout with nothing else to do while units it may update (at or above
 * the partitions) do not run the update revision: not Converged, but paused, with how many wait
 * and how to resume. Counted in ServingGroups under the group strategies, else in instances.
 */
function pausedCondition(
  model: Model,
  revisions: Revisions,
  desired: readonly InstanceState[],
): ConditionState | undefined {
  const { spec } = model.ms;
  if (!spec.rolloutStrategy.paused) return undefined;
  const groupPartition = resolveGroupBudget(spec).partition;
  // Role partitions count under RoleRollingUpdate only, as in the rollout.
  const byGroup = spec.rolloutStrategy.type !== "RoleRollingUpdate";
  const eligible = desired.filter((state) => {
    const role = model.roles.get(state.role);
    return (
      role !== undefined &&
      state.group >= groupPartition &&
      state.instance < role.replicas &&
      (byGroup || state.instance >= resolveRoleBudget(role).partition)
    );
  });
  const waiting = eligible.filter((state) => !state.atUpdate);
  if (waiting.length === 0) return undefined;
  const count = (states: readonly InstanceState[]) =>
    byGroup ? new Set(states.map((state) => state.group)).size : states.length;
  const unit = byGroup ? "ServingGroup(s)" : "instance(s)";
  return {
    type: "Progressing",
    status: "False",
    reason: PAUSED_REASON,
    message: `The rollout is paused: ${count(waiting)} of ${count(eligible)} ${unit} the rollout may update wait for revision ${revisions.update.name}. Set spec.rolloutStrategy.paused to false to resume.`,
  };
}

/**
 * The first desired instances (at most `MAX_LISTED`) that are not Ready and have pods, live or
 * terminating (an instance whose pods all terminate is waited for too, not "converged").
 */
function pendingInstances(desired: readonly InstanceState[]): InstanceState[] {
  return desired
    .filter((state) => !state.health.ready && (state.health.live.length > 0 || state.health.terminating.length > 0))
    .slice(0, MAX_LISTED);
}

function notReadyDetail(model: Model, pending: readonly InstanceState[]): string {
  return pending.map((state) => `${unitLabel(model.ordinals, state)}: ${whyNotReady(state)}`).join("; ");
}

/**
 * Nothing is left to do, no pod is being deleted, and some desired pods cannot be scheduled: no
 * step of the controller frees room for them, so only capacity (or a spec that asks for less)
 * ends the wait. "Waiting for them to become Ready", as said before, read as if it would end by
 * itself (fuzz-10975, fuzz-5636: a scale-up beside old, larger instances a partition keeps;
 * fuzz-9514 before 3774732: desired instances below a partition starved by the surge standing in
 * for them).
 */
function capacityCondition(model: Model, desired: readonly InstanceState[]): ConditionState {
  const starved = desired.filter((state) => state.health.unschedulable);
  const pods = starved.reduce(
    (sum, state) => sum + state.health.live.filter((view) => view.facts.unschedulable).length,
    0,
  );
  const detail = notReadyDetail(model, starved.slice(0, MAX_LISTED));
  const more = starved.length > MAX_LISTED ? `; and ${starved.length - MAX_LISTED} more instance(s)` : "";
  return {
    type: "Progressing",
    status: "True",
    reason: "WaitingForCapacity",
    message: `${pods} pod(s) cannot be scheduled and nothing left to do frees room for them: ${detail}${more}. Add capacity for them.`,
  };
}

/** One line per unreadable revision: why, then the units it pauses (at most a few named). */
function unreadableLines(unreadable: UnreadableUses): string[] {
  return [...unreadable].map(([reason, units]) => {
    const named = [...units].sort().slice(0, MAX_LISTED).join(", ");
    return `${reason} (pauses ${named}${units.size > MAX_LISTED ? ` and ${units.size - MAX_LISTED} more unit(s)` : ""})`;
  });
}

/** A True condition whose message lists (at most a few of) `items` after `lead`. */
function listCondition(type: string, reason: string, lead: string, items: readonly string[]): ConditionState {
  const listed = items.slice(0, MAX_LISTED).join("; ");
  const more = items.length > MAX_LISTED ? `; and ${items.length - MAX_LISTED} more` : "";
  return { type, status: "True", reason, message: `${lead}: ${listed}${more}.` };
}

/**
 * Merges computed conditions into the stored ones: a condition whose status is unchanged keeps
 * its lastTransitionTime; conditions not computed this time are dropped.
 */
export function settleConditions(
  stored: readonly Condition[],
  computed: readonly ConditionState[],
  generation: number,
  nowMs: number,
): Condition[] {
  return computed.map((condition) => {
    const previous = stored.find((candidate) => candidate.type === condition.type);
    const lastTransitionTime =
      previous?.status === condition.status && previous.lastTransitionTime !== undefined
        ? previous.lastTransitionTime
        : rfc3339(nowMs);
    return { ...condition, lastTransitionTime, observedGeneration: generation };
  });
}
