/**
 * Assembles `tandem router` on a cluster: transport (client-node, the router's own permission
 * list) → `KubeDiscovery` → `RequestRouter` with metrics and the access log, `RouteStatusSync`
 * writing route status, the replica's registration (its Lease, DESIGN §3.1), its drain
 * confirmations (DESIGN §3.4), and the operational endpoints. Used by the command and by the e2e
 * tests (in-process).
 *
 * Endpoints: the listen address serves the OpenAI paths and `/healthz`, `/readyz`, `/metrics`;
 * `metricsAddress`, when given, serves the last three too (src/kube/server.ts). Ready once every
 * cache has synced and the Lease is registered and not fenced, and no longer once shutting down;
 * completion requests are answered 503 with the reason while it does not route.
 *
 * Shutdown (`shutdown(deadlineMs)`): not ready and not routing at once, stop accepting
 * connections (idle keep-alive ones are closed), let the requests in flight finish up to the
 * deadline — the Lease is renewed and drains are confirmed meanwhile — then cut what is left,
 * stop confirming, delete the Lease, stop writing status and watching. Resolves when all of it is
 * done.
 */
import { randomInt } from "node:crypto";
import { createServer } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger, LogFields } from "../../engine/logger.ts";
import { WallClock } from "../../kube/clock.ts";
import type { KubeReaderOptions } from "../../kube/reader.ts";
import { ROUTER_PERMISSIONS } from "../../kube/resources.ts";
import { boundAddress, parseAddress, serveHealth, startHealthServer } from "../../kube/server.ts";
import type { HealthServer, HealthServerOptions } from "../../kube/server.ts";
import { KubeTransport, clientNodeSend } from "../../kube/transport.ts";
import type { Send } from "../../kube/transport.ts";
import { KubeWriter } from "../../kube/writer.ts";
import { parseRouterScope } from "../../api/router-lease.ts";
import { DrainConfirmer } from "../confirmer.ts";
import type { ConfirmerOptions } from "../confirmer.ts";
import { RouterRegistration } from "../registration.ts";
import { routesByModel } from "../route.ts";
import { routeEndpointCounts } from "../status.ts";
import { accessLog, createRouterMetrics } from "../proxy/metrics.ts";
import { allObservers } from "../proxy/observer.ts";
import type { RouterObserver } from "../proxy/observer.ts";
import { RequestRouter } from "../proxy/router.ts";
import type { LocalOps } from "../proxy/workers.ts";
import { KubeDiscovery } from "./discovery.ts";
import { RouteStatusSync } from "./status-sync.ts";

export interface RouterRunOptions {
  /** The cluster; or `send`, an HTTP exchange to the API server (tests). */
  readonly kubeConfig?: KubeConfig;
  readonly send?: Send;
  /** pino's `isLevelEnabled`, when there: the access log builds no info line that would be dropped. */
  readonly logger: Logger & {
    debug?(fields: LogFields, message: string): void;
    isLevelEnabled?(level: string): boolean;
  };
  /** Watch only this namespace; all namespaces when absent. */
  readonly namespace?: string | undefined;
  /** `host:port` of the data plane (port 0: any free port). */
  readonly listen: string;
  readonly metricsAddress?: string | undefined;
  /** `<router-id>` (DESIGN §3.1, §7 `--id`): its Lease's name, its confirmations' key, its name in logs. */
  readonly id: string;
  /** The namespace of this replica's Lease (its own). */
  readonly leaseNamespace: string;
  /** Default 15 (DESIGN §3.1). */
  readonly leaseDurationSeconds?: number | undefined;
  readonly debugHeaders?: boolean;
  readonly reflector?: KubeReaderOptions["reflector"];
  /** Coalescing delay of status writes (default 500 ms). */
  readonly statusDelayMs?: number;
  /**
   * In a worker of `tandem router --workers N`: given this worker's own registry and readiness,
   * the `/metrics` and `/readyz` its listener serves instead — the whole process's
   * (`WorkerLink.join`). Absent: its own.
   */
  readonly processOps?: (local: LocalOps) => Pick<HealthServerOptions, "registry" | "ready">;
}

export interface RunningRouter {
  /** The bound `host:port` of the data plane. */
  readonly address: string;
  readonly metricsAddress: string | undefined;
  readonly discovery: KubeDiscovery;
  isReady(): boolean;
  /** Graceful stop; requests still running after `deadlineMs` are cut. Idempotent. */
  shutdown(deadlineMs: number): Promise<void>;
}

const OPS_PATHS = new Set(["/healthz", "/readyz", "/metrics"]);

/** An address `runRouter` could not listen on, with the flag that named it; `cause` says why. */
export class ListenError extends Error {
  readonly flag: string;
  readonly address: string;

  constructor(flag: string, address: string, cause: unknown) {
    super(`cannot listen on ${address} (${flag})`, { cause });
    this.flag = flag;
    this.address = address;
  }
}

export async function runRouter(options: RouterRunOptions): Promise<RunningRouter> {
  const send = options.send ?? (options.kubeConfig === undefined ? undefined : clientNodeSend(options.kubeConfig));
  if (send === undefined) throw new Error("runRouter needs a kubeConfig or a send");
  const transport = new KubeTransport(send, { permissions: ROUTER_PERMISSIONS });
  const clock = new WallClock();
  const writer = new KubeWriter(transport);
  const { discovery, statusSync, registration } = clusterSide(options, { transport, writer, clock });
  let stopping = false;
  // The metrics read the router's in-flight counts, and the router reports to the metrics.
  const observers: RouterObserver[] = [accessLog(options.logger)];
  const router = new RequestRouter({
    discovery,
    rng: { int: (min, max) => randomInt(min, max) },
    debugHeaders: options.debugHeaders ?? false,
    observer: allObservers(observers),
    refusal: () => (stopping ? `router ${options.id} is shutting down` : registration.refusal()),
  });
  const metrics = createRouterMetrics({
    inFlight: router.inFlight,
    endpoints: () =>
      [...routesByModel(discovery.routes()).winners.values()].map((route) => ({
        route,
        roles: routeEndpointCounts(discovery.pods(route), route),
      })),
    leaseState: () => registration.state(),
  });
  observers.push(metrics);
  const confirmer = confirmerOf(router, {
    routerId: options.id,
    discovery,
    writer,
    clock,
    logger: options.logger,
    onConfirmed: () => {
      metrics.drainConfirmed();
    },
  });
  const ready = (): boolean => !stopping && discovery.hasSynced() && registration.refusal() === undefined;
  const local = { registry: metrics.registry, ready };
  const ops = options.processOps?.(local) ?? local;
  const { server, address, health } = await serve(router, ops, options);
  registration.start();
  discovery.start();
  statusSync.start();
  confirmer.start();
  const stop = async (deadlineMs: number): Promise<void> => {
    stopping = true;
    await drainServer(server, deadlineMs);
    await confirmer.stop();
    await registration.stop();
    await router.close();
    await statusSync.stop();
    await discovery.stop();
    await health?.close();
  };
  let done: Promise<void> | undefined;
  return {
    address,
    metricsAddress: health?.address,
    discovery,
    isReady: ready,
    shutdown: (deadlineMs) => (done ??= stop(deadlineMs)),
  };
}

/** The router's parts that talk to the API server: discovery, the ModelRoute status writer, the router's Lease. */
function clusterSide(
  options: RouterRunOptions,
  { transport, writer, clock }: { transport: KubeTransport; writer: KubeWriter; clock: WallClock },
) {
  const discovery = new KubeDiscovery({
    transport,
    clock,
    logger: options.logger,
    namespace: options.namespace,
    reflector: options.reflector,
  });
  const statusSync = new RouteStatusSync({
    discovery,
    writer,
    clock,
    logger: options.logger,
    ...(options.statusDelayMs === undefined ? {} : { delayMs: options.statusDelayMs }),
  });
  const registration = new RouterRegistration({
    id: options.id,
    namespace: options.leaseNamespace,
    scope: parseRouterScope(options.namespace ?? "*"),
    leaseDurationSeconds: options.leaseDurationSeconds,
    writer,
    clock,
    logger: options.logger,
  });
  return { discovery, statusSync, registration };
}

/**
 * The router's listener (requests and, on the same port, the health and metrics paths) and, with
 * `--metrics-addr`, a separate health server. A listen failure names its flag and closes what was opened.
 */
async function serve(
  router: RequestRouter,
  ops: Pick<HealthServerOptions, "registry" | "ready">,
  options: RouterRunOptions,
): Promise<{ server: Server; address: string; health: HealthServer | undefined }> {
  const server = createServer({ noDelay: true }, routerListener(router, ops));
  const address = await listen(server, options.listen).catch((error: unknown) => {
    throw new ListenError("--listen", options.listen, error);
  });
  const metricsAddress = options.metricsAddress;
  const health =
    metricsAddress === undefined
      ? undefined
      : await startHealthServer({ address: metricsAddress, ...ops }).catch(async (error: unknown) => {
          await router.close();
          await new Promise((resolve) => server.close(resolve));
          throw new ListenError("--metrics-addr", metricsAddress, error);
        });
  return { server, address, health };
}

/** The router's request listener: the OpenAI paths, and `/healthz`, `/readyz`, `/metrics` from `ops`. */
export function routerListener(
  router: Pick<RequestRouter, "handle">,
  ops: Pick<HealthServerOptions, "registry" | "ready">,
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    if (OPS_PATHS.has(path)) serveHealth(req, res, ops);
    else router.handle(req, res);
  };
}

/** The drain confirmer on the router's own in-flight counts and engine scraper. */
function confirmerOf(router: RequestRouter, options: Omit<ConfirmerOptions, "legs" | "engine">): DrainConfirmer {
  const engine = router.engineScraper;
  if (engine === undefined) throw new Error("the router's drain confirmation needs its default engine scraper");
  return new DrainConfirmer({ ...options, legs: router.inFlight, engine });
}

async function listen(server: Server, address: string): Promise<string> {
  const { host, port } = parseAddress(address, "--listen");
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      resolve();
    });
  });
  return boundAddress(server, host);
}

/** Stops accepting, waits for open requests up to `deadlineMs`, then cuts the rest. */
export async function drainServer(server: Server, deadlineMs: number): Promise<void> {
  const closed = new Promise<void>((resolve) => {
    server.close(() => {
      resolve();
    });
  });
  server.closeIdleConnections();
  // Keep-alive connections that finish a request while draining are closed once idle.
  const idle = setInterval(() => {
    server.closeIdleConnections();
  }, 100);
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, deadlineMs);
  });
  await Promise.race([closed, deadline]);
  clearInterval(idle);
  clearTimeout(timer);
  server.closeAllConnections();
  await closed;
}
