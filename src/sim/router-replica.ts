/**
 * One simulated router replica (DESIGN §3, §6 `cluster.router.replicas`): what a real `tandem
 * router` process holds, running the router's own code — `chooseTarget` for where a request goes,
 * `RouterRegistration` for its Lease (self-fencing included), `DrainConfirmer` (which decides with
 * `confirmDrain`) for its drain confirmations — on virtual time.
 *
 * Each replica has its own lagged cache (a `SimDiscovery` through its own client, `router-<i>`),
 * its own in-flight counts and its own engine scrapes. What happens to the legs it sends (ok, cut)
 * is the `SimRouter`'s ground truth, not the replica's.
 */
import type { Pod } from "../api/kube.ts";
import { silentLogger } from "../engine/logger.ts";
import type { Clock, Rng, Timer } from "../engine/ports.ts";
import { DrainConfirmer } from "../router/confirmer.ts";
import type { EngineProbe } from "../router/confirmer.ts";
import { InFlight } from "../router/proxy/inflight.ts";
import { RouterRegistration } from "../router/registration.ts";
import type { EngineQueue } from "../router/engine-metrics.ts";
import type { Endpoint } from "../router/endpoints.ts";
import { chooseTarget } from "../router/target.ts";
import type { TargetResult } from "../router/target.ts";
import type { EndpointLoad, TieBreak } from "../router/select.ts";
import { routesByModel } from "../router/route.ts";
import type { RouterRoute } from "../router/route.ts";
import type { SimCluster } from "./cluster.ts";
import { implicitRoutes } from "./implicit-routes.ts";
import { SimDiscovery } from "./router-discovery.ts";

/** A tie-break that always takes the first: for questions that must not move a stream. */
const FIRST_OF_TIES: TieBreak = { int: (min) => min };

/** Where every simulated replica keeps its Lease. */
export const SIM_LEASE_NAMESPACE = "default";

/** A replica's knobs (from `RouterOptions`). */
export interface ReplicaOptions {
  /** Watch lag of the replica's cache. */
  readonly informerLagMs: number;
  /** Period of the engine `/metrics` scrape. */
  readonly scrapeIntervalMs: number;
  readonly leaseDurationSeconds: number;
}

/** What a replica reads of the world beyond its cache: the engine's queue, as a scrape would get it. */
export interface ReplicaWorld {
  readonly cluster: SimCluster;
  /** The engine of pod `uid` now: its running legs, or unreadable when its containers are not running. */
  readonly engineQueue: (uid: string) => EngineQueue;
  /** The replica confirmed pod `pod` drained (the write succeeded). */
  readonly confirmed: (replica: string, pod: Pod) => void;
}

export class RouterReplica {
  /** `router-<index>`: its Lease name, holder identity, client name and confirmation key. */
  readonly id: string;
  readonly #world: ReplicaWorld;
  readonly #options: ReplicaOptions;
  readonly #clock: Clock;
  /** renewTime is compared on the controller's clock, which counts from the epoch. */
  readonly #epoch: Clock;
  readonly #rng: Rng;
  #discovery: SimDiscovery | undefined;
  /** The router's own registration (DESIGN §3.1), on the epoch clock the controller compares with. */
  #registration: RouterRegistration | undefined;
  /** Stopping cleanly: no new requests; those in flight finish, confirmations go on. */
  #stopping = false;
  /** This run's legs in flight per endpoint key (a restart begins with none). */
  #inFlight = new InFlight();
  /** The router's own confirmation loop, over this replica's cache, legs and scrapes. */
  #confirmer: DrainConfirmer | undefined;
  /** Scrape rounds so far, and each pod's latest reading with its round, by pod uid. */
  #round = 0;
  #nextScrapeAtMs = 0;
  #scrapes = new Map<string, { readonly atMs: number; readonly round: number; readonly queue: EngineQueue }>();
  readonly #onScrape = new Set<(key: string) => void>();
  readonly #timers = new Set<Timer>();

  constructor(index: number, world: ReplicaWorld, options: ReplicaOptions) {
    this.id = `router-${index}`;
    this.#world = world;
    this.#options = options;
    this.#clock = world.cluster.clock;
    this.#epoch = world.cluster.clock.onEpoch();
    this.#rng = world.cluster.rng(this.id);
  }

  /**
   * Takes new requests: its cache has synced, its Lease is written and renewed (not fenced), and it
   * is not stopping, so the load balancer sends it requests.
   */
  routable(): boolean {
    return !this.#stopping && this.#registration?.refusal() === undefined && this.#discovery?.hasSynced() === true;
  }

  /** Legs of this replica in flight, over every pod. */
  inFlight(): number {
    let total = 0;
    for (const count of this.#inFlight.snapshot().values()) total += count;
    return total;
  }

  /** Down (never started, or crashed and not restarted). */
  down(): boolean {
    return this.#discovery === undefined;
  }

  /**
   * Starts with a new, empty cache and nothing in flight: writes (or takes over) its Lease, renews
   * it every third of its duration, scrapes every engine it sees. A restarted replica confirms every
   * marked pod it has nothing on once synced: its cache shows the marks, its scrapes the engines.
   */
  start(): void {
    const discovery = new SimDiscovery(this.#world.cluster, {
      clientName: this.id,
      lagMs: this.#options.informerLagMs,
      addressOf: simAddress,
    });
    this.#discovery = discovery;
    this.#inFlight = new InFlight();
    this.#stopping = false;
    this.#registration = new RouterRegistration({
      id: this.id,
      namespace: SIM_LEASE_NAMESPACE,
      scope: { all: true },
      leaseDurationSeconds: this.#options.leaseDurationSeconds,
      writer: this.#world.cluster.writer(this.id),
      clock: this.#epoch,
      logger: silentLogger,
    });
    this.#registration.start();
    this.#confirmer = new DrainConfirmer({
      routerId: this.id,
      discovery: {
        // The replica's routes, implicit ones included: every pod it may send to is one it confirms.
        routes: () => this.routes(),
        pods: (route) => discovery.pods(route),
        revision: (namespace, name) => discovery.revision(namespace, name),
        hasSynced: () => discovery.hasSynced(),
        onChange: (listener) =>
          discovery.subscribe(() => {
            listener();
          }),
      },
      legs: this.#inFlight,
      engine: this.#probe(discovery),
      writer: this.#world.cluster.writer(this.id),
      clock: this.#clock,
      logger: silentLogger,
      onConfirmed: (pod) => {
        this.#world.confirmed(this.id, pod);
      },
    });
    this.#confirmer.start();
    // Scrapes of the replicas fall at different offsets within the period, as unsynchronized processes' do.
    this.#after(this.#rng.int(1, this.#options.scrapeIntervalMs + 1), () => {
      this.#scrape();
    });
  }

  /** The process dies: its cache, scrapes, confirmations and Lease renewals stop; its Lease stays. */
  crash(): void {
    this.#registration?.abandon();
    void this.#confirmer?.stop();
    this.#teardown();
  }

  /** A clean stop begins: the replica takes no new request; those in flight finish and it still confirms. */
  beginStop(): void {
    this.#stopping = true;
  }

  /** A clean stop ends (nothing in flight any more): its Lease is deleted, then it is down. */
  async finishStop(): Promise<void> {
    await this.#confirmer?.stop();
    await this.#registration?.stop();
    this.#teardown();
  }

  #teardown(): void {
    this.#registration = undefined;
    this.#discovery?.stop();
    this.#discovery = undefined;
    this.#confirmer = undefined;
    for (const timer of this.#timers) timer.cancel();
    this.#timers.clear();
    this.#onScrape.clear();
    this.#scrapes = new Map();
  }

  /** Routes the replica routes by: its cache's ModelRoutes (each model's winner), or with none the implicit ones. */
  routes(): RouterRoute[] {
    const discovery = this.#discovery;
    if (discovery === undefined) return [];
    const routes = discovery.routes();
    if (routes.length === 0) return implicitRoutes(discovery.modelServings());
    return [...routesByModel(routes).winners.values()];
  }

  /** `chooseTarget` over this replica's cache, in-flight counts and scrapes, ties drawn from its stream. */
  chooseTarget(route: RouterRoute, excluded: ReadonlySet<string>): TargetResult {
    return this.#choose(route, excluded, this.#rng);
  }

  /** Whether `chooseTarget` would find a target now; draws nothing from the replica's stream. */
  canServe(route: RouterRoute): boolean {
    return this.#choose(route, new Set(), FIRST_OF_TIES).ok;
  }

  #choose(route: RouterRoute, excluded: ReadonlySet<string>, rng: TieBreak): TargetResult {
    const discovery = this.#discovery;
    if (discovery === undefined) return { ok: false, reason: `router ${this.id} is down` };
    return chooseTarget({
      route,
      pods: discovery.pods(route),
      revisions: (name) => discovery.revision(route.namespace, name),
      loadOf: (endpoint) => this.#loadOf(endpoint),
      rng,
      excluded,
    });
  }

  /** The uid of an endpoint's pod in this replica's cache: where its connection really goes. */
  uidOf(endpoint: Endpoint): string | undefined {
    return this.#discovery?.pod(endpoint.namespace, endpoint.pod)?.metadata.uid;
  }

  /** Counts a leg in flight on `key` until the returned function is called. */
  begin(key: string): () => void {
    return this.#inFlight.begin(key);
  }

  #loadOf(endpoint: Endpoint): EndpointLoad {
    const uid = this.uidOf(endpoint);
    const scrape = uid === undefined ? undefined : this.#scrapes.get(uid);
    const engine =
      scrape?.queue.ok === true
        ? { running: scrape.queue.running, waiting: scrape.queue.waiting, ageMs: this.#clock.nowMs() - scrape.atMs }
        : undefined;
    return { inFlight: this.#inFlight.count(endpoint.key), engine };
  }

  // -------------------------------------------------------------------------------------------
  // Engine scrapes and drain confirmations (DESIGN §3.3–3.4)

  /**
   * One scrape round: every entry pod's engine queue read at once (the simulator's engines answer
   * without delay), numbered, and the confirmer told of each pod read.
   */
  #scrape(): void {
    const discovery = this.#discovery;
    if (discovery === undefined) return;
    const atMs = this.#clock.nowMs();
    const round = ++this.#round;
    const scrapes = new Map<string, { atMs: number; round: number; queue: EngineQueue }>();
    const pods = discovery.entryPods();
    for (const pod of pods)
      scrapes.set(pod.metadata.uid ?? "", { atMs, round, queue: this.#world.engineQueue(pod.metadata.uid ?? "") });
    this.#scrapes = scrapes;
    this.#nextScrapeAtMs = atMs + this.#options.scrapeIntervalMs;
    this.#after(this.#options.scrapeIntervalMs, () => {
      this.#scrape();
    });
    for (const pod of pods)
      for (const listener of [...this.#onScrape]) listener(`${pod.metadata.namespace ?? ""}/${pod.metadata.name}`);
  }

  /**
   * The confirmer's view of the scrapes (`EngineProbe`): rounds are its sequence numbers, and a
   * scrape asked for comes with the next round, which reads every engine anyway.
   */
  #probe(discovery: SimDiscovery): EngineProbe {
    return {
      sequence: () => this.#round,
      queueAfter: (key, after) => {
        const slash = key.indexOf("/");
        const uid = discovery.pod(key.slice(0, slash), key.slice(slash + 1))?.metadata.uid;
        const scrape = uid === undefined ? undefined : this.#scrapes.get(uid);
        return scrape !== undefined && scrape.round > after ? scrape.queue : undefined;
      },
      scrapeSoon: () => Math.max(1, this.#nextScrapeAtMs - this.#clock.nowMs()),
      onScrape: (listener) => {
        this.#onScrape.add(listener);
        return () => this.#onScrape.delete(listener);
      },
    };
  }

  #after(delayMs: number, run: () => void): void {
    const timer = this.#clock.setTimer(delayMs, () => {
      this.#timers.delete(timer);
      run();
    });
    this.#timers.add(timer);
  }
}

/** The address a simulated pod's engine listens on: nothing reaches it, but an eligible endpoint needs one. */
function simAddress(pod: Pod): { host: string; port: number } | undefined {
  const ip = (pod.status as { podIP?: unknown } | undefined)?.podIP;
  return typeof ip === "string" && ip !== "" ? { host: ip, port: 8000 } : undefined;
}
