/**
 * The simulated request traffic (DESIGN §6 `cluster.router`): requests on the virtual clock, sent
 * through router replicas (`router-replica.ts`) that decide with the router's own pure code —
 * `chooseTarget` (selection, pairing) and `confirmDrain` — and the request counts of the report
 * (`metrics.requests`). This module is the driver and the ground truth, not a second router.
 *
 * Two views of the cluster, on purpose:
 * - **what each replica believes**: its own lagged cache decides targets and drain confirmations,
 *   as a real router's does;
 * - **what happened**: a leg runs in its pod's containers, so whether it survives is decided from
 *   the API server watched without lag plus the kubelet's node state — a leg on a crashed node
 *   dies even though nobody has noticed the crash yet. The engines' queues (what a scrape reads)
 *   are the legs running on each pod, from every replica.
 *
 * Model (docs/design/simulator-core.md, "Router model"): Poisson arrivals of rate
 * `requestsPerSecond`, each to one routable replica (seeded), each lasting `requestSeconds` plus up
 * to `jitterPercent`; the replica picks a live route and its target; an aggregated request is one
 * leg, a disaggregated one a prefill leg (`prefillPercent` of the request) and a decode leg. Every
 * request counts one leg per role of its route: `ok`, `cut` (its containers stopped, its pod went
 * away or its replica crashed while it ran), `failed` (never ran: no target, the in-flight cap, a
 * pod that was already gone, a decode of another KV format than its prefill — `incompatible`).
 */
import type { Pod } from "../api/kube.ts";
import { ROUTER_LEASE_DURATION_SECONDS } from "../api/router-lease.ts";
import { LABEL_ROLE } from "../api/wellknown.ts";
import { Listeners } from "../engine/listeners.ts";
import type { KubeObject, Rng, Timer } from "../engine/ports.ts";
import type { EngineQueue } from "../router/engine-metrics.ts";
import type { Endpoint } from "../router/endpoints.ts";
import { kvFormatOf } from "../router/kv-format.ts";
import type { Outcomes } from "../router/outcomes.ts";
import { routeRoleNames } from "../router/route.ts";
import type { RouterRoute } from "../router/route.ts";
import { targetEndpoints } from "../router/target.ts";
import type { Target } from "../router/target.ts";
import { compareStrings } from "../core/maps.ts";
import type { SimCluster } from "./cluster.ts";
import { followStored } from "./follow.ts";
import type { Follower } from "./follow.ts";
import { isJsonObject } from "./json.ts";
import { MAX_ROUTER_REPLICAS } from "./limits.ts";
import { RouterReplica } from "./router-replica.ts";

export { targetRole } from "./implicit-routes.ts";

/** DESIGN §6 `cluster.router`, plus the model's knobs. */
export interface RouterOptions {
  /** Mean arrival rate over the whole cluster, > 0. */
  requestsPerSecond: number;
  /** Duration of one request before jitter, > 0. */
  requestSeconds: number;
  /** Router replicas, each with its own cache, Lease and in-flight counts. Default 1. */
  replicas?: number;
  /** Each request lasts up to this percent longer, uniformly. Default 10. */
  jitterPercent?: number;
  /** A disaggregated request's prefill leg lasts this percent of it (at least 1 ms). Default 10. */
  prefillPercent?: number;
  /** Watch lag of each replica's cache. Default 100. */
  informerLagMs?: number;
  /** Period of each replica's engine scrape. Default 1 000. */
  scrapeIntervalMs?: number;
  /** `leaseDurationSeconds` of each replica's Lease. Default 15. */
  leaseDurationSeconds?: number;
  /** Legs in flight at once over all pods; an arrival beyond it fails. Default 50 000. */
  maxInFlight?: number;
}

/** Leg outcomes; `total - ok - failed - cut` are in flight now. */
export interface RequestCounts extends Outcomes {
  total: number;
}

/** `metrics()`: the report's `metrics.requests`, every leg, overall and by role (sorted by role name). */
export interface RequestMetrics extends RequestCounts {
  /** Requests a decode refused for the KV format of its prefill (each also counted failed). */
  incompatible: number;
  inFlight: number;
  byRole: Record<string, RequestCounts>;
}

export type RouterEventType = "RequestFailed" | "RequestStarted" | "RequestOk" | "RequestCut" | "DrainAcked";

/** One thing the traffic did (per leg), for subscribers (a runner's event log, tests). */
export interface RouterEvent {
  atMs: number;
  type: RouterEventType;
  /** The replica that routed it (or confirmed). */
  replica: string;
  /** `<namespace>/<name>` of the ModelServing; absent on DrainAcked. */
  modelServing?: string;
  role: string;
  /** The pod, except on a leg that failed before one was chosen. */
  pod?: string;
  /** Why, on RequestFailed: the router's reason (no eligible endpoint, no compatible pair), or the engine's. */
  reason?: string;
}

const NO_HOLD = (): void => undefined;
/** How often a replica stopping cleanly looks whether its last request has finished. */
const STOP_POLL_MS = 100;
/** Subscribers at once; more is a leak. */
const MAX_SUBSCRIBERS = 16;
const TWO_POW_32 = 0x1_0000_0000;

/** One request: its legs, one per role of its route, prefill first. */
interface Request {
  readonly replica: RouterReplica;
  /** `<namespace>/<modelServing>`. */
  readonly modelServing: string;
  readonly target: Target;
  readonly durationMs: number;
  /** Legs running now. */
  readonly running: Set<Leg>;
  /** Roles whose leg has not started yet, in order. */
  readonly pending: string[];
  /** The KV format of the pod the prefill ran on (checked by the decode). */
  prefillKv: string | undefined;
  done: boolean;
  /**
   * NIXL: ends the count of the chosen decode in flight that the request holds from its choice
   * until the decode leg starts (as the data plane does), so no drain confirms the decode meanwhile.
   */
  readonly releaseDecode: () => void;
}

interface Leg {
  readonly request: Request;
  readonly role: string;
  readonly podUid: string;
  readonly podName: string;
  readonly release: () => void;
  readonly timer: Timer;
}

/** Legs running on one pod and the containers they run in. */
interface PodLoad {
  readonly uid: string;
  readonly name: string;
  /** `servingSignature` when the first leg started; any change means they were cut. */
  readonly signature: string;
  readonly legs: Set<Leg>;
}

/** A pod as the server has it, for deciding whether legs on it survive. */
interface KnownContainers {
  readonly node: string | undefined;
  readonly signature: string | undefined;
  readonly kvFormat: string;
}

/** Traffic on `cluster`'s clock through `options.replicas` router replicas, started. Stop it with `stop()`. */
export function attachRouter(cluster: SimCluster, options: RouterOptions): SimRouter {
  const router = new SimRouter(cluster, options);
  router.start();
  return router;
}

export class SimRouter {
  readonly #cluster: SimCluster;
  readonly #arrivalRng: Rng;
  readonly #durationRng: Rng;
  readonly #targetRng: Rng;
  readonly #replicaRng: Rng;
  readonly #meanGapMs: number;
  readonly #requestMs: number;
  readonly #jitterMs: number;
  readonly #prefillPercent: number;
  readonly #maxInFlight: number;
  readonly #replicas: RouterReplica[] = [];
  /** Routes (`<namespace>/<name>`) a replica could serve once. */
  readonly #live = new Set<string>();
  readonly #loads = new Map<string, PodLoad>();
  /** Every pod on the server by uid, as last seen without lag: the containers legs run in. */
  readonly #containers = new Map<string, KnownContainers>();
  readonly #counts = new Map<string, RequestCounts>();
  readonly #subscribers = new Listeners<RouterEvent>(MAX_SUBSCRIBERS, "router subscribers");
  #incompatible = 0;
  #inFlight = 0;
  #arrivalTimer: Timer | undefined;
  #truth: Follower | undefined;
  #stopped = false;

  /** Validates the options; nothing runs until `start()`. */
  constructor(cluster: SimCluster, options: RouterOptions) {
    const { requestsPerSecond, requestSeconds } = options;
    if (!(requestsPerSecond > 0 && Number.isFinite(requestsPerSecond)))
      throw new Error(`requestsPerSecond must be > 0, got ${requestsPerSecond}`);
    if (!(requestSeconds > 0 && Number.isFinite(requestSeconds)))
      throw new Error(`requestSeconds must be > 0, got ${requestSeconds}`);
    const jitterPercent = options.jitterPercent ?? 10;
    if (!(jitterPercent >= 0 && jitterPercent <= 100))
      throw new Error(`jitterPercent must be within 0..100, got ${jitterPercent}`);
    const replicas = options.replicas ?? 1;
    if (!(Number.isInteger(replicas) && replicas >= 1 && replicas <= MAX_ROUTER_REPLICAS))
      throw new Error(`replicas must be an integer within 1..${MAX_ROUTER_REPLICAS}, got ${replicas}`);
    this.#cluster = cluster;
    const rng = cluster.rng("router");
    this.#arrivalRng = rng.fork("arrivals");
    this.#durationRng = rng.fork("durations");
    this.#targetRng = rng.fork("targets");
    this.#replicaRng = rng.fork("replicas");
    this.#meanGapMs = 1000 / requestsPerSecond;
    this.#requestMs = Math.max(1, Math.round(requestSeconds * 1000));
    this.#jitterMs = Math.floor((this.#requestMs * jitterPercent) / 100);
    this.#prefillPercent = options.prefillPercent ?? 10;
    this.#maxInFlight = options.maxInFlight ?? 50_000;
    const world = {
      cluster,
      engineQueue: (uid: string) => this.#engineQueue(uid),
      confirmed: (replica: string, pod: Pod) => {
        this.#emit({
          type: "DrainAcked",
          replica,
          role: pod.metadata.labels?.[LABEL_ROLE] ?? "",
          pod: pod.metadata.name,
        });
      },
    };
    const replicaOptions = {
      informerLagMs: options.informerLagMs ?? 100,
      scrapeIntervalMs: options.scrapeIntervalMs ?? 1_000,
      leaseDurationSeconds: options.leaseDurationSeconds ?? ROUTER_LEASE_DURATION_SECONDS,
    };
    for (let index = 0; index < replicas; index++) this.#replicas.push(new RouterReplica(index, world, replicaOptions));
  }

  /** Starts every replica, the ground-truth watch and the arrivals (the first one gap from now). */
  start(): void {
    this.#truth = followStored(this.#cluster.server, "Pod", {
      seen: (pod) => {
        this.#observeTruth(pod.metadata.uid ?? "", pod);
      },
      gone: (uid) => {
        this.#observeTruth(uid, undefined);
      },
      knownUids: () => this.#containers.keys(),
    });
    for (const replica of this.#replicas) replica.start();
    this.#scheduleArrival();
  }

  /** Stops arrivals, replicas and watches; legs in flight are forgotten (neither ok nor cut). */
  stop(): void {
    this.#stopped = true;
    this.#arrivalTimer?.cancel();
    this.#truth?.stop();
    for (const replica of this.#replicas) replica.crash();
    for (const load of this.#loads.values()) for (const leg of load.legs) leg.timer.cancel();
  }

  /** Whether replica `index` is down (crashed, or between a clean stop and its start). */
  replicaDown(index: number): boolean {
    return this.#replicas[index]?.down() ?? false;
  }

  /** The replica ids, in index order. */
  replicaIds(): string[] {
    return this.#replicas.map((replica) => replica.id);
  }

  /**
   * Replica `index` crashes: every request it has in flight is cut (its connections go with it),
   * its cache and confirmations stop, its Lease is no longer renewed but stays. Undefined when it
   * was running; otherwise why not.
   */
  crashReplica(index: number): string | undefined {
    const replica = this.#replicas[index];
    if (replica === undefined) return `no router replica ${index}; replicas are 0..${this.#replicas.length - 1}`;
    if (replica.down()) return `router replica ${index} is already down`;
    for (const load of [...this.#loads.values()])
      for (const leg of [...load.legs]) if (leg.request.replica === replica) this.#cutRequest(leg.request);
    replica.crash();
    return undefined;
  }

  /**
   * Replica `index` starts again with an empty cache and takes over its Lease. A crashed one starts
   * at once; a running one restarts cleanly first, as on SIGTERM: it takes no new request, lets
   * those in flight finish (still confirming drains), deletes its Lease, then starts. Undefined
   * when it does; otherwise why not.
   */
  restartReplica(index: number): string | undefined {
    const replica = this.#replicas[index];
    if (replica === undefined) return `no router replica ${index}; replicas are 0..${this.#replicas.length - 1}`;
    if (replica.down()) {
      replica.start();
      return undefined;
    }
    replica.beginStop();
    const whenIdle = (): void => {
      if (this.#stopped) return;
      if (replica.inFlight() > 0) {
        this.#cluster.clock.setTimer(STOP_POLL_MS, whenIdle);
        return;
      }
      void replica.finishStop().then(() => {
        if (!this.#stopped) replica.start();
      });
    };
    whenIdle();
    return undefined;
  }

  /** The report's `metrics.requests`: every leg so far, overall and by role. */
  metrics(): RequestMetrics {
    const total: RequestCounts = { total: 0, ok: 0, failed: 0, cut: 0 };
    const byRole: Record<string, RequestCounts> = {};
    for (const [role, counted] of [...this.#counts].sort(([a], [b]) => compareStrings(a, b))) {
      const counts = { ...counted };
      byRole[role] = counts;
      total.total += counts.total;
      total.ok += counts.ok;
      total.failed += counts.failed;
      total.cut += counts.cut;
    }
    return { ...total, incompatible: this.#incompatible, inFlight: this.#inFlight, byRole };
  }

  /** Legs in flight by pod name, over every replica (pods with none are absent). */
  inFlightByPod(): Record<string, number> {
    const loads = [...this.#loads.values()].sort((a, b) => compareStrings(a.name, b.name));
    return Object.fromEntries(loads.map((load) => [load.name, load.legs.size]));
  }

  /** Calls `listener` after each router event, synchronously. Returns the unsubscribe function. */
  subscribe(listener: (event: RouterEvent) => void): () => void {
    return this.#subscribers.add(listener);
  }

  // -------------------------------------------------------------------------------------------
  // Arrivals

  #scheduleArrival(): void {
    if (this.#stopped) return;
    this.#arrivalTimer = this.#cluster.clock.setTimer(exponentialGapMs(this.#arrivalRng, this.#meanGapMs), () => {
      this.#arrive();
      this.#scheduleArrival();
    });
  }

  /**
   * One arrival: to a routable replica (a draw only when several are), then to one of its live
   * routes (a draw only when several are). Arrivals while no replica is routable, or none of its
   * routes is live, are not requests.
   */
  #arrive(): void {
    const replicas = this.#replicas.filter((replica) => replica.routable());
    const replica =
      replicas.length === 1 ? replicas[0] : replicas.length > 1 ? this.#replicaRng.pick(replicas) : undefined;
    if (replica === undefined) return;
    const routes = replica.routes().filter((route) => this.#isLive(replica, route));
    const route = routes.length === 1 ? routes[0] : routes.length > 1 ? this.#targetRng.pick(routes) : undefined;
    if (route === undefined) return;
    const durationMs = this.#requestMs + this.#durationRng.int(0, this.#jitterMs + 1);
    const modelServing = `${route.namespace}/${route.modelServing}`;
    if (this.#inFlight >= this.#maxInFlight) {
      this.#failUnstarted(
        replica,
        modelServing,
        routeRoleNames(route.roles),
        undefined,
        `${this.#maxInFlight} legs in flight, the cap`,
      );
      return;
    }
    this.#route(replica, route, modelServing, durationMs);
  }

  /** A route is live once some replica could serve it; before that nobody calls it. */
  #isLive(replica: RouterReplica, route: RouterRoute): boolean {
    const key = `${route.namespace}/${route.name}`;
    if (this.#live.has(key)) return true;
    if (!replica.canServe(route)) return false;
    this.#live.add(key);
    return true;
  }

  /**
   * Chooses the target with the replica's `chooseTarget` and starts the request's first leg(s).
   * A chosen pod that is not actually serving (the cache was stale: a refused connection) is
   * excluded and the choice made again while the route's retries last, as the data plane does.
   */
  #route(replica: RouterReplica, route: RouterRoute, modelServing: string, durationMs: number): void {
    const roles = routeRoleNames(route.roles);
    const excluded = new Set<string>();
    let refused: string | undefined;
    let reason = "";
    for (let attempt = 0; attempt <= route.retries.attempts; attempt++) {
      const decision = replica.chooseTarget(route, excluded);
      if (!decision.ok) {
        reason =
          refused === undefined
            ? decision.reason
            : `connection to ${refused} refused; no other endpoint (${decision.reason})`;
        break;
      }
      const target = decision.target;
      // Aggregated and NIXL start with one leg; SGLang sends both at once.
      const first = target.protocol === "sglang" ? targetEndpoints(target) : targetEndpoints(target).slice(0, 1);
      const down = first.filter((endpoint) => this.#uidIfServing(replica, endpoint) === undefined);
      if (down.length === 0) {
        const releaseDecode = target.protocol === "nixl" ? replica.begin(target.decode.key) : NO_HOLD;
        const request: Request = {
          replica,
          modelServing,
          target,
          durationMs,
          running: new Set(),
          pending: [...roles],
          prefillKv: undefined,
          done: false,
          releaseDecode,
        };
        this.#startLegs(request, first);
        return;
      }
      for (const endpoint of down) excluded.add(endpoint.key);
      refused = down[0]?.pod;
      reason = `connection to ${refused ?? ""} refused`;
    }
    this.#failUnstarted(replica, modelServing, roles, refused, reason);
  }

  // -------------------------------------------------------------------------------------------
  // Legs

  /** Starts the legs on `endpoints` (each serving now): the next pending roles of `request`. */
  #startLegs(request: Request, endpoints: readonly Endpoint[]): void {
    const disaggregated = request.target.protocol !== "aggregated";
    for (const endpoint of endpoints) {
      const uid = this.#uidIfServing(request.replica, endpoint) ?? "";
      const known = this.#containers.get(uid);
      const role = request.pending.shift() ?? endpoint.role;
      const isPrefill = disaggregated && request.pending.length > 0;
      if (isPrefill) request.prefillKv = known?.kvFormat;
      else if (disaggregated && request.prefillKv !== known?.kvFormat) {
        // The engine refuses KV parameters of another format (HTTP 400): the request fails.
        this.#incompatible++;
        this.#countUnstarted(role, "failed");
        const reason = `kv format mismatch: prefill ${request.prefillKv ?? "?"}, decode ${known?.kvFormat ?? "?"}`;
        this.#emit({
          type: "RequestFailed",
          replica: request.replica.id,
          modelServing: request.modelServing,
          role,
          pod: endpoint.pod,
          reason,
        });
        this.#finish(request, "failed");
        return;
      }
      const legMs = this.#legMs(request, isPrefill);
      const load = this.#loadFor(uid, endpoint.pod);
      const leg: Leg = {
        request,
        role,
        podUid: uid,
        podName: endpoint.pod,
        release: request.replica.begin(endpoint.key),
        timer: this.#cluster.clock.setTimer(legMs, () => {
          this.#endLeg(leg);
        }),
      };
      load.legs.add(leg);
      request.running.add(leg);
      if (!isPrefill) request.releaseDecode();
      this.#inFlight++;
      this.#count(role, "total");
      this.#emit({
        type: "RequestStarted",
        replica: request.replica.id,
        modelServing: request.modelServing,
        role,
        pod: endpoint.pod,
      });
    }
  }

  /** A prefill leg takes `prefillPercent` of the request; the decode (or only) leg the rest. */
  #legMs(request: Request, isPrefill: boolean): number {
    if (request.target.protocol === "aggregated") return request.durationMs;
    const prefillMs = Math.max(1, Math.round((request.durationMs * this.#prefillPercent) / 100));
    if (isPrefill) return prefillMs;
    return request.target.protocol === "nixl" ? Math.max(1, request.durationMs - prefillMs) : request.durationMs;
  }

  #loadFor(uid: string, name: string): PodLoad {
    const existing = this.#loads.get(uid);
    if (existing !== undefined) return existing;
    // Loads follow `#containers` (a change cuts at once), so a new load starts from the signature now.
    const load: PodLoad = { uid, name, signature: this.#signatureNow(uid) ?? "", legs: new Set() };
    this.#loads.set(uid, load);
    return load;
  }

  /** A leg's time is up: ok if its containers ran throughout (then the NIXL decode starts), else cut. */
  #endLeg(leg: Leg): void {
    const load = this.#loads.get(leg.podUid);
    if (load === undefined) return;
    if (this.#signatureNow(load.uid) !== load.signature) {
      this.#cutPod(leg.podUid);
      return;
    }
    const { request } = leg;
    this.#forget(leg);
    this.#count(leg.role, "ok");
    this.#emit({
      type: "RequestOk",
      replica: request.replica.id,
      modelServing: request.modelServing,
      role: leg.role,
      pod: leg.podName,
    });
    if (request.running.size > 0 || request.done) return;
    if (request.pending.length === 0) {
      request.done = true;
      return;
    }
    const decode = request.target.protocol === "aggregated" ? undefined : request.target.decode;
    if (decode !== undefined && this.#uidIfServing(request.replica, decode) !== undefined)
      this.#startLegs(request, [decode]);
    else this.#failPending(request, decode?.pod);
  }

  /** Every leg on the pod is cut (its containers stopped or it went away), and with it its request. */
  #cutPod(podUid: string): void {
    const load = this.#loads.get(podUid);
    if (load === undefined) return;
    for (const leg of [...load.legs]) this.#cutRequest(leg.request);
  }

  /** Cuts every running leg of `request`; the legs it had not started count as cut too. */
  #cutRequest(request: Request): void {
    for (const leg of [...request.running]) {
      leg.timer.cancel();
      this.#forget(leg);
      this.#count(leg.role, "cut");
      this.#emit({
        type: "RequestCut",
        replica: request.replica.id,
        modelServing: request.modelServing,
        role: leg.role,
        pod: leg.podName,
      });
    }
    this.#finish(request, "cut");
  }

  /** The next leg's pod is not serving (a refused connection): it and the rest fail. */
  #failPending(request: Request, pod: string | undefined): void {
    const role = request.pending.shift();
    if (role !== undefined) {
      this.#countUnstarted(role, "failed");
      this.#emit({
        type: "RequestFailed",
        replica: request.replica.id,
        modelServing: request.modelServing,
        role,
        ...(pod === undefined ? {} : { pod }),
        reason: `connection to ${pod ?? "?"} refused`,
      });
    }
    this.#finish(request, "failed");
  }

  /** Ends `request`: the legs it has not started count with its outcome. */
  #finish(request: Request, outcome: "failed" | "cut"): void {
    request.done = true;
    request.releaseDecode();
    for (const role of request.pending.splice(0)) this.#countUnstarted(role, outcome);
  }

  /** A request that never started: a failed leg on each of `roles`. */
  #failUnstarted(
    replica: RouterReplica,
    modelServing: string,
    roles: readonly string[],
    pod: string | undefined,
    reason: string,
  ): void {
    for (const role of roles) {
      this.#countUnstarted(role, "failed");
      this.#emit({
        type: "RequestFailed",
        replica: replica.id,
        modelServing,
        role,
        ...(pod === undefined ? {} : { pod }),
        reason,
      });
    }
  }

  #forget(leg: Leg): void {
    const load = this.#loads.get(leg.podUid);
    leg.release();
    leg.request.running.delete(leg);
    load?.legs.delete(leg);
    this.#inFlight--;
    if (load?.legs.size === 0) this.#loads.delete(leg.podUid);
  }

  #count(role: string, outcome: keyof RequestCounts): void {
    let counts = this.#counts.get(role);
    if (counts === undefined) {
      counts = { total: 0, ok: 0, failed: 0, cut: 0 };
      this.#counts.set(role, counts);
    }
    counts[outcome]++;
  }

  #countUnstarted(role: string, outcome: "failed" | "cut"): void {
    this.#count(role, "total");
    this.#count(role, outcome);
  }

  #emit(event: Omit<RouterEvent, "atMs">): void {
    // Shared by every listener, so frozen.
    this.#subscribers.notify(Object.freeze({ atMs: this.#cluster.clock.nowMs(), ...event }));
  }

  // -------------------------------------------------------------------------------------------
  // What happened: ground truth

  /** Records pod `uid` as `pod` now (undefined: gone) and cuts its legs if their containers changed. */
  #observeTruth(uid: string, pod: KubeObject | undefined): void {
    if (pod === undefined) this.#containers.delete(uid);
    else {
      const node = pod.spec?.["nodeName"];
      this.#containers.set(uid, {
        node: typeof node === "string" ? node : undefined,
        signature: servingSignature(pod),
        kvFormat: kvFormatOf(pod as unknown as Pod),
      });
    }
    const load = this.#loads.get(uid);
    if (load !== undefined && this.#signatureNow(uid) !== load.signature) this.#cutPod(uid);
  }

  /** The uid of the pod behind `endpoint` in the replica's cache when its containers serve now; else undefined. */
  #uidIfServing(replica: RouterReplica, endpoint: Endpoint): string | undefined {
    const uid = replica.uidOf(endpoint);
    return uid !== undefined && this.#signatureNow(uid) !== undefined ? uid : undefined;
  }

  /**
   * What the pod's containers are running now: `servingSignature` as last written, or undefined
   * when the pod is gone or its node has crashed (which the API server learns only later).
   */
  #signatureNow(uid: string): string | undefined {
    const known = this.#containers.get(uid);
    if (known === undefined || (known.node !== undefined && this.#cluster.kubelet.isNodeDown(known.node)))
      return undefined;
    return known.signature;
  }

  /** What a scrape of pod `uid`'s engine reads: the legs running on it from every replica. */
  #engineQueue(uid: string): EngineQueue {
    if (this.#signatureNow(uid) === undefined) return { ok: false, reason: "connection refused" };
    return { ok: true, running: this.#loads.get(uid)?.legs.size ?? 0, waiting: 0 };
  }
}

// ---------------------------------------------------------------------------------------------
// Pure helpers

/**
 * The containerIDs of the pod's containers when every one of them is running, else undefined. A
 * leg survives while this stays the same: a crash, an in-place image change, a node restart or
 * the end of a graceful termination gives new IDs or none.
 */
export function servingSignature(pod: KubeObject): string | undefined {
  const statuses = pod.status?.["containerStatuses"];
  if (!Array.isArray(statuses) || statuses.length === 0) return undefined;
  const ids: string[] = [];
  for (const status of statuses) {
    if (!isJsonObject(status)) return undefined;
    const state = status["state"];
    const id = status["containerID"];
    if (!isJsonObject(state) || !isJsonObject(state["running"]) || typeof id !== "string") return undefined;
    ids.push(id);
  }
  return ids.join(",");
}

/**
 * An exponential gap of mean `meanMs`, rounded to whole milliseconds: -ln(u)·mean with u uniform
 * in (0, 1] from one 32-bit draw. The largest gap is ln(2^32) ≈ 22 means.
 */
export function exponentialGapMs(rng: Rng, meanMs: number): number {
  const u = (rng.int(0, TWO_POW_32) + 1) / TWO_POW_32;
  return Math.round(Math.log(1 / u) * meanMs);
}
