/**
 * The controller: watch events → ModelServing keys → work queue → workers → reconcile, with retry
 * and logging policy. Built from ports only, so the simulator and the Kubernetes adapter construct
 * it the same way; a restart is `stop()` on one and a new Controller on a new cache, which
 * rebuilds everything from the cluster (the queue, backoff and expectations live in memory only).
 *
 * Retry policy per reconcile outcome:
 * - executed, all applied: backoff reset; requeued after the plan's `requeueAfterMs`, if any;
 * - executed with a stale outcome (Conflict): requeued with backoff, logged at info only;
 * - executed with a failure, or the pass threw: requeued with backoff, logged as an error
 *   (`requeueAfterMs` still applies when it is sooner);
 * - waiting for expectations: rechecked when the next one times out (events usually come first);
 * - gone: backoff and expectations dropped.
 *
 * Workers never run before the cache has synced: a plan over a half-listed cache would see
 * missing pods as failed.
 *
 * Router Leases (`tandem.dev/router: "true"`, DESIGN §3.1) feed the `RouterRegistry`, whose
 * routers every plan observes; when the set of live routers changes, the ModelServings in the
 * scopes it changed in are queued (a drain waiting on them re-plans). The reader must watch Leases.
 */
import { plan as corePlan } from "../core/plan.ts";
import { Executor } from "./executor.ts";
import type { ExecutionResult } from "./executor.ts";
import { Expectations } from "./expectations.ts";
import { silentLogger } from "./logger.ts";
import type { Logger } from "./logger.ts";
import type { Clock, ClusterReader, ClusterWriter, Recorder, Rng, Timer, WatchEvent } from "./ports.ts";
import { WorkQueue } from "./queue.ts";
import { Reconciler, keyOf, keyOfEvent } from "./reconciler.ts";
import type { PlanFunction, ReconcileOutcome } from "./reconciler.ts";
import { RouterRegistry, anyScopeCovers } from "./routers.ts";
import { LABEL_ROUTER } from "../api/wellknown.ts";

export interface ControllerPorts {
  readonly reader: ClusterReader;
  readonly writer: ClusterWriter;
  readonly clock: Clock;
  readonly recorder: Recorder;
  /** Jitters retry backoff when given; retries are exact without it. */
  readonly rng?: Rng;
  readonly logger?: Logger;
}

export interface ControllerOptions {
  /** The planning function; core's `plan` by default. */
  readonly plan?: PlanFunction;
  /** Keys reconciled at once (never the same key twice). Default 1, which is fully sequential. */
  readonly workers?: number;
  /** Backoff of failed keys: first delay and cap. Defaults 5 ms and 300 000 ms. */
  readonly baseDelayMs?: number;
  readonly maxDelayMs?: number;
  /** Bound on queued keys (see WorkQueue). Default 10 000. */
  readonly maxKeys?: number;
  /** How long an unmet expectation holds its key back. Default 30 000 ms. */
  readonly expectationTimeoutMs?: number;
  /** Concurrent writes within one batch of a plan. Default 8. */
  readonly maxParallelWrites?: number;
  /** How often to look again while the cache has not synced. Default 100 ms. */
  readonly syncPollMs?: number;
  /**
   * Coalescing of events: a key is not reconciled again within this many ms of clock time after
   * its last pass started. An event for a key passed more recently holds the key back until the
   * interval is over, so the events of a burst spread over time make one pass, not one each.
   * Explicit requeues (a plan's `requeueAfterMs`, backoff, expectation rechecks) are not held.
   * Default 0: every event makes the key ready at once (production). The simulator's bench sets
   * it to bound the number of plans per simulated second.
   */
  readonly minReconcileIntervalMs?: number;
  /**
   * Called after every reconcile pass (observe, plan and writes) with its clock duration and the
   * keys queued at that moment: the hook for metrics. Must not throw.
   */
  readonly onReconciled?: (pass: ReconcilePass) => void;
}

/** What `onReconciled` reports about one pass. */
export interface ReconcilePass {
  readonly key: string;
  readonly durationMs: number;
  /** Keys ready or held back (not counting keys being processed). */
  readonly queueDepth: number;
}

export class Controller {
  readonly #reader: ClusterReader;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #workers: number;
  readonly #syncPollMs: number;
  readonly #minReconcileIntervalMs: number;
  /** Clock time each key's last pass started, while `minReconcileIntervalMs` > 0. */
  readonly #lastPassMs = new Map<string, number>();
  readonly #queue: WorkQueue;
  readonly #onReconciled: ((pass: ReconcilePass) => void) | undefined;
  readonly #expectations: Expectations;
  readonly #routers = new RouterRegistry();
  readonly #reconciler: Reconciler;
  readonly #abort = new AbortController();
  readonly #inFlight = new Set<Promise<void>>();
  #idleWaiters: (() => void)[] = [];
  #unsubscribe: (() => void) | undefined;
  #syncTimer: Timer | undefined;
  #pumpScheduled = false;
  #started = false;

  constructor(ports: ControllerPorts, options: ControllerOptions = {}) {
    this.#reader = ports.reader;
    this.#clock = ports.clock;
    this.#logger = ports.logger ?? silentLogger;
    this.#workers = options.workers ?? 1;
    this.#syncPollMs = options.syncPollMs ?? 100;
    this.#minReconcileIntervalMs = options.minReconcileIntervalMs ?? 0;
    if (!Number.isSafeInteger(this.#minReconcileIntervalMs) || this.#minReconcileIntervalMs < 0) {
      throw new Error(`minReconcileIntervalMs must be a non-negative integer, got ${this.#minReconcileIntervalMs}`);
    }
    if (!Number.isSafeInteger(this.#workers) || this.#workers < 1)
      throw new Error(`workers must be a positive integer, got ${this.#workers}`);
    this.#queue = new WorkQueue(ports.clock, {
      ...(options.baseDelayMs === undefined ? {} : { baseDelayMs: options.baseDelayMs }),
      ...(options.maxDelayMs === undefined ? {} : { maxDelayMs: options.maxDelayMs }),
      ...(options.maxKeys === undefined ? {} : { maxKeys: options.maxKeys }),
      ...(ports.rng === undefined ? {} : { rng: ports.rng.fork("engine.backoff") }),
      onReady: () => {
        this.#schedulePump();
      },
    });
    const timeout = options.expectationTimeoutMs === undefined ? {} : { timeoutMs: options.expectationTimeoutMs };
    this.#expectations = new Expectations(ports.clock, { ...timeout, logger: this.#logger });
    const parallel = options.maxParallelWrites === undefined ? {} : { maxParallelWrites: options.maxParallelWrites };
    const executor = new Executor(ports, { ...parallel, expectations: this.#expectations });
    this.#onReconciled = options.onReconciled;
    this.#reconciler = new Reconciler({
      reader: ports.reader,
      clock: ports.clock,
      executor,
      expectations: this.#expectations,
      plan: options.plan ?? corePlan,
      routers: () => this.#routers.routers(),
    });
  }

  /**
   * Subscribes to the cache and queues every ModelServing it already holds, and the owner of every
   * pod it holds (a ModelServing deleted while no controller ran leaves terminating pods that only
   * the controller releases). Once only.
   */
  start(): void {
    if (this.#started) throw new Error("a Controller starts once; construct a new one to restart");
    this.#started = true;
    this.#unsubscribe = this.#reader.subscribe((event) => {
      this.#onEvent(event);
    });
    // The Leases already cached are live from now on (every ModelServing is queued below anyway).
    for (const lease of this.#reader.list("Lease", { labelSelector: `${LABEL_ROUTER}=true` }))
      this.#routers.apply("ADDED", lease, this.#clock.nowMs());
    for (const modelServing of this.#reader.list("ModelServing")) {
      this.#enqueue(keyOf(modelServing.metadata.namespace ?? "", modelServing.metadata.name));
    }
    const owners = new Set<string>();
    for (const pod of this.#reader.list("Pod")) {
      const key = keyOfEvent({ type: "ADDED", object: pod });
      if (key !== undefined) owners.add(key);
    }
    for (const key of owners) this.#enqueue(key);
  }

  /**
   * Stops taking events and keys, cancels every timer, asks running reconciles to stop before
   * their next batch of writes, and resolves when they have.
   */
  async stop(): Promise<void> {
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    this.#abort.abort();
    this.#queue.shutDown();
    this.#syncTimer?.cancel();
    this.#syncTimer = undefined;
    await Promise.all([...this.#inFlight]);
    this.#notifyIfIdle();
  }

  /**
   * Resolves once nothing runs and nothing is ready to run (timers may be pending: in virtual
   * time, the driver advances the clock and calls this again).
   */
  idle(): Promise<void> {
    return new Promise((resolve) => {
      this.#idleWaiters.push(resolve);
      this.#notifyIfIdle();
    });
  }

  #onEvent(event: WatchEvent): void {
    if (event.object.kind === "Lease") {
      this.#onLease(event);
      return;
    }
    const key = keyOfEvent(event);
    if (key === undefined) return;
    this.#expectations.observe(key, event);
    this.#enqueue(key);
  }

  /** Updates the router registry; queues the ModelServings whose live routers changed. */
  #onLease(event: WatchEvent): void {
    const scopes = this.#routers.apply(event.type, event.object, this.#clock.nowMs());
    if (scopes.length === 0) return;
    for (const modelServing of this.#reader.list("ModelServing")) {
      const namespace = modelServing.metadata.namespace ?? "";
      if (anyScopeCovers(scopes, namespace)) this.#enqueue(keyOf(namespace, modelServing.metadata.name));
    }
  }

  /** Makes `key` ready now, or when its `minReconcileIntervalMs` since the last pass is over. */
  #enqueue(key: string): void {
    const last = this.#lastPassMs.get(key);
    const holdMs = last === undefined ? 0 : last + this.#minReconcileIntervalMs - this.#clock.nowMs();
    const accepted = holdMs > 0 ? this.#queue.addAfter(key, holdMs) : this.#queue.add(key);
    if (!accepted)
      this.#logger.warn(
        { key, refused: this.#queue.refusedCount() },
        "work queue full or stopped; key dropped until its next event",
      );
  }

  /** Starts workers on the next microtask, so a burst of events for one key makes one pass. */
  #schedulePump(): void {
    if (this.#pumpScheduled || this.#abort.signal.aborted) return;
    this.#pumpScheduled = true;
    queueMicrotask(() => {
      this.#pumpScheduled = false;
      this.#pump();
    });
  }

  #pump(): void {
    if (this.#abort.signal.aborted) return;
    if (!this.#reader.hasSynced()) {
      this.#syncTimer ??= this.#clock.setTimer(this.#syncPollMs, () => {
        this.#syncTimer = undefined;
        this.#pump();
      });
      this.#notifyIfIdle();
      return;
    }
    // Bounded by the worker count: each pass takes one worker.
    while (this.#inFlight.size < this.#workers) {
      const key = this.#queue.get();
      if (key === undefined) break;
      const work: Promise<void> = this.#process(key).finally(() => {
        this.#inFlight.delete(work);
        this.#queue.done(key);
        this.#notifyIfIdle();
        if (this.#queue.readyCount() > 0) this.#schedulePump();
      });
      this.#inFlight.add(work);
    }
    this.#notifyIfIdle();
  }

  /** One reconcile of `key`, reported to `onReconciled`; never rejects. */
  async #process(key: string): Promise<void> {
    const startedMs = this.#clock.nowMs();
    try {
      await this.#pass(key);
    } finally {
      this.#onReconciled?.({
        key,
        durationMs: this.#clock.nowMs() - startedMs,
        queueDepth: this.#queue.readyCount() + this.#queue.waitingCount(),
      });
    }
  }

  /** One reconcile of `key` and the queue operations its outcome calls for; never rejects. */
  async #pass(key: string): Promise<void> {
    if (this.#minReconcileIntervalMs > 0) this.#lastPassMs.set(key, this.#clock.nowMs());
    let outcome: ReconcileOutcome;
    try {
      outcome = await this.#reconciler.reconcile(key, this.#abort.signal);
    } catch (error) {
      const retry = retryFields(this.#queue.addRateLimited(key));
      this.#logger.error(
        { key, ...retry, error: error instanceof Error ? error.message : String(error) },
        "reconcile threw; retrying with backoff",
      );
      return;
    }
    switch (outcome.kind) {
      case "gone":
        this.#queue.forget(key);
        this.#expectations.forget(key);
        this.#lastPassMs.delete(key);
        return;
      case "waiting":
        this.#queue.addAfter(key, outcome.recheckAfterMs);
        return;
      case "executed":
        this.#afterExecution(key, outcome.result, outcome.requeueAfterMs);
        return;
    }
  }

  #afterExecution(key: string, result: ExecutionResult, requeueAfterMs: number | undefined): void {
    const fields = { key, applied: result.applied, skipped: result.skipped };
    const first = (errors: readonly Error[]): string => errors[0]?.message ?? "";
    if (result.failed.length > 0) {
      const retry = retryFields(this.#queue.addRateLimited(key));
      const counts = { failed: result.failed.length, conflicts: result.conflicts.length };
      this.#logger.error(
        { ...fields, ...counts, ...retry, error: first(result.failed) },
        "some planned writes failed; retrying with backoff",
      );
    } else if (result.conflicts.length > 0) {
      const retry = retryFields(this.#queue.addRateLimited(key));
      this.#logger.info(
        { ...fields, conflicts: result.conflicts.length, ...retry, conflict: first(result.conflicts) },
        "the cluster changed under the plan; planning again",
      );
    } else {
      this.#queue.forget(key);
    }
    if (requeueAfterMs !== undefined) this.#queue.addAfter(key, requeueAfterMs);
  }

  #notifyIfIdle(): void {
    // Ready keys held back by an unsynced cache wait for the sync timer, as other keys wait for theirs.
    const runnable = this.#queue.readyCount() > 0 && this.#syncTimer === undefined && !this.#abort.signal.aborted;
    if (this.#inFlight.size > 0 || this.#pumpScheduled || runnable) return;
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const resolve of waiters) resolve();
  }
}

/** Log fields for a retry: its delay, or that the queue refused it (full or stopped). */
function retryFields(delayMs: number | undefined): { retryInMs: number } | { retryRefused: true } {
  return delayMs === undefined ? { retryRefused: true } : { retryInMs: delayMs };
}
