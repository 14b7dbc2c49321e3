/**
 * Requests to the Kubernetes API on @kubernetes/client-node: its KubeConfig supplies the server,
 * TLS and credentials (kubeconfig, in-cluster token with rotation, exec plugins), its fetch-based
 * HTTP library sends. On top: the permission check against `PERMISSIONS`, a per-request timeout,
 * 429 retries honouring `Retry-After`, JSON bodies, and newline-delimited watch streams.
 *
 * Plumbing only: the HTTP exchange is a `Send` function, so tests run the logic on a fake.
 */
import { IsomorphicFetchHttpLibrary, RequestContext } from "@kubernetes/client-node";
import type { HttpMethod, KubeConfig } from "@kubernetes/client-node";
import type { Kind } from "../engine/ports.ts";
import { KubeHttpError, httpError, transportError } from "./errors.ts";
import { PERMISSIONS, RESOURCES, isPermitted, resourcePath } from "./resources.ts";
import type { Permission, Target, Verb } from "./resources.ts";

export interface HttpRequest {
  readonly method: string;
  /** Path and query, from the server root (`/api/v1/pods?watch=true`). */
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string | undefined;
  readonly signal: AbortSignal;
}

export interface HttpResponse {
  readonly status: number;
  /** Lower-case header names. */
  readonly headers: Readonly<Record<string, string>>;
  text(): Promise<string>;
  /** The body as a stream (watches); null when there is none. */
  stream(): ReadableStream<Uint8Array> | null;
}

/** One HTTP exchange; rejects only when no response arrived. */
export type Send = (request: HttpRequest) => Promise<HttpResponse>;

/** A `Send` on client-node: server, TLS and credentials from `config`'s current context. */
export function clientNodeSend(config: KubeConfig): Send {
  const library = new IsomorphicFetchHttpLibrary();
  return async (request) => {
    const cluster = config.getCurrentCluster();
    if (cluster === null) throw new Error("the kubeconfig has no current cluster");
    const context = new RequestContext(
      `${cluster.server.replace(/\/$/, "")}${request.path}`,
      request.method as HttpMethod,
    );
    for (const [name, value] of Object.entries(request.headers)) context.setHeaderParam(name, value);
    if (request.body !== undefined) context.setBody(request.body);
    context.setSignal(request.signal);
    await config.applySecurityAuthentication(context);
    const response = await library.send(context).toPromise();
    return {
      status: response.httpStatusCode,
      headers: response.headers,
      text: () => response.body.text(),
      stream: () => response.body.stream(),
    };
  };
}

/** One API request: the verb (RBAC name) on `kind` at `target`. */
export interface Access {
  readonly verb: Verb;
  readonly kind: Kind;
  readonly target: Target;
  readonly query?: Readonly<Record<string, string>>;
  /** JSON-serialised as the request body. */
  readonly body?: unknown;
  /** Default `application/json`. */
  readonly contentType?: string;
}

export interface TransportOptions {
  /** The requests this transport may send; anything else throws before sending. Default PERMISSIONS. */
  readonly permissions?: readonly Permission[];
  /** Bound on one non-watch request, answer included. Default 30 000. */
  readonly requestTimeoutMs?: number;
  /** 429 answers retried before giving up. Default 8. */
  readonly maxThrottleRetries?: number;
  /** Cap on one 429 wait; without `Retry-After` the wait is 1 s. Default 10 000. */
  readonly maxRetryAfterMs?: number;
  /** Waits `ms`; injected by tests. Default: a timer. */
  readonly sleep?: (ms: number) => Promise<void>;
  /** Called for every failed request (after its retries), for metrics. */
  readonly onError?: (verb: Verb, kind: Kind, error: KubeHttpError) => void;
  /** Called for every request sent (each retry too), for metrics. */
  readonly onRequest?: (verb: Verb, kind: Kind) => void;
}

const METHODS: Readonly<Record<Verb, string>> = {
  get: "GET",
  list: "GET",
  watch: "GET",
  create: "POST",
  update: "PUT",
  patch: "PATCH",
  delete: "DELETE",
};

export class KubeTransport {
  readonly #send: Send;
  readonly #requestTimeoutMs: number;
  readonly #maxThrottleRetries: number;
  readonly #maxRetryAfterMs: number;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly #onError: TransportOptions["onError"];
  readonly #onRequest: TransportOptions["onRequest"];
  readonly #permissions: readonly Permission[];

  constructor(send: Send, options: TransportOptions = {}) {
    this.#send = send;
    this.#requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
    this.#maxThrottleRetries = options.maxThrottleRetries ?? 8;
    this.#maxRetryAfterMs = options.maxRetryAfterMs ?? 10_000;
    this.#sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.#onError = options.onError;
    this.#onRequest = options.onRequest;
    this.#permissions = options.permissions ?? PERMISSIONS;
  }

  /**
   * Sends `access` and resolves with the parsed JSON body (undefined when empty). Rejects with a
   * KubeHttpError; throws a plain Error for a request outside `PERMISSIONS` (a bug).
   */
  async request(access: Access): Promise<unknown> {
    const response = await this.#exchange(access, undefined);
    const text = await response.text();
    return text === "" ? undefined : (JSON.parse(text) as unknown);
  }

  /**
   * Opens a watch (`access.verb` must be "watch") and yields each event object of the stream
   * until it ends. Aborting `signal` ends the stream with an error. No timeout of its own: the
   * caller's watchdog decides when a silent stream is dead.
   */
  async watch(access: Access, signal: AbortSignal): Promise<AsyncIterable<unknown>> {
    const response = await this.#exchange(access, signal);
    const stream = response.stream();
    if (stream === null) throw transportError(describe(access), new Error("watch response without a body"));
    return jsonLines(stream);
  }

  /** The response of a 2xx answer, after 429 retries; rejects with a KubeHttpError otherwise. */
  async #exchange(access: Access, watchSignal: AbortSignal | undefined): Promise<HttpResponse> {
    assertPermitted(this.#permissions, access);
    for (let attempt = 0; ; attempt++) {
      try {
        const response = await this.#sendOnce(access, watchSignal);
        if (response.status >= 200 && response.status < 300) return response;
        const error = httpError(describe(access), response.status, await response.text(), response.headers);
        if (response.status !== 429 || attempt >= this.#maxThrottleRetries) throw error;
        await this.#sleep(Math.min(this.#maxRetryAfterMs, (error.retryAfterSeconds ?? 1) * 1_000));
      } catch (error) {
        const failure = error instanceof KubeHttpError ? error : transportError(describe(access), error);
        this.#onError?.(access.verb, access.kind, failure);
        throw failure;
      }
    }
  }

  #sendOnce(access: Access, watchSignal: AbortSignal | undefined): Promise<HttpResponse> {
    const query = new URLSearchParams({
      ...access.query,
      ...(access.verb === "watch" ? { watch: "true" } : {}),
    }).toString();
    const path = resourcePath(RESOURCES[access.kind], access.target) + (query === "" ? "" : `?${query}`);
    const headers: Record<string, string> = { accept: "application/json" };
    if (access.body !== undefined) headers["content-type"] = access.contentType ?? "application/json";
    const signal = watchSignal ?? AbortSignal.timeout(this.#requestTimeoutMs);
    const body = access.body === undefined ? undefined : JSON.stringify(access.body);
    this.#onRequest?.(access.verb, access.kind);
    return this.#send({ method: METHODS[access.verb], path, headers, body, signal });
  }
}

/** Throws for a request outside `permissions`: the shipped RBAC would refuse it. */
export function assertPermitted(permissions: readonly Permission[], access: Access): void {
  const resource = RESOURCES[access.kind];
  const name =
    access.target.subresource === undefined ? resource.plural : `${resource.plural}/${access.target.subresource}`;
  if (!isPermitted(permissions, resource.group, name, access.verb)) {
    throw new Error(
      `${access.verb} ${name}.${resource.group || "core"} is not in the permission list (src/kube/resources.ts); add it there so RBAC grants it`,
    );
  }
}

function describe(access: Access): string {
  const resource = RESOURCES[access.kind];
  const where = access.target.namespace === undefined ? "" : `${access.target.namespace}/`;
  const name = access.target.name === undefined ? "" : ` ${where}${access.target.name}`;
  return `${access.verb} ${resource.plural}${access.target.subresource === undefined ? "" : `/${access.target.subresource}`}${name}`;
}

/** Parses a newline-delimited JSON stream; blank lines are skipped, a bad line ends the stream with an error. */
async function* jsonLines(stream: ReadableStream<Uint8Array>): AsyncGenerator {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of stream) {
    buffer += decoder.decode(chunk, { stream: true });
    let newline = buffer.indexOf("\n");
    while (newline !== -1) {
      const line = buffer.slice(0, newline).trim();
      buffer = buffer.slice(newline + 1);
      if (line !== "") yield JSON.parse(line) as unknown;
      newline = buffer.indexOf("\n");
    }
  }
  const rest = buffer.trim();
  if (rest !== "") yield JSON.parse(rest) as unknown;
}
