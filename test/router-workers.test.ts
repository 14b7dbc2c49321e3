/**
 * `tandem router --workers 2` on real HTTP on 127.0.0.1: the router process of the benchmark
 * (bench/router-server.ts: `serveRouter`, the command's own code, over a one-pod stand-in API
 * server) in front of a fake engine in this process. Which worker served a request is read from
 * the access log (its `router` field, `bench-w<index>`), lines on the child's stdout. No sleeps:
 * every step waits for a log line, an answer or the exit, each bounded by WAIT_MS.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { request } from "node:http";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { FakeEngine } from "../src/router/proxy/test-engine.ts";
import type { Received } from "../src/router/proxy/test-engine.ts";

const SERVER = join(import.meta.dirname, "../bench/router-server.ts");
const WAIT_MS = 30_000;
/** Requests sent to reach a given worker; round-robin hands fresh connections to each in turn. */
const MAX_TRIES = 20;

type Line = Record<string, unknown>;

/** The router process: its log lines as they come, and waits on them. */
class RouterProcess {
  readonly lines: Line[] = [];
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  readonly port: Promise<number>;
  readonly #waiters = new Set<() => void>();

  constructor(enginePort: number) {
    this.child = spawn(process.execPath, [SERVER, String(enginePort), "--workers", "2"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let pending = "";
    this.child.stdout?.on("data", (chunk: Buffer) => {
      pending += chunk.toString("utf8");
      const complete = pending.split("\n");
      pending = complete.pop() ?? "";
      for (const text of complete) if (text.startsWith("{")) this.lines.push(JSON.parse(text) as Line);
      for (const wake of this.#waiters) wake();
    });
    this.port = new Promise((resolve, reject) => {
      let err = "";
      this.child.stderr?.on("data", (chunk: Buffer) => {
        err += chunk.toString("utf8");
        const match = /listening on (\d+)/.exec(err);
        if (match !== null) resolve(Number(match[1]));
      });
      this.child.once("exit", () => {
        reject(new Error(`the router exited before it listened:\n${err}`));
      });
    });
    this.exited = new Promise((resolve) => this.child.once("exit", resolve));
  }

  /** The first log line from index `from` on that `matches`. */
  line(what: string, matches: (line: Line) => boolean, from = 0): Promise<Line & { index: number }> {
    return new Promise((resolve, reject) => {
      const look = (): void => {
        const index = this.lines.findIndex((line, at) => at >= from && matches(line));
        const found = this.lines[index];
        if (found === undefined) return;
        clearTimeout(timer);
        this.#waiters.delete(look);
        resolve({ ...found, index });
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(look);
        reject(new Error(`no log line ${what} within ${WAIT_MS} ms; lines:\n${JSON.stringify(this.lines, null, 1)}`));
      }, WAIT_MS);
      this.#waiters.add(look);
      look();
    });
  }

  /** The router id (`bench-w<i>`) whose access log has request `id`. */
  async servedBy(id: string): Promise<string> {
    const line = await this.line(`for request ${id}`, (each) => each["msg"] === "request" && each["requestId"] === id);
    return String(line["router"]);
  }
}

/** One request on a connection of its own (so round-robin gives it the next worker). */
function send(
  port: number,
  method: string,
  path: string,
  init: { id?: string; body?: unknown } = {},
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        method,
        path,
        agent: false,
        headers: { "content-type": "application/json", ...(init.id === undefined ? {} : { "x-request-id": init.id }) },
      },
      (res) => {
        let text = "";
        res.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")));
        res.on("end", () => {
          resolve({ status: res.statusCode ?? 0, text });
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(init.body === undefined ? undefined : JSON.stringify(init.body));
  });
}

const completion = { model: "m", prompt: "hi" };

describe("tandem router --workers 2 on 127.0.0.1", () => {
  let engine: FakeEngine;
  let router: RouterProcess;
  let port: number;
  let sent = 0;
  let next = 0;

  /** Sends completions until `router` (a worker id) serves one, at most MAX_TRIES. */
  async function untilServedBy(wanted: (routerId: string) => boolean): Promise<string> {
    for (let tries = 0; tries < MAX_TRIES; tries++) {
      const id = `req-${next++}`;
      const answer = await send(port, "POST", "/v1/completions", { id, body: completion });
      assert.equal(answer.status, 200, answer.text);
      sent++;
      const by = await router.servedBy(id);
      if (wanted(by)) return by;
    }
    throw new Error(`no worker matching the wish served any of ${MAX_TRIES} requests`);
  }

  before(async () => {
    engine = await FakeEngine.start();
    router = new RouterProcess(engine.port);
    port = await router.port;
    // Listening is not routing: each worker routes once its Lease is written.
    for (const id of ["bench-w0", "bench-w1"])
      await router.line(`${id} routing`, (line) => line["router"] === id && String(line["msg"]).includes("routing"));
  });
  after(async () => {
    router.child.kill("SIGKILL");
    await engine.stop();
  });

  it("both workers serve, each a replica with its own Lease; /readyz is the whole process's", async () => {
    const seen = new Set<string>();
    seen.add(await untilServedBy(() => true));
    seen.add(await untilServedBy((by) => !seen.has(by)));
    assert.deepEqual([...seen].sort(), ["bench-w0", "bench-w1"]);
    assert.equal((await send(port, "GET", "/readyz")).status, 200);
  });

  it("/metrics aggregates every worker: requests summed, two workers up, two Leases registered", async () => {
    const { status, text } = await send(port, "GET", "/metrics");
    assert.equal(status, 200);
    assert.match(
      text,
      new RegExp(`^tandem_router_requests_total\\{model="m",role="serve",code="200"\\} ${sent}$`, "m"),
    );
    assert.match(text, /^tandem_router_workers 2$/m);
    assert.match(text, /^tandem_router_lease_state\{state="registered"\} 2$/m);
    assert.match(text, /^tandem_router_endpoints\{model="m",role="serve",state="ready"\} 1$/m, "not summed");
  });

  it("a killed worker is started again under the same replica id, and serves", async () => {
    const started = await router.line(
      "worker 0 started",
      (line) => line["msg"] === "router worker started" && line["worker"] === 0,
    );
    const pid = Number(started["pid"]);
    const from = router.lines.length;
    process.kill(pid, "SIGKILL");
    const died = await router.line("worker 0 died", (line) => String(line["msg"]).includes("died"), from);
    assert.equal(died["worker"], 0);
    const again = await router.line(
      "worker 0 started again",
      (line) => line["msg"] === "router worker started" && line["worker"] === 0,
      from,
    );
    assert.equal(again["worker"], 0);
    assert.notEqual(again["pid"], pid);
    await router.line(
      "bench-w0 routing again",
      (line) => line["router"] === "bench-w0" && String(line["msg"]).includes("routing"),
      again.index,
    );
    await untilServedBy((by) => by === "bench-w0");
    const metrics = await send(port, "GET", "/metrics");
    assert.match(metrics.text, /^tandem_router_worker_restarts_total 1$/m);
  });

  it("SIGTERM: every worker stops taking requests, the one in flight finishes, exit 0", async () => {
    let held: Received | undefined;
    const arrived = new Promise<void>((resolve) => {
      engine.behaviour = (received) => {
        held = received;
        resolve();
      };
    });
    const inFlight = send(port, "POST", "/v1/completions", { id: "held", body: completion });
    await arrived;
    const from = router.lines.length;
    router.child.kill("SIGTERM");
    await router.line("stopping", (line) => String(line["msg"]).startsWith("stopping"), from);
    // The idle worker stops at once; the other waits for its request before deleting its Lease.
    const first = await router.line("a Lease deleted", (line) => line["msg"] === "router lease deleted", from);
    assert.ok(!router.lines.some((line) => line["requestId"] === "held"), "the held request is not done yet");
    const refused = await send(port, "POST", "/v1/completions", { body: completion }).then(
      (answer) => answer.status,
      (error: unknown) => (error as { code?: string }).code ?? String(error),
    );
    // Not served: refused, reset, or any other connection failure (which one depends on where the
    // connection met the stopping process), or 503 from a stopping worker.
    assert.ok(typeof refused === "string" || refused === 503, `a new request after SIGTERM got ${String(refused)}`);
    held?.res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ choices: [] }));
    const answer = await inFlight;
    assert.equal(answer.status, 200);
    assert.equal(answer.text, JSON.stringify({ choices: [] }));
    assert.equal(await router.exited, 0);
    const deleted = router.lines.filter((line) => line["msg"] === "router lease deleted").map((line) => line["router"]);
    assert.deepEqual(deleted.sort(), ["bench-w0", "bench-w1"]);
    assert.notEqual(first["router"], await router.servedBy("held"), "the worker holding the request stopped last");
  });
});
