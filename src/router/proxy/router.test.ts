import assert from "node:assert/strict";
import { Readable } from "node:stream";
import { after, before, describe, it } from "node:test";
import { Agent, request } from "undici";
import { Prng } from "../../sim/prng.ts";
import { StaticDiscovery } from "../discovery.ts";
import type { DiscoveredPod } from "../endpoints.ts";
import type { RouterRoute } from "../route.ts";
import { aPod, aRoute, firstDraw } from "../test-fixtures.ts";
import { RequestRouter } from "./router.ts";
import type { RequestRouterOptions } from "./router.ts";
import { answerJson, closedPort, FakeEngine } from "./test-engine.ts";

const client = new Agent();
after(() => client.close());

/** A router on 127.0.0.1 over a static world; `url` is its base. */
async function startRouter(routes: RouterRoute[], pods: DiscoveredPod[], options: Partial<RequestRouterOptions> = {}) {
  const discovery = new StaticDiscovery({ routes, pods });
  const router = new RequestRouter({
    discovery,
    rng: firstDraw(),
    debugHeaders: true,
    newRequestId: () => "generated-id",
    ...options,
  });
  const { port } = await router.listen("127.0.0.1", 0);
  return { router, discovery, url: `http://127.0.0.1:${port}` };
}

function post(
  url: string,
  path: string,
  body: unknown,
  init: { headers?: Record<string, string>; signal?: AbortSignal } = {},
) {
  return request(`${url}${path}`, {
    dispatcher: client,
    method: "POST",
    headers: { "content-type": "application/json", ...init.headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
    ...(init.signal === undefined ? {} : { signal: init.signal }),
  });
}

const servePod = (
  name: string,
  port: number,
  extra: Parameters<typeof aPod>[0] extends infer O ? Partial<O> : never = {},
) => aPod({ name, port, revision: `ms-${name}`, ...extra });

describe("data plane: aggregated", () => {
  let engine: FakeEngine;
  before(async () => {
    engine = await FakeEngine.start();
  });
  after(() => engine.stop());

  it("passes a JSON answer through with the client's X-Request-Id and the debug headers", async () => {
    const { router, url } = await startRouter([aRoute()], [servePod("a", engine.port)]);
    const seen = engine.next();
    const response = await post(
      url,
      "/v1/completions",
      { model: "m", prompt: "hi" },
      { headers: { "x-request-id": "req-7", authorization: "Bearer k" } },
    );
    assert.equal(response.statusCode, 200);
    assert.deepEqual(await response.body.json(), {
      id: "cmpl-1",
      object: "text_completion",
      choices: [{ index: 0, text: "ok" }],
    });
    assert.equal(response.headers["x-request-id"], "req-7");
    assert.equal(response.headers["x-tandem-endpoint"], "a");
    assert.equal(response.headers["x-tandem-revision"], "ms-a");
    const upstream = await seen;
    assert.equal(upstream.path, "/v1/completions");
    assert.equal(upstream.headers["x-request-id"], "req-7");
    assert.equal(upstream.headers.authorization, "Bearer k");
    assert.equal(response.headers["x-request-id"], "req-7", "the router's id, whatever the engine echoes");
    assert.deepEqual(upstream.body, { model: "m", prompt: "hi" });
    assert.equal(router.inFlight.count("ns/a"), 0);
    await router.close();
  });

  it("while the replica may not route (its refusal: not registered, fenced, stopping), completions get 503 with the reason and no engine is asked; the last leg's end is told", async () => {
    let refusal: string | undefined = "router r1 has not registered its Lease ns/r1 yet";
    const { router, url } = await startRouter([aRoute()], [servePod("a", engine.port)], { refusal: () => refusal });
    const idle: string[] = [];
    router.inFlight.onIdle((key) => idle.push(key));
    const refused = await post(url, "/v1/completions", { model: "m", prompt: "hi" });
    assert.equal(refused.statusCode, 503);
    assert.deepEqual(await refused.body.json(), {
      error: {
        message: "router r1 has not registered its Lease ns/r1 yet",
        type: "server_error",
        param: null,
        code: "router_unavailable",
      },
    });
    assert.deepEqual(idle, []);
    refusal = undefined;
    const served = await post(url, "/v1/completions", { model: "m", prompt: "hi" });
    await served.body.dump();
    assert.equal(served.statusCode, 200);
    // The leg is released once its body has been piped; the client may see the end a turn earlier.
    for (let turn = 0; turn < 100 && idle.length === 0; turn++) await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(idle, ["ns/a"]);
    await router.close();
  });

  it("generates a request id when the client sends none; no debug headers unless asked", async () => {
    const { router, url } = await startRouter([aRoute()], [servePod("a", engine.port)], { debugHeaders: false });
    const response = await post(url, "/v1/chat/completions", { model: "m", messages: [] });
    await response.body.dump();
    assert.equal(response.headers["x-request-id"], "generated-id");
    assert.equal(response.headers["x-tandem-endpoint"], undefined);
    await router.close();
  });

  it("streams SSE chunk by chunk: the client reads chunk 1 before the engine writes chunk 2", async () => {
    const { router, url } = await startRouter([aRoute()], [servePod("a", engine.port)]);
    engine.behaviour = ({ res }) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: 1\n\n");
    };
    const seen = engine.next();
    const response = await post(url, "/v1/completions", { model: "m", prompt: "hi", stream: true });
    assert.equal(response.headers["content-type"], "text/event-stream");
    const upstream = await seen;
    const chunks = response.body[Symbol.asyncIterator]();
    assert.equal(String((await chunks.next()).value), "data: 1\n\n");
    assert.equal(router.inFlight.count("ns/a"), 1);
    upstream.res.write("data: 2\n\n");
    assert.equal(String((await chunks.next()).value), "data: 2\n\n");
    upstream.res.end("data: [DONE]\n\n");
    assert.equal(String((await chunks.next()).value), "data: [DONE]\n\n");
    assert.equal((await chunks.next()).done, true);
    assert.equal(router.inFlight.count("ns/a"), 0);
    await router.close();
  });

  it("the status and headers reach the client while the engine has sent headers and no body yet", async () => {
    const { router, url } = await startRouter([aRoute()], [servePod("a", engine.port)]);
    engine.behaviour = ({ res }) => {
      // An engine that answers at once and waits for its first token.
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.flushHeaders();
    };
    const seen = engine.next();
    const response = await post(url, "/v1/completions", { model: "m", prompt: "hi", stream: true });
    assert.equal(response.statusCode, 200);
    assert.equal(response.headers["content-type"], "text/event-stream");
    const upstream = await seen;
    upstream.res.end("data: [DONE]\n\n");
    assert.equal(await response.body.text(), "data: [DONE]\n\n");
    await router.close();
  });

  it("a client that disconnects mid-stream aborts the upstream request", { timeout: 30_000 }, async () => {
    const { router, url } = await startRouter([aRoute()], [servePod("a", engine.port)]);
    engine.behaviour = ({ res }) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: 1\n\n");
    };
    const seen = engine.next();
    const abort = new AbortController();
    const response = await post(
      url,
      "/v1/completions",
      { model: "m", prompt: "hi", stream: true },
      { signal: abort.signal },
    );
    const chunks = response.body[Symbol.asyncIterator]();
    await chunks.next();
    abort.abort();
    await (
      await seen
    ).aborted; // the engine sees its request closed; the test timeout bounds the wait
    await router.close();
  });
});

describe("data plane: retries", () => {
  let good: FakeEngine;
  let bad: FakeEngine;
  before(async () => {
    good = await FakeEngine.start();
    bad = await FakeEngine.start();
  });
  after(async () => {
    await good.stop();
    await bad.stop();
  });

  it("retries on another endpoint when the first refuses the connection", async () => {
    // With ties drawn first-in-key-order, "a" (nothing listening) is tried first.
    const { router, url } = await startRouter(
      [aRoute()],
      [servePod("a", await closedPort()), servePod("b", good.port)],
    );
    const response = await post(url, "/v1/completions", { model: "m", prompt: "x" });
    assert.equal(response.statusCode, 200);
    assert.equal(response.headers["x-tandem-endpoint"], "b");
    await response.body.dump();
    await router.close();
  });

  it("retries a 5xx answered before the first byte reached the client", async () => {
    bad.behaviour = answerJson(503, { error: "overloaded" });
    const before = { bad: bad.requests.length, good: good.requests.length };
    const { router, url } = await startRouter([aRoute()], [servePod("a", bad.port), servePod("b", good.port)]);
    const response = await post(url, "/v1/completions", { model: "m", prompt: "x" });
    assert.equal(response.statusCode, 200);
    await response.body.dump();
    assert.deepEqual(
      { bad: bad.requests.length - before.bad, good: good.requests.length - before.good },
      { bad: 1, good: 1 },
    );
    await router.close();
  });

  it("passes the last attempt's 5xx on once attempts run out (1 + retries.attempts)", async () => {
    bad.behaviour = answerJson(500, { error: "boom" });
    const before = bad.requests.length;
    const pods = ["a", "b", "c"].map((name) => servePod(name, bad.port));
    const { router, url } = await startRouter([aRoute({ retries: { attempts: 1 } })], pods);
    const response = await post(url, "/v1/completions", { model: "m", prompt: "x" });
    assert.equal(response.statusCode, 500);
    assert.deepEqual(await response.body.json(), { error: "boom" });
    assert.equal(bad.requests.length - before, 2);
    await router.close();
  });

  it("never retries a 4xx: the engine's answer is the client's", async () => {
    bad.behaviour = answerJson(400, { error: { message: "bad prompt" } });
    const before = good.requests.length;
    const { router, url } = await startRouter([aRoute()], [servePod("a", bad.port), servePod("b", good.port)]);
    const response = await post(url, "/v1/completions", { model: "m", prompt: "x" });
    assert.equal(response.statusCode, 400);
    assert.deepEqual(await response.body.json(), { error: { message: "bad prompt" } });
    assert.equal(good.requests.length, before);
    await router.close();
  });

  it("never retries after the first byte: a stream cut midway stays cut", async () => {
    bad.behaviour = ({ res }) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: 1\n\n");
    };
    const before = good.requests.length;
    const { router, url } = await startRouter([aRoute()], [servePod("a", bad.port), servePod("b", good.port)]);
    const seen = bad.next();
    const response = await post(url, "/v1/completions", { model: "m", prompt: "x", stream: true });
    const chunks = response.body[Symbol.asyncIterator]();
    assert.equal(String((await chunks.next()).value), "data: 1\n\n");
    (await seen).res.socket?.destroy();
    await assert.rejects(async () => {
      for (let next = await chunks.next(); next.done !== true; next = await chunks.next());
    });
    assert.equal(good.requests.length, before);
    await router.close();
  });

  it(
    "a first-byte timeout answers 504 and is not retried (the engine may still be working on it)",
    { timeout: 30_000 },
    async () => {
      bad.behaviour = () => undefined; // never answers
      const before = good.requests.length;
      const seen = bad.next();
      const { router, url } = await startRouter(
        [aRoute({ timeouts: { firstByteSeconds: 0.2, idleSeconds: 300 } })],
        [servePod("a", bad.port), servePod("b", good.port)],
      );
      const response = await post(url, "/v1/completions", { model: "m", prompt: "x" });
      assert.equal(response.statusCode, 504);
      assert.equal(((await response.body.json()) as any).error.code, "upstream_timeout");
      await (
        await seen
      ).aborted;
      assert.equal(good.requests.length, before);
      await router.close();
    },
  );

  it("an idle stream (no chunk within idleSeconds) is cut and its upstream closed", { timeout: 30_000 }, async () => {
    bad.behaviour = ({ res }) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: 1\n\n");
    };
    const seen = bad.next();
    const { router, url } = await startRouter(
      [aRoute({ timeouts: { firstByteSeconds: 60, idleSeconds: 0.2 } })],
      [servePod("a", bad.port)],
    );
    const response = await post(url, "/v1/completions", { model: "m", prompt: "x", stream: true });
    const chunks = response.body[Symbol.asyncIterator]();
    assert.equal(String((await chunks.next()).value), "data: 1\n\n");
    await assert.rejects(async () => {
      for (let next = await chunks.next(); next.done !== true; next = await chunks.next());
    });
    await (
      await seen
    ).aborted;
    await router.close();
  });

  it("with every endpoint refusing, answers 502 naming the failures", async () => {
    const { router, url } = await startRouter(
      [aRoute({ retries: { attempts: 5 } })],
      [servePod("a", await closedPort()), servePod("b", await closedPort())],
    );
    const response = await post(url, "/v1/completions", { model: "m", prompt: "x" });
    assert.equal(response.statusCode, 502);
    const body = (await response.body.json()) as any;
    assert.equal(body.error.code, "upstream_error");
    assert.match(
      body.error.message,
      /^b \(127\.0\.0\.1:\d+\): .*; no other endpoint to retry on \(model m: no eligible serve endpoint \(2 pods; 2 failed earlier in this request\)\)$/,
    );
    await router.close();
  });
});

describe("data plane: refusals are OpenAI-shaped", () => {
  it("a bad option is refused naming it", () => {
    const discovery = new StaticDiscovery({ routes: [], pods: [] });
    assert.throws(
      () => new RequestRouter({ discovery, rng: firstDraw(), maxBodyBytes: 0 }),
      /^Error: router option maxBodyBytes must be a positive integer, got 0$/,
    );
  });

  it("404 unknown model (listing the models), 400 malformed, 413 too large, 503 nothing eligible, 404 path, 405 method", async () => {
    const routes = [aRoute(), aRoute({ name: "r2", model: "other", modelServing: "ms2" })];
    const { router, url } = await startRouter(routes, [aPod({ name: "a", draining: true })], { maxBodyBytes: 64 });
    const cases: [unknown, number, string, string][] = [
      [{ model: "nope" }, 404, "model_not_found", 'the model "nope" does not exist; models: m, other'],
      ["{not json", 400, "invalid_json", "the request body must be a JSON object"],
      [{ prompt: "x" }, 400, "missing_model", "the request body needs a string field model"],
      [{ model: "m", prompt: "x".repeat(100) }, 413, "request_too_large", "request body larger than 64 bytes"],
      [{ model: "m" }, 503, "no_eligible_endpoint", "model m: no eligible serve endpoint (1 pod: 1 draining)"],
    ];
    for (const [body, status, code, message] of cases) {
      const response = await post(url, "/v1/completions", body);
      assert.equal(response.statusCode, status, code);
      const type = status < 500 ? "invalid_request_error" : "server_error";
      assert.deepEqual(await response.body.json(), { error: { message, type, param: null, code } });
    }
    // Without a Content-Length (chunked), the limit is counted as the body arrives.
    const chunked = await request(`${url}/v1/completions`, {
      dispatcher: client,
      method: "POST",
      body: Readable.from([Buffer.from(JSON.stringify({ model: "m", prompt: "y".repeat(100) }))]),
    });
    assert.equal(chunked.statusCode, 413);
    assert.equal(((await chunked.body.json()) as any).error.code, "request_too_large");
    const missing = await request(`${url}/v2/x`, { dispatcher: client });
    assert.equal(missing.statusCode, 404);
    assert.equal(((await missing.body.json()) as any).error.code, "not_found");
    const wrongMethod = await request(`${url}/v1/completions`, { dispatcher: client });
    assert.equal(wrongMethod.statusCode, 405);
    await wrongMethod.body.dump();
    await router.close();
  });

  it("GET /v1/models lists the models of the routes, conflicts resolved", async () => {
    const routes = [
      aRoute({ model: "b" }),
      aRoute({ name: "r2", model: "a", creationTimestamp: "2026-01-01T00:00:00Z" }),
    ];
    const { router, url } = await startRouter(routes, []);
    const response = await request(`${url}/v1/models`, { dispatcher: client });
    assert.deepEqual(await response.body.json(), {
      object: "list",
      data: [
        { id: "a", object: "model", created: 1767225600, owned_by: "ns" },
        { id: "b", object: "model", created: 0, owned_by: "ns" },
      ],
    });
    await router.close();
  });
});

describe("data plane: disaggregated", () => {
  let prefill: FakeEngine;
  let decode: FakeEngine;
  before(async () => {
    prefill = await FakeEngine.start();
    decode = await FakeEngine.start();
  });
  after(async () => {
    await prefill.stop();
    await decode.stop();
  });
  const pdRoute = (overrides: Partial<RouterRoute> = {}) =>
    aRoute({ roles: { prefill: "prefill", decode: "decode" }, ...overrides });
  const pdPods = () => [
    aPod({ name: "p", role: "prefill", port: prefill.port }),
    aPod({ name: "d", role: "decode", port: decode.port, revision: "ms-v2" }),
  ];

  it("NIXL: prefill gets the rewritten body, decode the returned kv_transfer_params with remote_host set, one request id", async () => {
    prefill.behaviour = answerJson(200, {
      id: "cmpl-p",
      choices: [{ index: 0, text: "H", finish_reason: "length" }],
      kv_transfer_params: {
        do_remote_prefill: true,
        do_remote_decode: false,
        remote_block_ids: [4],
        remote_engine_id: "e1",
        remote_request_id: "x",
        remote_host: "localhost",
        remote_port: 5600,
        tp_size: 1,
      },
    });
    decode.behaviour = ({ res }) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end("data: tokens\n\ndata: [DONE]\n\n");
    };
    const { router, url } = await startRouter([pdRoute()], pdPods());
    const [prefillSeen, decodeSeen] = [prefill.next(), decode.next()];
    const body = {
      model: "m",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 20,
      min_tokens: 2,
    };
    const response = await post(url, "/v1/chat/completions", body, { headers: { "x-request-id": "pd-1" } });
    assert.equal(await response.body.text(), "data: tokens\n\ndata: [DONE]\n\n");
    assert.deepEqual(
      [
        response.headers["x-tandem-prefill"],
        response.headers["x-tandem-decode"],
        response.headers["x-tandem-revision"],
      ],
      ["p", "d", "ms-v2"],
    );
    const [p, d] = [await prefillSeen, await decodeSeen];
    assert.equal(p.path, "/v1/chat/completions");
    assert.deepEqual(p.body, {
      model: "m",
      messages: [{ role: "user", content: "hi" }],
      stream: false,
      max_tokens: 1,
      kv_transfer_params: {
        do_remote_decode: true,
        do_remote_prefill: false,
        remote_engine_id: null,
        remote_block_ids: null,
        remote_host: null,
        remote_port: null,
      },
    });
    assert.deepEqual(d.body, {
      ...body,
      kv_transfer_params: {
        do_remote_prefill: true,
        do_remote_decode: false,
        remote_block_ids: [4],
        remote_engine_id: "e1",
        remote_request_id: "x",
        remote_host: "127.0.0.1",
        remote_port: 5600,
        tp_size: 1,
      },
    });
    assert.deepEqual([p.headers["x-request-id"], d.headers["x-request-id"]], ["pd-1", "pd-1"]);
    await router.close();
  });

  it("NIXL: a prefill answer without kv_transfer_params fails (502), never a decode-only request", async () => {
    prefill.behaviour = answerJson(200, { id: "cmpl-p", choices: [] });
    const before = decode.requests.length;
    const { router, url } = await startRouter([pdRoute()], pdPods());
    const response = await post(url, "/v1/completions", { model: "m", prompt: "x" });
    assert.equal(response.statusCode, 502);
    assert.match(
      ((await response.body.json()) as any).error.message,
      /^prefill p returned no kv_transfer_params object; no other endpoint to retry on/,
    );
    assert.equal(decode.requests.length, before);
    await router.close();
  });

  it(
    "NIXL: a client that leaves during the prefill aborts it, and no decode leg is sent",
    { timeout: 30_000 },
    async () => {
      prefill.behaviour = () => undefined; // still prefilling
      const before = decode.requests.length;
      const { router, url } = await startRouter([pdRoute()], pdPods());
      const seen = prefill.next();
      const abort = new AbortController();
      const response = post(url, "/v1/completions", { model: "m", prompt: "x" }, { signal: abort.signal });
      const leg = await seen;
      abort.abort();
      await assert.rejects(response);
      await leg.aborted;
      assert.equal(decode.requests.length, before);
      await router.close();
    },
  );

  it(
    "NIXL: the decode counts in flight while its prefill runs, so no drain confirms it under the request",
    { timeout: 30_000 },
    async () => {
      prefill.behaviour = () => undefined; // still prefilling
      const { router, url } = await startRouter([pdRoute()], pdPods());
      const seen = prefill.next();
      const abort = new AbortController();
      const response = post(url, "/v1/completions", { model: "m", prompt: "x" }, { signal: abort.signal });
      const leg = await seen;
      const during = [router.inFlight.count("ns/p"), router.inFlight.count("ns/d")];
      abort.abort();
      assert.deepEqual(during, [1, 1]);
      await assert.rejects(response);
      await leg.aborted;
      // The router learns of the abort a few event-loop turns after the engine does.
      for (let turn = 0; turn < 10_000 && router.inFlight.count("ns/d") + router.inFlight.count("ns/p") > 0; turn++)
        await new Promise(setImmediate);
      assert.deepEqual([router.inFlight.count("ns/p"), router.inFlight.count("ns/d")], [0, 0]);
      await router.close();
    },
  );

  it("no compatible pair is a 503 with the pairing's reason", async () => {
    const pods = [
      aPod({ name: "p", role: "prefill", group: 1, port: prefill.port }),
      aPod({ name: "d", role: "decode", group: 0, port: decode.port }),
    ];
    const { router, url } = await startRouter([pdRoute()], pods);
    const response = await post(url, "/v1/completions", { model: "m", prompt: "x" });
    assert.equal(response.statusCode, 503);
    assert.equal(
      ((await response.body.json()) as any).error.message,
      "model m: pairing SameGroup: no eligible prefill in the ServingGroup of any eligible decode (decode groups 0; prefill groups 1)",
    );
    await router.close();
  });

  it(
    "SGLang: both legs are in flight together, with one bootstrap room and the prefill's host and port",
    { timeout: 30_000 },
    async () => {
      // Neither engine answers until the other has its request: the test passes only if the router
      // sends both legs before waiting for either.
      const [prefillSeen, decodeSeen] = [prefill.next(), decode.next()];
      prefill.behaviour = () => {
        void decodeSeen.then(({ res }) => {
          res.writeHead(200, { "content-type": "application/json" });
          res.end('{"text":"decoded"}');
        });
      };
      decode.behaviour = () => {
        void prefillSeen.then(({ res }) => {
          res.writeHead(200, { "content-type": "application/json" });
          res.end('{"text":"prefilled"}');
        });
      };
      const pods = [
        aPod({ name: "p", role: "prefill", port: prefill.port, annotations: { "sglang.ai/bootstrap-port": "9123" } }),
        aPod({ name: "d", role: "decode", port: decode.port }),
      ];
      const { router, url } = await startRouter([pdRoute({ engine: "sglang", kvConnector: "sglang" })], pods, {
        rng: new Prng(11),
      });
      const response = await post(
        url,
        "/v1/completions",
        { model: "m", prompt: "x" },
        { headers: { "x-request-id": "sg-1" } },
      );
      assert.deepEqual(await response.body.json(), { text: "decoded" });
      const [p, d] = [await prefillSeen, await decodeSeen];
      assert.deepEqual(p.body, d.body);
      assert.equal(p.body.bootstrap_host, "127.0.0.1");
      assert.equal(p.body.bootstrap_port, 9123);
      assert.ok(Number.isSafeInteger(p.body.bootstrap_room));
      assert.deepEqual([p.headers["x-request-id"], d.headers["x-request-id"]], ["sg-1", "sg-1"]);
      await router.close();
    },
  );

  it("SGLang: a client that disconnects aborts both legs at once", { timeout: 30_000 }, async () => {
    const [prefillSeen, decodeSeen] = [prefill.next(), decode.next()];
    prefill.behaviour = () => undefined;
    decode.behaviour = ({ res }) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: 1\n\n");
    };
    const pods = [
      aPod({ name: "p", role: "prefill", port: prefill.port }),
      aPod({ name: "d", role: "decode", port: decode.port }),
    ];
    const { router, url } = await startRouter([pdRoute({ engine: "sglang", kvConnector: "sglang" })], pods);
    const abort = new AbortController();
    const response = await post(
      url,
      "/v1/completions",
      { model: "m", prompt: "x", stream: true },
      { signal: abort.signal },
    );
    await response.body[Symbol.asyncIterator]().next();
    const [p, d] = [await prefillSeen, await decodeSeen];
    abort.abort();
    await Promise.all([p.aborted, d.aborted]);
    await router.close();
  });

  it(
    "SGLang: a prefill that fails before the decode answers aborts the decode; with no other pair, 502",
    { timeout: 30_000 },
    async () => {
      const decodeSeen = decode.next();
      prefill.behaviour = ({ res }) => {
        // Fail only once the decode leg is in flight, so its abort is observable.
        void decodeSeen.then(() => {
          res.writeHead(500, { "content-type": "application/json" });
          res.end('{"error":"kv"}');
        });
      };
      decode.behaviour = () => undefined; // waits for KV that never comes
      const pods = [
        aPod({ name: "p", role: "prefill", port: prefill.port }),
        aPod({ name: "d", role: "decode", port: decode.port }),
      ];
      const { router, url } = await startRouter([pdRoute({ engine: "sglang", kvConnector: "sglang" })], pods);
      const response = await post(url, "/v1/completions", { model: "m", prompt: "x" });
      assert.equal(response.statusCode, 502);
      assert.match(
        ((await response.body.json()) as any).error.message,
        /^prefill p answered 500: \{"error":"kv"\}; no other endpoint to retry on/,
      );
      await (
        await decodeSeen
      ).aborted;
      await router.close();
    },
  );
});
