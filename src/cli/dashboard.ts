/**
 * `tandem dashboard [--kubeconfig F] [--context C] [--namespace NS] [--listen 127.0.0.1:8090]
 * [--router-namespace NS] [--router-metrics URL]...`: the live dashboard (docs/design/dashboard.md)
 * of a real cluster, read-only, served on localhost until SIGINT/SIGTERM; request rates from the
 * router pods' metrics in `--router-namespace`, or from the `--router-metrics` URLs given. `openDashboard` is shared with `tandem demo --ui`, which serves
 * the same page over the embedded simulated cluster.
 */
import type { Command } from "commander";
import { quote } from "../api/problems.ts";
import { startKubeFeed } from "../dashboard/kube-feed.ts";
import { startDashboardServer } from "../dashboard/server.ts";
import type { DashboardServer } from "../dashboard/server.ts";
import type { Logger, LogFields } from "../engine/logger.ts";
import { loadKubeConfig } from "../kube/config.ts";
import { DEFAULT_NAMESPACE } from "../kube/install.ts";
import { clientNodeSend } from "../kube/transport.ts";
import { FlagError } from "./io.ts";
import { DNS_LABEL } from "./router.ts";

export const DEFAULT_LISTEN = "127.0.0.1:8090";

/** `host:port` of `--listen` (IPv6 in brackets; port 0 picks a free one). */
export function parseListen(value: string): { host: string; port: number } {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+):(\d{1,5})$/.exec(value);
  const port = Number(match?.[2]);
  if (match?.[1] === undefined || port > 65_535)
    throw new FlagError(
      "--listen",
      `must be host:port, like ${DEFAULT_LISTEN} (port 0: any free one), not ${quote(value)}`,
    );
  return { host: match[1].replace(/^\[|\]$/g, ""), port };
}

/** A `--router-metrics` URL: http(s), with a host; `/metrics` when it names no path. */
export function parseRouterMetricsUrl(value: string): string {
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (url === undefined || (url.protocol !== "http:" && url.protocol !== "https:") || url.hostname === "")
    throw new FlagError(
      "--router-metrics",
      `must be a router's metrics URL, like http://127.0.0.1:9090/metrics, not ${quote(value)}`,
    );
  if (url.pathname === "/") url.pathname = "/metrics";
  return url.href;
}

/** Starts the dashboard's server on `--listen` and says where it is. */
export async function openDashboard(listen: string, write: (text: string) => void): Promise<DashboardServer> {
  const { host, port } = parseListen(listen);
  const server = await startDashboardServer({ host, port, flag: "--listen" });
  write(`dashboard: ${server.url}\n`);
  return server;
}

/** Resolves on the first SIGINT or SIGTERM. */
export function untilSignal(): Promise<string> {
  return new Promise((resolve) => {
    const on = (signal: string) => (): void => {
      process.off("SIGINT", onInt);
      process.off("SIGTERM", onTerm);
      resolve(signal);
    };
    const onInt = on("SIGINT");
    const onTerm = on("SIGTERM");
    process.once("SIGINT", onInt);
    process.once("SIGTERM", onTerm);
  });
}

interface DashboardFlags {
  kubeconfig?: string;
  context?: string;
  namespace?: string;
  listen: string;
  routerNamespace: string;
  routerMetrics: string[];
}

async function runDashboard(flags: DashboardFlags, write: (text: string) => void): Promise<number> {
  parseListen(flags.listen);
  const routerMetrics = flags.routerMetrics.map(parseRouterMetricsUrl);
  if (!DNS_LABEL.test(flags.routerNamespace))
    throw new FlagError(
      "--router-namespace",
      `must be a namespace name (a DNS-1123 label: lower-case letters, digits and '-'), not ${quote(flags.routerNamespace)}`,
    );
  let kubeConfig: ReturnType<typeof loadKubeConfig>;
  let server: DashboardServer;
  try {
    kubeConfig = loadKubeConfig(flags.kubeconfig, flags.context);
    server = await openDashboard(flags.listen, write);
  } catch (error) {
    process.stderr.write(`tandem dashboard: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
  const namespace = flags.namespace;
  const context = kubeConfig.getCurrentContext();
  const feed = startKubeFeed({
    send: clientNodeSend(kubeConfig),
    namespace,
    routerNamespace: flags.routerNamespace,
    routerMetrics,
    title: `${context}${namespace === undefined ? "" : ` · ${namespace}`}`,
    publish: (state) => {
      server.publish(state);
    },
    logger: stderrLogger(),
    say: (line) => process.stderr.write(`tandem dashboard: ${line}\n`),
  });
  write(
    `reading ${namespace === undefined ? "every namespace" : `namespace ${namespace}`} of context ${context} (read-only); Ctrl-C to stop\n`,
  );
  await untilSignal();
  await feed.stop();
  await server.close();
  return 0;
}

export function registerDashboard(program: Command): void {
  program
    .command("dashboard")
    .description("Serve a live, read-only dashboard of the cluster's ModelServings on localhost (Server-Sent Events).")
    .option("--kubeconfig <file>", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
    .option("--context <name>", "kubeconfig context to use (default: its current context)")
    .option("-n, --namespace <namespace>", "show this namespace only (default: every namespace)")
    .option(
      "--listen <host:port>",
      "serve the page here (keep it on loopback: the page is not authenticated)",
      DEFAULT_LISTEN,
    )
    .option(
      "--router-namespace <namespace>",
      "where the router pods run: their /metrics give the requests per second",
      DEFAULT_NAMESPACE,
    )
    .option(
      "--router-metrics <url>",
      "read requests per second from this router metrics URL instead of the router pods (repeatable; for a dashboard outside the cluster)",
      (value: string, previous: string[]) => [...previous, value],
      [] as string[],
    )
    .action(async (flags: DashboardFlags) => {
      process.exitCode = await runDashboard(flags, (text) => process.stdout.write(text));
    });
}

/**
 * Warnings and errors of the cluster feed (a list or watch refused, a context that does not reach
 * a cluster) as one line each on stderr: without them a page stuck on "Starting" says nothing why.
 */
function stderrLogger(): Logger {
  const line = (fields: LogFields, message: string): void => {
    const details = Object.entries(fields)
      .map(([key, value]) => `${key}=${value}`)
      .join(" ");
    process.stderr.write(`tandem dashboard: ${message}${details === "" ? "" : ` (${details})`}\n`);
  };
  return { info: () => undefined, warn: line, error: line };
}
