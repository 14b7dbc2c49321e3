/**
 * `tandem engine-mock` (DESIGN §7): an OpenAI-compatible stand-in engine on node:http, for tests and
 * for `tandem demo --serve`. `startEngineMock(options)` serves
 *
 * - `POST /v1/completions`, `POST /v1/chat/completions`: JSON, or SSE with `stream: true`
 *   (`stream_options.include_usage` adds the usage chunk); deterministic text (`text.ts`); the
 *   first token after `ttftMs` (a decode leg: after `tpotMs`, its KV already computed), then one
 *   every `tpotMs`; at most `maxRunning` requests generate at once, the rest wait in order; a
 *   client that goes away stops its request at once (counted as aborted);
 * - both disaggregation protocols from the engine's side (`disagg.ts`);
 * - `GET /v1/models`, `GET /health`, `GET /metrics` (`metrics.ts`).
 *
 * Everything in an answer is a function of the request, the order of requests (ids, KV block
 * ids) and the injected clock (`created`); time passes through the injected `sleep`.
 */
import { createServer } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as delay, setImmediate as nextTurn } from "node:timers/promises";
import type { Engine } from "../../api/route.ts";
import type { Leg } from "./disagg.ts";
import { blocksFor, legOf, prefillTransferParams } from "./disagg.ts";
import { engineMetrics } from "./metrics.ts";
import type { EngineMetrics } from "./metrics.ts";
import type { AnswerHeader, Endpoint, Generation, Parsed } from "./openai.ts";
import { answerId, answerJson, closingEvents, errorJson, parseGeneration, tokenEvents } from "./openai.ts";
import { QueueFullError, Slots } from "./slots.ts";
import { tokenAt } from "./text.ts";

/** Waits `delayMs`, or rejects once the signal aborts (real timers: an AbortError whose cause is its reason). */
export type Sleep = (delayMs: number, signal: AbortSignal) => Promise<void>;

export interface EngineMockOptions {
  /** Default 127.0.0.1. */
  readonly host?: string;
  /** Default 0: any free port (`port` of the result says which). */
  readonly port?: number;
  readonly engine?: Engine;
  readonly ttftMs?: number;
  readonly tpotMs?: number;
  /** The KV format this engine writes (prefill) and reads (decode). */
  readonly kvFormat?: string;
  readonly maxRunning?: number;
  /** The model served: requests naming another get 404, as from vLLM. Unset: any model is served. */
  readonly model?: string;
  /** Milliseconds since the epoch, for `created`; default the system clock. */
  readonly nowMs?: () => number;
  /** How time passes between tokens; default real timers. */
  readonly sleep?: Sleep;
}

/** The defaults of `tandem engine-mock`'s flags (DESIGN §7). */
export const ENGINE_MOCK_DEFAULTS = {
  engine: "vllm",
  ttftMs: 50,
  tpotMs: 10,
  kvFormat: "v1",
  maxRunning: 256,
} as const satisfies EngineMockOptions;

/** What `/v1/models` lists and `model_name` labels when no model is set. */
export const ANY_MODEL_NAME = "engine-mock";
/** Requests that may wait beyond `maxRunning` before new ones are refused with 503. */
export const MAX_WAITING = 4096;
/** KV cache size in tokens, for `kv_cache_usage_perc` / `token_usage`. */
const KV_CAPACITY_TOKENS = 65_536;
/** Largest request body read. */
const MAX_BODY_BYTES = 4 * 1024 * 1024;

export interface EngineMockStats {
  /** Generation requests that reached the engine, refused ones included. */
  readonly received: number;
  readonly completed: number;
  /** Requests whose client went away first, waiting or running. */
  readonly aborted: number;
  /** Requests of any path answered with an error (4xx, 5xx). */
  readonly rejected: number;
  readonly running: number;
  readonly waiting: number;
  /** Accepted requests by leg. */
  readonly legs: Readonly<Record<Leg, number>>;
}

export interface EngineMock {
  /** `http://HOST:PORT`. */
  readonly url: string;
  readonly port: number;
  /** This engine's id in the kv_transfer_params it produces. */
  readonly engineId: string;
  readonly engine: Engine;
  readonly kvFormat: string;
  stats(): EngineMockStats;
  /** Stops listening, aborts every request in flight, closes every connection. */
  close(): Promise<void>;
}

type Settings = Required<Omit<EngineMockOptions, "model" | "host" | "port">> & { readonly model: string | undefined };

/** The mutable state of one engine. */
interface EngineState {
  readonly settings: Settings;
  readonly slots: Slots;
  readonly metrics: EngineMetrics;
  /** Per running request, the tokens it holds in the KV cache. */
  readonly cached: Map<AbortController, number>;
  readonly active: Set<AbortController>;
  readonly counts: {
    received: number;
    completed: number;
    aborted: number;
    rejected: number;
    requests: number;
    nextBlockId: number;
  };
  readonly legs: Record<Leg, number>;
  engineId: string;
}

/**
 * Node's timers wait at least a millisecond, so a delay of 0 is one turn of the event loop instead:
 * an engine asked for no delay answers at once, and a long generation still lets other requests
 * (and aborts) in between its tokens.
 */
export const timerSleep: Sleep = (delayMs, signal) =>
  delayMs > 0 ? delay(delayMs, undefined, { signal }) : nextTurn(undefined, { signal });

function settingsOf(options: EngineMockOptions): Settings {
  return {
    engine: options.engine ?? ENGINE_MOCK_DEFAULTS.engine,
    ttftMs: options.ttftMs ?? ENGINE_MOCK_DEFAULTS.ttftMs,
    tpotMs: options.tpotMs ?? ENGINE_MOCK_DEFAULTS.tpotMs,
    kvFormat: options.kvFormat ?? ENGINE_MOCK_DEFAULTS.kvFormat,
    maxRunning: options.maxRunning ?? ENGINE_MOCK_DEFAULTS.maxRunning,
    model: options.model,
    nowMs: options.nowMs ?? (() => Date.now()),
    sleep: options.sleep ?? timerSleep,
  };
}

function newState(settings: Settings): EngineState {
  const slots = new Slots(settings.maxRunning, MAX_WAITING);
  const cached = new Map<AbortController, number>();
  const kvUsage = (): number =>
    Math.min(1, [...cached.values()].reduce((sum, tokens) => sum + tokens, 0) / KV_CAPACITY_TOKENS);
  return {
    settings,
    slots,
    metrics: engineMetrics(settings.engine, settings.model ?? ANY_MODEL_NAME, {
      running: () => slots.running,
      waiting: () => slots.waiting,
      kvUsage,
    }),
    cached,
    active: new Set(),
    counts: { received: 0, completed: 0, aborted: 0, rejected: 0, requests: 0, nextBlockId: 0 },
    legs: { aggregated: 0, prefill: 0, decode: 0, bootstrap: 0 },
    engineId: "",
  };
}

/** Starts an engine mock; rejects (EADDRINUSE, EACCES, …) when it cannot listen. */
export async function startEngineMock(options: EngineMockOptions = {}): Promise<EngineMock> {
  const host = options.host ?? "127.0.0.1";
  const state = newState(settingsOf(options));
  const server = createServer((request, response) => {
    route(state, request, response).catch((error: unknown) => {
      if (!response.headersSent) reply(state, response, 500, errorJson(500, String(error)));
      else response.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const hostPart = host.includes(":") ? `[${host}]` : host;
  state.engineId = `engine-mock-${host}-${port}`;
  return {
    url: `http://${hostPart}:${port}`,
    port,
    engineId: state.engineId,
    engine: state.settings.engine,
    kvFormat: state.settings.kvFormat,
    stats: () => statsOf(state),
    close: () => closeEngine(state, server),
  };
}

function statsOf(state: EngineState): EngineMockStats {
  const { received, completed, aborted, rejected } = state.counts;
  return {
    received,
    completed,
    aborted,
    rejected,
    running: state.slots.running,
    waiting: state.slots.waiting,
    legs: { ...state.legs },
  };
}

function closeEngine(state: EngineState, server: Server): Promise<void> {
  for (const job of state.active) job.abort(new Error("engine mock stopped"));
  return new Promise((resolve) => {
    server.close(() => {
      resolve();
    });
    server.closeAllConnections();
  });
}

async function route(state: EngineState, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const path = (request.url ?? "/").split("?")[0] ?? "/";
  const endpoint: Endpoint | undefined =
    path === "/v1/completions" ? "completion" : path === "/v1/chat/completions" ? "chat" : undefined;
  const method = endpoint === undefined ? "GET" : "POST";
  if (request.method !== method) reply(state, response, 405, errorJson(405, `${path} takes ${method}`));
  else if (endpoint !== undefined) await serveGeneration(state, endpoint, request, response);
  else if (path === "/health") response.writeHead(200).end();
  else if (path === "/v1/models") reply(state, response, 200, modelList(state));
  else if (path === "/metrics")
    response
      .writeHead(200, { "content-type": state.metrics.registry.contentType })
      .end(await state.metrics.registry.metrics());
  else reply(state, response, 404, errorJson(404, `no route ${path}`));
}

function reply(state: EngineState, response: ServerResponse, status: number, body: unknown): void {
  if (status >= 400) state.counts.rejected += 1;
  response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
}

function modelList(state: EngineState): Record<string, unknown> {
  const id = state.settings.model ?? ANY_MODEL_NAME;
  const created = Math.floor(state.settings.nowMs() / 1000);
  return {
    object: "list",
    data: [{ id, object: "model", created, owned_by: state.settings.engine, root: id, parent: null }],
  };
}

async function readJson(request: IncomingMessage): Promise<Parsed<unknown>> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes > MAX_BODY_BYTES)
      return { ok: false, message: `the request body is larger than ${MAX_BODY_BYTES} bytes` };
    chunks.push(chunk);
  }
  try {
    return { ok: true, value: JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown };
  } catch (error) {
    return {
      ok: false,
      message: `the request body is not JSON: ${error instanceof Error ? error.message : String(error)}`,
    };
  }
}

/** A checked request: what to generate, on which leg, under which header. */
interface Accepted {
  readonly generation: Generation;
  readonly leg: Leg;
  readonly header: AnswerHeader;
  readonly requestId: string;
}

/** An error answer: HTTP status and message. */
interface Refusal {
  readonly status: number;
  readonly message: string;
}

/** Reads and checks a generation request. */
async function accept(state: EngineState, endpoint: Endpoint, request: IncomingMessage): Promise<Accepted | Refusal> {
  const body = await readJson(request);
  if (!body.ok) return { status: 400, message: body.message };
  const generation = parseGeneration(endpoint, body.value);
  if (!generation.ok) return { status: 400, message: generation.message };
  const model = generation.value.body.model ?? state.settings.model ?? ANY_MODEL_NAME;
  if (state.settings.model !== undefined && model !== state.settings.model)
    return { status: 404, message: `The model \`${model}\` does not exist.` };
  const leg = legOf(generation.value.body, state.settings.engine, state.settings.kvFormat);
  if (!leg.ok) return { status: 400, message: leg.message };
  state.legs[leg.value] += 1;
  state.counts.requests += 1;
  const headerId = request.headers["x-request-id"];
  // vLLM takes the caller's X-Request-Id as the request id, so both legs of a pair share it.
  const requestId =
    typeof headerId === "string" && /^[\w.:-]{1,128}$/.test(headerId) ? headerId : `mock-${state.counts.requests}`;
  const header = { id: answerId(endpoint, requestId), created: Math.floor(state.settings.nowMs() / 1000), model };
  return { generation: generation.value, leg: leg.value, header, requestId };
}

async function serveGeneration(
  state: EngineState,
  endpoint: Endpoint,
  request: IncomingMessage,
  response: ServerResponse,
): Promise<void> {
  state.counts.received += 1;
  const accepted = await accept(state, endpoint, request);
  if ("status" in accepted) {
    reply(state, response, accepted.status, errorJson(accepted.status, accepted.message));
    return;
  }
  const job = new AbortController();
  state.active.add(job);
  response.once("close", () => {
    if (!response.writableFinished) job.abort(new Error("client went away"));
  });
  try {
    await state.slots.acquire(job.signal);
  } catch (error) {
    state.active.delete(job);
    if (error instanceof QueueFullError)
      reply(state, response, 503, errorJson(503, `the engine is full: ${error.message}`));
    else aborted(state, accepted.generation, 0);
    return;
  }
  await run(state, accepted, job, response);
}

/** Generates the answer of a running request, then frees its slot. */
async function run(
  state: EngineState,
  accepted: Accepted,
  job: AbortController,
  response: ServerResponse,
): Promise<void> {
  const { generation } = accepted;
  let generated = 0;
  state.cached.set(job, generation.promptTokens);
  try {
    if (generation.stream)
      response
        .writeHead(200, {
          "content-type": "text/event-stream",
          "cache-control": "no-cache",
          "x-request-id": accepted.requestId,
        })
        .flushHeaders();
    let text = "";
    for await (const token of tokens(state, accepted, job.signal)) {
      generated += 1;
      state.cached.set(job, generation.promptTokens + generated);
      if (generation.stream) response.write(tokenEvents(generation, accepted.header, generated - 1, token));
      else text += token;
    }
    if (generation.stream) response.end(closingEvents(generation, accepted.header));
    else
      response
        .writeHead(200, { "content-type": "application/json", "x-request-id": accepted.requestId })
        .end(JSON.stringify(answerJson(generation, accepted.header, text, prefillExtra(state, accepted))));
    state.counts.completed += 1;
    state.metrics.finished(generation.finishReason, generation.promptTokens, generated);
  } catch {
    aborted(state, generation, generated);
    response.destroy();
  } finally {
    state.cached.delete(job);
    state.active.delete(job);
    state.slots.release();
  }
}

function aborted(state: EngineState, generation: Generation, generated: number): void {
  state.counts.aborted += 1;
  state.metrics.finished("abort", generation.promptTokens, generated);
}

async function* tokens(state: EngineState, accepted: Accepted, signal: AbortSignal): AsyncGenerator<string> {
  const { sleep, ttftMs, tpotMs } = state.settings;
  // A decode leg has its KV from the prefill: its first token costs one decode step, not a prefill.
  const firstMs = accepted.leg === "decode" ? tpotMs : ttftMs;
  for (let index = 0; index < accepted.generation.completionTokens; index++) {
    await sleep(index === 0 ? firstMs : tpotMs, signal);
    yield tokenAt(accepted.generation.prompt, index);
  }
}

/** A prefill capped by max_tokens hands its KV to the decode (vLLM: only when LENGTH_CAPPED). */
function prefillExtra(state: EngineState, accepted: Accepted): Record<string, unknown> {
  if (accepted.leg !== "prefill" || accepted.generation.finishReason !== "length") return {};
  const firstBlockId = state.counts.nextBlockId;
  state.counts.nextBlockId += blocksFor(accepted.generation.promptTokens);
  const identity = {
    engineId: state.engineId,
    requestId: accepted.requestId,
    kvFormat: state.settings.kvFormat,
    firstBlockId,
  };
  return { kv_transfer_params: prefillTransferParams(identity, accepted.generation.promptTokens) };
}
