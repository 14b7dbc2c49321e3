/**
 * A whole simulated cluster, assembled from scenario options (DESIGN §6 `cluster`): virtual clock,
 * named PRNG streams from one seed, API server, nodes from pools, scheduler, kubelet, node
 * lifecycle, and the pod event log of the report. The controller plugs in through the ports:
 * `reader()` (an informer with lag), `writer()` (a client named "controller"), `clock`, `rng()`
 * and `recorder()`.
 *
 * Time moves only through `runUntil`/`advance`/`waitFor`: they fire one timer at a time and let
 * promise callbacks settle between firings (microtasks only, never the wall clock), so an engine
 * awaiting its writes sees them resolve before the next instant's events.
 */
import type { Kind, KubeObject } from "../engine/ports.ts";
import { ApiServer } from "./apiserver.ts";
import { EventRecorder } from "../engine/recorder.ts";
import type { SimClient } from "./client.ts";
import { VirtualClock } from "./clock.ts";
import { SimInformer } from "./informer.ts";
import { SimKubelet } from "./kubelet.ts";
import type { ImageBehaviour } from "./kubelet.ts";
import { SimNodeLifecycle } from "./node-lifecycle.ts";
import { isDeleting, refOf } from "./objects.ts";
import { nodesOfPools } from "./placement.ts";
import type { NodePool } from "./placement.ts";
import { PodEventLog } from "./pod-events.ts";
import type { PodEvent } from "./pod-events.ts";
import { Prng } from "./prng.ts";
import { SimScheduler } from "./scheduler.ts";

/** DESIGN §6 `cluster.timing`, plus the node lifecycle's two delays. */
export interface SimTiming {
  scheduleSeconds: number;
  pullSeconds: number;
  startSeconds: number;
  terminationSeconds: number;
  /** From a node failure to the node and its pods being marked not ready (node-monitor-grace-period). */
  nodeMonitorGraceSeconds: number;
  /** From a node being marked not ready to the deletion of its pods (unreachable toleration). */
  podEvictionSeconds: number;
}

export const DEFAULT_TIMING: Readonly<SimTiming> = {
  scheduleSeconds: 1,
  pullSeconds: 20,
  startSeconds: 60,
  terminationSeconds: 5,
  nodeMonitorGraceSeconds: 40,
  podEvictionSeconds: 300,
};

export interface SimClusterOptions {
  /** Root seed of every stream. Default 1. */
  seed?: number;
  /** Node pools; nodes `<name>-0 .. <name>-(count-1)`. Default one pool `gpu` of 4 nodes × 8 GPUs. */
  nodes?: readonly NodePool[];
  timing?: Partial<SimTiming>;
  images?: Readonly<Record<string, ImageBehaviour>>;
  /** Jitter added to pull and start times, in percent. Default 10. */
  jitterPercent?: number;
  /** Watch lag of the controller's informer (`reader()`). Default 100. */
  informerLagMs?: number;
  /** Owner-gone to dependents-collected delay of the garbage collector. Default 1000. */
  gcDelayMs?: number;
  /**
   * Microtask rounds without any new request, commit or timer after which promise chains count
   * as settled. Raise it for an engine with long chains of awaits that touch nothing. Default 32.
   */
  settleQuietRounds?: number;
}

export interface ReaderOptions {
  kinds?: readonly Kind[];
  /** Default `informerLagMs`. */
  lagMs?: number;
  /** Client the informer lists and watches through. Default "controller". */
  clientName?: string;
}

/** Kinds the controller's informer watches by default. */
export const CONTROLLER_KINDS: readonly Kind[] = ["ModelServing", "Pod", "Service", "ControllerRevision", "Lease"];

/** Settle hooks at once; more is a leak (one per controller instance is the use). */
const MAX_SETTLE_HOOKS = 16;
/** Upper bound on microtask rounds in one settle: a chain that never goes quiet is a bug. */
const MAX_SETTLE_ROUNDS = 1_000_000;
/** Upper bound on timers fired by one run. */
const MAX_TIMERS_PER_RUN = 10_000_000;
/**
 * A settled promise: awaiting it gives up exactly one microtask turn, as awaiting a new
 * `Promise.resolve()` does, without making a promise per settle round.
 */
const RESOLVED: Promise<void> = Promise.resolve();

export class SimCluster {
  readonly seed: number;
  readonly clock: VirtualClock;
  readonly server: ApiServer;
  readonly scheduler: SimScheduler;
  readonly kubelet: SimKubelet;
  readonly nodeLifecycle: SimNodeLifecycle;
  readonly podEvents: PodEventLog;
  readonly timing: Readonly<SimTiming>;
  readonly #root: Prng;
  readonly #faultRng: Prng;
  readonly #informerLagMs: number;
  readonly #chaos: SimClient;
  readonly #quietRounds: number;
  readonly #settleHooks: (() => Promise<void>)[] = [];
  /** The last resourceVersion text `#resourceVersionNumber` parsed, and its number. */
  #parsedVersion = { text: "", number: 0 };

  /** Builds and starts every component; nodes exist, nothing else does. */
  constructor(options: SimClusterOptions = {}) {
    this.seed = options.seed ?? 1;
    this.timing = { ...DEFAULT_TIMING, ...options.timing };
    this.#root = new Prng(this.seed);
    this.#faultRng = this.#root.fork("faults");
    this.#informerLagMs = options.informerLagMs ?? 100;
    this.#quietRounds = options.settleQuietRounds ?? 32;
    this.clock = new VirtualClock();
    this.server = new ApiServer(this.clock, this.#root.fork("apiserver"), {
      podTermination: "external",
      gcDelayMs: options.gcDelayMs ?? 1_000,
    });
    this.#chaos = this.server.client("chaos");
    for (const node of nodesOfPools(options.nodes ?? [{ name: "gpu", count: 4, gpus: 8 }])) this.server.create(node);
    this.scheduler = new SimScheduler(this.server, { cycleMs: Math.round(this.timing.scheduleSeconds * 1000) });
    this.kubelet = new SimKubelet(this.server, this.#root.fork("kubelet"), {
      pullSeconds: this.timing.pullSeconds,
      startSeconds: this.timing.startSeconds,
      terminationSeconds: this.timing.terminationSeconds,
      ...(options.images === undefined ? {} : { images: options.images }),
      ...(options.jitterPercent === undefined ? {} : { jitterPercent: options.jitterPercent }),
    });
    this.nodeLifecycle = new SimNodeLifecycle(this.server, {
      monitorGraceMs: Math.round(this.timing.nodeMonitorGraceSeconds * 1000),
      evictionMs: Math.round(this.timing.podEvictionSeconds * 1000),
    });
    this.podEvents = new PodEventLog(this.server);
    this.podEvents.start();
    this.scheduler.start();
    this.kubelet.start();
  }

  // -------------------------------------------------------------------------------------------
  // Ports for a controller

  /** A started informer (the controller's ClusterReader). Stop it when the controller goes away. */
  reader(options: ReaderOptions = {}): SimInformer {
    const informer = new SimInformer(this.server.client(options.clientName ?? "controller"), this.clock, {
      kinds: options.kinds ?? CONTROLLER_KINDS,
      lagMs: options.lagMs ?? this.#informerLagMs,
    });
    informer.start();
    return informer;
  }

  /** A ClusterWriter whose requests are counted under `name`. */
  writer(name = "controller"): SimClient {
    return this.server.client(name);
  }

  /**
   * A Recorder writing Events through a client named `clientName` — by default not "controller",
   * so the controller's object writes (zero after a restart) are counted apart from its events.
   */
  recorder(component = "tandem-controller", clientName = "controller-events"): EventRecorder {
    return new EventRecorder({ writer: this.server.client(clientName), clock: this.clock.onEpoch(), component });
  }

  /** The stream named `name` of this cluster's seed ("controller" for the controller). */
  rng(name: string): Prng {
    return this.#root.fork(name);
  }

  /** Report events so far (PodCreated, PodDeleted, PodReady, PodNotReady). */
  events(fromIndex = 0): PodEvent[] {
    return this.podEvents.events(fromIndex);
  }

  // -------------------------------------------------------------------------------------------
  // Time

  /**
   * Registers `hook` (e.g. the controller's `idle()`) to be awaited whenever settling starts or
   * sees activity, so settling does not rest on counting quiet microtask rounds alone. Returns a
   * function that removes it.
   */
  onSettle(hook: () => Promise<void>): () => void {
    if (this.#settleHooks.length >= MAX_SETTLE_HOOKS) throw new Error(`more than ${MAX_SETTLE_HOOKS} settle hooks`);
    this.#settleHooks.push(hook);
    return () => {
      const index = this.#settleHooks.indexOf(hook);
      if (index !== -1) this.#settleHooks.splice(index, 1);
    };
  }

  /**
   * Lets promise chains run until none made progress (no request, commit or timer) for
   * `settleQuietRounds` microtask rounds, awaiting the settle hooks after any progress. Virtual
   * time does not move.
   */
  async settle(): Promise<void> {
    let quiet = 0;
    let last = this.#activity();
    for (let round = 0; round < MAX_SETTLE_ROUNDS; round++) {
      if (quiet === 0) for (const hook of [...this.#settleHooks]) await hook();
      await RESOLVED;
      const now = this.#activity();
      quiet = now === last ? quiet + 1 : 0;
      last = now;
      if (quiet >= this.#quietRounds) return;
    }
    throw new Error(`promise chains still active after ${MAX_SETTLE_ROUNDS} microtask rounds`);
  }

  /** Runs every timer due up to `targetMs`, one at a time, settling in between; ends at `targetMs`. */
  async runUntil(targetMs: number): Promise<void> {
    await this.#run(targetMs, () => false);
  }

  /** `runUntil(now + ms)`. */
  async advance(ms: number): Promise<void> {
    await this.#run(this.clock.nowMs() + ms, () => false);
  }

  /**
   * Runs until `predicate` holds (checked after every settle) or `timeoutMs` has passed. Returns
   * whether it held; time stops at the instant it first held, or at the timeout.
   */
  async waitFor(predicate: () => boolean, timeoutMs: number): Promise<boolean> {
    return this.#run(this.clock.nowMs() + timeoutMs, predicate);
  }

  async #run(targetMs: number, done: () => boolean): Promise<boolean> {
    if (targetMs < this.clock.nowMs())
      throw new Error(`cannot run back to ${targetMs} ms: it is ${this.clock.nowMs()} ms`);
    for (let fired = 0; fired <= MAX_TIMERS_PER_RUN; fired++) {
      await this.settle();
      if (done()) return true;
      if (!this.clock.fireNext(targetMs)) {
        this.clock.runUntil(targetMs);
        return done();
      }
    }
    throw new Error(`more than ${MAX_TIMERS_PER_RUN} timers in one run`);
  }

  /** A number that grows whenever a request, commit or timer happens. */
  #activity(): number {
    return this.server.requestCount() + this.#resourceVersionNumber() + this.clock.setCount();
  }

  /** The server's resourceVersion as a number, parsed again only when its text changed: settling reads it every round. */
  #resourceVersionNumber(): number {
    const text = this.server.resourceVersion();
    if (text !== this.#parsedVersion.text) this.#parsedVersion = { text, number: Number(text) };
    return this.#parsedVersion.number;
  }

  // -------------------------------------------------------------------------------------------
  // Faults (DESIGN §6 steps `failNode`, `recoverNode`, `deletePods`)

  /**
   * The node fails now: its kubelet and containers die; after `nodeMonitorGraceSeconds` the node
   * turns NotReady (nothing more is scheduled there) and its pods Ready=False; after
   * `podEvictionSeconds` more its pods are deleted with grace period 0. The node's image cache
   * survives (the disk does). Throws when no such node exists.
   */
  failNode(name: string): void {
    this.server.get({ kind: "Node", name });
    this.kubelet.stopNode(name);
    this.nodeLifecycle.nodeFailed(name);
  }

  /** The node is back: Ready (schedulable) again, and its surviving pods' containers restart. */
  recoverNode(name: string): void {
    this.server.get({ kind: "Node", name });
    this.nodeLifecycle.nodeRecovered(name);
    this.kubelet.startNode(name);
  }

  /**
   * Deletes up to `count` pods matching `labelSelector` (and `among`, when given) that are not
   * already being deleted, chosen from the "faults" stream, through a client named "chaos" with
   * their own grace period. Returns the names, sorted.
   */
  async deletePods(labelSelector: string, count: number, among?: (pod: KubeObject) => boolean): Promise<string[]> {
    const candidates = this.server
      .list("Pod", { labelSelector })
      .items.filter((pod) => !isDeleting(pod) && (among === undefined || among(pod)));
    const chosen = this.#faultRng.shuffle(candidates).slice(0, Math.max(0, count));
    for (const pod of chosen) await this.#chaos.delete(refOf(pod), { uid: pod.metadata.uid ?? "" });
    return chosen.map((pod) => pod.metadata.name).sort();
  }

  /** Stops every component's watches; timers already set may still fire. */
  stop(): void {
    this.podEvents.stop();
    this.scheduler.stop();
    this.kubelet.stop();
    this.nodeLifecycle.stop();
  }
}
