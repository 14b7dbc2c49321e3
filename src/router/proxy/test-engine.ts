/**
 * A tiny fake engine for the data plane's tests, on node:http at 127.0.0.1 (port 0): it records
 * each request and hands it to the test, which answers it step by step (headers, SSE chunks, a
 * cut socket) and can wait for the router to close it. Test-only.
 */
import { createServer } from "node:http";
import type { IncomingHttpHeaders, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface Received {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: Record<string, unknown>;
  readonly res: ServerResponse;
  /** Resolves when the connection closes before the answer was complete (the router aborted it). */
  readonly aborted: Promise<void>;
}

/** How the engine answers; the default answers 200 with a small completion. */
export type Behaviour = (request: Received) => void;

export const answerJson =
  (status: number, body: unknown): Behaviour =>
  ({ res }) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };

export class FakeEngine {
  readonly requests: Received[] = [];
  behaviour: Behaviour = answerJson(200, {
    id: "cmpl-1",
    object: "text_completion",
    choices: [{ index: 0, text: "ok" }],
  });
  /** The Prometheus page `GET /metrics` serves; undefined answers 404. */
  metrics: string | undefined;
  metricsScrapes = 0;
  readonly #server: Server;
  readonly #waiting: ((request: Received) => void)[] = [];
  #port = 0;

  private constructor() {
    this.#server = createServer((req, res) => {
      if (req.method === "GET") {
        this.#serveGet(req.url ?? "", res);
        return;
      }
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", () => {
        const aborted = new Promise<void>((resolve) => {
          res.once("close", () => {
            if (!res.writableFinished) resolve();
          });
        });
        const received: Received = {
          path: req.url ?? "",
          headers: req.headers,
          body: JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>,
          res,
          aborted,
        };
        this.requests.push(received);
        this.behaviour(received);
        this.#waiting.shift()?.(received);
      });
    });
  }

  /** `/metrics` answers `metrics` (404 while undefined); `metricsScrapes` counts the GETs. */
  #serveGet(path: string, res: ServerResponse): void {
    if (path !== "/metrics" || this.metrics === undefined) {
      res.writeHead(404).end();
      return;
    }
    this.metricsScrapes++;
    res.writeHead(200, { "content-type": "text/plain; version=0.0.4" }).end(this.metrics);
  }

  static async start(): Promise<FakeEngine> {
    const engine = new FakeEngine();
    await new Promise<void>((resolve) => engine.#server.listen(0, "127.0.0.1", resolve));
    engine.#port = (engine.#server.address() as AddressInfo).port;
    return engine;
  }

  get port(): number {
    return this.#port;
  }

  /** The next request to arrive after this call. */
  next(): Promise<Received> {
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  async stop(): Promise<void> {
    const closed = new Promise((resolve) => this.#server.close(resolve));
    this.#server.closeAllConnections();
    await closed;
  }
}

/** A port on 127.0.0.1 nothing listens on: bound, then released. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
