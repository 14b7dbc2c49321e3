/**
 * `tandem router [--kubeconfig F] [--namespace NS] [--listen 127.0.0.1:8000] [--metrics-addr A]
 * [--id ID] [--debug-headers] [--lease-namespace NS] [--lease-duration-seconds N] [--workers N|auto]`
 * (DESIGN §7):
 * the OpenAI-compatible router on a cluster (src/router/kube/run.ts) until SIGTERM or SIGINT,
 * then a graceful stop: not ready, no new connections, requests in flight finish for up to
 * SHUTDOWN_DEADLINE_MS, the Lease is deleted, exit 0.
 *
 * `--id` (default $POD_NAME, else the hostname) must be a DNS-1123 label: it names the replica's
 * Lease. The Lease lives in `--lease-namespace`, else $POD_NAMESPACE (the Deployment sets both
 * variables from the downward API), else the kubeconfig context's namespace, else "default".
 *
 * `--workers N` (default 1; `auto`: one per core this process may use) runs N worker processes
 * sharing the listen port under one primary (src/router/proxy/workers.ts); each worker is a
 * replica of its own for the drain handshake, `<id>-w<index>`, so `<id>-w<N-1>` must be a
 * DNS-1123 label too. SIGTERM to the primary stops every worker gracefully.
 *
 * A bad flag, an address it cannot bind, or no cluster configured is one line on stderr and exit 1.
 */
import { availableParallelism, hostname } from "node:os";
import type { Command } from "commander";
import { contextNamespace, loadKubeConfig } from "../kube/config.ts";
import type { pino } from "pino";
import { LineWriter } from "../kube/line-writer.ts";
import { createLogger } from "../kube/logger.ts";
import type { LogLevelName } from "../kube/logger.ts";
import { parseAddress, startHealthServer } from "../kube/server.ts";
import { ListenError, runRouter } from "../router/kube/run.ts";
import type { RouterRunOptions, RunningRouter } from "../router/kube/run.ts";
import { joinSupervisor, superviseWorkers, workerSlot } from "../router/proxy/workers.ts";
import { parseWorkerCount, workerReplicaId } from "../router/workers.ts";
import { errorText } from "./engine-mock.ts";

export interface RouterFlags {
  readonly kubeconfig?: string;
  readonly context?: string;
  readonly namespace?: string;
  readonly listen: string;
  readonly metricsAddr?: string;
  readonly id?: string;
  readonly debugHeaders?: boolean;
  readonly leaseNamespace?: string;
  readonly leaseDurationSeconds?: string;
  readonly workers?: string;
  readonly logLevel: string;
}

/**
 * Where the router's lines go (`fd`: stdout in production): gathered and written when 16 Ki
 * characters have gathered and at least every second (Envoy's access logs flush on the same
 * interval), so one access-log line per request is not one write per request, and never
 * blocking the event loop on a slow reader (`LineWriter`). What is left is written synchronously
 * when the process exits.
 */
export function accessLogDestination(fd: number): pino.DestinationStream {
  const writer = new LineWriter(fd);
  process.once("exit", () => {
    writer.flushSync();
  });
  return writer;
}

/** What the flags say, besides the cluster and the logger. */
export type RouterCliOptions = Omit<RouterRunOptions, "kubeConfig" | "send" | "logger" | "processOps"> & {
  readonly workers: number;
};

/** Requests still running this long after SIGTERM are cut (the Deployment grants 30 s). */
export const SHUTDOWN_DEADLINE_MS = 25_000;
const LOG_LEVELS: readonly string[] = ["debug", "info", "warn", "error"];
/** A DNS-1123 label: what a Kubernetes namespace name, and a router id, must be. */
export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** A Lease shorter than this could not be renewed every third of it over a slow API server. */
const MIN_LEASE_DURATION_SECONDS = 3;

/**
 * The run options the flags say (without the cluster and logger); throws naming the flag.
 * `contextNamespace`: the kubeconfig's namespace, the Lease's last resort.
 */
export function routerOptionsOf(
  flags: RouterFlags,
  env: NodeJS.ProcessEnv,
  contextNamespace = "default",
  cores = availableParallelism(),
): RouterCliOptions {
  parseAddress(flags.listen, "--listen");
  if (flags.metricsAddr !== undefined) parseAddress(flags.metricsAddr, "--metrics-addr");
  if (flags.namespace !== undefined && !DNS_LABEL.test(flags.namespace))
    throw new Error(`--namespace "${flags.namespace}" is not a namespace name (a DNS-1123 label)`);
  if (flags.id?.trim() === "") throw new Error("--id must not be empty");
  const id = flags.id ?? nonEmpty(env["POD_NAME"]) ?? hostname();
  if (!DNS_LABEL.test(id))
    throw new Error(
      `--id "${id}"${flags.id === undefined ? " (from $POD_NAME or the hostname)" : ""} is not a DNS-1123 label (lower-case letters, digits and '-', at most 63): it names the router's Lease`,
    );
  const workers = parseWorkerCount(flags.workers ?? "1", cores);
  const lastWorker = workerReplicaId(id, workers - 1);
  if (workers > 1 && !DNS_LABEL.test(lastWorker))
    throw new Error(
      `--id "${id}" is too long for --workers ${workers}: each worker is a replica named <id>-w<index>, and "${lastWorker}" is not a DNS-1123 label (at most 63 characters)`,
    );
  const leaseNamespace = flags.leaseNamespace ?? nonEmpty(env["POD_NAMESPACE"]) ?? contextNamespace;
  if (!DNS_LABEL.test(leaseNamespace))
    throw new Error(`--lease-namespace "${leaseNamespace}" is not a namespace name (a DNS-1123 label)`);
  if (!LOG_LEVELS.includes(flags.logLevel))
    throw new Error(`--log-level must be one of ${LOG_LEVELS.join(", ")}, got "${flags.logLevel}"`);
  return {
    namespace: flags.namespace,
    listen: flags.listen,
    metricsAddress: flags.metricsAddr,
    id,
    leaseNamespace,
    leaseDurationSeconds: leaseDurationOf(flags.leaseDurationSeconds),
    debugHeaders: flags.debugHeaders === true,
    workers,
  };
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === "" ? undefined : value;
}

function leaseDurationOf(flag: string | undefined): number | undefined {
  if (flag === undefined) return undefined;
  const seconds = Number(flag);
  if (!Number.isSafeInteger(seconds) || seconds < MIN_LEASE_DURATION_SECONDS)
    throw new Error(`--lease-duration-seconds must be an integer ≥ ${MIN_LEASE_DURATION_SECONDS}, got "${flag}"`);
  return seconds;
}

async function runFromFlags(flags: RouterFlags): Promise<number> {
  let options: RouterCliOptions;
  let kubeConfig: ReturnType<typeof loadKubeConfig>;
  try {
    kubeConfig = loadKubeConfig(flags.kubeconfig, flags.context);
    options = routerOptionsOf(flags, process.env, contextNamespace(kubeConfig));
  } catch (error) {
    process.stderr.write(`tandem router: ${errorText(error)}\n`);
    return 1;
  }
  return serveRouter({
    ...options,
    kubeConfig,
    logger: (routerId) =>
      createLogger(flags.logLevel as LogLevelName, accessLogDestination(1), {
        component: "tandem-router",
        router: routerId,
      }),
  });
}

export interface ServeRouterOptions extends Omit<RouterRunOptions, "logger" | "processOps"> {
  /** 1: the router in this process; more: a primary supervising that many workers (src/router/proxy/workers.ts). */
  readonly workers: number;
  /** The logger of the router replica `routerId` (the process's id, or a worker's). */
  readonly logger: (routerId: string) => RouterRunOptions["logger"];
}

/**
 * Runs the router as `tandem router` does until SIGTERM or SIGINT, then stops it gracefully;
 * resolves with the exit code. In this process with `workers` 1; else as the primary of that many
 * workers — and, in a worker the primary forked (which runs the same command again), as that
 * worker, replica `<id>-w<slot>`. `onStarted` gets the bound data-plane address once it serves.
 */
export function serveRouter(options: ServeRouterOptions, onStarted?: (address: string) => void): Promise<number> {
  const slot = workerSlot();
  if (slot !== undefined) return serveAsWorker(options, slot);
  return options.workers > 1 ? serveAsPrimary(options, onStarted) : serveAlone(options, onStarted);
}

async function serveAlone(options: ServeRouterOptions, onStarted?: (address: string) => void): Promise<number> {
  const logger = options.logger(options.id);
  const running = await startOrReport({ ...options, logger });
  if (running === undefined) return 1;
  logger.info(
    {
      listen: running.address,
      metricsAddress: running.metricsAddress ?? "",
      namespace: options.namespace ?? "(all)",
      lease: `${options.leaseNamespace}/${options.id}`,
    },
    "router started",
  );
  onStarted?.(running.address);
  const signal = await signalled();
  logger.info({ signal, deadlineMs: SHUTDOWN_DEADLINE_MS }, "stopping: not ready, finishing requests in flight");
  await running.shutdown(SHUTDOWN_DEADLINE_MS);
  logger.info({}, "router stopped");
  return 0;
}

/** Worker `slot`: a whole router, replica `<id>-w<slot>`, serving the process's /metrics and /readyz. */
async function serveAsWorker(options: ServeRouterOptions, slot: number): Promise<number> {
  const link = joinSupervisor(SHUTDOWN_DEADLINE_MS);
  const id = workerReplicaId(options.id, slot);
  const logger = options.logger(id);
  // The primary serves --metrics-addr for the whole process.
  const running = await startOrReport({
    ...options,
    id,
    metricsAddress: undefined,
    logger,
    processOps: (local) => link.join(local),
  });
  if (running === undefined) return 1;
  link.listening(running.address);
  const deadlineMs = await link.stopRequested;
  await running.shutdown(deadlineMs);
  logger.info({}, "router worker stopped");
  process.disconnect();
  return 0;
}

/** The primary of `--workers N`: supervises the workers, serves --metrics-addr, stops them all on a signal. */
async function serveAsPrimary(options: ServeRouterOptions, onStarted?: (address: string) => void): Promise<number> {
  const logger = options.logger(options.id);
  const supervisor = superviseWorkers({ workers: options.workers, logger });
  const address = await supervisor.started.catch(() => undefined);
  if (address === undefined) {
    await supervisor.shutdown(0);
    return 1;
  }
  const ops = { registry: supervisor.registry, ready: () => supervisor.ready() };
  const metricsAddress = options.metricsAddress;
  const health =
    metricsAddress === undefined
      ? undefined
      : await startHealthServer({ address: metricsAddress, ...ops }).catch((error: unknown) => {
          process.stderr.write(
            `tandem router: ${new ListenError("--metrics-addr", metricsAddress, error).message}: ${errorText(error)}\n`,
          );
          return null;
        });
  if (health === null) {
    await supervisor.shutdown(0);
    return 1;
  }
  logger.info(
    {
      listen: address,
      metricsAddress: health?.address ?? "",
      namespace: options.namespace ?? "(all)",
      workers: options.workers,
      leases: `${options.leaseNamespace}/${workerReplicaId(options.id, 0)}..${workerReplicaId(options.id, options.workers - 1)}`,
    },
    "router started",
  );
  onStarted?.(address);
  const signal = await signalled();
  logger.info(
    { signal, deadlineMs: SHUTDOWN_DEADLINE_MS },
    "stopping every worker: not ready, finishing requests in flight",
  );
  const clean = await supervisor.shutdown(SHUTDOWN_DEADLINE_MS);
  await health?.close();
  logger.info({ clean }, "router stopped");
  return clean ? 0 : 1;
}

/** `runRouter`, or undefined after one line on stderr saying why it could not start. */
async function startOrReport(options: RouterRunOptions): Promise<RunningRouter | undefined> {
  try {
    return await runRouter(options);
  } catch (error) {
    const text = error instanceof ListenError ? `${error.message}: ${errorText(error.cause)}` : errorText(error);
    process.stderr.write(`tandem router: ${text}\n`);
    return undefined;
  }
}

function signalled(): Promise<string> {
  return new Promise<string>((resolve) => {
    process.once("SIGTERM", () => {
      resolve("SIGTERM");
    });
    process.once("SIGINT", () => {
      resolve("SIGINT");
    });
  });
}

export function registerRouter(program: Command): void {
  program
    .command("router")
    .description("Run the OpenAI-compatible request router in front of ModelServing entry pods (DESIGN §7).")
    .option("--kubeconfig <file>", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
    .option("--context <name>", "kubeconfig context to use (default: its current context)")
    .option("--namespace <namespace>", "serve the ModelRoutes of this namespace only (default: all namespaces)")
    .option("--listen <host:port>", "serve the OpenAI API (and /healthz, /readyz, /metrics) here", "127.0.0.1:8000")
    .option("--metrics-addr <host:port>", "also serve /metrics, /healthz and /readyz here")
    .option(
      "--id <id>",
      "this replica's identity, a DNS-1123 label: its Lease's name, its drain confirmations' key (default: $POD_NAME, else the hostname)",
    )
    .option(
      "--lease-namespace <namespace>",
      "where this replica's Lease lives (default: $POD_NAMESPACE, else the kubeconfig's namespace)",
    )
    .option("--lease-duration-seconds <seconds>", "the Lease's leaseDurationSeconds; renewed every third of it", "15")
    .option(
      "--workers <n|auto>",
      'worker processes sharing the listen port, each a replica of its own (Lease and confirmations <id>-w<index>); "auto": one per core',
      "1",
    )
    .option("--debug-headers", "add x-tandem-endpoint/-prefill/-decode/-revision to answers")
    .option("--log-level <level>", "debug, info, warn or error", "info")
    .action(async (flags: RouterFlags) => {
      process.exitCode = await runFromFlags(flags);
      // Keep-alive sockets may hold the event loop for a while; the work is done.
      setTimeout(() => process.exit(), 2_000).unref();
    });
}
