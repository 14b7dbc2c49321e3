/**
 * Plays one rollout in the simulator — the real controller, virtual time, no faults — and records
 * its step sequence (`rollout-steps.ts`): the ModelServing is created as `before`, becomes
 * Available, is updated to `after`, and the run waits for RolloutComplete. `tandem plan` prints
 * the result; the bound beside it is `rolloutBound`.
 *
 * The *idealised* cluster (`idealCluster`) has room for every pod at once, no scheduling, pull or
 * termination time, a fixed start time and no jitter, so each wave of starts happens at one instant
 * and the steps show only what the budgets and the controller decide. Deterministic: the same
 * inputs give the same steps.
 */
import type { ModelServing, Role } from "../api/schema.ts";
import type { JsonObject } from "../engine/ports.ts";
import { podGpuRequest } from "./placement.ts";
import { DEFAULT_TIMING } from "./cluster.ts";
import { MAX_NODES, podsOf } from "./limits.ts";
import { runScenario } from "./runner.ts";
import { MAX_STEP_SECONDS, parseScenario } from "./scenario.ts";
import type { Scenario, ScenarioCluster } from "./scenario.ts";
import { StepRecorder, rolloutSteps } from "./rollout-steps.ts";
import type { RolloutStep } from "./rollout-steps.ts";

/** Start time of every container on the idealised cluster: one "start cycle". */
export const IDEAL_START_SECONDS = 60;

export interface PlayedRollout {
  readonly steps: readonly RolloutStep[];
  /** RolloutComplete was reached. */
  readonly complete: boolean;
  /** Why not, when it was not: the stored RolloutBlocked message, else what the wait still waited for. */
  readonly reason: string | undefined;
  /** Seconds from the change to RolloutComplete (to the give-up time when incomplete). */
  readonly makespanSeconds: number;
  readonly podsCreated: number;
  readonly podsDeleted: number;
}

export interface PlayOptions {
  /** The cluster to play on; `idealCluster(before, after)` when absent. */
  readonly cluster?: ScenarioCluster;
  readonly seed?: number;
  /** Kubelet jitter in percent; 0 on the idealised cluster, the simulator's default otherwise. */
  readonly jitterPercent?: number;
}

/** A cluster with a node per pod the rollout can have live at once, each as large as the largest pod. */
export function idealCluster(before: ModelServing, after: ModelServing): ScenarioCluster {
  const gpus = Math.max(1, ...[before, after].flatMap((ms) => ms.spec.template.roles.flatMap(roleGpus)));
  const count = Math.min(MAX_NODES, podsOf(before) + 2 * podsOf(after));
  return {
    nodes: [{ name: "ideal", count, gpus }],
    timing: { scheduleSeconds: 0, pullSeconds: 0, startSeconds: IDEAL_START_SECONDS, terminationSeconds: 0 },
  };
}

function roleGpus(role: Role): number[] {
  const templates = [role.entryTemplate, ...(role.workerTemplate === undefined ? [] : [role.workerTemplate])];
  return templates.map(
    (template) =>
      podGpuRequest({ apiVersion: "v1", kind: "Pod", metadata: { name: "p" }, spec: template.spec as JsonObject }) ?? 0,
  );
}

/** The index of the step that applies the change in `rolloutScenario`'s steps. */
export const CHANGE_STEP = 2;

/**
 * The scenario `playRollout` runs: `before` applied, Available, `after` applied (step
 * `CHANGE_STEP`), RolloutComplete — with waits long enough for any rollout on `cluster`.
 */
export function rolloutScenario(
  before: ModelServing,
  after: ModelServing,
  cluster: ScenarioCluster,
  seed = 1,
): Scenario {
  const parsed = parseScenario({
    name: `plan-${after.metadata.name}`,
    seed,
    cluster,
    steps: [
      { apply: manifest(before) },
      { wait: { for: "Available", timeoutSeconds: waitSeconds(before, cluster) } },
      { apply: manifest(after) },
      { wait: { for: "RolloutComplete", timeoutSeconds: waitSeconds(after, cluster) } },
    ],
  });
  if (!parsed.ok) throw new Error(parsed.problems.map((found) => `${found.path}: ${found.reason}`).join("; "));
  return parsed.scenario;
}

/** Plays the rollout from `before` to `after` (same name; valid ModelServings) and records its steps. */
export async function playRollout(
  before: ModelServing,
  after: ModelServing,
  options: PlayOptions = {},
): Promise<PlayedRollout> {
  const cluster = options.cluster ?? idealCluster(before, after);
  const scenario = rolloutScenario(before, after, cluster, options.seed);
  const recorder = new StepRecorder(CHANGE_STEP, after.metadata.name);
  const jitter = options.jitterPercent ?? (options.cluster === undefined ? 0 : undefined);
  const report = await runScenario(scenario, {
    podSpecs: false,
    observer: recorder,
    ...(jitter === undefined ? {} : { jitterPercent: jitter }),
  });
  const changeAt = recorder.changeAt;
  const [created, available, , completion] = report.steps;
  if (changeAt === undefined || created?.ok !== true || available?.ok !== true)
    return notStarted(report.steps.at(-1)?.message ?? "the ModelServing was not created");
  const steps = rolloutSteps(report.events, changeAt, recorder.samples, after);
  const later = report.events.slice(changeAt.event);
  return {
    steps,
    complete: completion?.ok === true,
    reason: completion?.ok === true ? undefined : (blockedMessage(report.final.status) ?? completion?.message),
    makespanSeconds: Math.round(((completion?.endedAt ?? changeAt.seconds) - changeAt.seconds) * 1000) / 1000,
    podsCreated: later.filter((event) => event.type === "PodCreated").length,
    podsDeleted: later.filter((event) => event.type === "PodDeleted").length,
  };
}

function notStarted(message: string): PlayedRollout {
  return {
    steps: [],
    complete: false,
    reason: `before the change: ${message}`,
    makespanSeconds: 0,
    podsCreated: 0,
    podsDeleted: 0,
  };
}

/** The object to apply: the spec, with only the name and the namespace of the metadata. */
function manifest(ms: ModelServing): Record<string, unknown> {
  return {
    apiVersion: ms.apiVersion,
    kind: ms.kind,
    metadata: { name: ms.metadata.name, namespace: "default" },
    spec: ms.spec,
  };
}

/**
 * How long a wait may take before the run gives up: every pod started one after another, each
 * taking a whole cycle and a drain, three times over (a surge unit, a rebuild, a retry), at most
 * the longest step.
 */
function waitSeconds(ms: ModelServing, cluster: ScenarioCluster): number {
  const timing = { ...DEFAULT_TIMING, ...cluster.timing };
  const slowest = Math.max(
    0,
    ...Object.values(cluster.images ?? {}).map((image) => (image.pullSeconds ?? 0) + (image.startSeconds ?? 0)),
  );
  const cycle =
    timing.scheduleSeconds +
    timing.pullSeconds +
    timing.startSeconds +
    timing.terminationSeconds +
    slowest +
    ms.spec.drain.timeoutSeconds +
    10;
  return Math.min(MAX_STEP_SECONDS, 3 * (podsOf(ms) + 2) * cycle);
}

/** The stored RolloutBlocked condition's message, when it is True. */
function blockedMessage(status: unknown): string | undefined {
  const conditions = (status as { conditions?: { type?: string; status?: string; message?: string }[] } | null)
    ?.conditions;
  const blocked = conditions?.find((condition) => condition.type === "RolloutBlocked" && condition.status === "True");
  return blocked?.message;
}
