/**
 * One simulated router replica (DESIGN §3, §6 `cluster.router.replicas`): what a real `tandem
 * router` process holds, driving the router's own pure decisions — `chooseTarget` for where a
 * request goes, `confirmDrain` for when a marked pod may be confirmed drained.
 *
 * Each replica has its own lagged cache (a `SimDiscovery` through its own client, `router-<i>`),
 * its own Lease (kept by the router's own `RouterRegistration`, self-fencing included), its own
 * in-flight counts and its own engine scrapes. What happens to the legs it
 * sends (ok, cut) is the `SimRouter`'s ground truth, not the replica's.
 */
import type { Pod } from "../api/kube.ts";
import { silentLogger } from "../engine/logger.ts";
import { ANNOTATION_DRAINING } from "../api/wellknown.ts";
import { isApiError } from "../engine/ports.ts";
import type { Clock, Rng, Timer } from "../engine/ports.ts";
import { confirmDrain, confirmationPatch } from "../router/confirm.ts";
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
  readonly confirm: { readonly maxAttempts: number; readonly baseMs: number; readonly maxMs: number };
}

/** What a replica reads of the world beyond its cache: the engine's queue, as a scrape would get it. */
export interface ReplicaWorld {
  readonly cluster: SimCluster;
  /** The engine of pod `uid` now: its running legs, or unreadable when its containers are not running. */
  readonly engineQueue: (uid: string) => EngineQueue;
  /** The replica confirmed pod `pod` drained (the write succeeded). */
  readonly confirmed: (replica: string, pod: Pod) => void;
}

/** One confirmation, from its first write until the pod's mark changes. */
interface Confirmation {
  /** The mark this answers; a new mark needs a new confirmation. */
  readonly draining: string;
  attempts: number;
  timer: Timer | undefined;
  /** Written, or given up after `maxAttempts` (the next change of the pod starts over). */
  settled: boolean;
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
  readonly #inFlight = new Map<string, number>();
  /** Latest scrape by pod uid. */
  #scrapes = new Map<string, { readonly atMs: number; readonly queue: EngineQueue }>();
  /** When this replica's cache first showed each pod's current mark, by uid. */
  readonly #marksSeen = new Map<string, { readonly draining: string; readonly atMs: number }>();
  readonly #confirmations = new Map<string, Confirmation>();
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
    for (const count of this.#inFlight.values()) total += count;
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
    const discovery = new SimDiscovery(this.#world.cluster, { clientName: this.id, lagMs: this.#options.informerLagMs, addressOf: simAddress });
    this.#discovery = discovery;
    discovery.subscribe((event) => {
      if (event.object.kind === "Pod") this.#onPod(event.type === "DELETED" ? undefined : (event.object as unknown as Pod), event.object.metadata.uid ?? "");
    });
    // The first list fills the cache before anyone can subscribe: its marks are seen now.
    for (const pod of discovery.entryPods()) this.#onPod(pod, pod.metadata.uid ?? "");
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
    // Scrapes of the replicas fall at different offsets within the period, as unsynchronized processes' do.
    this.#after(this.#rng.int(1, this.#options.scrapeIntervalMs + 1), () => {
      this.#scrape();
    });
  }

  /** The process dies: its cache, scrapes, confirmations and Lease renewals stop; its Lease stays. */
  crash(): void {
    this.#registration?.abandon();
    this.#teardown();
  }

  /** A clean stop begins: the replica takes no new request; those in flight finish and it still confirms. */
  beginStop(): void {
    this.#stopping = true;
  }

  /** A clean stop ends (nothing in flight any more): its Lease is deleted, then it is down. */
  async finishStop(): Promise<void> {
    await this.#registration?.stop();
    this.#teardown();
  }

  #teardown(): void {
    this.#registration = undefined;
    this.#discovery?.stop();
    this.#discovery = undefined;
    for (const timer of this.#timers) timer.cancel();
    this.#timers.clear();
    for (const confirmation of this.#confirmations.values()) confirmation.timer?.cancel();
    this.#confirmations.clear();
    this.#marksSeen.clear();
    this.#inFlight.clear();
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
    this.#inFlight.set(key, (this.#inFlight.get(key) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.#inFlight.get(key) ?? 1) - 1;
      if (left === 0) this.#inFlight.delete(key);
      else this.#inFlight.set(key, left);
    };
  }

  #loadOf(endpoint: Endpoint): EndpointLoad {
    const uid = this.uidOf(endpoint);
    const scrape = uid === undefined ? undefined : this.#scrapes.get(uid);
    const engine = scrape?.queue.ok === true ? { running: scrape.queue.running, waiting: scrape.queue.waiting, ageMs: this.#clock.nowMs() - scrape.atMs } : undefined;
    return { inFlight: this.#inFlight.get(endpoint.key) ?? 0, engine };
  }

  // -------------------------------------------------------------------------------------------
  // Engine scrapes and drain confirmations (DESIGN §3.3–3.4)

  /** Reads every entry pod's engine queue, then looks at every marked pod again. */
  #scrape(): void {
    const discovery = this.#discovery;
    if (discovery === undefined) return;
    const atMs = this.#clock.nowMs();
    const scrapes = new Map<string, { atMs: number; queue: EngineQueue }>();
    const pods = discovery.entryPods();
    for (const pod of pods) scrapes.set(pod.metadata.uid ?? "", { atMs, queue: this.#world.engineQueue(pod.metadata.uid ?? "") });
    this.#scrapes = scrapes;
    for (const pod of pods) if (pod.metadata.annotations?.[ANNOTATION_DRAINING] !== undefined) this.#maybeConfirm(pod);
    this.#after(this.#options.scrapeIntervalMs, () => {
      this.#scrape();
    });
  }

  #onPod(pod: Pod | undefined, uid: string): void {
    const draining = pod?.metadata.annotations?.[ANNOTATION_DRAINING];
    const confirmation = this.#confirmations.get(uid);
    // Any change of the pod starts a settled confirmation over; a new mark a pending one too.
    if (confirmation !== undefined && (confirmation.settled || confirmation.draining !== draining)) {
      confirmation.timer?.cancel();
      this.#confirmations.delete(uid);
    }
    if (pod === undefined || draining === undefined) {
      this.#marksSeen.delete(uid);
      return;
    }
    if (this.#marksSeen.get(uid)?.draining !== draining) this.#marksSeen.set(uid, { draining, atMs: this.#clock.nowMs() });
    this.#maybeConfirm(pod);
  }

  /** Confirms `pod` (as cached) once `confirmDrain` says so; once per mark. */
  #maybeConfirm(pod: Pod): void {
    const uid = pod.metadata.uid ?? "";
    const draining = pod.metadata.annotations?.[ANNOTATION_DRAINING];
    const seen = this.#marksSeen.get(uid);
    if (draining === undefined || seen?.draining !== draining || this.#confirmations.has(uid)) return;
    const scrape = this.#scrapes.get(uid);
    const decision = confirmDrain({
      pod,
      routerId: this.id,
      inFlight: this.#inFlight.get(`${pod.metadata.namespace ?? ""}/${pod.metadata.name}`) ?? 0,
      engine: scrape !== undefined && scrape.atMs > seen.atMs ? scrape.queue : undefined,
    });
    if (!decision.confirm) return;
    const confirmation: Confirmation = { draining, attempts: 0, timer: undefined, settled: false };
    this.#confirmations.set(uid, confirmation);
    void this.#write(pod, confirmation);
  }

  /**
   * Merge-patches this replica's confirmation with the pod's uid as precondition. NotFound: the pod
   * is gone. Conflict, ServerError, Timeout (the patch is idempotent): again after a doubling delay,
   * at most `maxAttempts` writes; after that the next change of the pod starts over.
   */
  async #write(pod: Pod, confirmation: Confirmation): Promise<void> {
    const { maxAttempts, baseMs, maxMs } = this.#options.confirm;
    confirmation.attempts++;
    const uid = pod.metadata.uid ?? "";
    try {
      await this.#world.cluster.writer(this.id).patch({ kind: "Pod", namespace: pod.metadata.namespace ?? "", name: pod.metadata.name }, confirmationPatch(pod, this.id));
      confirmation.settled = true;
      this.#world.confirmed(this.id, pod);
    } catch (error) {
      if (!isApiError(error)) throw error;
      if (this.#confirmations.get(uid) !== confirmation) return;
      if (!isApiError(error, "Conflict", "ServerError", "Timeout") || confirmation.attempts >= maxAttempts) {
        confirmation.settled = true;
        return;
      }
      const delayMs = Math.min(maxMs, baseMs * 2 ** (confirmation.attempts - 1));
      confirmation.timer = this.#clock.setTimer(delayMs, () => {
        confirmation.timer = undefined;
        if (this.#confirmations.get(uid) === confirmation) void this.#write(pod, confirmation);
      });
    }
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
