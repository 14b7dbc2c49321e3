/**
 * The lower bound of a rollout's makespan (issue #21): ⌈changed units ÷ units the budgets let move
 * at once⌉ steps, each priced by how a unit is replaced on the cluster's timing. A *unit* is what
 * the strategy replaces: a ServingGroup under ServingGroupRollingUpdate and InPlaceUpdate, a role
 * instance under RoleRollingUpdate. Pure arithmetic over the specs and the cluster's timing, no
 * simulation: it is what no controller could beat under these budgets, to compare a played
 * makespan with (`tandem plan --timing`, the rollout table of `bench/rollout.ts`).
 *
 * Under RoleRollingUpdate each changed role moves within its own budget beside the others (a
 * *lane*), so the slowest lane decides; a coordinated dependency chain adds a floor of one step per
 * stage (a role starts only once the roles it depends on have new Ready capacity). A group
 * strategy has one lane, the groups.
 *
 * The dependency gate (DESIGN §2.9) also delays the outermost roles of a chain — changed roles
 * with changed dependencies that no changed role depends on; inner stages may start first — by
 * one start of a dependency in every batch of groups their delete-first moves take down together:
 * a new outer instance waits for new Ready capacity of its dependencies in its own group, and the
 * group budget keeps the next batch from starting before this one is done.
 */
import { resolveGroupBudget, resolveRoleBudget } from "../api/budgets.ts";
import type { ModelServing, PodTemplateSpec, Role } from "../api/schema.ts";
import { revisionData } from "../core/revision/projection.ts";
import { sameRevisionData, sameRoleSpec } from "../core/role-hash.ts";
import { DEFAULT_TIMING } from "./cluster.ts";
import type { ScenarioCluster } from "./scenario.ts";

/**
 * How a unit is replaced, which decides what one step costs: the old unit goes first, a surge unit
 * comes up beside it, or its containers restart with the new image.
 */
export type MoveKind = "delete-first" | "surge" | "in-place";

/** The cluster timings a step of a lane is made of, in seconds. */
export interface StepTiming {
  /** Scheduling a new pod (not paid in place). */
  readonly scheduleSeconds: number;
  /** The slowest of the lane's restarted containers, from its start to Ready. */
  readonly startSeconds: number;
  /**
   * What the first step adds to pull images the `before` side did not run (the slowest container's
   * pull and start beyond `startSeconds`); later steps may find them cached on the node.
   */
  readonly pullSeconds: number;
  /** Stopping an old pod: the cluster's termination time, at most the pods' grace period. */
  readonly terminationSeconds: number;
}

/** Units of one changed role (or the groups, under a group strategy) and how they may move. */
export interface Lane {
  /** The role, or undefined for the groups. */
  readonly role: string | undefined;
  readonly changedUnits: number;
  readonly unitsAtOnce: number;
  readonly move: MoveKind;
  readonly timing: StepTiming;
}

/** A lane with its steps and their price. */
export interface PricedLane extends Lane {
  /** ⌈changedUnits ÷ unitsAtOnce⌉, or the stages of the chain for the stage floor. */
  readonly steps: number;
  /** The steps' price, the gate's waits included. */
  readonly seconds: number;
  /** The dependency gate's waits, one per batch of groups (outermost delete-first roles of a chain). */
  readonly gate?: { readonly waits: number; readonly seconds: number };
}

export interface RolloutBound {
  readonly unit: "group" | "instance";
  /** The roles whose spec changes (every role of a changed group under the group strategies). */
  readonly roles: readonly string[];
  /** One per changed role (RoleRollingUpdate) or the groups; none when nothing above the partitions changes. */
  readonly lanes: readonly PricedLane[];
  /** Units at or above the partitions whose spec changes, over all lanes. */
  readonly changedUnits: number;
  /** Units the budgets let move at once, over all lanes. */
  readonly atOnce: number;
  /** Changed roles in the longest coordinated dependency chain; 1 without one. */
  readonly stages: number;
  /** What sets the bound: the slowest lane, or the chain's stage floor (`stages` steps of its cheapest lane). */
  readonly decidedBy: { readonly lane: PricedLane; readonly stageFloor: boolean } | undefined;
  readonly boundSeconds: number;
}

/** The bound of the rollout from `before` to `after` (same runtime parameters) on `cluster`. */
export function rolloutBound(before: ModelServing, after: ModelServing, cluster: ScenarioCluster): RolloutBound {
  const byRole = after.spec.rolloutStrategy.type === "RoleRollingUpdate";
  const changed = changedRoles(before, after, byRole);
  const priced = (byRole ? roleLanes(before, after, changed, cluster) : groupLanes(before, after, changed, cluster))
    .filter((lane) => lane.changedUnits > 0)
    .map((lane) => price(lane, boundSteps(lane)));
  const lanes = byRole ? gated(after, priced) : priced;
  const stages = byRole ? chainStages(after, new Set(changed.map((role) => role.name))) : 1;
  const slowest = lanes.reduce<PricedLane | undefined>(
    (worst, lane) => (worst === undefined || lane.seconds > worst.seconds ? lane : worst),
    undefined,
  );
  // The floor prices plain steps: a lane's gate waits are its own, not the chain's.
  const floor = stages > 1 ? cheapestFloor(priced, stages) : undefined;
  const decidedBy =
    floor !== undefined && floor.seconds > (slowest?.seconds ?? 0)
      ? { lane: floor, stageFloor: true }
      : slowest === undefined
        ? undefined
        : { lane: slowest, stageFloor: false };
  return {
    unit: byRole ? "instance" : "group",
    roles: changed.map((role) => role.name),
    lanes,
    changedUnits: lanes.reduce((sum, lane) => sum + lane.changedUnits, 0),
    atOnce: lanes.reduce((sum, lane) => sum + lane.unitsAtOnce, 0),
    stages,
    decidedBy,
    boundSeconds: decidedBy?.lane.seconds ?? 0,
  };
}

/**
 * `lanes` with the dependency gate's waits added to each outermost delete-first role's: one start
 * of its cheapest changed dependency per batch of groups it moves in (`groupsAtOnce`).
 */
function gated(ms: ModelServing, lanes: readonly PricedLane[]): PricedLane[] {
  const byRole = new Map(lanes.map((lane) => [lane.role, lane]));
  const dependsOn = new Map<string, string[]>();
  for (const dependency of ms.spec.rolloutStrategy.coordination?.dependencies ?? [])
    if (byRole.has(dependency.role))
      dependsOn.set(dependency.role, [
        ...(dependsOn.get(dependency.role) ?? []),
        ...dependency.dependsOn.filter((target) => byRole.has(target)),
      ]);
  const inner = new Set([...dependsOn.values()].flat());
  const groups = eligibleGroups(ms);
  const batches = Math.ceil(groups / Math.max(1, Math.min(groups, resolveGroupBudget(ms.spec).maxUnavailable)));
  return lanes.map((lane) => {
    const dependencies = lane.role === undefined ? [] : (dependsOn.get(lane.role) ?? []);
    if (lane.move !== "delete-first" || dependencies.length === 0 || inner.has(lane.role ?? "")) return lane;
    const wait = Math.min(...dependencies.map((role) => firstCapacitySeconds(byRole.get(role))));
    return { ...lane, seconds: lane.seconds + batches * wait, gate: { waits: batches, seconds: wait } };
  });
}

/** How long a lane's first new unit takes to be Ready: its old unit's termination first unless it surges. */
function firstCapacitySeconds(lane: Lane | undefined): number {
  if (lane === undefined) return 0;
  const { scheduleSeconds, startSeconds, terminationSeconds } = lane.timing;
  return lane.move === "delete-first"
    ? terminationSeconds + scheduleSeconds + startSeconds
    : scheduleSeconds + startSeconds;
}

/** ⌈changed ÷ at once⌉ of one lane. */
export function boundSteps({ changedUnits, unitsAtOnce }: Lane): number {
  if (!Number.isInteger(unitsAtOnce) || unitsAtOnce < 1)
    throw new Error(`unitsAtOnce must be a positive integer, got ${unitsAtOnce}`);
  return Math.ceil(changedUnits / unitsAtOnce);
}

/**
 * `steps` of `lane`, priced. A delete-first step pays the old unit's termination, then the new
 * unit's start; a surge step only the start, and the last old unit's termination once at the end;
 * an in-place step restarts the containers (no scheduling). The first step also pulls new images.
 */
export function price(lane: Lane, steps: number): PricedLane {
  const { scheduleSeconds, startSeconds, pullSeconds, terminationSeconds } = lane.timing;
  const unitStart = scheduleSeconds + startSeconds;
  const seconds =
    lane.move === "delete-first"
      ? steps * (terminationSeconds + unitStart) + pullSeconds
      : lane.move === "surge"
        ? steps * unitStart + pullSeconds + terminationSeconds
        : steps * startSeconds + pullSeconds;
  return { ...lane, steps, seconds };
}

/**
 * `stages` steps of the cheapest lane: no stage can finish before the ones it depends on. Over all
 * lanes, so never above the chain's own cheapest.
 */
function cheapestFloor(lanes: readonly PricedLane[], stages: number): PricedLane | undefined {
  return lanes
    .map((lane) => price(lane, stages))
    .reduce<PricedLane | undefined>(
      (best, lane) => (best === undefined || lane.seconds < best.seconds ? lane : best),
      undefined,
    );
}

function changedRoles(before: ModelServing, after: ModelServing, byRole: boolean): readonly Role[] {
  const from = revisionData(before);
  const to = revisionData(after);
  const roles = after.spec.template.roles;
  if (byRole) return roles.filter((role) => !sameRoleSpec(from, to, role.name));
  return sameRevisionData(from, to) ? [] : roles;
}

/** Groups at or above the group partition. */
function eligibleGroups(ms: ModelServing): number {
  return ms.spec.replicas - Math.min(resolveGroupBudget(ms.spec).partition, ms.spec.replicas);
}

function eligibleInstances(role: Role): number {
  return role.replicas - Math.min(resolveRoleBudget(role).partition, role.replicas);
}

/** The groups: `maxUnavailable + maxSurge` of them at once (no surge in place), surge priced when there is any. */
function groupLanes(
  before: ModelServing,
  after: ModelServing,
  changed: readonly Role[],
  cluster: ScenarioCluster,
): Lane[] {
  if (changed.length === 0) return [];
  const groups = eligibleGroups(after);
  const budget = resolveGroupBudget(after.spec);
  const inPlace = after.spec.rolloutStrategy.type === "InPlaceUpdate";
  const surge = inPlace ? 0 : budget.maxSurge;
  const move: MoveKind = inPlace ? "in-place" : surge > 0 ? "surge" : "delete-first";
  return [
    {
      role: undefined,
      changedUnits: groups,
      unitsAtOnce: Math.max(1, Math.min(groups, budget.maxUnavailable + surge)),
      move,
      timing: stepTiming(before, changed, cluster, inPlace),
    },
  ];
}

/**
 * One lane per changed role. A surge instance disrupts nothing, so each role's surge goes in every
 * group; the instances beyond it take their group down and so move in at most the group
 * maxUnavailable groups at once. Surge is priced when the role has any.
 */
function roleLanes(
  before: ModelServing,
  after: ModelServing,
  changed: readonly Role[],
  cluster: ScenarioCluster,
): Lane[] {
  const groups = eligibleGroups(after);
  const groupMaxUnavailable = resolveGroupBudget(after.spec).maxUnavailable;
  return changed.map((role) => {
    const budget = resolveRoleBudget(role);
    const eligible = eligibleInstances(role);
    const surge = Math.min(eligible, budget.maxSurge);
    const replaced = Math.min(eligible - surge, budget.maxUnavailable);
    return {
      role: role.name,
      changedUnits: groups * eligible,
      unitsAtOnce: Math.max(1, groups * surge + Math.min(groups, groupMaxUnavailable) * replaced),
      move: surge > 0 ? "surge" : "delete-first",
      timing: stepTiming(before, [role], cluster, false),
    };
  });
}

/** Changed roles on the longest dependency path among changed roles (only coordinated roles have edges). */
function chainStages(ms: ModelServing, changed: ReadonlySet<string>): number {
  const dependsOn = new Map<string, readonly string[]>();
  for (const dependency of ms.spec.rolloutStrategy.coordination?.dependencies ?? [])
    if (changed.has(dependency.role))
      dependsOn.set(
        dependency.role,
        dependency.dependsOn.filter((target) => changed.has(target)),
      );
  // Memoised, so a dense graph costs its edges, not its paths. Validation refuses cycles; `seen`
  // keeps one from recursing here all the same.
  const depths = new Map<string, number>();
  const depth = (role: string, seen: ReadonlySet<string>): number => {
    const known = depths.get(role);
    if (known !== undefined) return known;
    const targets = (dependsOn.get(role) ?? []).filter((target) => !seen.has(target));
    const found = 1 + Math.max(0, ...targets.map((target) => depth(target, new Set([...seen, target]))));
    depths.set(role, found);
    return found;
  };
  return Math.max(1, ...[...changed].map((role) => depth(role, new Set([role]))));
}

interface ContainerTiming {
  readonly startSeconds: number;
  readonly pullSeconds: number;
}

/**
 * The step timing of `roles` on `cluster`: every container of their templates (in place, only the
 * containers whose image changes) starts; an image `before` never ran is pulled.
 */
function stepTiming(
  before: ModelServing,
  roles: readonly Role[],
  cluster: ScenarioCluster,
  inPlace: boolean,
): StepTiming {
  const timing = { ...DEFAULT_TIMING, ...cluster.timing };
  const ran = new Set(before.spec.template.roles.flatMap((role) => templatesOf(role).flatMap(images)));
  const oldTemplates = (role: string): PodTemplateSpec[] => {
    const old = before.spec.template.roles.find((candidate) => candidate.name === role);
    return old === undefined ? [] : templatesOf(old);
  };
  const oldImage = (role: string, template: number, container: string): string | undefined =>
    oldTemplates(role)[template]?.spec.containers.find((candidate) => candidate.name === container)?.image;
  const templates = roles.flatMap((role) => templatesOf(role).map((template, index) => ({ role, template, index })));
  const containers: ContainerTiming[] = templates.flatMap(({ role, template, index }) =>
    template.spec.containers
      .filter((container) => !inPlace || oldImage(role.name, index, container.name) !== container.image)
      .map((container) => {
        const behaviour = cluster.images?.[container.image];
        const pull = ran.has(container.image) ? 0 : (behaviour?.pullSeconds ?? timing.pullSeconds);
        return { startSeconds: behaviour?.startSeconds ?? timing.startSeconds, pullSeconds: pull };
      }),
  );
  const startSeconds = Math.max(0, ...containers.map((container) => container.startSeconds));
  const firstSeconds = Math.max(0, ...containers.map((container) => container.pullSeconds + container.startSeconds));
  // The old pods' grace period caps their termination; both sides' count, to stay a lower bound.
  const grace = Math.min(
    ...roles.flatMap((role) => [...templatesOf(role), ...oldTemplates(role.name)]).map(gracePeriodSeconds),
  );
  return {
    scheduleSeconds: inPlace ? 0 : timing.scheduleSeconds,
    startSeconds,
    pullSeconds: firstSeconds - startSeconds,
    terminationSeconds: Math.min(timing.terminationSeconds, grace),
  };
}

function templatesOf(role: Role): PodTemplateSpec[] {
  return [role.entryTemplate, ...(role.workerTemplate === undefined ? [] : [role.workerTemplate])];
}

function images(template: PodTemplateSpec): string[] {
  return template.spec.containers.map((container) => container.image);
}

/** The pod's `terminationGracePeriodSeconds`, Kubernetes' 30 when unset. */
function gracePeriodSeconds(template: PodTemplateSpec): number {
  const value: unknown = template.spec["terminationGracePeriodSeconds"];
  return typeof value === "number" && value >= 0 ? value : 30;
}
