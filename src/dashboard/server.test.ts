import assert from "node:assert/strict";
import { request } from "node:http";
import type { IncomingMessage } from "node:http";
import { after, describe, it } from "node:test";
import { ListenError, startDashboardServer } from "./server.ts";

/** Opens the stream; resolves with the response once the headers are in, and a reader of events. */
function openStream(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ response: IncomingMessage; events: () => Promise<string> }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/events`, { headers }, (response) => {
      let buffered = "";
      const waiting: ((event: string) => void)[] = [];
      const queued: string[] = [];
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => {
        buffered += chunk;
        for (let end = buffered.indexOf("\n\n"); end !== -1; end = buffered.indexOf("\n\n")) {
          const event = buffered.slice(0, end);
          buffered = buffered.slice(end + 2);
          const next = waiting.shift();
          if (next === undefined) queued.push(event);
          else next(event);
        }
      });
      resolve({
        response,
        events: () =>
          queued.length > 0 ? Promise.resolve(queued.shift()!) : new Promise((next) => waiting.push(next)),
      });
    });
    req.on("error", reject);
    req.end();
  });
}

async function get(url: string, method = "GET"): Promise<{ status: number; body: string; type: string }> {
  const response = await fetch(url, { method });
  return { status: response.status, body: await response.text(), type: response.headers.get("content-type") ?? "" };
}

describe("dashboard server", async () => {
  const server = await startDashboardServer({ host: "127.0.0.1", port: 0, flag: "--listen", maxClients: 2 });
  after(() => server.close());

  it("binds to 127.0.0.1 and serves the page, its script and style; anything else is 404, writes 405", async () => {
    assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    const page = await get(`${server.url}/`);
    assert.equal(page.status, 200);
    assert.match(page.type, /text\/html/);
    assert.match(page.body, /<script src="\/app.js">/);
    assert.equal((await get(`${server.url}/app.js`)).status, 200);
    assert.equal((await get(`${server.url}/style.css`)).status, 200);
    assert.equal((await get(`${server.url}/../package.json`)).status, 404);
    assert.equal((await get(`${server.url}/`, "POST")).status, 405);
  });

  it("streams the latest state at once, each later one as it comes, and a reconnect with the latest id gets only what is new", async () => {
    server.publish({ n: 1 });
    const first = await openStream(server.url);
    assert.equal(first.response.headers["content-type"], "text/event-stream");
    assert.equal(await first.events(), "retry: 1000");
    assert.equal(await first.events(), 'id: 1\nevent: state\ndata: {"n":1}');
    server.publish({ n: 2 });
    assert.equal(await first.events(), 'id: 2\nevent: state\ndata: {"n":2}');
    server.dropClients();
    await new Promise((resolve) => first.response.once("close", resolve));
    const upToDate = await openStream(server.url, { "last-event-id": "2" });
    assert.equal(await upToDate.events(), "retry: 1000");
    const next = upToDate.events();
    server.publish({ n: 3 });
    assert.equal(await next, 'id: 3\nevent: state\ndata: {"n":3}');
    const behind = await openStream(server.url, { "last-event-id": "1" });
    assert.equal(await behind.events(), "retry: 1000");
    assert.equal(await behind.events(), 'id: 3\nevent: state\ndata: {"n":3}');
    assert.equal(server.clientCount(), 2);
    const third = await get(`${server.url}/events`);
    assert.equal(third.status, 503);
    assert.match(third.body, /at most 2/);
    server.dropClients();
  });

  it("a port in use is an error naming the flag and what to do", async () => {
    const port = Number(new URL(server.url).port);
    await assert.rejects(
      startDashboardServer({ host: "127.0.0.1", port, flag: "--listen" }),
      (error: unknown) =>
        error instanceof ListenError &&
        error.message.startsWith(`--listen 127.0.0.1:${port}: cannot listen: address already in use`),
    );
  });

  it("sends heartbeats on idle streams", async () => {
    const quick = await startDashboardServer({ host: "127.0.0.1", port: 0, flag: "--listen", heartbeatMs: 20 });
    try {
      const stream = await openStream(quick.url);
      assert.equal(await stream.events(), "retry: 1000");
      assert.equal(await stream.events(), ": heartbeat");
    } finally {
      await quick.close();
    }
  });
});
