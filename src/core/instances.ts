/**
 * Where each role instance stands: the revision it should be at (its durable record, else the
 * current revision), the revision its live pods run, and how healthy it is. Shared by the rollout
 * (which decides which instances move) and the lifecycle (which makes the pods match).
 */
import type { Role, UnitRecord } from "../api/schema.ts";
import type { InstanceHealth } from "./health.ts";
import { instanceHealth } from "./health.ts";
import { onFrozen } from "./frozen.ts";
import { instanceId } from "./identity.ts";
import { getOrCreate } from "./maps.ts";
import type { InstancePods, Model, PodView } from "./model.ts";
import type { Revision } from "./pods.ts";
import type { RevisionData } from "./revision/format.ts";
import type { Revisions } from "./revisions.ts";
import { sameRevisionData, sameRoleSpec } from "./role-hash.ts";
import { recordedRevisions } from "./units.ts";
import type { RecordedRevision } from "./units.ts";

/**
 * Which units should exist and at which revision: desired group and instance counts (surge
 * included), the durable unit records, and the revision units without a record default to.
 */
export interface Layout {
  readonly groups: number;
  readonly instances: (group: number, role: Role) => number;
  readonly units: readonly UnitRecord[];
  readonly currentName: string;
}

/** The layout the spec asks for with no rollout decision: no surge, the stored records. */
export function baseLayout(model: Model, revisions: Revisions): Layout {
  return {
    groups: model.ms.spec.replicas,
    instances: (_group, role) => role.replicas,
    units: model.ms.status?.units ?? [],
    currentName: revisions.currentName,
  };
}

export interface InstanceState {
  readonly group: number;
  readonly role: string;
  readonly instance: number;
  readonly pods: InstancePods | undefined;
  /** The revision the instance should be at (record, else current). */
  readonly target: Revision;
  /** The revision its live pods were built from; undefined when it has no live pod. */
  readonly running: Revision | undefined;
  /** Health against the pod count of `running` (or `target` when nothing runs). */
  readonly health: InstanceHealth;
  /** Live pods run a role spec other than the target's: the instance is being replaced. */
  readonly replacing: boolean;
  /** Complete, every pod Ready, none draining: it serves at full capacity. */
  readonly available: boolean;
  /** Its target builds the role like the update revision does (it has moved, or never had to). */
  readonly targetsUpdate: boolean;
  /** Not being replaced, and runs (or, with no pods, will be built at) the update revision's role spec. */
  readonly atUpdate: boolean;
}

/** The pod count of `role`'s instances at `revision` (1 + workerReplicas); 0 when it lacks the role. */
export function expectedPods(revision: Revision, role: string): number {
  return onFrozen(podCountMemo, revision.data, podCountsByRole).get(role) ?? 0;
}

/**
 * Pod counts by role name per revision data object. Keyed on the data (`onFrozen`: revision data
 * is deep-frozen when built, so a count never goes stale); every plan asks per instance.
 */
const podCountMemo = new WeakMap<object, ReadonlyMap<string, number>>();

function podCountsByRole(data: RevisionData): ReadonlyMap<string, number> {
  const counts = new Map<string, number>();
  // The first role of a name wins, as a search by name would find it.
  for (const spec of data.roles) if (!counts.has(spec.name)) counts.set(spec.name, 1 + spec.workerReplicas);
  return counts;
}

/**
 * Units paused by unreadable revisions: the reason a revision is unreadable → the units that
 * depend on it. Sets, because one plan looks at a unit more than once.
 */
export type UnreadableUses = Map<string, Set<string>>;

/** Resolves revision names; unreadable ones are reported in `unreadable` and yield undefined. */
type Resolve = (name: string, label: string) => Revision | undefined;

export function resolver(revisions: Revisions, unreadable: UnreadableUses): Resolve {
  return (name, label) => {
    const lookup = revisions.lookup(name);
    if (lookup.ok) return lookup.revision;
    const units = unreadable.get(lookup.reason) ?? new Set<string>();
    unreadable.set(lookup.reason, units.add(label));
    return undefined;
  };
}

/**
 * Instance states memoized for one plan. The state of an instance depends on the model and
 * revisions (fixed per memo), its ordinals, its recorded revision and the layout's current
 * revision, never on the rest of the layout, so the rollout and the lifecycle, which look at
 * several layouts, compute it once per plan. The revisions a state could not resolve are kept and
 * replayed into each caller's resolver, so every caller reports the units an unreadable revision
 * pauses exactly as if it had computed the state itself.
 */
export interface InstanceStates {
  readonly model: Model;
  readonly revisions: Revisions;
  /** group → role → instance → the states computed for it. */
  readonly memo: Map<number, Map<string, Map<number, MemoizedState[]>>>;
  /** Record look-ups per units array of a layout (layouts never change their arrays). */
  readonly records: WeakMap<readonly UnitRecord[], RecordedRevision>;
}

interface MemoizedState {
  readonly recorded: string | undefined;
  /** `recorded` is the instance's own record, not its group's. */
  readonly own: boolean;
  readonly currentName: string;
  readonly state: InstanceState | undefined;
  /** Names of the revisions it could not resolve, in the order it asked. */
  readonly unresolved: readonly string[];
}

const NONE_UNRESOLVED: readonly string[] = Object.freeze([]);

/** An empty memo of instance states for one plan of `model` with `revisions`. */
export function instanceStates(model: Model, revisions: Revisions): InstanceStates {
  return { model, revisions, memo: new Map(), records: new WeakMap() };
}

/**
 * The state of instance `at` under a layout whose records are `recorded` and whose current
 * revision is `currentName`, or undefined when a revision it depends on is unreadable (everything
 * that depends on it pauses; nothing is guessed). `memo` holds the states computed for the
 * instance's role in its group.
 */
function instanceState(
  states: InstanceStates,
  layout: { readonly recorded: RecordedRevision; readonly currentName: string },
  resolve: Resolve,
  memo: Map<number, MemoizedState[]>,
  at: { group: number; role: string; instance: number },
): InstanceState | undefined {
  const { group, role, instance } = at;
  const recorded = layout.recorded(group, role, instance);
  const own = recorded !== undefined && layout.recorded.own(group, role, instance) === recorded;
  const { currentName } = layout;
  const computed = getOrCreate(memo, instance, (): MemoizedState[] => []);
  let memoized: MemoizedState | undefined;
  // A loop, not `find`: this runs for every instance of every layout a plan looks at.
  for (const candidate of computed) {
    if (candidate.recorded === recorded && candidate.own === own && candidate.currentName === currentName) {
      memoized = candidate;
      break;
    }
  }
  if (memoized === undefined) {
    let unresolved: string[] | undefined;
    const lookup = (name: string): Revision | undefined => {
      const found = states.revisions.lookup(name);
      if (found.ok) return found.revision;
      (unresolved ??= []).push(name);
      return undefined;
    };
    const state = computeState(states, currentName, { name: recorded, own }, lookup, at);
    // Revisions are almost always readable: no array is kept per state for none.
    memoized = { recorded, own, currentName, state, unresolved: unresolved ?? NONE_UNRESOLVED };
    computed.push(memoized);
  }
  for (const name of memoized.unresolved) resolve(name, `${instanceId(role, instance)} of group ${group}`);
  return memoized.state;
}

/** The record look-up of a layout's `units`, indexed once per units array for this plan. */
function recordsOf(states: InstanceStates, units: readonly UnitRecord[]): RecordedRevision {
  let recorded = states.records.get(units);
  if (recorded === undefined) {
    recorded = recordedRevisions(units);
    states.records.set(units, recorded);
  }
  return recorded;
}

/**
 * `instanceState` itself; `lookup` yields undefined for a revision it cannot read. `recorded` is
 * the instance's recorded revision (`own`: a record of its own, not its group's).
 */
function computeState(
  states: InstanceStates,
  currentName: string,
  recorded: { readonly name: string | undefined; readonly own: boolean },
  lookup: (name: string) => Revision | undefined,
  at: { group: number; role: string; instance: number },
): InstanceState | undefined {
  const { model, revisions } = states;
  const { group, role, instance } = at;
  const pods = model.tree.get(group)?.get(role)?.get(instance);
  const targetCandidate = lookup(recorded.name ?? currentName);
  if (targetCandidate === undefined) return undefined;
  // A role that the current revision lacks (added since) starts at the update revision.
  const target =
    recorded.name === undefined && expectedPods(targetCandidate, role) === 0 ? revisions.update : targetCandidate;
  let liveView: PodView | undefined;
  for (const view of pods?.values() ?? []) {
    if (!view.facts.terminating && view.revision !== undefined) {
      liveView = view;
      break;
    }
  }
  const running = liveView?.revision === undefined ? undefined : lookup(liveView.revision);
  if (liveView !== undefined && running === undefined) return undefined;
  const health = instanceHealth(pods, expectedPods(running ?? target, role));
  // Pods left at an older label by a RoleRollingUpdate (their role unchanged since) run what the
  // current revision builds for them: nothing asks to move them, so under a group strategy (which
  // compares whole revisions) they are neither being replaced nor outdated against it. Only a
  // group record (a permit) moves them, within the budgets. A record of the instance's own was a
  // RoleRollingUpdate's, which compares role specs: pods that run its role spec under an older
  // label (a surge instance re-recorded at a newer update that left its role alone) are at it.
  // In place, a group record moves only the roles whose spec it changes (`movesInPlace`): the
  // pods of the others get no write, keep their older label and run the record's role spec, so
  // they are at it, Ready capacity and updated (a relabel would be a write per pod for nothing).
  const runs =
    running !== undefined &&
    (recorded.name === undefined || recorded.own || model.ms.spec.rolloutStrategy.type === "InPlaceUpdate") &&
    running.name !== target.name &&
    sameRoleSpec(running.data, target.data, role)
      ? target
      : running;
  const replacing = runs !== undefined && !sameSpec(model, runs, target, role);
  const atUpdate = !replacing && sameSpec(model, runs ?? target, revisions.update, role);
  return {
    group,
    role,
    instance,
    pods,
    target,
    running,
    health,
    replacing,
    available: health.ready && !health.draining && !replacing,
    targetsUpdate: sameSpec(model, target, revisions.update, role),
    atUpdate,
  };
}

/** Every desired instance of `group` under `layout`, in spec role order then ordinal. */
export function desiredInstanceStates(
  states: InstanceStates,
  layout: Layout,
  resolve: Resolve,
  group: number,
): InstanceState[] {
  const desired: InstanceState[] = [];
  const records = { recorded: recordsOf(states, layout.units), currentName: layout.currentName };
  const roles = getOrCreate(states.memo, group, () => new Map<string, Map<number, MemoizedState[]>>());
  for (const role of states.model.ms.spec.template.roles) {
    const count = layout.instances(group, role);
    const memo = getOrCreate(roles, role.name, () => new Map<number, MemoizedState[]>());
    for (let instance = 0; instance < count; instance++) {
      const state = instanceState(states, records, resolve, memo, { group, role: role.name, instance });
      if (state !== undefined) desired.push(state);
    }
  }
  return desired;
}

/**
 * Whether two revisions build `role`'s pods alike for the rollout strategy: under
 * RoleRollingUpdate the role's own spec decides (other roles' changes leave it alone); under the
 * group strategies a group switches as a whole, so any versioned change counts.
 */
function sameSpec(model: Model, a: Revision, b: Revision, role: string): boolean {
  if (a.name === b.name) return true;
  return model.ms.spec.rolloutStrategy.type === "RoleRollingUpdate"
    ? sameRoleSpec(a.data, b.data, role)
    : sameRevisionData(a.data, b.data);
}
