/**
 * The cases of the rollout table (`bench/rollout.ts`): four shapes × six strategies, each a
 * scenario (create, wait Available, change the images of the shape's changed roles, wait for the
 * rollout) and the lower bound its specs imply (`src/sim/rollout-bound.ts`, what `tandem plan
 * --timing` prints for the same specs).
 *
 * Every shape's change is image-only, so every strategy, InPlaceUpdate included, can carry it
 * out. Tandem's four strategies share one budget: 25% of the groups (rounded down) may be
 * disrupted at once; RoleRollingUpdate moves one instance per role and group at a time, or, with
 * surge, adds one surge instance per role and group and disrupts none.
 *
 * The peers are replayed in the simulator (see `docs/design/scenario-runner.md`, "Rollout table"):
 * - **group recreate** (LeaderWorkerSet's rolling update, Kthena's default
 *   ServingGroupRollingUpdate): a changed group is deleted whole and created again, every role of
 *   it, one group at a time (both peers' default `maxUnavailable: 1`, `maxSurge: 0`), no drain.
 *   Tandem's ServingGroupRollingUpdate is this mechanism, so the replay is that strategy with the
 *   peers' defaults: the same pods are deleted and created under the same budget. What differs is
 *   the writes (the peers write StatefulSets or delete pods by collection); the writes column
 *   counts the replay's.
 * - **one pod at a time** (StatefulSet, `OrderedReady`, `maxUnavailable: 1`): no Tandem
 *   configuration replaces less than a whole instance, so a peer plan (`peers/statefulset.ts`)
 *   takes over the controller's planning for the rollout.
 */
import { parseModelServing } from "../src/api/parse.ts";
import type { ModelServing } from "../src/api/schema.ts";
import { resolveGroupBudget } from "../src/api/budgets.ts";
import { parseScenario } from "../src/sim/scenario.ts";
import type { Scenario } from "../src/sim/scenario.ts";
import { boundSteps, price, rolloutBound } from "../src/sim/rollout-bound.ts";
import type { RolloutBound } from "../src/sim/rollout-bound.ts";

export interface RoleShape {
  readonly name: string;
  /** Instances per group. */
  readonly replicas: number;
  readonly workerReplicas: number;
  /** Its image changes in the rollout. */
  readonly changes: boolean;
}

export interface Shape {
  readonly name: string;
  readonly groups: number;
  readonly roles: readonly RoleShape[];
  /** A coordinated chain: each role depends on the one before it (applied under RoleRollingUpdate). */
  readonly chain?: boolean;
}

export const SHAPES: readonly Shape[] = [
  { name: "single role × 8", groups: 8, roles: [{ name: "serve", replicas: 1, workerReplicas: 0, changes: true }] },
  {
    name: "2P1D × 16",
    groups: 16,
    roles: [
      { name: "prefill", replicas: 2, workerReplicas: 0, changes: false },
      { name: "decode", replicas: 1, workerReplicas: 0, changes: true },
    ],
  },
  {
    name: "decode 1+3 workers × 4",
    groups: 4,
    roles: [
      { name: "prefill", replicas: 1, workerReplicas: 0, changes: false },
      { name: "decode", replicas: 1, workerReplicas: 3, changes: true },
    ],
  },
  {
    name: "3-role chain × 4",
    groups: 4,
    chain: true,
    roles: [
      { name: "encode", replicas: 2, workerReplicas: 0, changes: true },
      { name: "prefill", replicas: 2, workerReplicas: 0, changes: true },
      { name: "decode", replicas: 2, workerReplicas: 0, changes: true },
    ],
  },
];

export type StrategyName = "group" | "role" | "role-surge" | "in-place" | "group-recreate" | "statefulset";

export interface Strategy {
  readonly name: StrategyName;
  readonly label: string;
  /** Replayed by a peer plan instead of the core's (the controller still runs everything else). */
  readonly peer: boolean;
}

export const STRATEGIES: readonly Strategy[] = [
  { name: "group", label: "Tandem ServingGroupRollingUpdate", peer: false },
  { name: "role", label: "Tandem RoleRollingUpdate", peer: false },
  { name: "role-surge", label: "Tandem RoleRollingUpdate + surge", peer: false },
  { name: "in-place", label: "Tandem InPlaceUpdate", peer: false },
  { name: "group-recreate", label: "peer: group recreate (LWS, Kthena)", peer: false },
  { name: "statefulset", label: "peer: pod at a time (StatefulSet)", peer: true },
];

/**
 * The bench's cluster timings. The simulator caches pulled images per node, so a pull would make
 * later units start faster than the first and the bound inexact: the whole start (pull, NCCL,
 * weights) is in `startSeconds` instead. The runs also set the start jitter to 0.
 */
export const TIMING = { scheduleSeconds: 1, pullSeconds: 0, startSeconds: 80, terminationSeconds: 5 } as const;

/** Tandem's group budget in every Tandem row. */
const GROUP_MAX_UNAVAILABLE = "25%";
/** The ModelServing's name in every case. */
export const NAME = "bench";

const container = (image: string) => ({
  spec: { containers: [{ name: "engine", image, resources: { limits: { "nvidia.com/gpu": "1" } } }] },
});

/** A role's budget fields under `strategy` (only RoleRollingUpdate reads them). */
function roleBudget(strategy: StrategyName): Record<string, number> {
  if (strategy === "role") return { maxUnavailable: 1, maxSurge: 0 };
  if (strategy === "role-surge") return { maxUnavailable: 0, maxSurge: 1 };
  return {};
}

function roles(shape: Shape, strategy: StrategyName, updated: boolean): unknown[] {
  return shape.roles.map((role) => {
    const image = updated && role.changes ? "engine:v2" : "engine:v1";
    return {
      name: role.name,
      replicas: role.replicas,
      ...roleBudget(strategy),
      entryTemplate: container(image),
      ...(role.workerReplicas > 0 ? { workerReplicas: role.workerReplicas, workerTemplate: container(image) } : {}),
    };
  });
}

function rolloutStrategy(shape: Shape, strategy: StrategyName): unknown {
  switch (strategy) {
    case "group":
    case "statefulset":
      return {
        type: "ServingGroupRollingUpdate",
        rollingUpdateConfiguration: { maxUnavailable: GROUP_MAX_UNAVAILABLE },
      };
    case "group-recreate":
      return { type: "ServingGroupRollingUpdate", rollingUpdateConfiguration: { maxUnavailable: 1, maxSurge: 0 } };
    case "in-place":
      return { type: "InPlaceUpdate", rollingUpdateConfiguration: { maxUnavailable: GROUP_MAX_UNAVAILABLE } };
    case "role":
    case "role-surge":
      return {
        type: "RoleRollingUpdate",
        rollingUpdateConfiguration: { maxUnavailable: GROUP_MAX_UNAVAILABLE },
        ...(shape.chain === true ? { coordination: chainCoordination(shape) } : {}),
      };
  }
}

/** Each role depends on the one before it; maxSkew 50% lets a role run half its instances ahead. */
function chainCoordination(shape: Shape): unknown {
  const names = shape.roles.map((role) => role.name);
  return {
    roles: names,
    maxSkew: "50%",
    dependencies: names.slice(1).map((name, index) => ({ role: name, dependsOn: [names[index]] })),
  };
}

/** The ModelServing's spec before (`updated` false) or after the change. */
export function spec(shape: Shape, strategy: StrategyName, updated: boolean): Record<string, unknown> {
  const peer = strategy === "group-recreate" || strategy === "statefulset";
  return {
    replicas: shape.groups,
    // The peers have no drain handshake; Tandem's rows keep the default (no router: 2 s per drain).
    ...(peer ? { drain: { timeoutSeconds: 0 } } : {}),
    rolloutStrategy: rolloutStrategy(shape, strategy),
    template: { roles: roles(shape, strategy, updated) },
  };
}

/** Pods of one group. */
function podsPerGroup(shape: Shape, changedOnly: boolean): number {
  return shape.roles
    .filter((role) => role.changes || !changedOnly)
    .reduce((sum, role) => sum + role.replicas * (1 + role.workerReplicas), 0);
}

/**
 * Room for every pod twice over (one GPU each), so no surge ever waits for capacity. The
 * StatefulSet replay's rollout is as long as its changed pods times a step; its wait ends well
 * after that (the peer writes no rollout status to wait for).
 */
export function scenario(shape: Shape, strategy: Strategy): Scenario {
  const manifest = { apiVersion: "tandem.dev/v1alpha1", kind: "ModelServing", metadata: { name: NAME } };
  const steps: unknown[] = [
    { apply: { ...manifest, spec: spec(shape, strategy.name, false) } },
    { wait: { for: "Available", timeoutSeconds: 3600 } },
    { patch: { name: NAME, merge: { spec: { template: { roles: roles(shape, strategy.name, true) } } } } },
    strategy.peer
      ? { wait: { for: "Seconds", timeoutSeconds: replaySeconds(shape) } }
      : { wait: { for: "RolloutComplete", timeoutSeconds: 36_000 } },
  ];
  const result = parseScenario({
    name: `rollout-${shape.name}-${strategy.name}`,
    cluster: {
      nodes: [{ name: "gpu", count: Math.ceil((2 * shape.groups * podsPerGroup(shape, false)) / 8), gpus: 8 }],
      timing: TIMING,
    },
    steps,
  });
  if (!result.ok) throw new Error(`${shape.name}, ${strategy.name}: ${JSON.stringify(result.problems)}`);
  return result.scenario;
}

/** Twice the time one pod at a time needs, plus a margin. */
function replaySeconds(shape: Shape): number {
  const changedPods = shape.groups * podsPerGroup(shape, true);
  return 2 * changedPods * (TIMING.scheduleSeconds + TIMING.startSeconds + TIMING.terminationSeconds) + 600;
}

/** The ModelServing before (`updated` false) or after the change, parsed (defaults applied). */
export function parsedSpec(shape: Shape, strategy: StrategyName, updated = true): ModelServing {
  const parsed = parseModelServing({
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: NAME, namespace: "default" },
    spec: spec(shape, strategy, updated),
  });
  if (!parsed.ok) throw new Error(`${shape.name}, ${strategy}: ${JSON.stringify(parsed.problems)}`);
  return parsed.value;
}

/** Pods whose spec changes: the pods a rollout must create at least (none in place). */
export function minimumPods(shape: Shape, strategy: StrategyName): number {
  return strategy === "in-place" ? 0 : shape.groups * podsPerGroup(shape, true);
}

/** Pods of the whole ModelServing. */
export function desiredPods(shape: Shape): number {
  return shape.groups * podsPerGroup(shape, false);
}

/** Image patches an in-place update needs at least: one per pod whose spec changes. */
export function minimumImagePatches(shape: Shape, strategy: StrategyName): number {
  return strategy === "in-place" ? shape.groups * podsPerGroup(shape, true) : 0;
}

/** Groups the strategy's budget keeps serving: one pod (so one group) at a time for StatefulSet. */
export function floorGroups(shape: Shape, strategy: StrategyName): number {
  if (strategy === "statefulset") return shape.groups - 1;
  return shape.groups - resolveGroupBudget(parsedSpec(shape, strategy).spec).maxUnavailable;
}

/**
 * The lower bound of the case's makespan, in seconds: `rolloutBound` of its specs on its cluster.
 * StatefulSet's one pod at a time has no Tandem strategy: its bound is one lane of the changed
 * pods, one at a time, old pod first, at the timing of the groups' lane.
 */
export function caseBound(shape: Shape, strategy: Strategy): number {
  const bound = tandemBound(shape, strategy);
  if (strategy.name !== "statefulset") return bound.boundSeconds;
  const groups = bound.lanes[0];
  if (groups === undefined) return 0;
  const pods = { ...groups, changedUnits: shape.groups * podsPerGroup(shape, true), unitsAtOnce: 1 };
  return price({ ...pods, move: "delete-first" }, boundSteps(pods)).seconds;
}

/** `rolloutBound` of the case's specs before and after the change, on the case's cluster. */
export function tandemBound(shape: Shape, strategy: Strategy): RolloutBound {
  const before = parsedSpec(shape, strategy.name, false);
  return rolloutBound(before, parsedSpec(shape, strategy.name), scenario(shape, strategy).cluster);
}
