/**
 * The data plane (DESIGN §7): an OpenAI-compatible proxy on node:http in front of engine entry
 * pods, legs sent over undici. What it decides comes from the pure functions of `src/router/`
 * (`chooseTarget`, the leg bodies); this file only moves bytes, and keeps the rules of a proxy
 * that never loses track of a request:
 * - responses are never buffered: the upstream body is relayed to the client with backpressure
 *   (leg.ts);
 * - a client that disconnects aborts every leg of its request at once (one AbortSignal);
 * - an attempt is retried on another endpoint (or pair) only while nothing has been sent to the
 *   client, never on a 4xx, at most `retries.attempts` times; the last attempt's 5xx is passed on;
 * - every refusal is an OpenAI-shaped JSON error (errors.ts).
 */
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { compareStrings } from "../../core/maps.ts";
import { isJsonObject } from "../../engine/json.ts";
import type { JsonObject } from "../../engine/ports.ts";
import type { Discovery } from "../discovery.ts";
import type { Endpoint } from "../endpoints.ts";
import { nixlDecodeBody, nixlPrefillBody, sglangBody } from "../legs.ts";
import { routesByModel } from "../route.ts";
import type { RouterRoute } from "../route.ts";
import type { EngineLoad, TieBreak } from "../select.ts";
import { chooseTarget, targetEndpoints } from "../target.ts";
import type { Target } from "../target.ts";
import { readRequestBody } from "./body.ts";
import { EngineScraper } from "./engine-scraper.ts";
import { sendError } from "./errors.ts";
import type { RouterError } from "./errors.ts";
import { InFlight } from "./inflight.ts";
import { AnswerTap } from "./observer.ts";
import type { RequestRecord, RouterObserver } from "./observer.ts";
import { classifyFailure, Upstreams } from "./upstream.ts";
import type { LegFailure } from "./upstream.ts";
import type { LegResponse } from "./leg.ts";

export const DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024;
export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
const COMPLETION_PATHS = new Set(["/v1/completions", "/v1/chat/completions"]);
/** Client-supplied request ids longer than this, or with other characters, are replaced. */
const REQUEST_ID = /^[\x21-\x7e]{1,200}$/;
/** Response headers that describe one connection, not the message (RFC 9110 §7.6.1). */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);
/** Headers of the engine's answer the router sets itself. */
const ROUTER_SET = new Set(["x-request-id"]);
/** Client request headers a leg carries on, besides the request id. */
const FORWARDED_REQUEST_HEADERS = ["authorization", "accept"];

export interface RequestRouterOptions {
  readonly discovery: Discovery;
  /** Tie-breaks and SGLang bootstrap rooms; seeded by the caller. */
  readonly rng: TieBreak;
  /**
   * The latest engine reading of an endpoint (undefined: in-flight counts alone decide it).
   * Default: each endpoint's `/metrics` scraped at most every second (`EngineScraper`).
   */
  readonly engineLoad?: (endpoint: Endpoint, route: RouterRoute) => EngineLoad | undefined;
  /** Wall time for the default scraper's reading ages. Default `Date.now`. */
  readonly nowMs?: () => number;
  /** Adds `x-tandem-endpoint`/`-prefill`/`-decode`/`-revision` to answers (DESIGN §7). */
  readonly debugHeaders?: boolean;
  /** Larger request bodies get 413. Default 8 MiB; also bounds a prefill's JSON answer. */
  readonly maxBodyBytes?: number;
  readonly connectTimeoutMs?: number;
  /** Request ids for requests that bring none. Default: random UUIDs. */
  readonly newRequestId?: () => string;
  /** Told of every request, failed leg and retry (metrics, access log). */
  readonly observer?: RouterObserver;
  /**
   * Why this replica must not route now (not registered, fenced, stopping: DESIGN §3.1);
   * completion requests are then answered 503 with it. Undefined: always routes.
   */
  readonly refusal?: () => string | undefined;
}

/** What is known of a request so far, for its `RequestRecord`. */
interface Trace {
  model: string;
  attempts: number;
  endpoints: readonly string[];
  role: string;
  revision: string;
  firstByteMs: number | undefined;
  tap: AnswerTap | undefined;
}

/** One client request being proxied. */
interface Exchange {
  readonly res: ServerResponse;
  readonly route: RouterRoute;
  readonly path: string;
  readonly raw: Buffer;
  readonly body: JsonObject;
  readonly headers: Readonly<Record<string, string>>;
  /** Aborted when the client goes away. */
  readonly signal: AbortSignal;
  readonly trace: Trace;
}

/** A leg that got response headers, counted in flight until `release`. */
interface SentLeg {
  readonly endpoint: Endpoint;
  readonly response: LegResponse;
  readonly release: () => void;
}

type Sent = ({ readonly ok: true } & SentLeg) | { readonly ok: false; readonly failure: LegFailure };

/** `done`: the client has its answer (or is gone); otherwise nothing was sent and another attempt may follow. */
type Outcome =
  { readonly done: true } | { readonly done: false; readonly failed: readonly string[]; readonly failure: LegFailure };
const DONE: Outcome = { done: true };
/** Which SGLang leg settled the attempt first. */
type First =
  { readonly kind: "decode"; readonly sent: Sent } | { readonly kind: "prefill"; readonly failure: LegFailure };

export class RequestRouter {
  /** This replica's legs in flight per endpoint key: selection and the drain confirmation read it. */
  readonly inFlight = new InFlight();
  /** The default engine scraper (absent when `engineLoad` was given); the drain confirmation asks it too. */
  readonly engineScraper: EngineScraper | undefined;
  readonly #options: RequestRouterOptions;
  readonly #upstreams: Upstreams;
  readonly #maxBodyBytes: number;
  readonly #engineLoad: (endpoint: Endpoint, route: RouterRoute) => EngineLoad | undefined;
  readonly #nowMs: () => number;
  #server: Server | undefined;
  #routesMemo: { routes: readonly RouterRoute[]; byModel: Map<string, RouterRoute> } | undefined;

  /** Throws, naming the option, when a size or timeout is not a positive integer. */
  constructor(options: RequestRouterOptions) {
    for (const name of ["maxBodyBytes", "connectTimeoutMs"] as const) {
      const value = options[name];
      if (value !== undefined && !(Number.isSafeInteger(value) && value > 0))
        throw new Error(`router option ${name} must be a positive integer, got ${value}`);
    }
    this.#options = options;
    this.#maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    const upstreams = new Upstreams({ connectTimeoutMs: options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS });
    this.#upstreams = upstreams;
    this.#nowMs = options.nowMs ?? Date.now;
    if (options.engineLoad !== undefined) {
      this.#engineLoad = options.engineLoad;
      this.engineScraper = undefined;
    } else {
      const scraper = new EngineScraper({ upstreams, nowMs: this.#nowMs });
      this.engineScraper = scraper;
      this.#engineLoad = (endpoint, route) => scraper.reading(endpoint, route.engine);
    }
  }

  /** Listens on `host:port` (port 0: any free port); resolves with the bound address. */
  async listen(host: string, port: number): Promise<AddressInfo> {
    const server = createServer({ noDelay: true }, (req, res) => {
      this.handle(req, res);
    });
    this.#server = server;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, resolve);
    });
    return server.address() as AddressInfo;
  }

  /** Stops listening, cuts open connections (their legs abort with them) and closes the pools. */
  async close(): Promise<void> {
    const server = this.#server;
    if (server !== undefined) {
      const closed = new Promise((resolve) => server.close(resolve));
      server.closeAllConnections();
      await closed;
    }
    await this.#upstreams.close();
  }

  /** The node:http request listener; never throws. */
  handle(req: IncomingMessage, res: ServerResponse): void {
    this.#handle(req, res).catch((error: unknown) => {
      sendError(res, {
        code: "internal_error",
        message: `router error: ${error instanceof Error ? error.message : String(error)}`,
      });
    });
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    if (path === "/v1/models") {
      if (req.method !== "GET")
        sendError(res, { code: "method_not_allowed", message: `${path} takes GET` }, { allow: "GET" });
      else this.#models(res);
      return;
    }
    if (!COMPLETION_PATHS.has(path)) {
      sendError(res, {
        code: "not_found",
        message: `no such path ${path}: the router serves /v1/completions, /v1/chat/completions and /v1/models`,
      });
      return;
    }
    if (req.method !== "POST") {
      sendError(res, { code: "method_not_allowed", message: `${path} takes POST` }, { allow: "POST" });
      return;
    }
    await this.#completion(req, res, path);
  }

  #routes(): Map<string, RouterRoute> {
    const routes = this.#options.discovery.routes();
    if (this.#routesMemo?.routes !== routes) this.#routesMemo = { routes, byModel: routesByModel(routes).winners };
    return this.#routesMemo.byModel;
  }

  #models(res: ServerResponse): void {
    const data = [...this.#routes().values()]
      .sort((a, b) => compareStrings(a.model, b.model))
      .map((route) => ({
        id: route.model,
        object: "model",
        created: createdSeconds(route),
        owned_by: route.namespace,
      }));
    const bytes = JSON.stringify({ object: "list", data });
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(bytes) });
    res.end(bytes);
  }

  async #completion(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const requestIdHeader = req.headers["x-request-id"];
    const requestId =
      typeof requestIdHeader === "string" && REQUEST_ID.test(requestIdHeader)
        ? requestIdHeader
        : (this.#options.newRequestId ?? randomUUID)();
    res.setHeader("x-request-id", requestId);
    const client = new AbortController();
    const trace: Trace = {
      model: "",
      attempts: 0,
      endpoints: [],
      role: "",
      revision: "",
      firstByteMs: undefined,
      tap: undefined,
    };
    const startedMs = this.#nowMs();
    res.once("close", () => {
      if (!res.writableFinished) client.abort();
      this.#options.observer?.requestDone(
        recordOf(trace, {
          id: requestId,
          path,
          status: res.headersSent ? res.statusCode : 0,
          startedMs,
          endedMs: this.#nowMs(),
          complete: res.writableFinished,
        }),
      );
    });
    const read = await readRequestBody(req, this.#maxBodyBytes);
    if (!read.ok) {
      if (read.tooLarge) sendError(res, { code: "request_too_large", message: read.reason }, { connection: "close" });
      return;
    }
    const parsed = parseRequest(read.bytes, this.#routes());
    if ("route" in parsed) trace.model = parsed.route.model;
    if ("code" in parsed) {
      sendError(res, parsed);
      return;
    }
    const refusal = this.#options.refusal?.();
    if (refusal !== undefined) {
      sendError(res, { code: "router_unavailable", message: refusal });
      return;
    }
    const headers: Record<string, string> = { "x-request-id": requestId, "content-type": "application/json" };
    for (const name of FORWARDED_REQUEST_HEADERS) {
      const value = req.headers[name];
      if (typeof value === "string") headers[name] = value;
    }
    await this.#proxy({
      res,
      route: parsed.route,
      path,
      raw: read.bytes,
      body: parsed.body,
      headers,
      signal: client.signal,
      trace,
    });
  }

  /** Attempts until one answers the client, a failure may not be retried, or attempts run out. */
  async #proxy(exchange: Exchange): Promise<void> {
    const { route } = exchange;
    const excluded = new Set<string>();
    const attempts = 1 + route.retries.attempts;
    let lastFailure: LegFailure | undefined;
    const { observer } = this.#options;
    for (let attempt = 0; attempt < attempts && !exchange.signal.aborted; attempt++) {
      if (attempt > 0) observer?.retried(route);
      const decision = chooseTarget({
        route,
        pods: this.#options.discovery.pods(route),
        revisions: (name) => this.#options.discovery.revision(route.namespace, name),
        loadOf: (endpoint) => ({
          inFlight: this.inFlight.count(endpoint.key),
          engine: this.#engineLoad(endpoint, route),
        }),
        rng: this.#options.rng,
        excluded,
      });
      if (!decision.ok) {
        const reason = `model ${route.model}: ${decision.reason}`;
        sendError(
          exchange.res,
          lastFailure === undefined
            ? { code: "no_eligible_endpoint", message: reason }
            : { ...lastFailure, message: `${lastFailure.message}; no other endpoint to retry on (${reason})` },
        );
        return;
      }
      exchange.trace.attempts++;
      exchange.trace.endpoints = targetEndpoints(decision.target).map((endpoint) => endpoint.pod);
      const outcome = await this.#attempt(exchange, decision.target, attempt === attempts - 1);
      if (outcome.done) return;
      for (const key of outcome.failed) {
        excluded.add(key);
        observer?.legFailed(route, key, outcome.failure);
      }
      lastFailure = outcome.failure;
      if (!lastFailure.retryable) break;
    }
    if (lastFailure !== undefined) sendError(exchange.res, lastFailure);
  }

  #attempt(exchange: Exchange, target: Target, last: boolean): Promise<Outcome> {
    switch (target.protocol) {
      case "aggregated":
        return this.#aggregated(exchange, target.endpoint, last);
      case "nixl":
        return this.#nixl(exchange, target, last);
      case "sglang":
        return this.#sglang(exchange, target, last);
    }
  }

  /** One leg with the client's bytes as they came. */
  async #aggregated(exchange: Exchange, endpoint: Endpoint, last: boolean): Promise<Outcome> {
    const sent = await this.#send(exchange, endpoint, exchange.raw, exchange.signal);
    if (!sent.ok) return failed(endpoint, sent.failure);
    return this.#deliver(exchange, sent, last, {
      "x-tandem-endpoint": endpoint.pod,
      "x-tandem-revision": endpoint.revision,
    });
  }

  /**
   * vLLM NIXL: the prefill leg to its JSON answer, then the decode leg streamed to the client. The
   * decode is counted in flight from the moment it is chosen, prefill included: otherwise a drain
   * mark arriving during the prefill could be confirmed for a decode about to get this request.
   */
  async #nixl(exchange: Exchange, target: Target & { protocol: "nixl" }, last: boolean): Promise<Outcome> {
    const { prefill, decode } = target;
    const debug = pairHeaders(prefill, decode);
    const holdDecode = this.inFlight.begin(decode.key);
    let decodeBody: string;
    try {
      const pre = await this.#send(exchange, prefill, JSON.stringify(nixlPrefillBody(exchange.body)), exchange.signal);
      if (!pre.ok) return failed(prefill, pre.failure);
      // An error answer of the prefill is the request's answer (4xx) or a reason to retry (5xx).
      if (pre.response.statusCode >= 400) return await this.#deliver(exchange, pre, last, debug);
      const answer = await pre.response.body.read(this.#maxBodyBytes);
      pre.release();
      if (exchange.signal.aborted) return DONE;
      const json = answer.ok ? parseJson(answer.bytes) : undefined;
      const leg = nixlDecodeBody(exchange.body, json, prefill);
      if (!leg.ok)
        return failed(prefill, {
          code: "upstream_error",
          message: answer.ok ? leg.reason : `prefill ${prefill.pod}: ${answer.reason}`,
          retryable: true,
          reason: "prefill_answer_unusable",
        });
      decodeBody = JSON.stringify(leg.body);
    } finally {
      // The decode leg's own count (`#send`) begins at once below, so the decode is never at zero.
      holdDecode();
    }
    const dec = await this.#send(exchange, decode, decodeBody, exchange.signal);
    if (!dec.ok) return failed(decode, dec.failure);
    return this.#deliver(exchange, dec, last, debug);
  }

  /**
   * SGLang: both legs at once with one bootstrap room; the decode's answer is the client's. A
   * prefill that fails before the decode answers fails the attempt (and aborts the decode, which
   * would wait for KV that never comes); the prefill's own answer is read and dropped, and a
   * prefill still running when the decode is done is aborted.
   */
  async #sglang(exchange: Exchange, target: Target & { protocol: "sglang" }, last: boolean): Promise<Outcome> {
    const { prefill, decode, bootstrapRoom } = target;
    const body = JSON.stringify(sglangBody(exchange.body, prefill, bootstrapRoom));
    const legs = new AbortController();
    const signal = AbortSignal.any([exchange.signal, legs.signal]);
    const prefillFailure = this.#send(exchange, prefill, body, signal).then((sent) =>
      settlePrefill(sent, this.#maxBodyBytes),
    );
    const decodeLeg = this.#send(exchange, decode, body, signal);
    const decodeFirst: Promise<First> = decodeLeg.then((sent) => ({ kind: "decode", sent }));
    // A prefill that succeeds leaves the race to the decode.
    const prefillFirst: Promise<First> = prefillFailure.then((failure) =>
      failure === undefined ? decodeFirst : { kind: "prefill", failure },
    );
    const first = await Promise.race([decodeFirst, prefillFirst]);
    if (first.kind === "prefill") {
      legs.abort();
      const dec = await decodeLeg;
      if (dec.ok) {
        dec.response.body.destroy();
        dec.release();
      }
      return failed(prefill, first.failure);
    }
    if (!first.sent.ok) {
      legs.abort();
      return failed(decode, first.sent.failure);
    }
    const outcome = await this.#deliver(exchange, first.sent, last, pairHeaders(prefill, decode));
    // The decode is done (or failed): a prefill still waiting in the room would only hold KV.
    legs.abort();
    return outcome;
  }

  /** Sends one leg, counted in flight on its endpoint from now until its body is done. */
  async #send(exchange: Exchange, endpoint: Endpoint, body: string | Buffer, signal: AbortSignal): Promise<Sent> {
    const release = this.inFlight.begin(endpoint.key);
    try {
      const response = await this.#upstreams.send({
        endpoint,
        route: exchange.route,
        path: exchange.path,
        body,
        headers: exchange.headers,
        signal,
      });
      return { ok: true, endpoint, response, release };
    } catch (error) {
      release();
      return { ok: false, failure: classifyFailure(error, endpoint) };
    }
  }

  /**
   * Passes a leg's answer to the client: status, headers and the body piped as it arrives. A 5xx
   * is retried instead while attempts remain (nothing has been sent yet). Once streaming, an
   * upstream failure can only cut the response short.
   */
  async #deliver(exchange: Exchange, sent: SentLeg, last: boolean, debug: Record<string, string>): Promise<Outcome> {
    const { response, release, endpoint } = sent;
    if (response.statusCode >= 500 && !last) {
      await response.body.dump();
      release();
      return failed(endpoint, {
        code: "upstream_error",
        message: `${endpoint.pod} answered ${response.statusCode}`,
        retryable: true,
        reason: "status_5xx",
      });
    }
    const { res } = exchange;
    if (res.destroyed) {
      response.body.destroy();
      release();
      return DONE;
    }
    res.writeHead(
      response.statusCode,
      forwardedHeaders(response.headers, this.#options.debugHeaders === true ? debug : {}),
    );
    const { trace } = exchange;
    trace.role = endpoint.role;
    trace.revision = endpoint.revision;
    const tap = new AnswerTap(() => {
      trace.firstByteMs = this.#nowMs();
    });
    trace.tap = tap;
    // Neither side's failure rejects: the client left (its abort already went to every leg) or
    // the engine cut the stream, and either way the response is closed.
    await response.body.relay(res, (chunk) => {
      tap.observe(chunk);
    });
    release();
    return DONE;
  }
}

function recordOf(
  trace: Trace,
  end: { id: string; path: string; status: number; startedMs: number; endedMs: number; complete: boolean },
): RequestRecord {
  const usage = trace.tap?.usage();
  return {
    id: end.id,
    path: end.path,
    model: trace.model,
    status: end.status,
    endpoints: trace.endpoints,
    role: trace.role,
    revision: trace.revision,
    attempts: trace.attempts,
    durationMs: end.endedMs - end.startedMs,
    ttftMs: trace.firstByteMs === undefined ? undefined : trace.firstByteMs - end.startedMs,
    promptTokens: usage?.promptTokens,
    completionTokens: usage?.completionTokens,
    complete: end.complete,
  };
}

function failed(endpoint: Endpoint, failure: LegFailure): Outcome {
  return { done: false, failed: [endpoint.key], failure };
}

function pairHeaders(prefill: Endpoint, decode: Endpoint): Record<string, string> {
  return { "x-tandem-prefill": prefill.pod, "x-tandem-decode": decode.pod, "x-tandem-revision": decode.revision };
}

/** The SGLang prefill leg's answer read and dropped; a failure when it got none or an error status. */
async function settlePrefill(sent: Sent, maxBytes: number): Promise<LegFailure | undefined> {
  if (!sent.ok) return sent.failure;
  const { response, release, endpoint } = sent;
  const text = await response.body.read(maxBytes);
  release();
  if (response.statusCode < 400) return undefined;
  const detail = text.ok ? text.bytes.toString("utf8").slice(0, 500) : text.reason;
  return {
    code: "upstream_error",
    message: `prefill ${endpoint.pod} answered ${response.statusCode}: ${detail}`,
    retryable: response.statusCode >= 500,
    reason: response.statusCode >= 500 ? "status_5xx" : "prefill_status_4xx",
  };
}

/** The client's JSON body and its route, or the 400/404 to answer. */
function parseRequest(
  bytes: Buffer,
  routes: ReadonlyMap<string, RouterRoute>,
): { body: JsonObject; route: RouterRoute } | RouterError {
  const body = parseJson(bytes);
  if (!isJsonObject(body)) return { code: "invalid_json", message: "the request body must be a JSON object" };
  const model = body.model;
  if (typeof model !== "string" || model === "")
    return { code: "missing_model", message: "the request body needs a string field model" };
  const route = routes.get(model);
  if (route === undefined) {
    const known = [...routes.keys()].sort();
    return {
      code: "model_not_found",
      message: `the model ${JSON.stringify(model)} does not exist; ${known.length === 0 ? "no models are served" : `models: ${known.join(", ")}`}`,
    };
  }
  return { body, route };
}

function parseJson(bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString("utf8"));
  } catch {
    return undefined;
  }
}

/** The engine's answer headers the client gets, then `extra` (one object: this runs for every answer). */
function forwardedHeaders(
  headers: LegResponse["headers"],
  extra: Readonly<Record<string, string>>,
): Record<string, string | string[]> {
  const kept: Record<string, string | string[]> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined && !HOP_BY_HOP.has(name) && !ROUTER_SET.has(name)) kept[name] = value;
  }
  for (const name in extra) kept[name] = extra[name] as string;
  return kept;
}

function createdSeconds(route: RouterRoute): number {
  const ms = route.creationTimestamp === undefined ? Number.NaN : Date.parse(route.creationTimestamp);
  return Number.isNaN(ms) ? 0 : Math.floor(ms / 1000);
}
