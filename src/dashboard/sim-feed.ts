/**
 * The dashboard over the embedded simulated cluster (`tandem demo --ui`): a RunObserver that
 * publishes the dashboard's state as the scenario plays — at every step's start and end, and
 * every PUBLISH_EVERY_MS of virtual time in between. It only reads the cluster.
 *
 * `beforeStep` lets a caller hold the run before a step (tests drive virtual time step by step
 * this way: the page is checked while the simulation waits); `speed` paces virtual time to the
 * wall clock when nothing else does (the terminal view paces itself).
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { KubeObject } from "../engine/ports.ts";
import type { SimCluster } from "../sim/cluster.ts";
import type { StepRecord } from "../sim/report.ts";
import type { SimRouter } from "../sim/router.ts";
import type { RunObserver } from "../sim/runner.ts";
import type { Step } from "../sim/scenario.ts";
import { DashboardModel } from "./state.ts";
import type { RequestTotals } from "./requests.ts";
import type { DashboardState } from "./state.ts";

/** Virtual time between two states while a step runs. */
const PUBLISH_EVERY_MS = 500;

export interface SimFeedOptions {
  readonly title: string;
  readonly publish: (state: DashboardState) => void;
  /** Words for a step, e.g. the demo's `describeStep`. */
  readonly describe: (step: Step) => string;
  /** Simulated seconds per wall second; undefined: no pacing of its own. */
  readonly speed?: number | undefined;
  readonly beforeStep?: (index: number, step: Step) => Promise<void>;
  /** Requests finished so far, for the timeline; default: the simulated router's (none without one). */
  readonly requests?: () => RequestTotals;
}

export class SimFeed implements RunObserver {
  readonly #options: SimFeedOptions;
  #cluster: SimCluster | undefined;
  #router: SimRouter | undefined;
  #model: DashboardModel | undefined;
  #lastPublishedMs = Number.NEGATIVE_INFINITY;
  #pace: { virtualStartMs: number; wallStartMs: number } | undefined;

  constructor(options: SimFeedOptions) {
    this.#options = options;
  }

  attach(cluster: SimCluster, router: SimRouter | undefined): void {
    this.#cluster = cluster;
    this.#router = router;
    this.#model = new DashboardModel(
      { kind: "simulated", title: this.#options.title },
      cluster.clock.onEpoch().nowMs(),
    );
    this.#pace = { virtualStartMs: cluster.clock.nowMs(), wallStartMs: Date.now() };
    cluster.onSettle(() => this.#settled());
  }

  async stepStarted(index: number, step: Step): Promise<void> {
    await this.#options.beforeStep?.(index, step);
    this.#model?.setStep(this.#options.describe(step));
    this.#publish();
  }

  stepEnded(record: StepRecord): void {
    if (!record.ok) this.#model?.setStep(`Step ${record.index + 1} failed: ${record.message}`);
    this.#publish();
  }

  /** The run is over: the last state says so. */
  ended(): void {
    this.#model?.end();
    this.#publish();
  }

  async #settled(): Promise<void> {
    const cluster = this.#cluster;
    if (cluster === undefined) return;
    if (cluster.clock.nowMs() - this.#lastPublishedMs >= PUBLISH_EVERY_MS) this.#publish();
    const speed = this.#options.speed;
    if (speed === undefined || this.#pace === undefined) return;
    const aheadMs = (cluster.clock.nowMs() - this.#pace.virtualStartMs) / speed - (Date.now() - this.#pace.wallStartMs);
    if (aheadMs >= 1) await sleep(Math.min(aheadMs, 1_000));
  }

  #publish(): void {
    const cluster = this.#cluster;
    const model = this.#model;
    if (cluster === undefined || model === undefined) return;
    this.#lastPublishedMs = cluster.clock.nowMs();
    const stored = (kind: "ModelServing" | "Pod" | "ControllerRevision" | "Lease"): KubeObject[] =>
      cluster.server.stored(kind) as KubeObject[];
    const requests = this.#options.requests?.() ?? this.#router?.metrics();
    const nowMs = cluster.clock.onEpoch().nowMs();
    this.#options.publish(
      model.state(
        {
          modelServings: stored("ModelServing"),
          pods: stored("Pod"),
          revisions: stored("ControllerRevision"),
          leases: stored("Lease"),
          nowMs,
        },
        requests === undefined
          ? undefined
          : { router: { totals: { ok: requests.ok, failed: requests.failed, cut: requests.cut }, atMs: nowMs } },
      ),
    );
  }
}

/** Both observers, `first` before `second` at every hook (the demo's view, then the dashboard's). */
export function alongside(first: RunObserver, second: RunObserver): RunObserver {
  return {
    attach: (cluster, router) => {
      first.attach?.(cluster, router);
      second.attach?.(cluster, router);
    },
    stepStarted: async (index, step) => {
      await first.stepStarted?.(index, step);
      await second.stepStarted?.(index, step);
    },
    stepEnded: async (record) => {
      await first.stepEnded?.(record);
      await second.stepEnded?.(record);
    },
  };
}
