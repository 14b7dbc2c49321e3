/**
 * `tandem controller [--kubeconfig FILE] [--namespace NS] [--leader-elect] [--metrics-addr ADDR]`:
 * runs the controller against a cluster (src/kube/run.ts) until SIGTERM/SIGINT (exit 0) or until
 * it loses its leader lease (exit 1, so the Deployment restarts it as a fresh candidate).
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { KubeConfig } from "@kubernetes/client-node";
import type { Command } from "commander";
import { quote } from "../api/problems.ts";
import { loadKubeConfig } from "../kube/config.ts";
import { DEFAULT_NAMESPACE, LEASE_NAME } from "../kube/install.ts";
import { LOG_LEVELS, createLogger } from "../kube/logger.ts";
import type { LogLevelName } from "../kube/logger.ts";
import { runController } from "../kube/run.ts";
import { parseAddress } from "../kube/server.ts";
import type { RunEnd, RunOptions } from "../kube/run.ts";
import { errorText } from "./engine-mock.ts";
import { FlagError } from "./io.ts";

export interface ControllerFlags {
  readonly kubeconfig?: string;
  readonly context?: string;
  readonly namespace?: string;
  readonly leaderElect?: boolean;
  readonly leaderElectNamespace?: string;
  readonly metricsAddr: string;
  readonly logLevel: string;
  readonly workers: string;
}

/** The exit code of a controller run that ended this way. */
export function exitCodeOf(end: RunEnd): number {
  return end === "lost-leadership" ? 1 : 0;
}

/**
 * RunOptions from flags and the environment (POD_NAME, POD_NAMESPACE name the leader identity and
 * Lease namespace). Throws a FlagError for a flag it cannot use.
 */
export function runOptionsOf(
  flags: ControllerFlags,
  env: NodeJS.ProcessEnv,
): Omit<RunOptions, "kubeConfig" | "logger"> {
  const workers = Number(flags.workers);
  if (!Number.isSafeInteger(workers) || workers < 1)
    throw new FlagError("--workers", `must be a positive integer, not ${quote(flags.workers)}`);
  if (!(LOG_LEVELS as readonly string[]).includes(flags.logLevel))
    throw new FlagError("--log-level", `must be one of ${LOG_LEVELS.join(", ")}, not ${quote(flags.logLevel)}`);
  try {
    parseAddress(flags.metricsAddr);
  } catch {
    throw new FlagError(
      "--metrics-addr",
      `must be host:port (IPv6 in brackets), such as 127.0.0.1:8080, not ${quote(flags.metricsAddr)}`,
    );
  }
  const identity = `${env["POD_NAME"] ?? hostname()}_${randomBytes(4).toString("hex")}`;
  const leaseNamespace = flags.leaderElectNamespace ?? env["POD_NAMESPACE"] ?? DEFAULT_NAMESPACE;
  return {
    namespace: flags.namespace,
    metricsAddress: flags.metricsAddr,
    leaderElection: flags.leaderElect === true ? { namespace: leaseNamespace, name: LEASE_NAME, identity } : undefined,
    controller: { workers },
  };
}

async function runFromFlags(flags: ControllerFlags): Promise<number> {
  const options = runOptionsOf(flags, process.env); // first: it checks the flags
  let kubeConfig: KubeConfig;
  try {
    kubeConfig = loadKubeConfig(flags.kubeconfig, flags.context);
  } catch (error) {
    process.stderr.write(`tandem controller: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
  const logger = createLogger(flags.logLevel as LogLevelName);
  let running: Awaited<ReturnType<typeof runController>>;
  try {
    running = await runController({ ...options, kubeConfig, logger });
  } catch (error) {
    // The health server is the one thing started before the controller returns: a bind error is its.
    const listening = (error as { syscall?: unknown }).syscall === "listen";
    process.stderr.write(
      `tandem controller: ${listening ? `cannot listen on ${flags.metricsAddr} (--metrics-addr): ` : ""}${errorText(error)}\n`,
    );
    return 1;
  }
  logger.info(
    { identity: running.identity, metricsAddress: running.metricsAddress ?? "", namespace: flags.namespace ?? "(all)" },
    "controller started",
  );
  const onSignal = (signal: string): void => {
    logger.info({ signal }, "stopping");
    void running.stop();
  };
  process.once("SIGTERM", onSignal);
  process.once("SIGINT", onSignal);
  const end = await running.done;
  await running.stop();
  process.off("SIGTERM", onSignal);
  process.off("SIGINT", onSignal);
  logger.info({ end }, "controller stopped");
  return exitCodeOf(end);
}

export function registerController(program: Command): void {
  program
    .command("controller")
    .description("Run the ModelServing controller against a Kubernetes cluster.")
    .option("--kubeconfig <file>", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
    .option("--context <name>", "kubeconfig context to use (default: its current context)")
    .option("--namespace <namespace>", "manage ModelServings in this namespace only (default: all namespaces)")
    .option("--leader-elect", "elect a leader among replicas on a Lease; only the leader reconciles")
    .option(
      "--leader-elect-namespace <namespace>",
      "namespace of the Lease (default: $POD_NAMESPACE, else tandem-system)",
    )
    .option("--metrics-addr <host:port>", "serve /metrics, /healthz and /readyz here", "127.0.0.1:8080")
    .option("--log-level <level>", "debug, info, warn or error", "info")
    .option("--workers <n>", "ModelServings reconciled at once", "2")
    .action(async (flags: ControllerFlags) => {
      process.exitCode = await runFromFlags(flags);
      // Keep-alive sockets may hold the event loop for a while; the work is done.
      setTimeout(() => process.exit(), 5_000).unref();
    });
}
