/**
 * Random scenarios for the scenario fuzz (`npm run fuzz`, scripts/fuzz.ts): one ModelServing of
 * one or two roles (prefill; decode, perhaps with a worker), created, then changed two to five
 * times — images, group and role replica counts, workers, budgets, the strategy, partitions,
 * pause — with waits and a pod deletion now and then in between. The cluster fits the largest
 * version with room for surge, or (three times in ten) fits it exactly. Every scenario ends
 * waiting for RolloutComplete, then Available, so a rollout that never finishes fails too.
 *
 * With `coordination`, the spec coordinates its two roles' updates now and then (RoleRollingUpdate
 * only): maxSkew 10-100 %, perhaps a dependency either way, drawn from a stream of its own at the
 * start and redrawn after a quarter of the changes.
 *
 * With `faults`, each change is also followed now and then by a fault from a stream of its own
 * (`faultSteps`), so the scenario is the same one with faults added: a node outage (the node
 * fails, stays down a while — long enough, on the fault timing, for its pods to be evicted — and
 * recovers), a controller restart, pods deleted anywhere (mid-rollout too), a rollback; and such a
 * scenario runs with failing API requests and dropped watches (`fuzzChaos`), half of the time
 * with router traffic (so drains wait for the router's ack) through 1-3 router replicas, one of
 * which crashes and restarts now and then after a change. Every fault has
 * ended before the last two waits, so those check liveness after faults stop; safety is checked
 * at every instant throughout.
 *
 * With `crash`, now and then a role or both move to an image that crashes, then recover
 * (`CrashSteps`); with `gang`, the spec sets a gang policy now and then (drawn at the start and
 * redrawn after a quarter of the changes). Each comes from a stream of its own, so the scenarios of
 * the other modes are unchanged.
 *
 * Pure: the same `generatorSeed` gives the same scenario (named streams of `Prng`); the
 * scenario's own seed is the runner's. Specs are kept valid (a role with maxUnavailable 0 gets a
 * surge; a group strategy never has both group budgets at 0), so a scenario that fails to parse
 * is a generator bug.
 */
import { Prng } from "./prng.ts";
import type { Chaos } from "./runner.ts";

type Strategy = "RoleRollingUpdate" | "ServingGroupRollingUpdate" | "InPlaceUpdate";

interface RoleState {
  name: "prefill" | "decode";
  replicas: number;
  image: string;
  workerReplicas: number;
  maxUnavailable: number | undefined;
  maxSurge: number | undefined;
  partition: number | undefined;
}

/** What a version of the spec says, in the generator's terms. */
interface SpecState {
  replicas: number;
  recoveryPolicy: string;
  drainSeconds: number;
  strategy: Strategy;
  paused: boolean;
  groupMaxUnavailable: number;
  groupMaxSurge: number;
  groupPartition: number;
  roles: RoleState[];
  /** Coordinated update settings; in the spec only under RoleRollingUpdate with both roles. */
  coordination: CoordinationState | undefined;
  /** The scenario coordinates now and then: a patch removes coordination where it does not apply. */
  coordinating: boolean;
  /** `template.gangPolicy.minRoleReplicas` (every role named), or none. */
  gang: Record<string, number> | undefined;
  /** The scenario sets a gang policy now and then: a patch removes it when there is none. */
  ganging: boolean;
}

interface CoordinationState {
  maxSkewPercent: number;
  dependency: "none" | "decode-on-prefill" | "prefill-on-decode";
}

const GPUS_PER_NODE = 4;
const CHANGES = [
  "image",
  "image",
  "image",
  "imageBoth",
  "replicas",
  "roleReplicas",
  "workers",
  "budget",
  "strategy",
  "partition",
  "pause",
  "resume",
] as const;

export interface FuzzOptions {
  /** Add faults between changes (the module comment says which). Default false. */
  readonly faults?: boolean;
  /** Coordinate the roles' updates now and then (maxSkew, a dependency). Default false. */
  readonly coordination?: boolean;
  /** Move roles to crashing images now and then, then recover (`CrashSteps`). Default false. */
  readonly crash?: boolean;
  /** Set a gang policy now and then (the ServingGroup's pods bind together). Default false. */
  readonly gang?: boolean;
}

/**
 * With faults, a node fails `nodeMonitorGraceSeconds` before it is NotReady and its pods are
 * evicted `podEvictionSeconds` later: short enough that some outages evict and others do not.
 */
const FAULT_TIMING = { nodeMonitorGraceSeconds: 10, podEvictionSeconds: 20 } as const;

/** The scenario of `generatorSeed`, as `parseScenario` takes it (named `fuzz[-faults][-coordinated][-crash][-gang]-<seed>`). */
export function fuzzScenario(generatorSeed: number, options: FuzzOptions = {}): Record<string, unknown> {
  const root = new Prng(generatorSeed);
  const shape = root.fork("shape");
  const state = initialState(shape);
  const coordinating = options.coordination === true ? root.fork("coordination") : undefined;
  if (coordinating !== undefined) {
    state.coordinating = true;
    state.coordination = drawCoordination(coordinating);
  }
  const ganging = options.gang === true ? root.fork("gang") : undefined;
  if (ganging !== undefined) {
    state.ganging = true;
    state.gang = drawGang(ganging, state);
    keepValid(state);
  }
  const faults =
    options.faults === true ? new FaultSteps(root.fork("faults"), root.fork("router-faults"), state) : undefined;
  const crashes = options.crash === true ? new CrashSteps(root.fork("crash")) : undefined;
  let neededGpus = gpusOf(state);
  const steps: unknown[] = [
    {
      apply: { apiVersion: "tandem.dev/v1alpha1", kind: "ModelServing", metadata: { name: "m" }, spec: specOf(state) },
    },
    waitFor("Available", 1200),
  ];
  const changes = root.fork("changes");
  const image = { next: 1 };
  for (let change = changes.int(2, 6); change > 0; change--) {
    for (let edit = changes.int(1, 3); edit > 0; edit--) applyChange(state, changes, image);
    if (coordinating?.chance(1, 4) === true) state.coordination = drawCoordination(coordinating);
    if (ganging?.chance(1, 4) === true) state.gang = drawGang(ganging, state);
    keepValid(state);
    if (changes.chance(1, 10)) state.paused = false;
    steps.push(patchTo(state));
    neededGpus = Math.max(neededGpus, gpusOf(state));
    steps.push(...between(changes, state.paused));
    if (faults !== undefined) steps.push(...faults.next(state));
    const crash = crashes?.next(state, change === 1) ?? [];
    if (crash.length > 0) faults?.crashRecovered(state);
    steps.push(...crash);
  }
  if (state.paused) {
    state.paused = false;
    steps.push(patchTo(state));
  }
  steps.push(waitFor("RolloutComplete", 3600), waitFor("Available", 1800));
  const cluster = { ...clusterFor(neededGpus, root.fork("cluster")), ...crashes?.images() };
  const mode = `${faults === undefined ? "" : "-faults"}${coordinating === undefined ? "" : "-coordinated"}${crashes === undefined ? "" : "-crash"}${ganging === undefined ? "" : "-gang"}`;
  const name = `fuzz${mode}-${generatorSeed}`;
  if (faults === undefined) return { name, cluster, steps };
  const timing = { ...cluster.timing, ...FAULT_TIMING };
  const { router } = faults.router();
  const replicas = router === undefined ? undefined : faults.routerReplicas();
  const faultCluster = { ...cluster, timing, ...(router === undefined ? {} : { router: { ...router, replicas } }) };
  return { name, cluster: faultCluster, steps: faults.resolveSlots(steps, cluster.nodes[0].count, replicas) };
}

/** Percentage of the controller's API requests that fail, and of steps before which every watch drops, in a fault scenario. */
export const FAULT_CHAOS_PERCENT = 10;

/**
 * The API and watch faults a fault scenario runs with (`RunOptions.chaos`, which a scenario file
 * cannot hold): on until its last two waits, which then check liveness after faults stop.
 */
export function fuzzChaos(scenario: { readonly steps: readonly unknown[] }): Chaos {
  return { percent: FAULT_CHAOS_PERCENT, untilStep: scenario.steps.length - 2 };
}

/** A node named by a draw, resolved against the node count once the cluster is sized. */
interface NodeSlot {
  readonly nodeSlot: number;
  readonly kind: "failNode" | "recoverNode";
}

/** The faults of a fault scenario, drawn from their own stream (see the module comment). */
class FaultSteps {
  readonly #rng: Prng;
  /** Router replica crashes and the replica count, a stream of their own so the other faults are unchanged. */
  readonly #routerRng: Prng;
  /** The images of the spec versions so far: a rollback needs a revision to go back to. */
  readonly #images = new Set<string>();
  /**
   * The versioned fields of the spec a crash was last recovered to (`CrashSteps`): while the spec
   * still has them, the update revision is the one recovered to, and the revision just below it
   * is the crashing one, so a rollback would go back to the crash.
   */
  #recovered: string | undefined;

  /** `initial` is the spec the scenario applies first. */
  constructor(rng: Prng, routerRng: Prng, initial: SpecState) {
    this.#rng = rng;
    this.#routerRng = routerRng;
    this.#images.add(imagesOf(initial));
  }

  /**
   * The fault (perhaps none) after the change to `state`, then (one time in three) a router
   * replica crash: the replica crashes, stays down 1, 5 or 20 s, and restarts — left out when the
   * scenario has no router (`resolveSlots`).
   */
  next(state: SpecState): unknown[] {
    const fault = this.#fault(state);
    const rng = this.#routerRng;
    if (!rng.chance(1, 3)) return fault;
    const crash: RouterCrashSlot = { routerSlot: rng.int(0, 1 << 16), downSeconds: rng.pick([1, 5, 20]) };
    return [...fault, crash];
  }

  #fault(state: SpecState): unknown[] {
    const rng = this.#rng;
    this.#images.add(imagesOf(state));
    const mayRollback = this.#images.size > 1 && !state.paused && versionedOf(state) !== this.#recovered;
    switch (
      rng.pick(["none", "none", "none", "outage", "outage", "restart", "deleteAny", "deleteAny", "rollback"] as const)
    ) {
      case "none":
        return [];
      case "outage": {
        const nodeSlot = rng.int(0, 1 << 16);
        const downSeconds = rng.pick([5, 25, 60, 120]);
        return [
          { nodeSlot, kind: "failNode" },
          { wait: { for: "Seconds", timeoutSeconds: downSeconds } },
          { nodeSlot, kind: "recoverNode" },
        ];
      }
      case "restart":
        return [{ wait: { for: "Seconds", timeoutSeconds: rng.pick([1, 10, 30]) } }, { restartController: {} }];
      case "deleteAny":
        // Pods of any group and role, workers included. Available may come mid-rollout; waiting for
        // it makes sure some pod is not being deleted already.
        return [
          waitFor("Available", 1800),
          { deletePods: { selector: "tandem.dev/modelserving=m", count: rng.int(1, 3) } },
        ];
      case "rollback":
        // The update's revision is recorded within seconds of the change that made it.
        return mayRollback ? [{ wait: { for: "Seconds", timeoutSeconds: 10 } }, { rollback: { name: "m" } }] : [];
    }
  }

  /** A crash was recovered to the versioned fields of `state` (see `#recovered`). */
  crashRecovered(state: SpecState): void {
    this.#recovered = versionedOf(state);
  }

  /**
   * Router traffic half of the time (drawn after every fault): requests the drains wait for, and
   * that pods lost to faults cut; some outlast a 5 s drain timeout.
   */
  router(): { router?: { requestsPerSecond: number; requestSeconds: number } } {
    const rng = this.#rng;
    return rng.chance(1, 2)
      ? { router: { requestsPerSecond: rng.pick([2, 10]), requestSeconds: rng.pick([1, 3, 8]) } }
      : {};
  }

  /** Router replicas, with router traffic: 1 to 3 (drawn last from the router stream). */
  routerReplicas(): number {
    return this.#routerRng.int(1, 4);
  }

  /**
   * `steps` with every node slot replaced by its step on one of `count` nodes ("gpu-<i>"), and
   * every router crash slot by its episode on one of `replicas` replicas (none without a router).
   */
  resolveSlots(steps: readonly unknown[], count: number, replicas: number | undefined): unknown[] {
    return steps.flatMap((step) => {
      if (isNodeSlot(step)) return [{ [step.kind]: { name: `gpu-${step.nodeSlot % count}` } }];
      if (!isRouterCrashSlot(step)) return [step];
      if (replicas === undefined) return [];
      const replica = step.routerSlot % replicas;
      return [
        { crashRouter: { replica } },
        { wait: { for: "Seconds", timeoutSeconds: step.downSeconds } },
        { restartRouter: { replica } },
      ];
    });
  }
}

/**
 * Crash episodes of a crash scenario, drawn from their own stream: after a change, now and then
 * (and after the last change if none came before), one role or both move to an image that
 * crashes on every start and never becomes Ready (`cluster.images` `crash: true`, perhaps after
 * running a while: `crashAfterSeconds`), as a canary (the group partition lets the last group
 * move, or under RoleRollingUpdate the role partitions each group's last instance of every role)
 * or as a full rollout, unpaused. Expected (DESIGN §2.2–2.3): no budget is broken while it
 * crashes (checked at every instant), the rollout stalls instead of spreading the crash; a wait of
 * some seconds lets it crash, then a rollback (the previous revision: the spec just before the
 * crash, recorded during a 10 s wait before the crash patch) or a patch back to that spec
 * recovers, and the wait for RolloutComplete that follows must pass.
 */
class CrashSteps {
  readonly #rng: Prng;
  /** `cluster.images` of the crashing images so far. */
  readonly #images: Record<string, { crash: true; crashAfterSeconds?: number }> = {};
  #crashes = 0;

  constructor(rng: Prng) {
    this.#rng = rng;
  }

  /** The crash episode (perhaps none) after the change to `state`; one surely after the `last` change if none came before. */
  next(state: SpecState, last: boolean): unknown[] {
    const rng = this.#rng;
    if (!rng.chance(1, 3) && !(last && this.#crashes === 0)) return [];
    this.#crashes += 1;
    const base = structuredClone(state);
    base.paused = false;
    partition(base, rng.chance(1, 2), rng);
    const crashed = structuredClone(base);
    const crashAfter = rng.pick([undefined, 30, 120]);
    for (const role of rng.chance(1, 4) ? crashed.roles : [rng.pick(crashed.roles)])
      role.image = this.#crashImage(role.image, crashAfter);
    const rollback = rng.chance(1, 2);
    const crashSeconds = rng.pick([20, 60, 180, 400]);
    return [
      // The rollback goes back to the revision just below the crash: the spec before it, recorded by then.
      ...(rollback ? [{ wait: { for: "Seconds", timeoutSeconds: 10 } }] : []),
      patchTo(crashed),
      { wait: { for: "Seconds", timeoutSeconds: crashSeconds } },
      rollback ? { rollback: { name: "m" } } : patchTo(base),
      waitFor("RolloutComplete", 1800),
    ];
  }

  /** The scenario's `cluster.images` entry, when it has crashed. */
  images(): { images?: Record<string, { crash: true; crashAfterSeconds?: number }> } {
    return this.#crashes === 0 ? {} : { images: this.#images };
  }

  /** A new crashing image of the repository of `image`, its workers' image too. */
  #crashImage(image: string, crashAfterSeconds: number | undefined): string {
    const crashing = `${image.split(":")[0] ?? ""}:crash-${this.#crashes}`;
    const behaviour =
      crashAfterSeconds === undefined ? { crash: true as const } : { crash: true as const, crashAfterSeconds };
    this.#images[crashing] = behaviour;
    this.#images[`${crashing}-w`] = behaviour;
    return crashing;
  }
}

/**
 * Partitions `state` for a canary: only its last group moves, or (under RoleRollingUpdate) each
 * group's last instance of every role; or, for a full rollout, not at all.
 */
function partition(state: SpecState, canary: boolean, rng: Prng): void {
  state.groupPartition = 0;
  for (const role of state.roles) role.partition = undefined;
  if (!canary) return;
  const role = rng.pick(state.roles);
  if (state.strategy === "RoleRollingUpdate" && role.replicas > 1 && (state.replicas === 1 || rng.chance(1, 2))) {
    for (const each of state.roles) each.partition = each.replicas - 1;
  } else state.groupPartition = state.replicas - 1;
}

/** The images of a spec version: another image is surely another revision (budgets may not be). */
function imagesOf(state: SpecState): string {
  return state.roles.map((role) => role.image).join(" ");
}

/** The versioned fields of a spec version the generator changes: each role's image and workers. */
function versionedOf(state: SpecState): string {
  return state.roles.map((role) => `${role.image}*${role.workerReplicas}`).join(" ");
}

/** A router replica crash, its replica resolved once the replica count is drawn. */
interface RouterCrashSlot {
  readonly routerSlot: number;
  readonly downSeconds: number;
}

function isRouterCrashSlot(step: unknown): step is RouterCrashSlot {
  return typeof step === "object" && step !== null && "routerSlot" in step;
}

function isNodeSlot(step: unknown): step is NodeSlot {
  return typeof step === "object" && step !== null && "nodeSlot" in step;
}

function initialState(rng: Prng): SpecState {
  const prefill: RoleState = {
    name: "prefill",
    replicas: rng.int(1, 3),
    image: "p:v1",
    workerReplicas: 0,
    maxUnavailable: rng.pick([undefined, 0, 1]),
    maxSurge: rng.pick([undefined, 1]),
    partition: undefined,
  };
  const decode: RoleState = {
    name: "decode",
    replicas: rng.int(1, 3),
    image: "d:v1",
    workerReplicas: rng.int(0, 2),
    maxUnavailable: rng.pick([undefined, 0, 1]),
    maxSurge: rng.pick([undefined, 0, 1]),
    partition: undefined,
  };
  const state: SpecState = {
    replicas: rng.int(1, 5),
    recoveryPolicy: rng.pick(["RoleRecreate", "ServingGroupRecreate", "RoleRecreate"]),
    drainSeconds: rng.pick([0, 0, 5]),
    strategy: rng.pick<Strategy>([
      "RoleRollingUpdate",
      "RoleRollingUpdate",
      "ServingGroupRollingUpdate",
      "InPlaceUpdate",
    ]),
    paused: false,
    groupMaxUnavailable: rng.int(1, 3),
    groupMaxSurge: rng.int(0, 2),
    groupPartition: 0,
    roles: rng.chance(3, 10) ? [decode] : [prefill, decode],
    coordination: undefined,
    coordinating: false,
    gang: undefined,
    ganging: false,
  };
  keepValid(state);
  return state;
}

/** One random edit of `state`; `image` numbers new image tags. */
function applyChange(state: SpecState, rng: Prng, image: { next: number }): void {
  const role = rng.pick(state.roles);
  switch (rng.pick(CHANGES)) {
    case "image":
      role.image = `${role.image.split(":")[0] ?? ""}:v${++image.next}`;
      break;
    case "imageBoth":
      image.next += 1;
      for (const each of state.roles) each.image = `${each.image.split(":")[0] ?? ""}:v${image.next}`;
      break;
    case "replicas":
      state.replicas = rng.int(1, 6);
      break;
    case "roleReplicas":
      role.replicas = rng.int(1, 4);
      break;
    case "workers":
      // InPlaceUpdate refuses a workerReplicas change (by design): not worth generating.
      if (state.strategy !== "InPlaceUpdate") role.workerReplicas = rng.int(0, 3);
      break;
    case "budget":
      role.maxUnavailable = rng.pick([undefined, 0, 1, 2]);
      role.maxSurge = rng.pick([undefined, 0, 1, 2]);
      state.groupMaxSurge = rng.int(0, 3);
      state.groupMaxUnavailable = rng.int(0, 3);
      break;
    case "strategy":
      state.strategy = rng.pick<Strategy>(["RoleRollingUpdate", "ServingGroupRollingUpdate", "InPlaceUpdate"]);
      break;
    case "partition":
      if (rng.chance(1, 2)) role.partition = rng.int(0, 3);
      else state.groupPartition = rng.int(0, 4);
      break;
    case "pause":
      state.paused = true;
      break;
    case "resume":
      state.paused = false;
      break;
  }
}

/** Coordination (a third of the time none): maxSkew 10-100 %, perhaps a dependency either way. */
function drawCoordination(rng: Prng): CoordinationState | undefined {
  if (rng.chance(1, 3)) return undefined;
  return {
    maxSkewPercent: rng.pick([10, 25, 50, 100]),
    dependency: rng.pick(["none", "decode-on-prefill", "prefill-on-decode"] as const),
  };
}

/**
 * A gang policy (a third of the time none): a minimum for every role, so a merge patch replaces
 * the whole map. The scheduler binds a ServingGroup's pending pods together when there is one.
 */
function drawGang(rng: Prng, state: SpecState): Record<string, number> | undefined {
  if (rng.chance(1, 3)) return undefined;
  return Object.fromEntries(state.roles.map((role) => [role.name, rng.int(0, role.replicas + 1)]));
}

/** The rollout strategy as the spec has it: coordination only where it applies (RoleRollingUpdate, two roles). */
function strategyOf(state: SpecState): Record<string, unknown> {
  const rollingUpdateConfiguration = {
    maxUnavailable: state.groupMaxUnavailable,
    maxSurge: state.strategy === "ServingGroupRollingUpdate" ? state.groupMaxSurge : 0,
    partition: state.groupPartition,
  };
  const strategy = { type: state.strategy, paused: state.paused, rollingUpdateConfiguration };
  const { coordination } = state;
  if (coordination === undefined || state.strategy !== "RoleRollingUpdate" || state.roles.length < 2) return strategy;
  const [role, on] = coordination.dependency === "decode-on-prefill" ? ["decode", "prefill"] : ["prefill", "decode"];
  const dependencies = coordination.dependency === "none" ? {} : { dependencies: [{ role, dependsOn: [on] }] };
  return { ...strategy, coordination: { maxSkew: `${coordination.maxSkewPercent}%`, ...dependencies } };
}

/** The rules a valid spec follows (see the module comment), applied in place. */
function keepValid(state: SpecState): void {
  for (const role of state.roles) if ((role.maxUnavailable ?? 1) === 0 && (role.maxSurge ?? 0) === 0) role.maxSurge = 1;
  if (state.strategy === "ServingGroupRollingUpdate" && state.groupMaxUnavailable === 0 && state.groupMaxSurge === 0)
    state.groupMaxSurge = 1;
  if (state.strategy !== "ServingGroupRollingUpdate" && state.groupMaxUnavailable === 0) state.groupMaxUnavailable = 1;
  // A role's gang minimum is at most its replicas.
  const { gang } = state;
  if (gang !== undefined)
    for (const role of state.roles) gang[role.name] = Math.min(gang[role.name] ?? 0, role.replicas);
}

/**
 * What comes after a change: nothing, a wait of some seconds or for a condition, and now and then
 * a pod of the first ServingGroup deleted. A deletion always follows a wait for Available:
 * mid-rollout, group 0 may have no pod that is not already being deleted (the group being
 * replaced, maxUnavailable ≥ replicas), and the step would fail for want of a pod, not for
 * anything the controller did. The group is named by its position, not by the
 * `tandem.dev/group` label: after a surge group succeeded it, no group may carry ordinal 0
 * (fuzz-faults-910001, docs/design/succession.md).
 */
function between(rng: Prng, paused: boolean): unknown[] {
  const steps: unknown[] = [];
  const wait = rng.pick(["none", "none", "seconds", "seconds", "rollout", "available"] as const);
  if (wait === "seconds") steps.push({ wait: { for: "Seconds", timeoutSeconds: rng.pick([1, 5, 20, 40, 90]) } });
  else if (wait === "rollout" && !paused) steps.push(waitFor("RolloutComplete", 1800));
  else if (wait === "available") steps.push(waitFor("Available", 1800));
  if (rng.chance(1, 10)) {
    if (wait !== "available") steps.push(waitFor("Available", 1800));
    steps.push({ deletePods: { selector: "tandem.dev/modelserving=m", count: 1, groupPosition: 0 } });
  }
  return steps;
}

function specOf(state: SpecState): Record<string, unknown> {
  const byRole = state.strategy === "RoleRollingUpdate";
  return {
    replicas: state.replicas,
    recoveryPolicy: state.recoveryPolicy,
    drain: { timeoutSeconds: state.drainSeconds },
    rolloutStrategy: strategyOf(state),
    template: {
      ...(state.gang === undefined ? {} : { gangPolicy: { minRoleReplicas: { ...state.gang } } }),
      roles: state.roles.map((role) => roleOf(role, byRole)),
    },
  };
}

/** A role as the spec has it; role budgets only under RoleRollingUpdate. */
function roleOf(role: RoleState, byRole: boolean): Record<string, unknown> {
  const container = (image: string) => ({
    spec: { containers: [{ name: "vllm", image, resources: { limits: { "nvidia.com/gpu": "1" } } }] },
  });
  const budgets = byRole
    ? { maxUnavailable: role.maxUnavailable, maxSurge: role.maxSurge, partition: role.partition }
    : {};
  const defined = Object.fromEntries(Object.entries(budgets).filter(([, value]) => value !== undefined));
  const workers = role.workerReplicas > 0 ? { workerTemplate: container(`${role.image}-w`) } : {};
  return {
    name: role.name,
    replicas: role.replicas,
    entryTemplate: container(role.image),
    workerReplicas: role.workerReplicas,
    ...workers,
    ...defined,
  };
}

/** `needed` GPUs (the largest version's), plus as many again and 8 for surge unless tight; whole 4-GPU nodes. */
interface FuzzCluster {
  readonly nodes: readonly [{ readonly name: string; readonly count: number; readonly gpus: number }];
  readonly timing: Record<string, number>;
}

function clusterFor(needed: number, rng: Prng): FuzzCluster {
  const total = rng.chance(3, 10) ? needed : 2 * needed + 8;
  const timing = {
    scheduleSeconds: 1,
    pullSeconds: rng.pick([2, 10]),
    startSeconds: rng.pick([5, 20]),
    terminationSeconds: rng.pick([1, 5]),
  };
  return {
    nodes: [{ name: "gpu", count: Math.max(1, Math.ceil(total / GPUS_PER_NODE)), gpus: GPUS_PER_NODE }],
    timing,
  };
}

function gpusOf(state: SpecState): number {
  return state.replicas * state.roles.reduce((sum, role) => sum + role.replicas * (1 + role.workerReplicas), 0);
}

function patchTo(state: SpecState): unknown {
  const spec = specOf(state);
  const strategy = spec["rolloutStrategy"] as Record<string, unknown>;
  // A merge patch keeps what it does not name: `null` removes coordination set by an earlier version.
  if (state.coordinating && !("coordination" in strategy))
    spec["rolloutStrategy"] = { ...strategy, coordination: null };
  if (state.ganging && state.gang === undefined)
    spec["template"] = { ...(spec["template"] as Record<string, unknown>), gangPolicy: null };
  return { patch: { name: "m", merge: { spec } } };
}

function waitFor(condition: "Available" | "RolloutComplete", timeoutSeconds: number): unknown {
  return { wait: { for: condition, timeoutSeconds } };
}
