/**
 * Runs one case of the rollout table (`rollout-cases.ts`) in the simulator and measures it: the
 * report gives pods created and container restarts by role and the controller's writes; a
 * `RunObserver` marks where the rollout starts (the patch step), snapshots the write counts there
 * and samples serving capacity — groups available by the core's own predicate (`groupAvailable`
 * over `availableCounts`, surge instances and surge groups counted, as the budgets count them) —
 * at the end of every instant of the rollout.
 */
import { parseModelServing } from "../src/api/parse.ts";
import type { Pod } from "../src/api/kube.ts";
import { availableCounts, groupAvailable, placedPods, podsByInstance } from "../src/core/invariants.ts";
import type { Revision } from "../src/core/pods.ts";
import { decodeControllerRevision } from "../src/core/revision/controller-revision.ts";
import type { Metrics, Report } from "../src/sim/report.ts";
import { controllerWrites } from "../src/sim/report.ts";
import { runScenario } from "../src/sim/runner.ts";
import type { RunObserver } from "../src/sim/runner.ts";
import type { SimCluster } from "../src/sim/cluster.ts";
import type { Step } from "../src/sim/scenario.ts";
import { statefulSetPlan } from "./peers/statefulset.ts";
import {
  NAME,
  caseBound,
  desiredPods,
  floorGroups,
  minimumImagePatches,
  minimumPods,
  scenario,
} from "./rollout-cases.ts";
import type { Shape, Strategy } from "./rollout-cases.ts";
import type { Measures } from "./rollout-judge.ts";

export interface CaseResult {
  readonly shape: Shape;
  readonly strategy: Strategy;
  readonly measures: Measures;
  /** Every step succeeded and, for the peer replay, every pod ended at the update, Ready. */
  readonly completed: boolean;
  /** Why not, when it did not. */
  readonly failure: string | undefined;
  /** Tandem's invariants the run broke (expected of peers: they keep other rules). */
  readonly brokenInvariants: readonly string[];
  /** The controller's writes during the rollout beyond creates, deletes and status writes, by `Kind.verb`. */
  readonly extraWrites: Readonly<Record<string, number>>;
}

type WriteCounts = Metrics["apiWrites"]["byKind"];

/** Where the rollout started and how many groups served at the end of each instant since. */
class RolloutWatch implements RunObserver {
  #cluster: SimCluster | undefined;
  #startedAtSeconds: number | undefined;
  #writesAtStart: WriteCounts = {};
  #restartsAtStart: Readonly<Record<string, number>> = {};
  /** Groups available at the last sample, and the instant and server version it was taken at. */
  #last: { ms: number; version: string; groups: number } | undefined;
  /** The lowest over instants that have ended (the last sample's instant may still change). */
  #lowestEnded = Number.POSITIVE_INFINITY;

  get active(): boolean {
    return this.#startedAtSeconds !== undefined;
  }

  attach(cluster: SimCluster): void {
    this.#cluster = cluster;
    cluster.onSettle(() => {
      this.#sample();
      return Promise.resolve();
    });
  }

  stepStarted(_index: number, step: Step): void {
    if (step.kind !== "patch" || this.#cluster === undefined) return;
    this.#startedAtSeconds = this.#cluster.clock.nowMs() / 1000;
    this.#writesAtStart = controllerWrites(this.#cluster.server.apiWriteCounts()).byKind;
    this.#restartsAtStart = this.#cluster.kubelet.restartsByRole();
  }

  startedAtSeconds(): number {
    if (this.#startedAtSeconds === undefined) throw new Error("the rollout never started (no patch step ran)");
    return this.#startedAtSeconds;
  }

  writesAtStart(): WriteCounts {
    return this.#writesAtStart;
  }

  /** Container restarts of `role` since the rollout started (`final`: the report's counts by role). */
  restartsSinceStart(role: string, final: Readonly<Record<string, number>>): number {
    return (final[role] ?? 0) - (this.#restartsAtStart[role] ?? 0);
  }

  lowestGroups(): number {
    return Math.min(this.#lowestEnded, this.#last?.groups ?? Number.POSITIVE_INFINITY);
  }

  /** Samples after every settle; only the last sample of an instant counts (states within one pass). */
  #sample(): void {
    const cluster = this.#cluster;
    if (cluster === undefined || !this.active) return;
    const ms = cluster.clock.nowMs();
    const version = cluster.server.resourceVersion();
    if (this.#last !== undefined && this.#last.ms !== ms)
      this.#lowestEnded = Math.min(this.#lowestEnded, this.#last.groups);
    if (this.#last?.version === version && this.#last.ms === ms) return;
    this.#last = { ms, version, groups: groupsServing(cluster) };
  }
}

/** Groups (desired and surge) with every role at its desired count of available instances. */
function groupsServing(cluster: SimCluster): number {
  const parsed = parseModelServing(cluster.server.peek({ kind: "ModelServing", namespace: "default", name: NAME }));
  if (!parsed.ok) return 0;
  const ms = parsed.value;
  const revisions = new Map<string, Revision>();
  for (const object of cluster.server.stored("ControllerRevision")) {
    const decoded = decodeControllerRevision(object);
    if (decoded.ok) revisions.set(decoded.revision.name, decoded.revision);
  }
  const placed = placedPods(ms, cluster.server.stored("Pod") as unknown as Pod[]);
  const counts = availableCounts(ms, podsByInstance(placed), revisions);
  const groups = new Set(placed.map((entry) => entry.id.group));
  return [...groups].filter((group) => groupAvailable(ms, group, counts)).length;
}

/** Runs the case and measures its rollout. */
export async function runCase(shape: Shape, strategy: Strategy): Promise<CaseResult> {
  const watch = new RolloutWatch();
  const report = await runScenario(scenario(shape, strategy), {
    observer: watch,
    jitterPercent: 0,
    podSpecs: false,
    ...(strategy.peer ? { plan: statefulSetPlan(() => watch.active) } : {}),
  });
  const startedAt = watch.startedAtSeconds();
  const during = report.steps.filter((step) => step.startedAt >= startedAt);
  const created = sumByRole(during.map((step) => step.podsCreated));
  const unchanged = shape.roles.filter((role) => !role.changes).map((role) => role.name);
  const deleted = sumByRole(during.map((step) => step.podsDeleted));
  const imagePatches = minimumImagePatches(shape, strategy.name);
  const gates = gateTransitions(sum(created), sum(deleted), imagePatches);
  const writes = writesSince(watch.writesAtStart(), report.metrics.apiWrites.byKind, { gates, imagePatches });
  const failure = failureOf(report, shape, strategy);
  return {
    shape,
    strategy,
    measures: {
      makespanSeconds: lastPodEvent(report, startedAt) - startedAt,
      boundSeconds: caseBound(shape, strategy),
      podsCreated: sum(created),
      minimumPods: minimumPods(shape, strategy.name),
      unchangedRestarts: unchanged.reduce(
        (sum, role) =>
          sum + (created[role] ?? 0) + watch.restartsSinceStart(role, report.metrics.containerRestarts.byRole),
        0,
      ),
      writes: writes.total,
      necessaryWrites: writes.necessary,
      lowestGroups: watch.lowestGroups(),
      desiredGroups: shape.groups,
      floorGroups: floorGroups(shape, strategy.name),
    },
    completed: failure === undefined,
    failure,
    brokenInvariants: report.invariants.filter((result) => result.violations > 0).map((result) => result.name),
    extraWrites: writes.extra,
  };
}

function sum(byRole: Readonly<Record<string, number>>): number {
  return Object.values(byRole).reduce((total, count) => total + count, 0);
}

/**
 * The serving-gate transitions (`Pod.patchStatus`) the contract asks for, a status change each:
 * every pod the rollout creates has its gate opened once (the API server drops the status a pod is
 * created with, so no create can carry it), every pod it deletes has it closed once before the
 * deletion (DESIGN §3.2, the mark), and every pod patched in place has it closed and opened again.
 */
function gateTransitions(created: number, deleted: number, imagePatches: number): number {
  return created + deleted + 2 * imagePatches;
}

function sumByRole(counts: readonly Readonly<Record<string, number>>[]): Record<string, number> {
  const sum: Record<string, number> = {};
  for (const byRole of counts) for (const [role, count] of Object.entries(byRole)) sum[role] = (sum[role] ?? 0) + count;
  return sum;
}

/** The time of the last pod event of the rollout (a creation, a deletion, a readiness change). */
function lastPodEvent(report: Report, startedAt: number): number {
  return report.events.reduce((last, event) => (event.t >= startedAt ? Math.max(last, event.t) : last), startedAt);
}

/** Why the run does not count as a finished rollout, or undefined. */
function failureOf(report: Report, shape: Shape, strategy: Strategy): string | undefined {
  const failed = report.steps.find((step) => !step.ok);
  if (failed !== undefined) return `step ${failed.index} (${failed.kind}): ${failed.message}`;
  if (!strategy.peer) return undefined;
  const changed = new Set(shape.roles.filter((role) => role.changes).map((role) => role.name));
  const left = report.final.pods.filter(
    (pod) => !pod.ready || (changed.has(pod.role ?? "") && !pod.images.every((image) => image === "engine:v2")),
  );
  if (left.length > 0) return `${left.length} pod(s) not updated and Ready at the end, e.g. ${left[0]?.name}`;
  const pods = report.final.pods.length;
  return pods === desiredPods(shape) ? undefined : `${pods} pod(s) at the end, not ${desiredPods(shape)}`;
}

/** Verbs that make or remove an object the rollout needs, and the status write. */
function necessary(kind: string, verb: string): boolean {
  if (verb === "create" || verb === "delete") return kind !== "Event";
  return kind === "ModelServing" && verb === "patchStatus";
}

/**
 * The controller's writes from `before` to `after`: in total, the necessary ones, the rest by
 * `Kind.verb`. Pod status writes are necessary up to `gates` (`gateTransitions`), pod patches up
 * to `imagePatches` (in place); any beyond are extra.
 */
function writesSince(
  before: WriteCounts,
  after: WriteCounts,
  minimum: { readonly gates: number; readonly imagePatches: number },
): { total: number; necessary: number; extra: Record<string, number> } {
  let total = 0;
  let needed = 0;
  const extra: Record<string, number> = {};
  for (const [kind, verbs] of Object.entries(after))
    for (const [verb, count] of Object.entries(verbs)) {
      const during = count - (before[kind]?.[verb] ?? 0);
      if (during === 0) continue;
      total += during;
      const upTo =
        kind !== "Pod" ? 0 : verb === "patchStatus" ? minimum.gates : verb === "patch" ? minimum.imagePatches : 0;
      const counted = necessary(kind, verb) ? during : Math.min(during, upTo);
      needed += counted;
      if (during > counted) extra[`${kind}.${verb}`] = during - counted;
    }
  return { total, necessary: needed, extra };
}
