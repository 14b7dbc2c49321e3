/**
 * The dashboard's HTTP server (node:http): the static page from `web/dashboard/` and a
 * Server-Sent Events stream of the dashboard's state at `/events`. Read-only: only GET is served.
 *
 * Stream contract: every event is `event: state`, `id: <seq>` and the whole state as JSON (the
 * page replaces what it shows; a full state is small next to a loopback link, and no client can
 * miss a delta). A client connecting with `Last-Event-ID` equal to the latest seq gets nothing
 * until the next change; any other client gets the latest state at once — so a reconnect always
 * starts from a full state. A comment line every `heartbeatMs` keeps idle connections (and
 * proxies) alive; `retry: 1000` tells the browser to reconnect after a second. At most
 * `maxClients` streams at once (503 beyond, saying so); a client that does not read is dropped
 * once `MAX_BUFFERED_BYTES` wait for it (it reconnects and gets a full state).
 */
import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";

/** Where the page lives: `web/dashboard/` at the package root (from src/dashboard or dist/dashboard). */
export const PAGE_DIR = join(import.meta.dirname, "../../web/dashboard");
const FILES: Readonly<Record<string, { file: string; type: string }>> = {
  "/": { file: "index.html", type: "text/html; charset=utf-8" },
  "/app.js": { file: "app.js", type: "text/javascript; charset=utf-8" },
  "/style.css": { file: "style.css", type: "text/css; charset=utf-8" },
};
export const DEFAULT_MAX_CLIENTS = 16;
export const DEFAULT_HEARTBEAT_MS = 15_000;
const MAX_BUFFERED_BYTES = 8 * 1024 * 1024;

export interface DashboardServerOptions {
  readonly host: string;
  /** 0 picks a free port. */
  readonly port: number;
  /** The flag the address came from, for errors (`--listen`). */
  readonly flag: string;
  readonly maxClients?: number;
  readonly heartbeatMs?: number;
}

export interface DashboardServer {
  /** `http://host:port` as bound. */
  readonly url: string;
  /** Sends `state` to every client now, and to every client that connects later. */
  publish(state: unknown): void;
  /** Streams open now. */
  clientCount(): number;
  /** Ends every stream (the clients reconnect); `close` does it too. */
  dropClients(): void;
  close(): Promise<void>;
}

/** The server cannot listen where it was told to; the message names the flag and what to do. */
export class ListenError extends Error {}

export async function startDashboardServer(options: DashboardServerOptions): Promise<DashboardServer> {
  const hub = new StreamHub(options.maxClients ?? DEFAULT_MAX_CLIENTS);
  const server = createServer((request, response) => {
    void handle(request, response, hub);
  });
  await listen(server, options);
  const heartbeat = setInterval(() => {
    hub.heartbeat();
  }, options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS);
  heartbeat.unref();
  const address = server.address() as AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    publish: (state) => {
      hub.publish(state);
    },
    clientCount: () => hub.size(),
    dropClients: () => {
      hub.dropAll();
    },
    close: async () => {
      clearInterval(heartbeat);
      hub.dropAll();
      const closed = new Promise((resolve) => server.close(resolve));
      server.closeAllConnections();
      await closed;
    },
  };
}

async function listen(server: Server, options: DashboardServerOptions): Promise<void> {
  const where = `${options.host.includes(":") ? `[${options.host}]` : options.host}:${options.port}`;
  await new Promise<void>((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) => {
      const why =
        error.code === "EADDRINUSE"
          ? "address already in use (another process listens there: stop it, or choose another port; port 0 picks a free one)"
          : error.code === "EADDRNOTAVAIL" || error.code === "ENOTFOUND"
            ? "no such local address (use 127.0.0.1, or an address of this machine)"
            : error.code === "EACCES"
              ? "permission denied (ports below 1024 need privileges: choose a higher one)"
              : (error.code ?? error.message);
      reject(new ListenError(`${options.flag} ${where}: cannot listen: ${why}`));
    });
    server.listen(options.port, options.host, resolve);
  });
}

async function handle(request: IncomingMessage, response: ServerResponse, hub: StreamHub): Promise<void> {
  const path = (request.url ?? "/").split("?")[0] ?? "/";
  if (request.method !== "GET" && request.method !== "HEAD") {
    response.writeHead(405, { "content-type": "text/plain", allow: "GET" }).end("read-only: only GET\n");
    return;
  }
  if (path === "/events") {
    hub.add(request, response);
    return;
  }
  const entry = FILES[path];
  if (entry === undefined) {
    response.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
    return;
  }
  try {
    const body = await readFile(join(PAGE_DIR, entry.file));
    response.writeHead(200, { "content-type": entry.type, "cache-control": "no-cache" }).end(body);
  } catch {
    response.writeHead(500, { "content-type": "text/plain" }).end(`cannot read ${entry.file}\n`);
  }
}

/** The open streams and the latest state. */
class StreamHub {
  readonly #clients = new Set<ServerResponse>();
  readonly #maxClients: number;
  #seq = 0;
  #latest: string | undefined;

  constructor(maxClients: number) {
    this.#maxClients = maxClients;
  }

  size(): number {
    return this.#clients.size;
  }

  add(request: IncomingMessage, response: ServerResponse): void {
    if (this.#clients.size >= this.#maxClients) {
      response
        .writeHead(503, { "content-type": "text/plain", "retry-after": "5" })
        .end(`too many dashboard clients (at most ${this.#maxClients}): close another tab\n`);
      return;
    }
    response.writeHead(200, {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      connection: "keep-alive",
    });
    response.write("retry: 1000\n\n");
    this.#clients.add(response);
    response.once("close", () => this.#clients.delete(response));
    const lastId = request.headers["last-event-id"];
    if (this.#latest !== undefined && lastId !== String(this.#seq)) this.#send(response, this.#latest);
  }

  publish(state: unknown): void {
    this.#seq += 1;
    this.#latest = `id: ${this.#seq}\nevent: state\ndata: ${JSON.stringify(state)}\n\n`;
    for (const client of this.#clients) this.#send(client, this.#latest);
  }

  heartbeat(): void {
    for (const client of this.#clients) this.#send(client, ": heartbeat\n\n");
  }

  dropAll(): void {
    for (const client of this.#clients) client.destroy();
    this.#clients.clear();
  }

  #send(client: ServerResponse, text: string): void {
    if (client.writableLength > MAX_BUFFERED_BYTES) {
      // It does not read: drop it rather than hold its backlog; it reconnects to a full state.
      client.destroy();
      this.#clients.delete(client);
      return;
    }
    client.write(text);
  }
}
