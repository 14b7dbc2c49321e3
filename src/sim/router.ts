/**
 * The simulated request router (DESIGN §6 `cluster.router`): traffic on the virtual clock, routed
 * to ModelServing entry pods from a lagged cache, with the router's half of the drain handshake
 * (DESIGN §3) and the request counts of the report (`metrics.requests`).
 *
 * Two views of the cluster, on purpose:
 * - **what the router believes**: its own informer (client "router", watch lag `informerLagMs`)
 *   decides the candidate set and the drain acks, as a real router's endpoint cache does;
 * - **what happened**: a request runs in its pod's containers, so whether it survives is decided
 *   from the API server watched without lag plus the kubelet's node state — a request on a
 *   crashed node dies even though nobody has noticed the crash yet.
 *
 * Model (see docs/design/simulator-core.md, "Router model"):
 * - arrivals form a Poisson process of rate `requestsPerSecond` (exponential gaps rounded to whole
 *   milliseconds); each request lasts `requestSeconds` plus up to `jitterPercent`;
 * - each request goes to one ModelServing that has gone live (the router has seen a candidate for
 *   it once; before that nobody sends it traffic), and within it to the **target role**: the first
 *   role whose name contains "decode", else the first role of `spec.template.roles`;
 * - candidates: entry pods of the target role that are Ready, not draining, not terminating, in
 *   the router's cache; the one with the fewest requests in flight wins (ties: name order);
 * - outcomes: `ok` (ran to its end), `cut` (its pod's containers stopped, or the pod went away,
 *   while it ran), `failed` (never ran: no candidate, the in-flight cap, or the chosen pod was
 *   already gone because the cache was stale — a refused connection).
 */
import { ROUTER_LEASE_DURATION_SECONDS, drainedAnnotation, microTime, routerLeaseObject } from "../api/router-lease.ts";
import { ANNOTATION_DRAINING, LABEL_ENTRY, LABEL_MODEL_SERVING, LABEL_ROLE } from "../api/wellknown.ts";
import { Listeners } from "../engine/listeners.ts";
import { isApiError } from "../engine/ports.ts";
import type { Clock, ClusterReader, ClusterWriter, JsonObject, KubeObject, Rng, Timer, WatchEvent } from "../engine/ports.ts";
import type { ApiServer } from "./apiserver.ts";
import type { SimCluster } from "./cluster.ts";
import { SimInformer } from "./informer.ts";
import { isJsonObject } from "./json.ts";
import { isPodReady } from "./pod-status.ts";
import { followStored } from "./follow.ts";
import type { Follower } from "./follow.ts";
import { compareStrings } from "../core/maps.ts";

/** DESIGN §6 `cluster.router`, plus the model's knobs. */
export interface RouterOptions {
  /** Mean arrival rate over the whole cluster, > 0. */
  requestsPerSecond: number;
  /** Duration of one request before jitter, > 0. */
  requestSeconds: number;
  /** Each request lasts up to this percent longer, uniformly. Default 10. */
  jitterPercent?: number;
  /** Watch lag of the router's cache. Default 100. */
  informerLagMs?: number;
  /** Requests in flight at once over all pods; an arrival beyond it fails. Default 50 000. */
  maxInFlight?: number;
  /** Attempts at writing one drain ack before leaving it to the next change of the pod. Default 8. */
  maxAckAttempts?: number;
  /** First retry delay of a failed ack write, doubled per attempt. Default 100. */
  ackRetryBaseMs?: number;
  /** Cap on the ack retry delay. Default 5 000. */
  ackRetryMaxMs?: number;
}

/** What the router needs; `attachRouter` wires them from a `SimCluster`. */
export interface RouterPorts {
  readonly clock: Clock;
  /** The router's own stream; sub-streams "arrivals", "durations", "targets" are forked from it. */
  readonly rng: Rng;
  /** The router's cache of ModelServings and Pods: lagged, never started by the caller. */
  readonly cache: ClusterReader & { start(): void; stop(): void };
  /** Writes the drain acks (client "router"). */
  readonly client: ClusterWriter;
  /** Ground truth for whether a request survives: pods watched without lag. */
  readonly server: ApiServer;
  /** Ground truth the API server lacks: the node has crashed (its containers are dead). */
  readonly isNodeDown: (node: string) => boolean;
  /**
   * The epoch clock the controller compares drain marks with (`cluster.clock.onEpoch()`): the
   * router's Lease renewTime is written on it. Without it the router registers no Lease.
   */
  readonly epochClock?: Clock;
}

/** The simulated router's replica identity: its Lease and its confirmations `drained.tandem.dev/sim-router`. */
export const SIM_ROUTER_ID = "sim-router";
const SIM_ROUTER_LEASE_NAMESPACE = "default";

/** Request outcomes; `total - ok - failed - cut` are in flight now. */
export interface RequestCounts {
  total: number;
  ok: number;
  failed: number;
  cut: number;
}

/** `metrics()`: the report's `metrics.requests`, overall and by role (sorted by role name). */
export interface RequestMetrics extends RequestCounts {
  inFlight: number;
  byRole: Record<string, RequestCounts>;
}

export type RouterEventType = "RequestFailed" | "RequestStarted" | "RequestOk" | "RequestCut" | "DrainAcked";

/** One thing the router did, for subscribers (a runner's event log, tests). */
export interface RouterEvent {
  atMs: number;
  type: RouterEventType;
  /** `<namespace>/<name>` of the ModelServing; absent on DrainAcked. */
  modelServing?: string;
  role: string;
  /** The pod, except on a request that failed for want of a candidate. */
  pod?: string;
}

/** Subscribers at once; more is a leak. */
const MAX_SUBSCRIBERS = 16;
const TWO_POW_32 = 0x1_0000_0000;

/** An entry pod as the router's cache shows it. */
interface EntryView {
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
  /** `<namespace>/<modelserving>/<role>`: the pool this pod serves. */
  readonly pool: string;
  readonly role: string;
  readonly candidate: boolean;
  /** The draining annotation's value, when present. */
  readonly draining: string | undefined;
  readonly drained: boolean;
  readonly terminating: boolean;
}

interface Target {
  /** `<namespace>/<name>`. */
  readonly key: string;
  readonly uid: string;
  /** `<namespace>/<name>/<targetRole>`, or undefined when the ModelServing has no role. */
  readonly pool: string | undefined;
  readonly role: string;
}

interface InFlightRequest {
  readonly podUid: string;
  readonly modelServing: string;
  readonly role: string;
  readonly timer: Timer;
}

/** Requests running on one pod and the containers they run in. */
interface PodLoad {
  readonly uid: string;
  readonly name: string;
  /** `servingSignature` when the first request started; any change means they were cut. */
  readonly signature: string;
  readonly requests: Set<InFlightRequest>;
}

/** A pod as the server has it, for deciding whether requests on it survive. */
interface KnownContainers {
  readonly node: string | undefined;
  readonly signature: string | undefined;
}

/** One drain ack, from its first write until the pod or its draining value changes. */
interface AckState {
  /** The draining value this ack answers; a new drain needs a new ack. */
  readonly draining: string;
  /** Writes sent so far. */
  attempts: number;
  /** The pending retry, if any. */
  timer: Timer | undefined;
}

/** A router on `cluster`'s clock, reading through its own informer, started. Stop it with `stop()`. */
export function attachRouter(cluster: SimCluster, options: RouterOptions): SimRouter {
  const cache = new SimInformer(cluster.server.client("router"), cluster.clock, {
    kinds: ["ModelServing", "Pod"],
    lagMs: options.informerLagMs ?? 100,
  });
  const router = new SimRouter(
    {
      clock: cluster.clock,
      rng: cluster.rng("router"),
      cache,
      client: cluster.writer("router"),
      server: cluster.server,
      isNodeDown: (node) => cluster.kubelet.isNodeDown(node),
      epochClock: cluster.clock.onEpoch(),
    },
    options,
  );
  router.start();
  return router;
}

export class SimRouter {
  readonly #ports: RouterPorts;
  readonly #arrivalRng: Rng;
  readonly #durationRng: Rng;
  readonly #targetRng: Rng;
  readonly #meanGapMs: number;
  readonly #requestMs: number;
  readonly #jitterMs: number;
  readonly #maxInFlight: number;
  readonly #ack: { maxAttempts: number; baseMs: number; maxMs: number };
  readonly #targets = new Map<string, Target>();
  /** ModelServing uids that have had a candidate once. */
  readonly #live = new Set<string>();
  readonly #entries = new Map<string, EntryView>();
  readonly #loads = new Map<string, PodLoad>();
  /** Every pod on the server by uid, as last seen without lag: the containers requests run in. */
  readonly #containers = new Map<string, KnownContainers>();
  readonly #acks = new Map<string, AckState>();
  readonly #counts = new Map<string, RequestCounts>();
  readonly #subscribers = new Listeners<RouterEvent>(MAX_SUBSCRIBERS, "router subscribers");
  #inFlight = 0;
  #arrivalTimer: Timer | undefined;
  #leaseTimer: Timer | undefined;
  #truth: Follower | undefined;
  #unsubscribe: (() => void) | undefined;
  #stopped = false;

  /** Validates the options; nothing runs until `start()`. */
  constructor(ports: RouterPorts, options: RouterOptions) {
    const { requestsPerSecond, requestSeconds } = options;
    if (!(requestsPerSecond > 0 && Number.isFinite(requestsPerSecond))) throw new Error(`requestsPerSecond must be > 0, got ${requestsPerSecond}`);
    if (!(requestSeconds > 0 && Number.isFinite(requestSeconds))) throw new Error(`requestSeconds must be > 0, got ${requestSeconds}`);
    const jitterPercent = options.jitterPercent ?? 10;
    if (!(jitterPercent >= 0 && jitterPercent <= 100)) throw new Error(`jitterPercent must be within 0..100, got ${jitterPercent}`);
    this.#ports = ports;
    this.#arrivalRng = ports.rng.fork("arrivals");
    this.#durationRng = ports.rng.fork("durations");
    this.#targetRng = ports.rng.fork("targets");
    this.#meanGapMs = 1000 / requestsPerSecond;
    this.#requestMs = Math.max(1, Math.round(requestSeconds * 1000));
    this.#jitterMs = Math.floor((this.#requestMs * jitterPercent) / 100);
    this.#maxInFlight = options.maxInFlight ?? 50_000;
    this.#ack = { maxAttempts: options.maxAckAttempts ?? 8, baseMs: options.ackRetryBaseMs ?? 100, maxMs: options.ackRetryMaxMs ?? 5_000 };
  }

  /**
   * Starts the Lease (DESIGN §3.1), the cache, the ground-truth watch and the arrivals (the first
   * one gap from now).
   */
  start(): void {
    this.#registerLease();
    this.#unsubscribe = this.#ports.cache.subscribe((event) => {
      this.#onCacheEvent(event);
    });
    this.#ports.cache.start();
    this.#truth = followStored(this.#ports.server, "Pod", {
      seen: (pod) => {
        this.#observeTruth(pod.metadata.uid ?? "", pod);
      },
      gone: (uid) => {
        this.#observeTruth(uid, undefined);
      },
      knownUids: () => this.#containers.keys(),
    });
    this.#scheduleArrival();
  }

  /** Stops arrivals, acks and watches; requests in flight are forgotten (neither ok nor cut). */
  stop(): void {
    this.#stopped = true;
    this.#arrivalTimer?.cancel();
    this.#leaseTimer?.cancel();
    this.#unsubscribe?.();
    this.#ports.cache.stop();
    this.#truth?.stop();
    for (const load of this.#loads.values()) for (const request of load.requests) request.timer.cancel();
    for (const ack of this.#acks.values()) ack.timer?.cancel();
  }

  /** The report's `metrics.requests`: counts so far, overall and by role. */
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
    return { ...total, inFlight: this.#inFlight, byRole };
  }

  /** Requests in flight by pod name (pods with none are absent). */
  inFlightByPod(): Record<string, number> {
    const loads = [...this.#loads.values()].sort((a, b) => compareStrings(a.name, b.name));
    return Object.fromEntries(loads.map((load) => [load.name, load.requests.size]));
  }

  /** Calls `listener` after each router event, synchronously. Returns the unsubscribe function. */
  subscribe(listener: (event: RouterEvent) => void): () => void {
    return this.#subscribers.add(listener);
  }

  // -------------------------------------------------------------------------------------------
  // What the router believes: its cache

  #onCacheEvent(event: WatchEvent): void {
    if (event.object.kind === "ModelServing") this.#onModelServing(event);
    else if (event.object.kind === "Pod") this.#onPod(event);
  }

  #onModelServing(event: WatchEvent): void {
    const { namespace = "", name, uid = "" } = event.object.metadata;
    const key = `${namespace}/${name}`;
    if (event.type === "DELETED") {
      this.#targets.delete(key);
      this.#live.delete(uid);
      return;
    }
    const role = targetRole(roleNames(event.object));
    this.#targets.set(key, { key, uid, role: role ?? "", pool: role === undefined ? undefined : `${key}/${role}` });
    this.#markLive();
  }

  #onPod(event: WatchEvent): void {
    const uid = event.object.metadata.uid ?? "";
    const view = event.type === "DELETED" ? undefined : entryViewOf(event.object);
    if (view === undefined) {
      this.#entries.delete(uid);
      this.#acks.get(uid)?.timer?.cancel();
      this.#acks.delete(uid);
      return;
    }
    this.#entries.set(uid, view);
    const ack = this.#acks.get(uid);
    if (ack !== undefined && ack.draining !== view.draining) {
      ack.timer?.cancel();
      this.#acks.delete(uid);
    }
    if (view.candidate) this.#markLive();
    this.#maybeAck(uid);
  }

  /** Marks live every ModelServing whose target pool has a candidate now. */
  #markLive(): void {
    for (const target of this.#targets.values()) {
      if (this.#live.has(target.uid) || target.pool === undefined) continue;
      if (this.#candidates(target.pool).length > 0) this.#live.add(target.uid);
    }
  }

  #candidates(pool: string): EntryView[] {
    return [...this.#entries.values()].filter((view) => view.pool === pool && view.candidate);
  }

  // -------------------------------------------------------------------------------------------
  // Traffic

  #scheduleArrival(): void {
    if (this.#stopped) return;
    this.#arrivalTimer = this.#ports.clock.setTimer(exponentialGapMs(this.#arrivalRng, this.#meanGapMs), () => {
      this.#arrive();
      this.#scheduleArrival();
    });
  }

  /** One arrival: to a live ModelServing's target role, or nowhere when none is live (not counted). */
  #arrive(): void {
    const live = [...this.#targets.values()].filter((target) => this.#live.has(target.uid)).sort((a, b) => compareStrings(a.key, b.key));
    if (live.length === 0) return;
    const target = live.length === 1 ? live[0] : this.#targetRng.pick(live);
    if (target === undefined) return;
    const durationMs = this.#requestMs + this.#durationRng.int(0, this.#jitterMs + 1);
    const chosen = this.#pick(target.pool);
    if (chosen === undefined || this.#inFlight >= this.#maxInFlight) {
      this.#count(target.role, "failed");
      this.#emit({ type: "RequestFailed", modelServing: target.key, role: target.role, ...(chosen === undefined ? {} : { pod: chosen.name }) });
      return;
    }
    this.#run(target.key, chosen, durationMs);
  }

  /** The candidate with the fewest requests in flight; ties go to the first name. */
  #pick(pool: string | undefined): EntryView | undefined {
    if (pool === undefined) return undefined;
    let best: EntryView | undefined;
    let bestLoad = Infinity;
    for (const view of this.#candidates(pool)) {
      const load = this.#loads.get(view.uid)?.requests.size ?? 0;
      if (load < bestLoad || (load === bestLoad && best !== undefined && view.name < best.name)) {
        best = view;
        bestLoad = load;
      }
    }
    return best;
  }

  /** Starts a request on `view`'s pod, or fails it when the pod is not actually serving. */
  #run(modelServing: string, view: EntryView, durationMs: number): void {
    const signature = this.#signatureNow(view.uid);
    if (signature === undefined) {
      this.#count(view.role, "failed");
      this.#emit({ type: "RequestFailed", modelServing, role: view.role, pod: view.name });
      return;
    }
    // Loads follow `#containers` (a change cuts at once), so an existing load has `signature`.
    const load = this.#loads.get(view.uid);
    const requests = load?.requests ?? new Set<InFlightRequest>();
    if (load === undefined) this.#loads.set(view.uid, { uid: view.uid, name: view.name, signature, requests });
    const request: InFlightRequest = {
      podUid: view.uid,
      modelServing,
      role: view.role,
      timer: this.#ports.clock.setTimer(durationMs, () => {
        this.#end(request);
      }),
    };
    requests.add(request);
    this.#inFlight++;
    this.#count(view.role, "total");
    this.#emit({ type: "RequestStarted", modelServing, role: view.role, pod: view.name });
  }

  /** A request's time is up: ok if its containers ran throughout, else cut. */
  #end(request: InFlightRequest): void {
    const load = this.#loads.get(request.podUid);
    if (load === undefined) return;
    const podName = load.name;
    const intact = this.#signatureNow(load.uid) === load.signature;
    if (!intact) {
      this.#cutAll(request.podUid);
      return;
    }
    this.#forget(request, load);
    this.#count(request.role, "ok");
    this.#emit({ type: "RequestOk", modelServing: request.modelServing, role: request.role, pod: podName });
    this.#maybeAck(request.podUid);
  }

  /** Every request on the pod is cut (its containers stopped or it went away). */
  #cutAll(podUid: string): void {
    const load = this.#loads.get(podUid);
    if (load === undefined) return;
    for (const request of [...load.requests]) {
      request.timer.cancel();
      this.#forget(request, load);
      this.#count(request.role, "cut");
      this.#emit({ type: "RequestCut", modelServing: request.modelServing, role: request.role, pod: load.name });
    }
    this.#maybeAck(podUid);
  }

  #forget(request: InFlightRequest, load: PodLoad): void {
    load.requests.delete(request);
    this.#inFlight--;
    if (load.requests.size === 0) this.#loads.delete(request.podUid);
  }

  #count(role: string, outcome: keyof RequestCounts): void {
    let counts = this.#counts.get(role);
    if (counts === undefined) {
      counts = { total: 0, ok: 0, failed: 0, cut: 0 };
      this.#counts.set(role, counts);
    }
    counts[outcome]++;
    if (outcome === "failed") counts.total++;
  }

  #emit(event: Omit<RouterEvent, "atMs">): void {
    const full: RouterEvent = { atMs: this.#ports.clock.nowMs(), ...event };
    // Shared by every listener, so frozen.
    this.#subscribers.notify(Object.freeze({ ...full }));
  }

  // -------------------------------------------------------------------------------------------
  // What happened: ground truth

  /** Records pod `uid` as `pod` now (undefined: gone) and cuts its requests if their containers changed. */
  #observeTruth(uid: string, pod: KubeObject | undefined): void {
    if (pod === undefined) this.#containers.delete(uid);
    else this.#containers.set(uid, { node: stringOrUndefined(pod.spec?.["nodeName"]), signature: servingSignature(pod) });
    const load = this.#loads.get(uid);
    if (load !== undefined && this.#signatureNow(uid) !== load.signature) this.#cutAll(uid);
  }

  /**
   * What the pod's containers are running now: `servingSignature` as last written, or undefined
   * when the pod is gone or its node has crashed (which the API server learns only later).
   */
  #signatureNow(uid: string): string | undefined {
    const known = this.#containers.get(uid);
    if (known === undefined || (known.node !== undefined && this.#ports.isNodeDown(known.node))) return undefined;
    return known.signature;
  }

  // -------------------------------------------------------------------------------------------
  // Drain handshake (DESIGN §3, router side)

  /**
   * Acks the drain of entry pod `uid` when the cache shows it draining and not yet drained, not
   * terminating, and no request of ours is left on it (the engine's running + waiting count is
   * this same count). Once per drain; a failed write is retried with backoff.
   */
  /**
   * Creates the router's Lease (scope `*`, the default duration) and renews it every third of its
   * duration on virtual time, so the controller waits for this router's confirmations. A failed
   * write is tried again at the next renewal, well within the duration.
   */
  #registerLease(): void {
    const clock = this.#ports.epochClock;
    if (clock === undefined) return;
    let created = false;
    const ref = { kind: "Lease" as const, namespace: SIM_ROUTER_LEASE_NAMESPACE, name: SIM_ROUTER_ID };
    const write = (): void => {
      const nowMs = clock.nowMs();
      // Created until a create succeeds (one may fail under injected API errors), renewed after.
      const request = created
        ? this.#ports.client.patch(ref, { spec: { renewTime: microTime(nowMs) } })
        : this.#ports.client.create(routerLeaseObject({ id: SIM_ROUTER_ID, namespace: SIM_ROUTER_LEASE_NAMESPACE, scope: { all: true }, leaseDurationSeconds: ROUTER_LEASE_DURATION_SECONDS, nowMs }));
      // AlreadyExists: a create that timed out went through after all.
      request.then(() => { created = true; }, (error: unknown) => { if (isApiError(error, "AlreadyExists")) created = true; });
      this.#leaseTimer = this.#ports.clock.setTimer((ROUTER_LEASE_DURATION_SECONDS * 1000) / 3, write);
    };
    write();
  }

  #maybeAck(uid: string): void {
    const view = this.#entries.get(uid);
    if (view?.draining === undefined || !this.#mayAck(view) || this.#acks.has(uid)) return;
    const state: AckState = { draining: view.draining, attempts: 0, timer: undefined };
    this.#acks.set(uid, state);
    this.#attemptAck(uid, state);
  }

  #mayAck(view: EntryView): boolean {
    return !this.#stopped && view.draining !== undefined && !view.drained && !view.terminating && !this.#loads.has(view.uid);
  }

  /** One write of the ack, if the cache still calls for it; otherwise the ack is dropped. */
  #attemptAck(uid: string, state: AckState): void {
    const view = this.#entries.get(uid);
    if (view === undefined || !this.#mayAck(view)) {
      this.#acks.delete(uid);
      return;
    }
    state.attempts++;
    void this.#writeAck(view, state);
  }

  /**
   * Merge-patches `drained.tandem.dev/sim-router: "true"` with the pod's uid as precondition. NotFound: the pod
   * is gone, stop. Conflict, ServerError, Timeout (the patch is idempotent): retry after a doubling
   * delay capped at `ackRetryMaxMs`, at most `maxAckAttempts` writes; after that the next change of
   * the pod in the cache starts over, and meanwhile the controller's drain timeout bounds the wait.
   */
  async #writeAck(view: EntryView, state: AckState): Promise<void> {
    const patch: JsonObject = { metadata: { uid: view.uid, annotations: { [drainedAnnotation(SIM_ROUTER_ID)]: "true" } } };
    try {
      await this.#ports.client.patch({ kind: "Pod", namespace: view.namespace, name: view.name }, patch);
      this.#emit({ type: "DrainAcked", role: view.role, pod: view.name });
    } catch (error) {
      if (!isApiError(error)) throw error;
      if (this.#acks.get(view.uid) !== state) return;
      if (!isApiError(error, "Conflict", "ServerError", "Timeout") || state.attempts >= this.#ack.maxAttempts) {
        this.#acks.delete(view.uid);
        return;
      }
      const delayMs = Math.min(this.#ack.maxMs, this.#ack.baseMs * 2 ** (state.attempts - 1));
      state.timer = this.#ports.clock.setTimer(delayMs, () => {
        state.timer = undefined;
        this.#attemptAck(view.uid, state);
      });
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Pure helpers

function stringOrUndefined(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

/** The role requests go to: the first whose name contains "decode", else the first. */
export function targetRole(roles: readonly string[]): string | undefined {
  return roles.find((role) => role.includes("decode")) ?? roles[0];
}

/** `spec.template.roles[].name` of a ModelServing, in spec order; malformed entries skipped. */
function roleNames(modelServing: KubeObject): string[] {
  const template = modelServing.spec?.["template"];
  const roles = isJsonObject(template) ? template["roles"] : undefined;
  if (!Array.isArray(roles)) return [];
  return roles.flatMap((role) => (isJsonObject(role) && typeof role["name"] === "string" ? [role["name"]] : []));
}

/** The router's view of an entry pod, or undefined for any other pod (workers never take requests). */
function entryViewOf(pod: KubeObject): EntryView | undefined {
  const labels = pod.metadata.labels ?? {};
  const modelServing = labels[LABEL_MODEL_SERVING];
  const role = labels[LABEL_ROLE];
  if (labels[LABEL_ENTRY] !== "true" || modelServing === undefined || role === undefined) return undefined;
  const namespace = pod.metadata.namespace ?? "";
  const draining = pod.metadata.annotations?.[ANNOTATION_DRAINING];
  const terminating = pod.metadata.deletionTimestamp !== undefined;
  return {
    uid: pod.metadata.uid ?? "",
    namespace,
    name: pod.metadata.name,
    pool: `${namespace}/${modelServing}/${role}`,
    role,
    candidate: isPodReady(pod) && draining === undefined && !terminating,
    draining,
    drained: pod.metadata.annotations?.[drainedAnnotation(SIM_ROUTER_ID)] === "true",
    terminating,
  };
}

/**
 * The containerIDs of the pod's containers when every one of them is running, else undefined. A
 * request survives while this stays the same: a crash, an in-place image change, a node restart
 * or the end of a graceful termination gives new IDs or none.
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
