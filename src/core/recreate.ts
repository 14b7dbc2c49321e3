/**
 * The explicit recreate (seed §5: "a costlier recovery action needs an explicit trigger"; DESIGN
 * §2.10): `tandem rollout restart NAME --recreate --group G [--role R]` writes the request
 * `tandem.dev/recreate` (src/api/recreate.ts), and this module turns it into the replacement of
 * exactly that unit — ServingGroup G, or the instances of role R in it. Nothing else ever asks for
 * it: an in-place update that stalls on a bad image stays stalled until the user asks.
 *
 * Exactly once, across plans and controller restarts: a request is taken up by recording it in
 * `status.recreate` (phase `Replacing`) with the UIDs of the unit's live pods, in the barrier
 * status write that precedes every pod action of the plan. From then on only those pods are
 * replaced (drained, deleted, and rebuilt by the lifecycle at the revision recorded for their
 * unit, so partitions hold as in recovery, DESIGN §2.5); pods created since are new and stay.
 * Once none of them exists the record says `Done`; a record with the request's id is never acted
 * on again, and a new id asks again. A request that does not fit the spec is recorded `Rejected`
 * with the reason (a later scale-up does not revive it). One request at a time: a new one waits
 * while another is `Replacing`.
 *
 * Within the budgets, decided after the rollout's own moves of this plan (its permits already
 * make their units unavailable in the layout's states): an instance (or, under the group
 * strategies, a group) that is unavailable anyway goes at no cost; an available one goes only
 * while its role keeps `replicas − maxUnavailable` available instances in the group and, when it
 * takes a serving group down, while the groups available (surge groups included) stay at least
 * `replicas − maxUnavailable`. Under the group strategies a whole-group request moves the group at
 * once (the group is their unit); under RoleRollingUpdate it goes instance by instance, each
 * within its role's budget. No surge is added for a recreate. Pure.
 */
import { resolveGroupBudget, roleFloor } from "../api/budgets.ts";
import { readRecreateRequest, recreateProblem, recreateUnitLabel } from "../api/recreate.ts";
import { ANNOTATION_RECREATE } from "../api/wellknown.ts";
import type { RecreateRequest } from "../api/recreate.ts";
import type { ModelServing, RecreateRecord, Role } from "../api/schema.ts";
import type { Action } from "./actions.ts";
import { recordEvent } from "./events.ts";
import { range } from "./health.ts";
import type { InstanceState, InstanceStates, Layout } from "./instances.ts";
import type { LifecycleRecreate } from "./lifecycle.ts";
import { desiredInstanceStates } from "./instances.ts";
import type { Revision } from "./pods.ts";
import { groupAvailable } from "./rollout.ts";
import { groupLabel, groupOrdinals, unitLabel } from "./ordinals.ts";

/** What this plan does about the explicit recreate. */
export interface RecreateDecision {
  /** `status.recreate` after this plan; undefined when there is none. */
  readonly record: RecreateRecord | undefined;
  /** A request is taken up in this plan: its record must be durable before any pod action. */
  readonly taken: boolean;
  /** Instances (`recreateKey`) whose pods are drained and deleted now, for the lifecycle. */
  readonly lifecycle: LifecycleRecreate;
  /** Why a unit of the request waits, for Progressing. */
  readonly waiting: readonly string[];
  /** RecreateStarted, RecreateCompleted or RecreateRejected, with the record write they follow. */
  readonly events: readonly Action[];
}

/** The key of an instance in `LifecycleRecreate.replaceNow`. */
export function recreateKey(state: Pick<InstanceState, "group" | "role" | "instance">): string {
  return `${state.group}/${state.role}/${state.instance}`;
}

type Resolve = (name: string, label: string) => Revision | undefined;

const NOTHING: LifecycleRecreate = { replaceNow: new Set(), why: "" };

/** Decides the explicit recreate for this plan under the rollout's `layout`. */
export function planRecreate(states: InstanceStates, layout: Layout, resolve: Resolve): RecreateDecision {
  const { model } = states;
  const stored = model.ms.status?.recreate;
  if (stored?.phase === "Replacing") return replace(states, layout, resolve, stored, false);
  const read = readRecreateRequest(model.ms.metadata.annotations);
  if (read === undefined || read.id === stored?.id) return idle(stored);
  if (!read.ok)
    return reject({ id: read.id, phase: "Rejected", message: `The annotation ${ANNOTATION_RECREATE} ${read.reason}.` });
  const { request } = read;
  const problem = recreateProblem(model.ms.spec, request, groupOrdinals(model.ordinals, model.ms.spec.replicas));
  if (problem !== undefined)
    return reject({
      ...requestFields(request),
      phase: "Rejected",
      message: `The annotation ${ANNOTATION_RECREATE} asks for ${problem.field} ${problem.field === "group" ? request.group : (request.role ?? "")}, but ${problem.reason}.`,
    });
  const pods = unitPodUids(states, request, (terminating) => !terminating);
  const taken: RecreateRecord = { ...requestFields(request), phase: "Replacing", pods };
  const started = recordEvent(
    "RecreateStarted",
    `Recreating ${recreateUnitLabel(request)} by replacement, as request ${request.id} asks: ${pods.length} pod(s) are drained, deleted and rebuilt at the revision recorded for their unit, within the budgets.`,
  );
  const decision = replace(states, layout, resolve, taken, true);
  return { ...decision, events: [started, ...decision.events] };
}

function idle(record: RecreateRecord | undefined): RecreateDecision {
  return { record, taken: false, lifecycle: NOTHING, waiting: [], events: [] };
}

function reject(record: RecreateRecord): RecreateDecision {
  return {
    record,
    taken: true,
    lifecycle: NOTHING,
    waiting: [],
    events: [recordEvent("RecreateRejected", `Recreate request ${record.id} refused: ${record.message ?? ""}`)],
  };
}

function requestFields(request: RecreateRequest): Pick<RecreateRecord, "id" | "group" | "role"> {
  return { id: request.id, group: request.group, ...(request.role === undefined ? {} : { role: request.role }) };
}

/**
 * The UIDs of the pods of the request's unit that `keep` accepts (by whether they terminate),
 * sorted: the pods a request taken up now replaces (live ones), or those still left of it.
 */
function unitPodUids(
  states: InstanceStates,
  unit: { readonly group?: number | undefined; readonly role?: string | undefined },
  keep: (terminating: boolean) => boolean,
  among?: ReadonlySet<string>,
): string[] {
  const uids: string[] = [];
  const at = unit.group === undefined ? undefined : states.model.ordinals.groups.position(unit.group);
  for (const [role, instances] of at === undefined ? [] : (states.model.tree.get(at) ?? [])) {
    if (unit.role !== undefined && role !== unit.role) continue;
    for (const pods of instances.values())
      for (const view of pods.values())
        if (keep(view.facts.terminating) && (among === undefined || among.has(view.uid))) uids.push(view.uid);
  }
  return uids.sort();
}

/**
 * Carries out a request taken up (`record` in phase Replacing): done once none of its pods is
 * left; else the instances with a live pod of it that the budgets let go now.
 */
function replace(
  states: InstanceStates,
  layout: Layout,
  resolve: Resolve,
  record: RecreateRecord,
  taken: boolean,
): RecreateDecision {
  const uids = new Set(record.pods ?? []);
  if (unitPodUids(states, record, () => true, uids).length === 0) {
    const { pods: _pods, ...rest } = record; // eslint-disable-line @typescript-eslint/no-unused-vars -- dropped on purpose
    const done: RecreateRecord = { ...rest, phase: "Done" };
    return {
      record: done,
      taken,
      lifecycle: NOTHING,
      waiting: [],
      events: [
        recordEvent(
          "RecreateCompleted",
          `Recreate request ${record.id}: every pod of ${recreateUnitLabel(record)} it replaces is gone; the unit is rebuilt by replacement.`,
        ),
      ],
    };
  }
  // The request names the group by its ordinal (what pod names show); the layout by position.
  const group = states.model.ordinals.groups.position(record.group ?? 0);
  const groupStates = group >= 0 && group < layout.groups ? desiredInstanceStates(states, layout, resolve, group) : [];
  const pending = groupStates.filter(
    (state) =>
      (record.role === undefined || state.role === record.role) && state.health.live.some((view) => uids.has(view.uid)),
  );
  const chosen = admit(states, layout, resolve, {
    group,
    groupStates,
    pending,
    wholeGroup: record.role === undefined && states.model.ms.spec.rolloutStrategy.type !== "RoleRollingUpdate",
    id: record.id,
  });
  return {
    record,
    taken,
    lifecycle: { replaceNow: new Set(chosen.go.map(recreateKey)), why: `recreate ${record.id}, as requested` },
    waiting: chosen.waiting,
    events: [],
  };
}

interface Admission {
  readonly group: number;
  /** The desired instances of the group under the layout. */
  readonly groupStates: readonly InstanceState[];
  /** Those with a live pod the request replaces. */
  readonly pending: readonly InstanceState[];
  /** The group goes as one unit (a whole-group request under a group strategy). */
  readonly wholeGroup: boolean;
  readonly id: string;
}

/** The pending instances the budgets let go now, and why the others wait (module comment). */
function admit(
  states: InstanceStates,
  layout: Layout,
  resolve: Resolve,
  admission: Admission,
): { go: InstanceState[]; waiting: string[] } {
  const { model } = states;
  const { spec } = model.ms;
  const roles = spec.template.roles;
  const { group, groupStates, pending, id } = admission;
  if (pending.length === 0) return { go: [], waiting: [] };
  let groupDown = !groupAvailable(groupStates, roles);
  const groupBudget = resolveGroupBudget(spec).maxUnavailable;
  const groupsAvailable = (): number =>
    range(layout.groups).filter((other) =>
      groupAvailable(other === group ? groupStates : desiredInstanceStates(states, layout, resolve, other), roles),
    ).length;
  const groupMayGo = (): boolean => groupDown || groupsAvailable() - 1 >= spec.replicas - groupBudget;
  const groupWait = () =>
    `recreate ${id}: ${groupLabel(model.ordinals, group)} waits for the group budget: ${groupsAvailable()} of ${spec.replicas} ServingGroup(s) available with maxUnavailable ${groupBudget}`;
  if (admission.wholeGroup)
    return groupMayGo() ? { go: [...pending], waiting: [] } : { go: [], waiting: [groupWait()] };
  const go: InstanceState[] = [];
  const waiting: string[] = [];
  for (const role of roles) {
    let available = groupStates.filter((state) => state.role === role.name && state.available).length;
    // Highest ordinal first, as the rollout moves instances.
    for (const state of pending.filter((candidate) => candidate.role === role.name).reverse()) {
      if (!state.available) go.push(state);
      else if (available - 1 < roleFloor(role))
        waiting.push(roleWait(unitLabel(model.ordinals, state), id, role, available));
      else if (!groupDown && available - 1 < role.replicas && !groupMayGo()) waiting.push(groupWait());
      else {
        go.push(state);
        available -= 1;
        if (available < role.replicas) groupDown = true;
      }
    }
  }
  return { go, waiting: [...new Set(waiting)] };
}

function roleWait(label: string, id: string, role: Role, available: number): string {
  return `recreate ${id}: ${label} waits for the role budget: ${available} of ${role.replicas} ${role.name} instance(s) available, at least ${roleFloor(role)} must stay`;
}

/**
 * Why the explicit recreate keeps a rollout from being complete (`rolloutPending`): a request
 * replacing pods, or one the controller has not taken up yet.
 */
export function recreatePending(ms: ModelServing): string[] {
  const name = ms.metadata.name;
  const stored = ms.status?.recreate;
  const reasons: string[] = [];
  if (stored?.phase === "Replacing")
    reasons.push(`${name}: recreate ${stored.id} of ${recreateUnitLabel(stored)} is replacing its pods`);
  const read = readRecreateRequest(ms.metadata.annotations);
  if (read !== undefined && read.id !== stored?.id) {
    const unit = read.ok ? ` of ${recreateUnitLabel(read.request)}` : "";
    reasons.push(`${name}: recreate ${read.id}${unit} is not taken up by the controller yet`);
  }
  return reasons;
}
