/**
 * The controller's HTTP endpoints on `--metrics-addr`: `/metrics` (Prometheus text format),
 * `/healthz` (the process serves requests), `/readyz` (200 when `ready()` says so, else 503).
 * Anything else is 404. Only GET is served.
 */
import { createServer } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Registry } from "prom-client";

export interface HealthServerOptions {
  /** `host:port`; port 0 picks a free port (tests). */
  readonly address: string;
  /** The page `/metrics` serves (a prom-client Registry, or the aggregate of a router's workers). */
  readonly registry: Pick<Registry, "metrics" | "contentType">;
  /**
   * Readiness: the caches have synced (or the process is a standby waiting for leadership); a
   * promise when it must be asked of other processes (a router's workers).
   */
  readonly ready: () => boolean | Promise<boolean>;
}

export interface HealthServer {
  /** The bound `host:port`. */
  readonly address: string;
  close(): Promise<void>;
}

/** Parses `host:port` (IPv6 in brackets); throws on anything else, naming `flag`. */
export function parseAddress(address: string, flag = "--metrics-addr"): { host: string; port: number } {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^:]+):(\d{1,5})$/.exec(address);
  const port = Number(match?.[2]);
  if (match?.[1] === undefined || port > 65_535) throw new Error(`${flag} "${address}" is not host:port`);
  return { host: match[1].replace(/^\[|\]$/g, ""), port };
}

export async function startHealthServer(options: HealthServerOptions): Promise<HealthServer> {
  const { host, port } = parseAddress(options.address);
  const server = createServer((request, response) => {
    serveHealth(request, response, options);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      resolve();
    });
  });
  return { address: boundAddress(server, host), close: () => closeServer(server) };
}

/** Answers one request of `/healthz`, `/readyz` or `/metrics` (anything else: 404; not GET: 405). */
export function serveHealth(
  request: IncomingMessage,
  response: ServerResponse,
  options: Pick<HealthServerOptions, "registry" | "ready">,
): void {
  const path = (request.url ?? "/").split("?")[0];
  const reply = (status: number, contentType: string, body: string): void => {
    response.writeHead(status, { "content-type": contentType }).end(body);
  };
  if (request.method !== "GET") reply(405, "text/plain", "method not allowed\n");
  else if (path === "/healthz") reply(200, "text/plain", "ok\n");
  else if (path === "/readyz") serveReady(options.ready, reply);
  else if (path !== "/metrics") reply(404, "text/plain", "not found\n");
  else serveMetrics(options.registry, reply);
}

function serveReady(
  ready: HealthServerOptions["ready"],
  reply: (status: number, contentType: string, body: string) => void,
): void {
  const answer = (isReady: boolean): void => {
    reply(isReady ? 200 : 503, "text/plain", isReady ? "ok\n" : "not ready\n");
  };
  const now = ready();
  if (typeof now === "boolean") answer(now);
  else
    now.then(answer, () => {
      answer(false);
    });
}

function serveMetrics(
  registry: HealthServerOptions["registry"],
  reply: (status: number, contentType: string, body: string) => void,
): void {
  registry.metrics().then(
    (text) => {
      reply(200, registry.contentType, text);
    },
    (error: unknown) => {
      reply(500, "text/plain", `${String(error)}\n`);
    },
  );
}

/** The `host:port` `server` is bound to (IPv6 hosts in brackets). */
export function boundAddress(server: Server, host: string): string {
  const bound = server.address();
  const port = bound !== null && typeof bound === "object" ? bound.port : 0;
  return `${host.includes(":") ? `[${host}]` : host}:${port}`;
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => {
      resolve();
    });
    server.closeAllConnections();
  });
}
