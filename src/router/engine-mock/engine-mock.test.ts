/**
 * The engine mock over real HTTP on 127.0.0.1 (port 0). Time passes through an injected `sleep`:
 * 0 ms where only the answer matters, a gate the test opens token by token where order matters
 * (streaming, running/waiting, abort), so no test depends on wall-clock speed.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import type { EngineMock, EngineMockOptions, Sleep } from "./server.ts";
import { startEngineMock, timerSleep } from "./server.ts";
import { stat } from "node:fs";
import { naturalLength, tokenAt } from "./text.ts";

const NOW_MS = Date.UTC(2026, 11, 1, 12, 0, 0);
const instant: Sleep = () => Promise.resolve();

const mocks: EngineMock[] = [];
after(async () => {
  await Promise.all(mocks.map((mock) => mock.close()));
});

async function start(options: EngineMockOptions = {}): Promise<EngineMock> {
  const mock = await startEngineMock({ sleep: instant, nowMs: () => NOW_MS, ...options });
  mocks.push(mock);
  return mock;
}

async function post(
  mock: EngineMock,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: any }> {
  const response = await fetch(`${mock.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.status, json: await response.json() };
}

/** The `data:` payloads of an SSE body, `[DONE]` included. */
function events(text: string): string[] {
  return text
    .split("\n\n")
    .filter((event) => event.startsWith("data: "))
    .map((event) => event.slice("data: ".length));
}

async function metric(mock: EngineMock, name: string, labels = ""): Promise<number | undefined> {
  const text = await (await fetch(`${mock.url}/metrics`)).text();
  const line = text.split("\n").find((candidate) => candidate.startsWith(`${name}{`) && candidate.includes(labels));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1));
}

/**
 * Repeats `read` until `accept` holds, letting the event loop turn (I/O in flight proceeds) between
 * attempts; fails after `attempts` turns. Never a timed wait.
 */
async function until<T>(
  read: () => Promise<T> | T,
  accept: (value: T) => boolean,
  what: string,
  attempts = 100_000,
): Promise<T> {
  for (let attempt = 0; attempt < attempts; attempt++) {
    const value = await read();
    if (accept(value)) return value;
    await new Promise((resolve) => setImmediate(resolve));
  }
  throw new Error(`gave up waiting for ${what}`);
}

/** A `sleep` the test opens one call at a time. */
function gate(): { sleep: Sleep; waiting: () => number; open: () => void; aborted: () => number } {
  const pending: (() => void)[] = [];
  let abortedSleeps = 0;
  const sleep: Sleep = (_ms, signal) =>
    new Promise((resolve, reject) => {
      const onAbort = (): void => {
        pending.splice(pending.indexOf(wake), 1);
        abortedSleeps += 1;
        reject(signal.reason as Error);
      };
      const wake = (): void => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      };
      pending.push(wake);
      signal.addEventListener("abort", onAbort, { once: true });
    });
  return { sleep, waiting: () => pending.length, open: () => pending.shift()?.(), aborted: () => abortedSleeps };
}

const prompt = "Tandem keeps a working request path";
const expectedText = (count: number, text = prompt): string =>
  Array.from({ length: count }, (_, index) => tokenAt(text, index)).join("");

describe("completions and chat, JSON", () => {
  it("answers /v1/completions in OpenAI's shape, deterministically, finish_reason length at max_tokens", async () => {
    const mock = await start();
    const body = { model: "llama", prompt, max_tokens: 5 };
    const first = await post(mock, "/v1/completions", body);
    const second = await post(mock, "/v1/completions", body);
    assert.equal(first.status, 200);
    assert.deepEqual(first.json, {
      id: "cmpl-mock-1",
      object: "text_completion",
      created: NOW_MS / 1000,
      model: "llama",
      choices: [{ index: 0, text: expectedText(5), logprobs: null, finish_reason: "length" }],
      usage: { prompt_tokens: 6, total_tokens: 11, completion_tokens: 5 },
    });
    assert.deepEqual({ ...second.json, id: "cmpl-mock-1" }, first.json, "the same request gives the same answer");
    assert.equal(second.json.id, "cmpl-mock-2");
  });

  it("stops by itself (finish_reason stop) at the prompt's natural length unless ignore_eos; 16 tokens by default", async () => {
    const mock = await start();
    const natural = naturalLength(prompt);
    const stopped = await post(mock, "/v1/completions", { prompt, max_tokens: 1000 });
    assert.equal(stopped.json.choices[0].finish_reason, "stop");
    assert.equal(stopped.json.usage.completion_tokens, natural);
    assert.equal(stopped.json.choices[0].text, expectedText(natural));
    const forced = await post(mock, "/v1/completions", { prompt, max_tokens: natural + 3, ignore_eos: true });
    assert.deepEqual(
      [forced.json.choices[0].finish_reason, forced.json.usage.completion_tokens],
      ["length", natural + 3],
    );
    const defaulted = await post(mock, "/v1/completions", { prompt });
    assert.equal(defaulted.json.usage.completion_tokens, 16);
    assert.equal(defaulted.json.model, "engine-mock");
  });

  it("answers /v1/chat/completions; max_completion_tokens wins over max_tokens; X-Request-Id names the answer", async () => {
    const mock = await start();
    const messages = [
      { role: "system", content: "be brief" },
      { role: "user", content: [{ type: "text", text: "hello there" }] },
    ];
    const { status, json } = await post(
      mock,
      "/v1/chat/completions",
      { model: "llama", messages, max_tokens: 9, max_completion_tokens: 3 },
      { "x-request-id": "req-7" },
    );
    assert.equal(status, 200);
    assert.equal(json.id, "chatcmpl-req-7");
    assert.equal(json.object, "chat.completion");
    assert.deepEqual(json.choices, [
      {
        index: 0,
        message: { role: "assistant", content: expectedText(3, "system: be brief\nuser: hello there") },
        logprobs: null,
        finish_reason: "length",
      },
    ]);
    assert.deepEqual(json.usage, { prompt_tokens: 6, total_tokens: 9, completion_tokens: 3 });
  });

  it("refuses bad requests with an OpenAI-shaped error naming the field", async () => {
    const mock = await start({ model: "llama" });
    const cases: [string, unknown, number, RegExp][] = [
      ["/v1/completions", { prompt: 3 }, 400, /^prompt: must be a string/],
      ["/v1/completions", { prompt, max_tokens: 0 }, 400, /^max_tokens: must be 1 or more/],
      [
        "/v1/completions",
        { prompt, max_tokens: 2, min_tokens: 5 },
        400,
        /min_tokens \(5\) must be less than or equal to max_tokens \(2\)/,
      ],
      ["/v1/completions", { prompt, n: 2 }, 400, /^n: must be 1/],
      ["/v1/chat/completions", { messages: [] }, 400, /^messages: must list at least 1 item/],
      ["/v1/completions", { model: "other", prompt }, 404, /The model `other` does not exist/],
    ];
    for (const [path, body, status, message] of cases) {
      const answer = await post(mock, path, body);
      assert.equal(answer.status, status, JSON.stringify(body));
      assert.match(answer.json.error.message, message);
      assert.equal(answer.json.error.code, status);
    }
    const notJson = await fetch(`${mock.url}/v1/completions`, { method: "POST", body: "{" });
    assert.equal(notJson.status, 400);
    assert.match(((await notJson.json()) as any).error.message, /^the request body is not JSON/);
    assert.equal((await fetch(`${mock.url}/v1/completions`)).status, 405);
    assert.equal((await fetch(`${mock.url}/nothing`)).status, 404);
    assert.equal(mock.stats().rejected, 9);
  });

  it("serves /v1/models and /health", async () => {
    const mock = await start({ model: "llama", engine: "sglang" });
    const models: any = await (await fetch(`${mock.url}/v1/models`)).json();
    assert.deepEqual(models, {
      object: "list",
      data: [{ id: "llama", object: "model", created: NOW_MS / 1000, owned_by: "sglang", root: "llama", parent: null }],
    });
    const health = await fetch(`${mock.url}/health`);
    assert.equal(health.status, 200);
  });
});

describe("streaming", () => {
  it("streams the JSON answer's tokens as SSE, the usage chunk only when asked, then [DONE]", async () => {
    const mock = await start();
    for (const endpoint of ["/v1/completions", "/v1/chat/completions"]) {
      const body =
        endpoint === "/v1/completions"
          ? { prompt, max_tokens: 4 }
          : { messages: [{ role: "user", content: prompt }], max_tokens: 4 };
      const json = await post(mock, endpoint, body);
      const response = await fetch(`${mock.url}${endpoint}`, {
        method: "POST",
        body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
      });
      assert.equal(response.headers.get("content-type"), "text/event-stream");
      const payloads = events(await response.text());
      assert.equal(payloads.at(-1), "[DONE]");
      const chunks = payloads.slice(0, -1).map((payload) => JSON.parse(payload));
      const usage = chunks.pop();
      assert.deepEqual(usage.choices, []);
      assert.deepEqual(usage.usage, json.json.usage);
      const texts = chunks.map((chunk) => chunk.choices[0].text ?? chunk.choices[0].delta.content);
      const answer = json.json.choices[0].text ?? json.json.choices[0].message.content;
      assert.equal(texts.join(""), answer);
      assert.deepEqual(
        chunks.map((chunk) => chunk.choices[0].finish_reason),
        [...Array.from({ length: chunks.length - 1 }, () => null), "length"],
      );
      assert.ok(
        chunks.every(
          (chunk) =>
            chunk.object === (endpoint === "/v1/completions" ? "text_completion" : "chat.completion.chunk") &&
            !("usage" in chunk),
        ),
      );
      if (endpoint === "/v1/chat/completions")
        assert.deepEqual(chunks[0].choices[0].delta, { role: "assistant", content: "" });
      const plain = await fetch(`${mock.url}${endpoint}`, {
        method: "POST",
        body: JSON.stringify({ ...body, stream: true }),
      });
      assert.equal(events(await plain.text()).filter((payload) => payload.includes('"usage"')).length, 0);
    }
  });

  it("sends each token as it is generated: the first chunk arrives while the last is not generated yet", async () => {
    const clock = gate();
    const mock = await start({ sleep: clock.sleep });
    const response = await fetch(`${mock.url}/v1/completions`, {
      method: "POST",
      body: JSON.stringify({ prompt, max_tokens: 3, stream: true }),
    });
    const reader = response.body!.getReader();
    await until(
      () => clock.waiting(),
      (waiting) => waiting === 1,
      "the first token's sleep",
    );
    clock.open();
    const first = new TextDecoder().decode((await reader.read()).value);
    assert.equal(JSON.parse(events(first)[0]!).choices[0].text, tokenAt(prompt, 0));
    assert.equal(mock.stats().completed, 0, "the answer is not finished when its first token arrives");
    for (let token = 1; token < 3; token++) {
      await until(
        () => clock.waiting(),
        (waiting) => waiting === 1,
        `token ${token}'s sleep`,
      );
      clock.open();
    }
    let rest = "";
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read())
      rest += new TextDecoder().decode(chunk.value);
    assert.equal(events(rest).at(-1), "[DONE]");
    assert.equal(mock.stats().completed, 1);
  });
});

describe("load, metrics and aborts", () => {
  it("with --max-running 1 and 2 requests, 1 runs and 1 waits, as the engine's own metrics say", async () => {
    const clock = gate();
    const mock = await start({ sleep: clock.sleep, maxRunning: 1 });
    const answers = [
      post(mock, "/v1/completions", { prompt, max_tokens: 1 }),
      post(mock, "/v1/completions", { prompt: "second", max_tokens: 1 }),
    ];
    await until(
      () => metric(mock, "vllm:num_requests_waiting"),
      (waiting) => waiting === 1,
      "one waiting request",
    );
    assert.equal(await metric(mock, "vllm:num_requests_running", 'model_name="engine-mock"'), 1);
    assert.ok((await metric(mock, "vllm:kv_cache_usage_perc"))! > 0);
    assert.deepEqual([mock.stats().running, mock.stats().waiting], [1, 1]);
    clock.open();
    await until(
      () => clock.waiting(),
      (waiting) => waiting === 1,
      "the second request to run",
    );
    assert.equal(await metric(mock, "vllm:num_requests_waiting"), 0);
    clock.open();
    assert.deepEqual(
      (await Promise.all(answers)).map((answer) => answer.status),
      [200, 200],
    );
    assert.equal(await metric(mock, "vllm:num_requests_running"), 0);
    assert.equal(await metric(mock, "vllm:request_success_total", 'finished_reason="length"'), 2);
    assert.equal(await metric(mock, "vllm:generation_tokens_total"), 2);
  });

  it("uses SGLang's metric names with --engine sglang", async () => {
    const mock = await start({ engine: "sglang", model: "llama" });
    await post(mock, "/v1/completions", { prompt, max_tokens: 2 });
    assert.equal(await metric(mock, "sglang:num_running_reqs", 'model_name="llama"'), 0);
    assert.equal(await metric(mock, "sglang:num_queue_reqs"), 0);
    assert.equal(await metric(mock, "sglang:token_usage"), 0);
    assert.equal(await metric(mock, "sglang:generation_tokens_total"), 2);
    assert.equal(await metric(mock, "vllm:num_requests_running"), undefined);
  });

  it("a client that goes away stops its request at once, running or waiting, and the metrics count it", async () => {
    const clock = gate();
    const mock = await start({ sleep: clock.sleep, maxRunning: 1 });
    const streaming = new AbortController();
    const response = await fetch(`${mock.url}/v1/completions`, {
      method: "POST",
      body: JSON.stringify({ prompt, max_tokens: 50, stream: true }),
      signal: streaming.signal,
    });
    const reader = response.body!.getReader();
    await until(
      () => clock.waiting(),
      (waiting) => waiting === 1,
      "the first token's sleep",
    );
    clock.open();
    await reader.read();
    const queued = new AbortController();
    const waitingAnswer = fetch(`${mock.url}/v1/completions`, {
      method: "POST",
      body: JSON.stringify({ prompt, max_tokens: 5 }),
      signal: queued.signal,
    }).catch(() => "aborted");
    await until(
      () => mock.stats().waiting,
      (waiting) => waiting === 1,
      "the second request to wait",
    );
    queued.abort();
    assert.equal(await waitingAnswer, "aborted");
    await until(
      () => mock.stats().waiting,
      (waiting) => waiting === 0,
      "the waiting request to leave the queue",
    );
    streaming.abort();
    await until(
      () => metric(mock, "engine_mock_requests_aborted_total"),
      (count) => count === 2,
      "two aborted requests",
    );
    assert.equal(clock.aborted(), 1, "the running request's pending sleep was cut short");
    assert.deepEqual(
      { ...mock.stats(), legs: undefined },
      { received: 2, completed: 0, aborted: 2, rejected: 0, running: 0, waiting: 0, legs: undefined },
    );
    assert.equal(await metric(mock, "vllm:request_success_total", 'finished_reason="abort"'), 2);
    assert.equal(await metric(mock, "vllm:generation_tokens_total"), 1, "generation stopped after the one token sent");
  });
});

describe("close", () => {
  it("cuts the requests in flight, running and waiting, and stops listening", async () => {
    const clock = gate();
    const mock = await startEngineMock({ sleep: clock.sleep, maxRunning: 1 });
    const answers = [0, 1].map(() =>
      fetch(`${mock.url}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt }) }).then(
        (response) => response.status,
        () => "cut",
      ),
    );
    await until(
      () => mock.stats(),
      (stats) => stats.running === 1 && stats.waiting === 1,
      "one running and one waiting request",
    );
    await mock.close();
    assert.deepEqual(await Promise.all(answers), ["cut", "cut"]);
    assert.deepEqual([mock.stats().aborted, mock.stats().running, mock.stats().waiting], [2, 0, 0]);
    await assert.rejects(fetch(`${mock.url}/health`));
  });
});

describe("disaggregation", () => {
  const prefillBody = (body: Record<string, unknown>): Record<string, unknown> => ({
    ...body,
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

  it("vLLM NIXL: the prefill hands kv_transfer_params (remote_host localhost) to a decode, which answers as an aggregated engine would", async () => {
    const prefill = await start();
    const decode = await start();
    const original = { model: "llama", prompt, max_tokens: 6, stream: true, stream_options: { include_usage: true } };
    const first = await post(prefill, "/v1/completions", prefillBody(original), { "x-request-id": "pd-1" });
    assert.equal(first.status, 200);
    assert.equal(first.json.choices[0].text, tokenAt(prompt, 0));
    assert.deepEqual(first.json.kv_transfer_params, {
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_block_ids: [0],
      remote_engine_id: prefill.engineId,
      remote_request_id: "pd-1",
      remote_host: "localhost",
      remote_port: 5600,
      tp_size: 1,
      kv_format: "v1",
    });
    const kv = { ...first.json.kv_transfer_params, remote_host: "127.0.0.1" };
    const response = await fetch(`${decode.url}/v1/completions`, {
      method: "POST",
      headers: { "x-request-id": "pd-1" },
      body: JSON.stringify({ ...original, kv_transfer_params: kv }),
    });
    assert.equal(response.status, 200);
    const chunks = events(await response.text())
      .slice(0, -1)
      .map((payload) => JSON.parse(payload));
    assert.equal(chunks.map((chunk) => chunk.choices[0]?.text ?? "").join(""), expectedText(6));
    assert.equal(chunks[0].id, "cmpl-pd-1");
    assert.deepEqual([prefill.stats().legs.prefill, decode.stats().legs.decode], [1, 1]);
    const again = await post(prefill, "/v1/completions", prefillBody(original));
    assert.deepEqual(again.json.kv_transfer_params.remote_block_ids, [1], "block ids count up per engine");
  });

  it("vLLM NIXL: a decode of another --kv-format refuses with 400 kv format mismatch; bad parameters are named", async () => {
    const prefill = await start({ kvFormat: "v1" });
    const decode = await start({ kvFormat: "v2" });
    const { json } = await post(prefill, "/v1/completions", prefillBody({ prompt }));
    const kv = { ...json.kv_transfer_params, remote_host: "10.0.0.7" };
    const mismatch = await post(decode, "/v1/completions", { prompt, kv_transfer_params: kv });
    assert.equal(mismatch.status, 400);
    assert.deepEqual(Object.keys(mismatch.json.error), ["message", "type", "param", "code"]);
    assert.match(
      mismatch.json.error.message,
      /^kv format mismatch: kv_transfer_params.kv_format is "v1", this decode reads "v2"/,
    );
    const same = await start({ kvFormat: "v1" });
    const localhost = await post(same, "/v1/completions", { prompt, kv_transfer_params: json.kv_transfer_params });
    assert.equal(localhost.status, 400);
    assert.match(localhost.json.error.message, /remote_host is "localhost".*the router must set it/);
    const noBlocks = await post(same, "/v1/completions", {
      prompt,
      kv_transfer_params: { ...kv, remote_block_ids: null },
    });
    assert.match(noBlocks.json.error.message, /^kv_transfer_params.remote_block_ids must be a list of block ids/);
    const streamingPrefill = await post(prefill, "/v1/completions", { ...prefillBody({ prompt }), stream: true });
    assert.match(streamingPrefill.json.error.message, /^stream: a prefill leg .* must not stream/);
    const sglang = await start({ engine: "sglang" });
    const wrongProtocol = await post(sglang, "/v1/completions", { prompt, kv_transfer_params: kv });
    assert.match(wrongProtocol.json.error.message, /vLLM's NIXL protocol, but this engine is sglang/);
  });

  it("SGLang bootstrap: a leg with bootstrap_host, bootstrap_port and bootstrap_room is served; incomplete or mistyped fields are refused", async () => {
    const mock = await start({ engine: "sglang" });
    const leg = {
      prompt,
      max_tokens: 3,
      bootstrap_host: "10.0.0.7",
      bootstrap_port: 8998,
      bootstrap_room: 2 ** 53 - 1,
    };
    const served = await post(mock, "/v1/completions", leg);
    assert.equal(served.status, 200);
    assert.equal(served.json.choices[0].text, expectedText(3));
    assert.equal(mock.stats().legs.bootstrap, 1);
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ ...leg, bootstrap_room: undefined }, /^bootstrap_room: required with bootstrap_host, bootstrap_port/],
      [{ ...leg, bootstrap_port: "8998" }, /^bootstrap_port must be a port/],
      [{ ...leg, bootstrap_room: -1 }, /^bootstrap_room must be an integer ≥ 0/],
      [{ ...leg, bootstrap_host: "" }, /^bootstrap_host must be a non-empty string/],
    ];
    for (const [body, message] of cases) {
      const refused = await post(mock, "/v1/completions", body);
      assert.equal(refused.status, 400);
      assert.match(refused.json.error.message, message);
    }
    const vllm = await start();
    const wrong = await post(vllm, "/v1/completions", leg);
    assert.match(wrong.json.error.message, /SGLang's bootstrap protocol, but this engine is vllm/);
  });
});

describe("engine mock: the default sleep", () => {
  it("0 ms is a turn of the event loop, not a timer (Node's timers wait at least 1 ms)", async () => {
    // From an I/O callback the loop runs immediates before the next timers, so the order is fixed:
    // a sleep on a timer would end after the timer set before it.
    await new Promise((resolve) => stat(".", resolve));
    const order: string[] = [];
    const timer = new Promise<void>((resolve) =>
      setTimeout(() => {
        order.push("timer");
        resolve();
      }, 0),
    );
    await timerSleep(0, new AbortController().signal).then(() => order.push("sleep"));
    await timer;
    assert.deepEqual(order, ["sleep", "timer"]);
  });

  it("an aborted signal ends a 0 ms sleep, as it ends a timed one", async () => {
    const controller = new AbortController();
    const reason = new Error("client gone");
    controller.abort(reason);
    await assert.rejects(timerSleep(0, controller.signal), { name: "AbortError", cause: reason });
  });
});
