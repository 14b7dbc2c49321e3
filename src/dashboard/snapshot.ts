/**
 * What the dashboard shows of a cluster at one instant: per ModelServing, a grid of groups ×
 * roles × instances with each instance's revision and state, its conditions, per-role progress and
 * revision history. Pure: a snapshot is a function of the observed objects and `nowMs`.
 *
 * An instance's state comes from the core's own reading of it (`buildModel`, `planRevisions`,
 * `desiredInstanceStates`, `instanceHealth`, `podFailure`): the dashboard says "ready", "failed"
 * or "draining" exactly when planning and status do.
 */
import { resolveGroupBudget, resolveRoleBudget } from "../api/budgets.ts";
import type { Pod } from "../api/kube.ts";
import { drainConfirmations, parseRouterLease, scopeCovers } from "../api/router-lease.ts";
import type { ModelServing } from "../api/schema.ts";
import { LABEL_MODEL_SERVING } from "../api/wellknown.ts";
import { podFailure } from "../core/health.ts";
import type { Layout } from "../core/instances.ts";
import { baseLayout, desiredInstanceStates, instanceStates, resolver } from "../core/instances.ts";
import type { InstanceState } from "../core/instances.ts";
import { compareStrings } from "../core/maps.ts";
import type { Model } from "../core/model.ts";
import { buildModel } from "../core/model.ts";
import type { Revisions } from "../core/revisions.ts";
import { planRevisions } from "../core/revisions.ts";
import { groupAvailable } from "../core/rollout.ts";
import type { OrdinalTable } from "../core/ordinals.ts";
import { isUpdated } from "../core/status.ts";
import type { KubeObject } from "../engine/ports.ts";
import { revisionHistory } from "./history.ts";
import type { RevisionEntry } from "./history.ts";

/** What an instance is doing, in the order a person looks for trouble. */
export type UnitState = "failed" | "terminating" | "draining" | "pending" | "starting" | "ready" | "unknown";

export interface InstanceCell {
  readonly instance: number;
  readonly state: UnitState;
  /** The revision its live pods run (else the one it will be built at); undefined when unreadable. */
  readonly revision: string | undefined;
  /** That revision's number (1, 2, …); 0 when unknown. */
  readonly revisionNumber: number;
  /** It runs the update revision's spec for its role, every pod present. */
  readonly updated: boolean;
  /** Beyond the spec's count of its level: a temporary surge unit. */
  readonly surge: boolean;
  /** Below a partition and not at the update revision: the rollout leaves it where it is. */
  readonly held: boolean;
  /** Live pods / Ready pods / pods the instance should have. */
  readonly pods: { readonly live: number; readonly ready: number; readonly expected: number };
  /** While draining: the live routers in scope that have not confirmed yet (DESIGN §3.4). */
  readonly awaitingRouters: readonly string[];
}

export interface GroupRow {
  /** The group's ordinal, as its pod names and labels show it (docs/design/succession.md); rows come in position order. */
  readonly group: number;
  /** Beyond `spec.replicas`: a surge group. */
  readonly surge: boolean;
  /** Below the group partition. */
  readonly partitioned: boolean;
  /** Role name → its instances in ordinal order. */
  readonly roles: Readonly<Record<string, readonly InstanceCell[]>>;
}

export interface RoleProgress {
  readonly name: string;
  /** Desired instances (surge excluded) that are updated and available. */
  readonly updated: number;
  readonly total: number;
  /** The coordination's maxSkew (`10%`) when this role takes part in one. */
  readonly maxSkew: string | undefined;
}

export interface ConditionView {
  readonly type: string;
  readonly status: string;
  readonly reason: string;
  readonly message: string;
}

export interface ModelServingView {
  readonly namespace: string;
  readonly name: string;
  readonly strategy: string;
  readonly paused: boolean;
  readonly replicas: number;
  /** Groups that serve at full capacity now, and the floor the group budget keeps. */
  readonly servingGroups: number;
  readonly floorGroups: number;
  readonly updateRevision: string | undefined;
  /** Its number (the next one while the controller has not recorded it yet); 0 when unknown. */
  readonly updateRevisionNumber: number;
  readonly currentRevision: string | undefined;
  readonly roles: readonly RoleProgress[];
  readonly groups: readonly GroupRow[];
  readonly conditions: readonly ConditionView[];
  readonly revisions: readonly RevisionEntry[];
  /** Why no grid can be drawn (the spec does not validate, its revision cannot be read). */
  readonly problem: string | undefined;
}

export interface SnapshotInput {
  readonly modelServings: readonly KubeObject[];
  /** Pods, ControllerRevisions and router Leases of any namespace: each view takes its own. */
  readonly pods: readonly KubeObject[];
  readonly revisions: readonly KubeObject[];
  readonly leases: readonly KubeObject[];
  /** Epoch milliseconds on the clock the objects' timestamps were written with. */
  readonly nowMs: number;
}

export interface Snapshot {
  readonly nowMs: number;
  readonly modelServings: readonly ModelServingView[];
}

/** The snapshot of every ModelServing in `input`, sorted by namespace then name. */
export function buildSnapshot(input: SnapshotInput): Snapshot {
  const views = input.modelServings.map((object) => modelServingView(object, input));
  views.sort((a, b) => compareStrings(a.namespace, b.namespace) || compareStrings(a.name, b.name));
  return { nowMs: input.nowMs, modelServings: views };
}

/** Objects of `namespace` labelled for the ModelServing `name`. */
function ownedObjects(objects: readonly KubeObject[], namespace: string, name: string): KubeObject[] {
  return objects.filter(
    (object) =>
      (object.metadata.namespace ?? "default") === namespace && object.metadata.labels?.[LABEL_MODEL_SERVING] === name,
  );
}

function modelServingView(object: KubeObject, input: SnapshotInput): ModelServingView {
  const namespace = object.metadata.namespace ?? "default";
  const name = object.metadata.name;
  const revisionObjects = ownedObjects(input.revisions, namespace, name);
  const built = buildModel({
    modelServing: object,
    pods: ownedObjects(input.pods, namespace, name) as unknown as Pod[],
    services: [],
    revisions: revisionObjects,
    routers: [],
  });
  const stored = object as unknown as { status?: { conditions?: ConditionView[] } };
  const conditions = (stored.status?.conditions ?? []).map(({ type, status, reason, message }) => ({
    type,
    status,
    reason,
    message,
  }));
  if (!built.ok) return emptyView(namespace, name, conditions, built.problems.map((p) => p.reason).join("; "));
  const revisions = planRevisions(built.model);
  if (!revisions.ok) return emptyView(namespace, name, conditions, revisions.reason);
  return gridView(built.model, revisions.revisions, { conditions, input, revisionObjects });
}

function emptyView(
  namespace: string,
  name: string,
  conditions: readonly ConditionView[],
  problem: string,
): ModelServingView {
  return {
    namespace,
    name,
    strategy: "",
    paused: false,
    replicas: 0,
    servingGroups: 0,
    floorGroups: 0,
    updateRevision: undefined,
    updateRevisionNumber: 0,
    currentRevision: undefined,
    roles: [],
    groups: [],
    conditions,
    revisions: [],
    problem,
  };
}

interface ViewContext {
  readonly conditions: readonly ConditionView[];
  readonly input: SnapshotInput;
  readonly revisionObjects: readonly KubeObject[];
}

function gridView(model: Model, revisions: Revisions, context: ViewContext): ModelServingView {
  const { ms } = model;
  const states = instanceStates(model, revisions);
  const layout = observedLayout(model, baseLayout(model, revisions));
  const resolve = resolver(revisions, new Map());
  const numbers = new Map([...model.revisions.values()].map((revision) => [revision.name, revision.revision]));
  numbers.set(revisions.update.name, revisions.updateNumber);
  const routers = routersInScope(context.input.leases, model.owner.namespace, context.input.nowMs);
  const cellOf = (state: InstanceState): InstanceCell =>
    instanceCell(state, { ms, numbers, routers, nowMs: context.input.nowMs, ordinals: model.ordinals });
  const groupBudget = resolveGroupBudget(ms.spec);
  const groups: GroupRow[] = [];
  // Desired groups available as the budgets count them (surge instances standing in included).
  let servingGroups = 0;
  for (let group = 0; group < layout.groups; group++) {
    const roles: Record<string, InstanceCell[]> = {};
    for (const role of ms.spec.template.roles) roles[role.name] = [];
    const groupStates = desiredInstanceStates(states, layout, resolve, group);
    for (const state of groupStates) roles[state.role]?.push(cellOf(state));
    const surge = group >= ms.spec.replicas;
    if (!surge && groupAvailable(groupStates, ms.spec.template.roles)) servingGroups += 1;
    // Named by the ordinal its pods carry (a position still waiting for one shows its number).
    const ordinal = model.ordinals.groups.assigned(group) ?? group;
    groups.push({ group: ordinal, surge, partitioned: group < groupBudget.partition, roles });
  }
  return {
    namespace: model.owner.namespace,
    name: model.owner.name,
    strategy: ms.spec.rolloutStrategy.type,
    paused: ms.spec.rolloutStrategy.paused,
    replicas: ms.spec.replicas,
    servingGroups,
    floorGroups: Math.max(0, ms.spec.replicas - groupBudget.maxUnavailable),
    updateRevision: revisions.update.name,
    updateRevisionNumber: revisions.updateNumber,
    currentRevision: ms.status?.currentRevision,
    roles: roleProgress(ms, groups),
    groups,
    conditions: context.conditions,
    revisions: revisionHistory(context.revisionObjects, ms.status),
    problem: undefined,
  };
}

/**
 * The base layout widened to every unit that has pods: surge groups and instances exist only as
 * pods (the rollout's surge decision is not stored), so the grid shows what is there.
 */
function observedLayout(model: Model, base: Layout): Layout {
  let groups = base.groups;
  const instances = new Map<string, number>();
  for (const [group, roles] of model.tree) {
    groups = Math.max(groups, group + 1);
    for (const [role, byInstance] of roles) {
      const highest = Math.max(...byInstance.keys()) + 1;
      const key = `${group}/${role}`;
      instances.set(key, Math.max(instances.get(key) ?? 0, highest));
    }
  }
  return {
    ...base,
    groups,
    instances: (group, role) => Math.max(base.instances(group, role), instances.get(`${group}/${role.name}`) ?? 0),
  };
}

interface CellContext {
  readonly ms: ModelServing;
  readonly ordinals: OrdinalTable;
  readonly numbers: ReadonlyMap<string, number>;
  readonly routers: readonly string[];
  readonly nowMs: number;
}

function instanceCell(state: InstanceState, context: CellContext): InstanceCell {
  const { ms } = context;
  const role = ms.spec.template.roles.find((candidate) => candidate.name === state.role);
  const revision = (state.running ?? state.target).name;
  const { health } = state;
  const draining = health.live.filter((view) => view.facts.drainingSinceMs !== undefined);
  const confirmed = new Set(draining.flatMap((view) => drainConfirmations(view.pod.metadata.annotations)));
  const rolePartition =
    role === undefined || ms.spec.rolloutStrategy.type !== "RoleRollingUpdate" ? 0 : resolveRoleBudget(role).partition;
  const groupPartition = resolveGroupBudget(ms.spec).partition;
  return {
    instance: context.ordinals.instances(state.group, state.role).assigned(state.instance) ?? state.instance,
    state: unitState(state, ms.spec.template.restartGracePeriodSeconds, context.nowMs),
    revision,
    revisionNumber: context.numbers.get(revision) ?? 0,
    updated: isUpdated(state),
    surge: state.instance >= (role?.replicas ?? 0),
    held: !state.atUpdate && (state.group < groupPartition || state.instance < rolePartition),
    pods: {
      live: health.live.length,
      ready: health.live.filter((view) => view.facts.ready).length,
      expected: health.live.length - health.extra.length + health.absent.length,
    },
    awaitingRouters: draining.length === 0 ? [] : context.routers.filter((id) => !confirmed.has(id)),
  };
}

/** One state per instance, from the core's health of its pods; the worst thing that is true wins. */
export function unitState(state: InstanceState, restartGracePeriodSeconds: number, nowMs: number): UnitState {
  const { health } = state;
  if (health.live.some((view) => podFailure(view.facts, restartGracePeriodSeconds, nowMs).failed)) return "failed";
  if (health.live.length === 0 && health.terminating.length > 0) return "terminating";
  if (health.draining) return "draining";
  if (health.ready) return "ready";
  if (health.unschedulable) return "pending";
  return "starting";
}

/**
 * The router ids whose Lease covers `namespace` and was renewed within its duration of `nowMs`.
 * Judged on the reader's clock against the stored renewTime: good enough to show who is awaited
 * (the controller itself judges liveness from changes it observes, DESIGN §3.1).
 */
function routersInScope(leases: readonly KubeObject[], namespace: string, nowMs: number): string[] {
  const ids = new Set<string>();
  for (const lease of leases) {
    const parsed = parseRouterLease(lease);
    if (parsed === undefined || !scopeCovers(parsed.scope, namespace)) continue;
    const renewedMs = Date.parse(parsed.renewTime);
    if (Number.isNaN(renewedMs) || nowMs - renewedMs <= parsed.leaseDurationSeconds * 1000) ids.add(parsed.id);
  }
  return [...ids].sort(compareStrings);
}

function roleProgress(ms: ModelServing, groups: readonly GroupRow[]): RoleProgress[] {
  const coordination = ms.spec.rolloutStrategy.coordination;
  return ms.spec.template.roles.map((role) => {
    const cells = groups.filter((row) => !row.surge).flatMap((row) => row.roles[role.name] ?? []);
    const desired = cells.filter((cell) => !cell.surge);
    const coordinated =
      coordination !== undefined && (coordination.roles ?? []).length === 0
        ? true
        : coordination?.roles?.includes(role.name) === true;
    return {
      name: role.name,
      updated: desired.filter((cell) => cell.updated && cell.state === "ready").length,
      total: desired.length,
      maxSkew: coordinated ? coordination?.maxSkew : undefined,
    };
  });
}
