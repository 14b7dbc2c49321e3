/**
 * `tandem router --workers N` (and the benchmark's router server): node:cluster, one primary that
 * supervises N workers, each a whole router (its discovery caches, selection, data plane, Lease
 * and drain confirmations), all serving one listening port — the primary accepts connections and
 * hands them to the workers in turn (node:cluster's round-robin), so a connection, and every
 * request on it, stays with one worker.
 *
 * The primary owns no request. It:
 * - starts the workers (env `TANDEM_ROUTER_WORKER` = the slot, 0..N-1) and resolves `started`
 *   once every one listens; a worker that exits before it listens fails the start (its own stderr
 *   says why: an address in use, a bad kubeconfig), and the others are stopped;
 * - starts a worker that dies again after a backoff (`restartDelayMs`: 100 ms doubling to 10 s,
 *   reset after 30 s of uptime), under the same slot, hence the same replica id: the new worker
 *   takes its Lease over, and until then the Lease ages as any dead replica's does;
 * - answers for the whole process: `/metrics` is every worker's registry plus its own, aggregated
 *   by prom-client (counters and histograms summed, each gauge by its `aggregator`), and `/readyz`
 *   is ready only while every worker answers ready — a worker that is starting, restarting or
 *   silent (no answer within `collectTimeoutMs`) makes the process not ready;
 * - on `shutdown(deadlineMs)` stops restarting and tells every worker to stop (each then does its
 *   own graceful stop: not ready, not accepting, requests in flight finish up to the deadline,
 *   Lease deleted), and resolves once all have exited; a worker still running `SHUTDOWN_GRACE_MS`
 *   after the deadline is killed.
 *
 * A worker serves `/metrics` and `/readyz` on the shared port by asking the primary (`joinSupervisor`),
 * so a scrape sees the process, whichever worker the connection landed on.
 */
import cluster from "node:cluster";
import type { Worker } from "node:cluster";
import { AggregatorRegistry, Counter, Gauge, Registry, collectDefaultMetrics } from "prom-client";
import type { Logger } from "../../engine/logger.ts";
import { allWorkersReady, quickDeaths, restartDelayMs } from "../workers.ts";

/** The environment variable that tells a forked worker its slot. */
export const WORKER_SLOT_ENV = "TANDEM_ROUTER_WORKER";
/** A worker still running this long after the shutdown deadline is killed. */
export const SHUTDOWN_GRACE_MS = 5_000;
const DEFAULT_COLLECT_TIMEOUT_MS = 2_000;

/** What `/metrics` needs of a registry: its page and its content type. */
export type MetricsPage = Pick<Registry, "metrics" | "contentType">;

/** What the workers are asked for: their metrics (as JSON, to aggregate) or whether they are ready. */
type Ask = "metrics" | "ready";
type ToPrimary =
  | { readonly tandem: "listening"; readonly address: string }
  | { readonly tandem: "ask"; readonly id: number; readonly what: Ask }
  | { readonly tandem: "collected"; readonly id: number; readonly value: unknown };
type ToWorker =
  | { readonly tandem: "answer"; readonly id: number; readonly value: string | boolean | undefined }
  | { readonly tandem: "collect"; readonly id: number; readonly what: Ask }
  | { readonly tandem: "shutdown"; readonly deadlineMs: number };

/** One of this module's messages (node:cluster has its own on the same channel). */
function isOurs(message: unknown): boolean {
  return typeof message === "object" && message !== null && "tandem" in message;
}

export interface SupervisorOptions {
  readonly workers: number;
  readonly logger: Logger;
  /** How long the primary waits for the workers' answers to a `/metrics` or `/readyz`. Default 2 s. */
  readonly collectTimeoutMs?: number;
}

export interface Supervisor {
  /** The data plane's bound `host:port`, once every worker listens. */
  readonly started: Promise<string>;
  /** The whole process's metrics (every worker's and the primary's, aggregated). */
  readonly registry: MetricsPage;
  /** Every worker is up and ready, and the process is not stopping. */
  ready(): Promise<boolean>;
  /** Stops every worker gracefully; resolves true when all exited 0. Idempotent. */
  shutdown(deadlineMs: number): Promise<boolean>;
}

interface Slot {
  worker: Worker | undefined;
  listening: boolean;
  startedMs: number;
  deaths: number;
  restart: NodeJS.Timeout | undefined;
  /** The current worker's exit code (null: killed by a signal), once it exits. */
  exited: Promise<number | null>;
}

/** In the primary: forks the workers and supervises them until `shutdown`. */
export function superviseWorkers(options: SupervisorOptions): Supervisor {
  return new WorkerSupervisor(options);
}

class WorkerSupervisor implements Supervisor {
  readonly started: Promise<string>;
  readonly registry: MetricsPage;
  readonly #options: SupervisorOptions;
  readonly #slots: Slot[];
  readonly #own = new Registry();
  readonly #restarts: Counter;
  readonly #pending = new Map<number, { answers: unknown[]; expected: number; done: () => void }>();
  #nextId = 0;
  #everyoneListened = false;
  #settleStart: { resolve: (address: string) => void; reject: (error: Error) => void } | undefined;
  #stopping: Promise<boolean> | undefined;

  constructor(options: SupervisorOptions) {
    this.#options = options;
    this.#slots = Array.from({ length: options.workers }, () => ({
      worker: undefined,
      listening: false,
      startedMs: 0,
      deaths: 0,
      restart: undefined,
      exited: Promise.resolve(0),
    }));
    collectDefaultMetrics({ register: this.#own });
    this.#restarts = new Counter({
      name: "tandem_router_worker_restarts_total",
      help: "Router workers started again after they died.",
      registers: [this.#own],
    });
    const slots = this.#slots;
    new Gauge({
      name: "tandem_router_workers",
      help: "Router workers up (listening), of the --workers asked for.",
      registers: [this.#own],
      collect() {
        this.set(slots.filter((slot) => slot.listening).length);
      },
    });
    this.registry = { contentType: this.#own.contentType, metrics: () => this.#metrics() };
    this.started = new Promise((resolve, reject) => {
      this.#settleStart = { resolve, reject };
    });
    // A start that fails is reported through `started`; nobody else has to wait on it.
    this.started.catch(() => undefined);
    for (let index = 0; index < options.workers; index++) this.#fork(index);
  }

  async ready(): Promise<boolean> {
    if (this.#stopping !== undefined) return false;
    const answers = await this.#collect("ready");
    return allWorkersReady(
      answers.map((answer) => answer === true),
      this.#options.workers,
    );
  }

  shutdown(deadlineMs: number): Promise<boolean> {
    this.#stopping ??= this.#stop(deadlineMs);
    return this.#stopping;
  }

  /** The workers running now must all exit 0; a slot waiting to restart has nothing to stop. */
  async #stop(deadlineMs: number): Promise<boolean> {
    const running = this.#slots.filter((slot) => slot.worker !== undefined);
    for (const slot of this.#slots) {
      clearTimeout(slot.restart);
      const worker = slot.worker;
      if (worker?.isConnected() === true) worker.send({ tandem: "shutdown", deadlineMs } satisfies ToWorker);
    }
    const kill = setTimeout(() => {
      for (const slot of this.#slots) slot.worker?.process.kill("SIGKILL");
    }, deadlineMs + SHUTDOWN_GRACE_MS);
    const codes = await Promise.all(running.map((slot) => slot.exited));
    clearTimeout(kill);
    return codes.every((code) => code === 0);
  }

  #fork(index: number): void {
    const slot = this.#slots[index];
    if (slot === undefined) return;
    const worker = cluster.fork({ [WORKER_SLOT_ENV]: String(index) });
    slot.worker = worker;
    slot.listening = false;
    slot.startedMs = Date.now();
    this.#options.logger.info({ worker: index, pid: worker.process.pid ?? 0 }, "router worker started");
    worker.on("message", (message: unknown) => {
      if (isOurs(message)) this.#onMessage(worker, slot, message as ToPrimary);
    });
    slot.exited = new Promise((resolve) => {
      worker.once("exit", (code, signal) => {
        slot.listening = false;
        resolve(code);
        this.#onExit(index, slot, code, signal);
      });
    });
  }

  #onMessage(worker: Worker, slot: Slot, message: ToPrimary): void {
    switch (message.tandem) {
      case "listening":
        slot.listening = true;
        if (!this.#everyoneListened && this.#slots.every((each) => each.listening)) {
          this.#everyoneListened = true;
          this.#settleStart?.resolve(message.address);
        }
        return;
      case "collected": {
        const pending = this.#pending.get(message.id);
        pending?.answers.push(message.value);
        if (pending !== undefined && pending.answers.length === pending.expected) pending.done();
        return;
      }
      case "ask":
        void this.#answer(message.what).then((value) => {
          if (worker.isConnected()) worker.send({ tandem: "answer", id: message.id, value } satisfies ToWorker);
        });
    }
  }

  /** A worker's question about the whole process: the aggregated page, or readiness. */
  async #answer(what: Ask): Promise<string | boolean | undefined> {
    try {
      return what === "ready" ? await this.ready() : await this.#metrics();
    } catch {
      return undefined;
    }
  }

  #onExit(index: number, slot: Slot, code: number | null, signal: string | null): void {
    const fields = { worker: index, pid: slot.worker?.process.pid ?? 0, code: code ?? -1, signal: signal ?? "" };
    slot.worker = undefined;
    if (this.#stopping !== undefined) return;
    if (!this.#everyoneListened) {
      // A worker that cannot start (an address in use, no cluster) will not start on a retry either.
      this.#options.logger.error(fields, "router worker exited before it listened; stopping");
      this.#settleStart?.reject(new Error(`router worker ${index} exited (code ${fields.code}) before it listened`));
      void this.shutdown(0);
      return;
    }
    slot.deaths = quickDeaths(slot.deaths, Date.now() - slot.startedMs);
    const delayMs = restartDelayMs(slot.deaths);
    this.#options.logger.warn({ ...fields, restartInMs: delayMs }, "router worker died; starting it again");
    slot.restart = setTimeout(() => {
      slot.restart = undefined;
      this.#restarts.inc();
      this.#fork(index);
    }, delayMs);
  }

  /** Every listening worker's answer to `what` that came within the collect timeout. */
  #collect(what: Ask): Promise<unknown[]> {
    const workers = this.#slots.flatMap((slot) =>
      slot.listening && slot.worker?.isConnected() === true ? [slot.worker] : [],
    );
    const id = this.#nextId++;
    const answers: unknown[] = [];
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#pending.delete(id);
        resolve(answers);
      };
      const timer = setTimeout(done, this.#options.collectTimeoutMs ?? DEFAULT_COLLECT_TIMEOUT_MS);
      this.#pending.set(id, { answers, expected: workers.length, done });
      if (workers.length === 0) done();
      for (const worker of workers) worker.send({ tandem: "collect", id, what } satisfies ToWorker);
    });
  }

  async #metrics(): Promise<string> {
    const workers = await this.#collect("metrics");
    const pages = [...workers.filter((page) => Array.isArray(page)), await this.#own.getMetricsAsJSON()];
    return AggregatorRegistry.aggregate(pages).metrics();
  }
}

/** This process's slot when it is a worker forked by `superviseWorkers`, else undefined. */
export function workerSlot(): number | undefined {
  if (!cluster.isWorker) return undefined;
  const slot = Number(process.env[WORKER_SLOT_ENV]);
  return Number.isSafeInteger(slot) && slot >= 0 ? slot : undefined;
}

/** What a worker's own router answers for itself, and the primary aggregates. */
export interface LocalOps {
  readonly registry: Registry;
  readonly ready: () => boolean;
}

export interface WorkerLink {
  /** Answers the primary's questions from `local`; returns what the worker's listener serves (the whole process's). */
  join(local: LocalOps): { registry: MetricsPage; ready: () => Promise<boolean> };
  /** Tells the primary this worker listens on `address`. */
  listening(address: string): void;
  /**
   * Resolves with the deadline to stop within: when the primary says so, when this worker gets
   * SIGTERM or SIGINT itself (a Ctrl-C reaches the whole process group) — `defaultDeadlineMs` —
   * or when the primary is gone.
   */
  readonly stopRequested: Promise<number>;
}

/** In a worker: the link to the primary. */
export function joinSupervisor(defaultDeadlineMs: number, collectTimeoutMs = DEFAULT_COLLECT_TIMEOUT_MS): WorkerLink {
  let local: LocalOps | undefined;
  const asked = new Map<number, (value: string | boolean | undefined) => void>();
  let nextId = 0;
  const stopRequested = new Promise<number>((resolve) => {
    const byDefault = (): void => {
      resolve(defaultDeadlineMs);
    };
    process.once("SIGTERM", byDefault);
    process.once("SIGINT", byDefault);
    process.once("disconnect", byDefault);
    process.on("message", (received: unknown) => {
      if (!isOurs(received)) return;
      const message = received as ToWorker;
      if (message.tandem === "shutdown") resolve(message.deadlineMs);
      else if (message.tandem === "answer") asked.get(message.id)?.(message.value);
      else void collected(local, message.what).then((value) => send({ tandem: "collected", id: message.id, value }));
    });
  });
  const ask = (what: Ask): Promise<string | boolean | undefined> =>
    new Promise((resolve) => {
      const id = nextId++;
      const timer = setTimeout(() => {
        settle(undefined);
      }, collectTimeoutMs * 2);
      const settle = (value: string | boolean | undefined): void => {
        clearTimeout(timer);
        asked.delete(id);
        resolve(value);
      };
      asked.set(id, settle);
      if (!send({ tandem: "ask", id, what })) settle(undefined);
    });
  return {
    join: (ops) => {
      local = ops;
      return {
        registry: {
          contentType: ops.registry.contentType,
          metrics: async () => {
            const page = await ask("metrics");
            if (typeof page !== "string") throw new Error("the router's primary process did not answer");
            return page;
          },
        },
        ready: async () => (await ask("ready")) === true,
      };
    },
    listening: (address) => {
      send({ tandem: "listening", address });
    },
    stopRequested,
  };
}

async function collected(local: LocalOps | undefined, what: Ask): Promise<unknown> {
  if (local === undefined) return what === "ready" ? false : [];
  return what === "ready" ? local.ready() : local.registry.getMetricsAsJSON();
}

/** Sends to the primary; false when the channel is gone. */
function send(message: ToPrimary): boolean {
  if (process.send === undefined || !process.connected) return false;
  process.send(message);
  return true;
}
