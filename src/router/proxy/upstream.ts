/**
 * Legs to engines over undici: one Agent, which keeps a keep-alive Pool per endpoint origin, each
 * leg dispatched with its own handler (leg.ts), and the classification of what can go wrong
 * before an answer arrives.
 */
import { Agent } from "undici";
import type { Dispatcher } from "undici";
import type { Address, Endpoint } from "../endpoints.ts";
import type { RouterRoute } from "../route.ts";
import type { RouterError } from "./errors.ts";
import { Leg } from "./leg.ts";
import type { LegResponse } from "./leg.ts";

export interface LegRequest {
  readonly endpoint: Endpoint;
  readonly route: RouterRoute;
  /** `/v1/completions` or `/v1/chat/completions`, as the client asked. */
  readonly path: string;
  readonly body: string | Buffer;
  /** Sent as they are: the caller includes `content-type`. */
  readonly headers: Readonly<Record<string, string>>;
  readonly signal: AbortSignal;
}

/** An engine's `/metrics` page, as the scrapers read it. */
export type ScrapeResponse = Dispatcher.ResponseData;

/** Why a leg got no answer: the error the client sees if no other attempt succeeds. */
export interface LegFailure extends RouterError {
  /** The leg's endpoint may be retried elsewhere: nothing suggests the request itself is bad. */
  readonly retryable: boolean;
  /** A short label for metrics: connect_timeout, first_byte_timeout, connect_failed, status_5xx, ... */
  readonly reason: string;
}

export class Upstreams {
  readonly #agent: Agent;

  constructor(options: { connectTimeoutMs: number }) {
    this.#agent = new Agent({ connect: { timeout: options.connectTimeoutMs }, keepAliveTimeout: 30_000 });
  }

  /**
   * Sends one leg: resolves when the response headers arrive (the first byte, bounded by the
   * route's `firstByteSeconds`), its body then bounded between chunks by `idleSeconds`; rejects on
   * connection failure, timeout or abort (`classifyFailure` reads the error). The leg is aborted
   * when `signal` is, until its body has ended or failed.
   */
  send(request: LegRequest): Promise<LegResponse> {
    const { signal } = request;
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    const onAbort = (): void => {
      leg.abort(signal.reason as Error);
    };
    const leg = new Leg(() => {
      signal.removeEventListener("abort", onAbort);
    });
    signal.addEventListener("abort", onAbort, { once: true });
    this.#agent.dispatch(
      {
        origin: originOf(request.endpoint.address),
        path: request.path,
        method: "POST",
        headers: request.headers,
        body: request.body,
        headersTimeout: request.route.timeouts.firstByteSeconds * 1000,
        bodyTimeout: request.route.timeouts.idleSeconds * 1000,
      },
      leg,
    );
    return leg.response;
  }

  /** A GET (an engine's `/metrics`) whose headers and body must each arrive within `timeoutMs`. */
  get(address: Address, path: string, timeoutMs: number): Promise<ScrapeResponse> {
    return this.#agent.request({
      origin: originOf(address),
      path,
      method: "GET",
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
  }

  /** Closes idle connections and waits for the ones in use. */
  close(): Promise<void> {
    return this.#agent.close();
  }
}

function originOf(address: Address): string {
  return `http://${address.host.includes(":") ? `[${address.host}]` : address.host}:${address.port}`;
}

const CONNECT_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EPIPE",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
]);

/**
 * What a failed `send` means for the client. Connection failures are retried on another endpoint
 * (the engine never started the request); a first-byte timeout is not (the engine may be working
 * on it: a second copy doubles the load that made it slow) and answers 504.
 */
export function classifyFailure(error: unknown, endpoint: Endpoint): LegFailure {
  const code = typeof error === "object" && error !== null && "code" in error ? String(error.code) : "";
  const at = `${endpoint.pod} (${endpoint.address.host}:${endpoint.address.port})`;
  if (code === "UND_ERR_CONNECT_TIMEOUT")
    return {
      code: "upstream_timeout",
      message: `connecting to ${at} timed out`,
      retryable: true,
      reason: "connect_timeout",
    };
  if (code === "UND_ERR_HEADERS_TIMEOUT")
    return {
      code: "upstream_timeout",
      message: `${at} sent no response within the route's firstByteSeconds`,
      retryable: false,
      reason: "first_byte_timeout",
    };
  const detail = error instanceof Error ? error.message : String(error);
  const retryable = CONNECT_CODES.has(code);
  return {
    code: "upstream_error",
    message: `${at}: ${detail}`,
    retryable,
    reason: retryable ? "connect_failed" : "transport_error",
  };
}
