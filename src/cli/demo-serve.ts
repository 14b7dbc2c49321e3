/**
 * `tandem demo --serve` (DESIGN §7): a scenario played in real time (the virtual clock paced to
 * the wall clock, `--speed` times faster) with the real router in front of it. Every simulated
 * entry pod is backed by an engine-mock on 127.0.0.1 from the moment it runs until it goes away;
 * the real data plane (`RequestRouter`, debug headers on) reads the simulated cluster through the
 * simulator's Discovery (`SimDiscovery`, a lagged cache) and confirms drains (DESIGN §3.4) with
 * the router's own `DrainConfirmer` — its in-flight counts and scrapes of the engine-mock's
 * `/metrics` — so a rolling update waits for the requests a user sends. The router registers with
 * the router's own `RouterRegistration` (DESIGN §3.1), as on a cluster: it routes only once its
 * Lease is written, renews it on virtual time, and deletes it after it stops routing. It prints
 * `router: http://127.0.0.1:PORT` once it accepts requests and, when the scenario ends or on
 * SIGINT/SIGTERM, the request totals.
 */
import { createServer } from "node:http";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { setImmediate, setTimeout as sleep } from "node:timers/promises";
import { parseModelRoute } from "../api/parse.ts";
import type { Pod } from "../api/kube.ts";
import type { Engine } from "../api/route.ts";
import { LABEL_ENTRY, LABEL_MODEL_SERVING } from "../api/wellknown.ts";
import { silentLogger } from "../engine/logger.ts";
import type { Timer } from "../engine/ports.ts";
import { DrainConfirmer } from "../router/confirmer.ts";
import type { ConfirmerDiscovery } from "../router/confirmer.ts";
import { startEngineMock } from "../router/engine-mock/server.ts";
import type { EngineMock } from "../router/engine-mock/server.ts";
import type { Address } from "../router/endpoints.ts";
import { kvFormatOf } from "../router/kv-format.ts";
import { startLoad } from "../router/proxy/load.ts";
import type { Load } from "../router/proxy/load.ts";
import { RequestRouter } from "../router/proxy/router.ts";
import { RouterRegistration } from "../router/registration.ts";
import type { SimCluster } from "../sim/cluster.ts";
import { followStored } from "../sim/follow.ts";
import type { Follower } from "../sim/follow.ts";
import type { Report, StepRecord } from "../sim/report.ts";
import { SimDiscovery } from "../sim/router-discovery.ts";
import type { RunObserver } from "../sim/runner.ts";
import { runScenario } from "../sim/runner.ts";
import type { Scenario, Step } from "../sim/scenario.ts";

/** Virtual time between pacing points: no simulated event runs more than this early in wall time. */
const PACE_TICK_MS = 100;
const LOOPBACK = "127.0.0.1";
/** Each built-in client's answer length, and its deadline. */
const CLIENT_MAX_TOKENS = 16;
const CLIENT_TIMEOUT_MS = 60_000;
/** The router replica's identity: its Lease's name and holder (DESIGN §3.1). */
export const SERVE_ROUTER_ID = "demo-serve";
const LEASE_NAMESPACE = "default";

export interface ServeOptions {
  readonly scenario: Scenario;
  /** The router's port on 127.0.0.1; 0 picks a free one. */
  readonly port: number;
  /** Simulated seconds per wall second: 1 is real time. */
  readonly speed: number;
  /** Engine-mock latencies (defaults: engine-mock's). */
  readonly ttftMs?: number;
  readonly tpotMs?: number;
  /** Step lines and events while the scenario plays (the demo's plain view). */
  readonly view: RunObserver;
  readonly write: (text: string) => void;
  /** Aborted: stop now (SIGINT/SIGTERM), print the totals and return. */
  readonly signal: AbortSignal;
  /** Called with the router's URL once it accepts requests (tests). */
  readonly onListening?: (url: string) => void;
  /**
   * Built-in clients (`--clients`): this many stream chat completions of `model` through the
   * router, one after another each, from the end of the scenario's first wait (the model is
   * served) to its end, so the totals show what a rollout does to requests. Default 0.
   */
  readonly clients?: { readonly count: number; readonly model: string };
  /** Counted into as the router answers (the dashboard's timeline reads it); default: a fresh one. */
  readonly totals?: RequestTotals;
}

/** Requests the router answered, by outcome. */
export interface RequestTotals {
  ok: number;
  /** Answers with a status ≥ 400, by status. */
  failedByStatus: Record<number, number>;
  /** Clients that left before their answer was complete. */
  aborted: number;
}

export function emptyTotals(): RequestTotals {
  return { ok: 0, failedByStatus: {}, aborted: 0 };
}

/** The router cannot listen on its port (in use, not allowed). */
class ListenError extends Error {}

/** Plays the scenario behind a real router; 0 when it passed (or was stopped on request), 1 otherwise. */
export async function runServe(options: ServeOptions): Promise<number> {
  const serve = new ServeRun(options);
  let report: Report | undefined;
  let listenFailure: string | undefined;
  try {
    report = await runScenario(options.scenario, { observer: serve });
  } catch (error) {
    if (error instanceof ListenError) listenFailure = error.message;
    // The pacer rejects out of the runner when the run is stopped between steps.
    else if (!options.signal.aborted) throw error;
  } finally {
    await serve.close();
  }
  if (listenFailure !== undefined) {
    options.write(`${listenFailure}\n`);
    return 1;
  }
  options.write(serve.summary(report));
  if (options.signal.aborted) return 0;
  return report?.verdict === "pass" ? 0 : 1;
}

/** The run's observer: builds the serving side on the runner's cluster and paces it. */
class ServeRun implements RunObserver {
  readonly #options: ServeOptions;
  readonly totals: RequestTotals;
  #cluster: SimCluster | undefined;
  #engines: PodEngines | undefined;
  #discovery: SimDiscovery | undefined;
  #router: RequestRouter | undefined;
  #server: Server | undefined;
  #drains: DrainConfirmer | undefined;
  #registration: RouterRegistration | undefined;
  /** Settles once the Lease is first written. */
  #registered: Promise<void> | undefined;
  #tick: Timer | undefined;
  #unhook: (() => void) | undefined;
  #url: string | undefined;
  #load: Load | undefined;

  constructor(options: ServeOptions) {
    this.totals = options.totals ?? emptyTotals();
    this.#options = options;
  }

  attach(cluster: SimCluster): void {
    this.#cluster = cluster;
    this.#options.view.attach?.(cluster, undefined);
    const engines = new PodEngines(cluster, this.#options);
    const discovery = new SimDiscovery(cluster, { addressOf: (pod) => engines.addressOf(pod) });
    // The epoch clock: renewTime is compared with the controller's clock, and engines are
    // scraped at most every simulated second, as on a cluster.
    const clock = cluster.clock.onEpoch();
    const writer = cluster.writer("router");
    let registered = (): void => undefined;
    this.#registered = new Promise((resolve) => {
      registered = resolve;
    });
    const onState = (state: string): void => {
      if (state === "registered") registered();
    };
    const registration = new RouterRegistration({
      id: SERVE_ROUTER_ID,
      namespace: LEASE_NAMESPACE,
      scope: { all: true },
      writer,
      clock,
      logger: silentLogger,
      onState,
    });
    const router = new RequestRouter({
      discovery,
      rng: cluster.rng("demo-serve-router"),
      debugHeaders: true,
      nowMs: () => clock.nowMs(),
      refusal: () => registration.refusal(),
    });
    const engine = router.engineScraper;
    if (engine === undefined) throw new Error("demo --serve: the router has no engine scraper");
    this.#engines = engines;
    this.#discovery = discovery;
    this.#router = router;
    this.#registration = registration;
    this.#drains = new DrainConfirmer({
      routerId: SERVE_ROUTER_ID,
      discovery: confirmerDiscovery(discovery),
      legs: router.inFlight,
      engine,
      writer,
      clock,
      logger: silentLogger,
    });
    this.#pace(cluster);
  }

  /** Before the first step: the router listens; later steps are only passed to the view. */
  async stepStarted(index: number, step: Step): Promise<void> {
    if (index === 0) await this.#listen();
    await this.#options.view.stepStarted?.(index, step);
  }

  async stepEnded(record: StepRecord): Promise<void> {
    if (record.kind === "wait" && this.#load === undefined) this.#startClients();
    await this.#options.view.stepEnded?.(record);
  }

  #startClients(): void {
    const clients = this.#options.clients;
    if (clients === undefined || clients.count === 0 || this.#url === undefined) return;
    this.#load = startLoad({
      routers: [this.#url],
      model: clients.model,
      total: Number.POSITIVE_INFINITY,
      concurrency: clients.count,
      maxTokens: CLIENT_MAX_TOKENS,
      requestTimeoutMs: CLIENT_TIMEOUT_MS,
    });
    this.#options.write(
      `clients: ${clients.count} streaming chat completions of ${clients.model} from now to the end\n`,
    );
  }

  async #listen(): Promise<void> {
    const router = this.#router;
    if (router === undefined) throw new Error("demo --serve: the run was not attached");
    // The Lease exists before the router listens (and it refuses requests whenever it does not).
    this.#registration?.start();
    await this.#registered;
    this.#drains?.start();
    const server = createServer({ noDelay: true }, (req, res) => {
      res.once("close", () => {
        this.#count(res.writableFinished, res.statusCode);
      });
      router.handle(req, res);
    });
    this.#server = server;
    await new Promise<void>((resolve, reject) => {
      server.once("error", (error: NodeJS.ErrnoException) => {
        const why =
          error.code === "EADDRINUSE"
            ? "address already in use (another process listens there: stop it, or choose another --port; 0 picks a free one)"
            : (error.code ?? error.message);
        reject(
          new ListenError(`--port ${this.#options.port}: cannot listen on ${LOOPBACK}:${this.#options.port}: ${why}`),
        );
      });
      server.listen(this.#options.port, LOOPBACK, resolve);
    });
    const url = `http://${LOOPBACK}:${(server.address() as AddressInfo).port}`;
    this.#url = url;
    this.#options.write(`router: ${url}\n`);
    this.#options.onListening?.(url);
  }

  #count(finished: boolean, status: number): void {
    if (!finished) this.totals.aborted++;
    else if (status < 400) this.totals.ok++;
    else this.totals.failedByStatus[status] = (this.totals.failedByStatus[status] ?? 0) + 1;
  }

  /**
   * Paces virtual time to the wall clock: after every simulated instant, sleeps until the wall
   * clock has caught up with it (`speed` simulated seconds per wall second), and a tick every
   * PACE_TICK_MS keeps the instants close together, so nothing happens more than a tick early.
   * The sleeps are where the router and the engine-mocks serve. Virtual time never runs faster
   * than `speed`: on a machine too busy to keep up, the run falls behind the wall clock and goes on
   * from there instead of catching up in a burst, in which virtual deadlines (a drain's timeout)
   * would expire under requests still streaming; and each instant behind lets the sockets be served.
   * Stopping rejects the sleep, which ends the run at its current step.
   */
  #pace(cluster: SimCluster): void {
    const { speed, signal } = this.#options;
    let virtualBaseMs = cluster.clock.nowMs();
    let wallBaseMs = Date.now();
    const tick = (): void => {
      this.#tick = cluster.clock.setTimer(PACE_TICK_MS, tick);
    };
    tick();
    this.#unhook = cluster.onSettle(async () => {
      signal.throwIfAborted();
      const aheadMs = (cluster.clock.nowMs() - virtualBaseMs) / speed - (Date.now() - wallBaseMs);
      if (aheadMs >= 1) {
        await sleep(aheadMs, undefined, { signal });
        return;
      }
      if (aheadMs < -PACE_TICK_MS / speed) {
        virtualBaseMs = cluster.clock.nowMs();
        wallBaseMs = Date.now();
      }
      await setImmediate(undefined, { signal });
    });
  }

  async close(): Promise<void> {
    // The clients' last requests finish first, on engines still running (the clock no longer paced).
    this.#load?.stop();
    await this.#load?.done;
    this.#unhook?.();
    this.#tick?.cancel();
    const server = this.#server;
    if (server !== undefined) {
      const closed = new Promise((resolve) => server.close(resolve));
      server.closeAllConnections();
      await closed;
    }
    await this.#drains?.stop();
    await this.#registration?.stop();
    await this.#router?.close();
    this.#discovery?.stop();
    await this.#engines?.close();
  }

  /** The closing lines: the scenario's verdict and the router's request totals. */
  summary(report: Report | undefined): string {
    const seconds = Math.round((this.#cluster?.clock.nowMs() ?? 0) / 1000);
    const head =
      report === undefined
        ? `stopped after ${seconds}s simulated`
        : `${report.scenario}: ${report.verdict === "pass" ? "PASS" : "FAIL"} after ${seconds}s simulated`;
    return `${head}\nrouter requests: ${formatTotals(this.totals)}\n`;
  }
}

/** `12 ok, 2 failed (503: 2), 1 aborted by the client`. */
export function formatTotals(totals: RequestTotals): string {
  const failed = Object.entries(totals.failedByStatus).sort(([a], [b]) => Number(a) - Number(b));
  const failedCount = failed.reduce((sum, [, count]) => sum + count, 0);
  const byStatus = failed.length === 0 ? "" : ` (${failed.map(([status, count]) => `${status}: ${count}`).join(", ")})`;
  return `${totals.ok + failedCount + totals.aborted} total, ${totals.ok} ok, ${failedCount} failed${byStatus}, ${totals.aborted} aborted by the client`;
}

// ---------------------------------------------------------------------------------------------

/** The engine-mock of one pod: `started` settles once it listens (or failed to), setting `engine`. */
interface PodEngine {
  readonly podIP: string;
  started: Promise<EngineMock | undefined> | undefined;
  engine: EngineMock | undefined;
}

/** One engine-mock per running entry pod, keyed by pod uid. */
class PodEngines {
  readonly #cluster: SimCluster;
  readonly #latency: { ttftMs?: number; tpotMs?: number };
  readonly #engines = new Map<string, PodEngine>();
  readonly #follower: Follower;

  constructor(cluster: SimCluster, latency: { ttftMs?: number; tpotMs?: number }) {
    this.#cluster = cluster;
    this.#latency = {
      ...(latency.ttftMs === undefined ? {} : { ttftMs: latency.ttftMs }),
      ...(latency.tpotMs === undefined ? {} : { tpotMs: latency.tpotMs }),
    };
    // The containers' truth, without lag: an engine runs while its pod runs, whatever a cache says.
    this.#follower = followStored(cluster.server, "Pod", {
      seen: (object) => {
        this.#seen(object as unknown as Pod);
      },
      gone: (uid) => {
        this.#stop(uid);
      },
      knownUids: () => this.#engines.keys(),
    });
  }

  /** Where the engine of `pod` listens (its podIP mapped to 127.0.0.1:port), once it does. */
  addressOf(pod: Pod): Address | undefined {
    const entry = this.#engines.get(pod.metadata.uid ?? "");
    if (entry?.engine === undefined || entry.podIP !== pod.status?.podIP) return undefined;
    return { host: LOOPBACK, port: entry.engine.port };
  }

  #seen(pod: Pod): void {
    const uid = pod.metadata.uid ?? "";
    const running =
      pod.metadata.labels?.[LABEL_ENTRY] === "true" &&
      pod.status?.phase === "Running" &&
      typeof pod.status.podIP === "string";
    if (!running) {
      this.#stop(uid);
      return;
    }
    if (this.#engines.has(uid)) return;
    const entry: PodEngine = { podIP: pod.status?.podIP ?? "", started: undefined, engine: undefined };
    // An engine that cannot listen leaves the pod without an address: the router counts it
    // ineligible ("no pod IP"), as it would a pod whose engine never came up.
    const started = startEngineMock({
      host: LOOPBACK,
      port: 0,
      engine: this.#engineOf(pod),
      kvFormat: kvFormatOf(pod),
      ...this.#latency,
    }).catch(() => undefined);
    entry.started = started.then((engine) => (entry.engine = engine));
    this.#engines.set(uid, entry);
  }

  #stop(uid: string): void {
    const entry = this.#engines.get(uid);
    if (entry === undefined) return;
    this.#engines.delete(uid);
    void entry.started?.then((engine) => engine?.close());
  }

  /** The engine of the route that serves the pod's ModelServing; vLLM when no route names it. */
  #engineOf(pod: Pod): Engine {
    const modelServing = pod.metadata.labels?.[LABEL_MODEL_SERVING];
    for (const object of this.#cluster.server.stored("ModelRoute")) {
      const parsed = parseModelRoute(object);
      if (
        parsed.ok &&
        parsed.value.spec.modelServing === modelServing &&
        object.metadata.namespace === pod.metadata.namespace
      )
        return parsed.value.spec.engine;
    }
    return "vllm";
  }

  async close(): Promise<void> {
    this.#follower.stop();
    const entries = [...this.#engines.values()];
    this.#engines.clear();
    await Promise.all(entries.map(async (entry) => (await entry.started)?.close()));
  }
}

/** The simulator's router cache as the drain confirmer reads it: told of every change. */
function confirmerDiscovery(discovery: SimDiscovery): ConfirmerDiscovery {
  return {
    routes: () => discovery.routes(),
    pods: (route) => discovery.pods(route),
    revision: (namespace, name) => discovery.revision(namespace, name),
    hasSynced: () => discovery.hasSynced(),
    onChange: (listener) =>
      discovery.subscribe(() => {
        listener();
      }),
  };
}
