/**
 * The router's Prometheus metrics (prom-client, a private registry, as the controller's
 * src/kube/metrics.ts) and its access log:
 * - `tandem_router_requests_total{model,role,code}`: completion requests by the HTTP status sent
 *   (code "0": the client left before any) and the role that answered ("" when none did);
 * - `tandem_router_requests_cut_total{model,role,code}`: those of them whose response ended before
 *   it was complete (the client left, or the engine's stream broke) — the dashboard tells ok from
 *   cut with it;
 * - `tandem_router_request_duration_seconds{model}` and `tandem_router_time_to_first_token_seconds{model}`
 *   (histograms): arrival to the end of the response, and to its first body byte;
 * - `tandem_router_inflight_requests{endpoint}` (gauge): this replica's legs in flight per endpoint;
 * - `tandem_router_upstream_errors_total{model,reason}`: failed legs by reason (`LegFailure.reason`);
 * - `tandem_router_retries_total{model}`: further attempts;
 * - `tandem_router_endpoints{model,role,state}` (gauge): entry pods ready or draining per route role;
 * - `tandem_router_drain_confirmations_total`: drain confirmations this replica wrote (DESIGN §3.4);
 * - `tandem_router_lease_state{state}` (gauge): 1 for the state of this replica's Lease
 *   (`unregistered`, `registered`, `fenced`, `stopped`: DESIGN §3.1), 0 for the others;
 *   with `--workers N`, each worker being a replica, the number of workers whose Lease is in it;
 * - Node process metrics (`process_*`, `nodejs_*`).
 * The gauges are read when scraped, from the in-flight counts and the discovery caches. With
 * `--workers N` the process's page sums the workers' (src/router/proxy/workers.ts): counters,
 * histograms and in-flight legs add up; `tandem_router_endpoints` is their maximum.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { LogFields } from "../../engine/logger.ts";
import type { RoleEndpoints } from "../../api/route.ts";
import type { LeaseState } from "../registration.ts";
import type { RouterRoute } from "../route.ts";
import type { InFlight } from "./inflight.ts";
import type { RequestRecord, RouterObserver } from "./observer.ts";
import { getOrCreate } from "../../core/maps.ts";

/** Seconds; LLM answers span milliseconds (a cached prefill) to minutes (a long generation). */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

export interface RouterMetricsSources {
  readonly inFlight: Pick<InFlight, "snapshot">;
  /** The served routes with their endpoint counts per role (as the route status states them). */
  readonly endpoints: () => readonly { readonly route: RouterRoute; readonly roles: readonly RoleEndpoints[] }[];
  /** The state of this replica's Lease; no gauge without it. */
  readonly leaseState?: () => LeaseState;
}

const LEASE_STATES: readonly LeaseState[] = ["unregistered", "registered", "fenced", "stopped"];

export interface RouterMetrics extends RouterObserver {
  readonly registry: Registry;
  /** Counts one drain confirmation written. */
  drainConfirmed(): void;
}

export function createRouterMetrics(sources: RouterMetricsSources): RouterMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const requestSeries = requestCounters(registers);
  const duration = new Histogram({
    name: "tandem_router_request_duration_seconds",
    help: "Time from a request's arrival to the end of its response.",
    labelNames: ["model"],
    buckets: DURATION_BUCKETS,
    registers,
  });
  const ttft = new Histogram({
    name: "tandem_router_time_to_first_token_seconds",
    help: "Time from a request's arrival to the first byte of its answer's body.",
    labelNames: ["model"],
    buckets: DURATION_BUCKETS,
    registers,
  });
  const errors = new Counter({
    name: "tandem_router_upstream_errors_total",
    help: "Failed legs to engines, by reason.",
    labelNames: ["model", "reason"],
    registers,
  });
  const retries = new Counter({
    name: "tandem_router_retries_total",
    help: "Requests tried again on another endpoint or pair.",
    labelNames: ["model"],
    registers,
  });
  const confirmations = new Counter({
    name: "tandem_router_drain_confirmations_total",
    help: "Drain confirmations (drained.tandem.dev/<router-id>) this replica wrote.",
    registers,
  });
  registerStateGauges(registers, sources);
  const durationSeries = memoize((model: string) => duration.labels({ model }));
  const ttftSeries = memoize((model: string) => ttft.labels({ model }));
  return {
    registry,
    drainConfirmed: () => {
      confirmations.inc();
    },
    requestDone: (record) => {
      const series = requestSeries(`${record.model}\n${record.role}\n${record.status}`);
      series.requests.inc();
      if (!record.complete) series.cut.inc();
      durationSeries(record.model).observe(record.durationMs / 1000);
      if (record.ttftMs !== undefined) ttftSeries(record.model).observe(record.ttftMs / 1000);
    },
    legFailed: (route, _endpoint, failure) => {
      errors.inc({ model: route.model, reason: failure.reason });
    },
    retried: (route) => {
      retries.inc({ model: route.model });
    },
  };
}

/**
 * The requests and cut-requests counters, and each `model\nrole\ncode` key's pair of series, looked
 * up once: prom-client hashes a label object on every call otherwise. The label values are
 * bounded (served models, roles, HTTP codes).
 */
function requestCounters(
  registers: Registry[],
): (key: string) => { requests: Counter.Internal; cut: Counter.Internal } {
  const requests = new Counter({
    name: "tandem_router_requests_total",
    help: "Completion requests by model, answering role and HTTP status.",
    labelNames: ["model", "role", "code"],
    registers,
  });
  const cut = new Counter({
    name: "tandem_router_requests_cut_total",
    help: "Completion requests whose response ended before it was complete (also counted in tandem_router_requests_total).",
    labelNames: ["model", "role", "code"],
    registers,
  });
  return memoize((key: string) => {
    const [model = "", role = "", code = ""] = key.split("\n");
    const labels = { model, role, code };
    return { requests: requests.labels(labels), cut: cut.labels(labels) };
  });
}

function memoize<T>(make: (key: string) => T): (key: string) => T {
  const made = new Map<string, T>();
  return (key) => getOrCreate(made, key, () => make(key));
}

/** The gauges read at scrape time from `sources`: in-flight legs, endpoints per route and role, the Lease state. */
function registerStateGauges(registers: Registry[], sources: RouterMetricsSources): void {
  new Gauge({
    name: "tandem_router_inflight_requests",
    help: "This router's legs in flight per endpoint (namespace/pod).",
    labelNames: ["endpoint"],
    registers,
    collect() {
      this.reset();
      for (const [endpoint, count] of sources.inFlight.snapshot()) this.set({ endpoint }, count);
    },
  });
  new Gauge({
    name: "tandem_router_endpoints",
    help: "Entry pods of each route's roles, ready or draining.",
    labelNames: ["model", "role", "state"],
    registers,
    // Every worker of `--workers N` counts the same pods: the process's figure is one worker's, not the sum.
    aggregator: "max",
    collect() {
      this.reset();
      for (const { route, roles } of sources.endpoints()) {
        for (const role of roles) {
          this.set({ model: route.model, role: role.role, state: "ready" }, role.ready);
          this.set({ model: route.model, role: role.role, state: "draining" }, role.draining);
        }
      }
    },
  });
  new Gauge({
    name: "tandem_router_lease_state",
    help: "1 for the state of this replica's router Lease (unregistered, registered, fenced, stopped), 0 for the others.",
    labelNames: ["state"],
    registers,
    collect() {
      const current = sources.leaseState?.();
      if (current === undefined) return;
      for (const state of LEASE_STATES) this.set({ state }, state === current ? 1 : 0);
    },
  });
}

/** The access log's fields of one request (one line each, message "request"). */
export function accessLogFields(record: RequestRecord): LogFields {
  const fields: Record<string, string | number | boolean> = {
    requestId: record.id,
    path: record.path,
    model: record.model,
    status: record.status,
    endpoints: record.endpoints.join(","),
    attempts: record.attempts,
    durationMs: Math.round(record.durationMs),
    complete: record.complete,
  };
  if (record.role !== "") fields["role"] = record.role;
  if (record.revision !== "") fields["revision"] = record.revision;
  if (record.ttftMs !== undefined) fields["ttftMs"] = Math.round(record.ttftMs);
  if (record.promptTokens !== undefined) fields["promptTokens"] = record.promptTokens;
  if (record.completionTokens !== undefined) fields["completionTokens"] = record.completionTokens;
  return fields;
}

/**
 * An observer writing one access-log line per request (info; a 5xx or a cut response: warn). A
 * logger that says info is off (pino's `isLevelEnabled`, from `--log-level warn`) gets only the
 * warnings, and the info lines are not even built: at one connection they are about a quarter of
 * the router's CPU per request (docs/design/router.md).
 */
export function accessLog(logger: {
  info(fields: LogFields, message: string): void;
  warn(fields: LogFields, message: string): void;
  isLevelEnabled?(level: string): boolean;
}): RouterObserver {
  return {
    requestDone: (record) => {
      const failedRequest = record.status >= 500 || !record.complete;
      if (failedRequest) logger.warn(accessLogFields(record), "request");
      else if (logger.isLevelEnabled?.("info") !== false) logger.info(accessLogFields(record), "request");
    },
    legFailed: () => undefined,
    retried: () => undefined,
  };
}
