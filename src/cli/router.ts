/**
 * `tandem router [--kubeconfig F] [--namespace NS] [--listen 127.0.0.1:8000] [--metrics-addr A]
 * [--id ID] [--debug-headers] [--lease-namespace NS] [--lease-duration-seconds N]` (DESIGN §7):
 * the OpenAI-compatible router on a cluster (src/router/kube/run.ts) until SIGTERM or SIGINT,
 * then a graceful stop: not ready, no new connections, requests in flight finish for up to
 * SHUTDOWN_DEADLINE_MS, the Lease is deleted, exit 0.
 *
 * `--id` (default $POD_NAME, else the hostname) must be a DNS-1123 label: it names the replica's
 * Lease. The Lease lives in `--lease-namespace`, else $POD_NAMESPACE (the Deployment sets both
 * variables from the downward API), else the kubeconfig context's namespace, else "default".
 *
 * A bad flag, an address it cannot bind, or no cluster configured is one line on stderr and exit 1.
 */
import { hostname } from "node:os";
import type { Command } from "commander";
import { contextNamespace, loadKubeConfig } from "../kube/config.ts";
import { createLogger } from "../kube/logger.ts";
import type { LogLevelName } from "../kube/logger.ts";
import { parseAddress } from "../kube/server.ts";
import { ListenError, runRouter } from "../router/kube/run.ts";
import type { RouterRunOptions } from "../router/kube/run.ts";
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
  readonly logLevel: string;
}

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
): Omit<RouterRunOptions, "kubeConfig" | "send" | "logger"> {
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
  let options: ReturnType<typeof routerOptionsOf>;
  let kubeConfig: ReturnType<typeof loadKubeConfig>;
  try {
    kubeConfig = loadKubeConfig(flags.kubeconfig, flags.context);
    options = routerOptionsOf(flags, process.env, contextNamespace(kubeConfig));
  } catch (error) {
    process.stderr.write(`tandem router: ${errorText(error)}\n`);
    return 1;
  }
  const logger = createLogger(flags.logLevel as LogLevelName, undefined, {
    component: "tandem-router",
    router: options.id,
  });
  let running: Awaited<ReturnType<typeof runRouter>>;
  try {
    running = await runRouter({ ...options, kubeConfig, logger });
  } catch (error) {
    const text = error instanceof ListenError ? `${error.message}: ${errorText(error.cause)}` : errorText(error);
    process.stderr.write(`tandem router: ${text}\n`);
    return 1;
  }
  logger.info(
    {
      listen: running.address,
      metricsAddress: running.metricsAddress ?? "",
      namespace: flags.namespace ?? "(all)",
      lease: `${options.leaseNamespace}/${options.id}`,
    },
    "router started",
  );
  const signal = await new Promise<string>((resolve) => {
    process.once("SIGTERM", () => {
      resolve("SIGTERM");
    });
    process.once("SIGINT", () => {
      resolve("SIGINT");
    });
  });
  logger.info({ signal, deadlineMs: SHUTDOWN_DEADLINE_MS }, "stopping: not ready, finishing requests in flight");
  await running.shutdown(SHUTDOWN_DEADLINE_MS);
  logger.info({}, "router stopped");
  return 0;
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
    .option("--debug-headers", "add x-tandem-endpoint/-prefill/-decode/-revision to answers")
    .option("--log-level <level>", "debug, info, warn or error", "info")
    .action(async (flags: RouterFlags) => {
      process.exitCode = await runFromFlags(flags);
      // Keep-alive sockets may hold the event loop for a while; the work is done.
      setTimeout(() => process.exit(), 2_000).unref();
    });
}
