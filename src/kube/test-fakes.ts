/**
 * Test doubles for the adapter: a scripted `Send` that records every request and answers from
 * a handler, response builders (JSON bodies, watch streams that stay open until aborted), and a
 * driver that runs the adapter's async loops on a virtual clock.
 */
import { setImmediate as nextTurn } from "node:timers/promises";
import type { HttpRequest, HttpResponse, Send } from "./transport.ts";

export interface Recorded extends HttpRequest {
  /** Parsed JSON body, if any. */
  readonly json: unknown;
}

/** A response with a JSON (or empty) body. */
export function jsonResponse(status: number, body?: unknown, headers: Record<string, string> = {}): HttpResponse {
  const text = body === undefined ? "" : JSON.stringify(body);
  return { status, headers, text: () => Promise.resolve(text), stream: () => null };
}

/**
 * A 200 watch response streaming `lines` (each JSON-serialised), then staying open until
 * `signal` aborts, or ending when `end` is true.
 */
export function watchResponse(lines: readonly unknown[], signal: AbortSignal, end = false): HttpResponse {
  const encoder = new TextEncoder();
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const line of lines) controller.enqueue(encoder.encode(`${JSON.stringify(line)}\n`));
      if (end) controller.close();
      else
        signal.addEventListener(
          "abort",
          () => {
            controller.error(new DOMException("aborted", "AbortError"));
          },
          { once: true },
        );
    },
  });
  return { status: 200, headers: {}, text: () => Promise.resolve(""), stream: () => stream };
}

/** A Send answering with `handler`, recording each request in `requests`. */
export function fakeSend(handler: (request: Recorded) => HttpResponse | Promise<HttpResponse>): {
  send: Send;
  requests: Recorded[];
} {
  const requests: Recorded[] = [];
  const send: Send = async (request) => {
    const recorded = {
      ...request,
      json: request.body === undefined ? undefined : (JSON.parse(request.body) as unknown),
    };
    requests.push(recorded);
    return handler(recorded);
  };
  return { send, requests };
}

/** `group resource verb` of a recorded request, by its method and path. */
export function permissionOf(request: Recorded): string {
  const [path = "", query = ""] = request.path.split("?");
  const parts = path.split("/").filter((part) => part !== "");
  const group = parts[0] === "api" ? "" : (parts[1] ?? "");
  const rest = parts.slice(parts[0] === "api" ? 2 : 3);
  const afterNamespace = rest[0] === "namespaces" ? rest.slice(2) : rest;
  const [plural = "", name, subresource] = afterNamespace;
  const resource = subresource === undefined ? plural : `${plural}/${subresource}`;
  const verbs: Record<string, string> = {
    POST: "create",
    PUT: "update",
    PATCH: "patch",
    DELETE: "delete",
    GET: new URLSearchParams(query).get("watch") === "true" ? "watch" : name === undefined ? "list" : "get",
  };
  return `${group} ${resource} ${verbs[request.method] ?? request.method}`;
}

/** The part of the simulator's VirtualClock that `until` drives. */
interface SteppedClock {
  nowMs(): number;
  /** Fires the next pending timer(s); false when none is pending. */
  next(): boolean;
}

/**
 * Drives code running on a virtual clock until `check` holds: one event-loop turn lets its promise
 * chains run until they wait on the clock (the fake transport does no I/O, so a turn drains them),
 * then the clock's next timer fires (a watchdog, a backoff, a retry period), and so on. No
 * wall-clock time is involved: the same steps happen on every run.
 */
export async function until(clock: SteppedClock, what: string, check: () => boolean, maxTimers = 20): Promise<void> {
  for (let fired = 0; ; fired++) {
    await nextTurn();
    if (check()) return;
    if (fired === maxTimers || !clock.next())
      throw new Error(`${what}: not reached after ${fired} timers, at ${clock.nowMs()} virtual ms`);
  }
}
