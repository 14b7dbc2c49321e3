/**
 * A load of streaming chat completions, for the e2e tests and `tandem demo --serve --clients N`:
 * `concurrency` clients send requests one after another, round-robin over `routers`, until `total`
 * have been sent or `stop()` is called, each classified as ok (status 200 and the stream ended
 * with `data: [DONE]`), failed (no 200: refused, 503, ...) or cut (a 200 whose stream ended early
 * or broke). Every request has a deadline.
 */
import { Agent, request } from "undici";
import type { Outcomes } from "../outcomes.ts";

export interface LoadCounts extends Outcomes {
  sent: number;
  /** Failed requests a decode refused for their prefill's KV format (engine-mock: "kv format mismatch"). */
  kvMismatch: number;
  /** Failed requests by status (0: no response at all), for the assertion message. */
  failedByStatus: Record<string, number>;
  /** The first few failure bodies, for the assertion message. */
  samples: string[];
}

export interface LoadOptions {
  /** `http://127.0.0.1:PORT` of each router. */
  readonly routers: readonly string[];
  readonly model: string;
  /** Requests to send at most (`Infinity`: until `stop()`). */
  readonly total: number;
  readonly concurrency: number;
  /** Tokens generated per request. */
  readonly maxTokens: number;
  /** Deadline of one request. */
  readonly requestTimeoutMs: number;
}

export interface Load {
  readonly counts: LoadCounts;
  /** Resolves once every client has stopped (after `total` requests or `stop()`). */
  readonly done: Promise<void>;
  /** Sends no more requests; those in flight finish. */
  stop(): void;
}

const MAX_SAMPLES = 5;

export function startLoad(options: LoadOptions): Load {
  const counts: LoadCounts = { sent: 0, ok: 0, failed: 0, cut: 0, kvMismatch: 0, failedByStatus: {}, samples: [] };
  const agent = new Agent({ connections: options.concurrency, keepAliveTimeout: 10_000 });
  let stopped = false;
  const client = async (): Promise<void> => {
    while (!stopped && counts.sent < options.total) {
      const router = options.routers[counts.sent % options.routers.length] ?? "";
      counts.sent++;
      await one(agent, router, options, counts);
    }
  };
  const done = Promise.all(Array.from({ length: options.concurrency }, client)).then(() => agent.close());
  return {
    counts,
    done,
    stop: () => {
      stopped = true;
    },
  };
}

async function one(agent: Agent, router: string, options: LoadOptions, counts: LoadCounts): Promise<void> {
  const body = JSON.stringify({
    model: options.model,
    messages: [{ role: "user", content: "Say something." }],
    max_tokens: options.maxTokens,
    stream: true,
  });
  let status = 0;
  try {
    const response = await request(`${router}/v1/chat/completions`, {
      method: "POST",
      dispatcher: agent,
      headers: { "content-type": "application/json" },
      body,
      signal: AbortSignal.timeout(options.requestTimeoutMs),
    });
    status = response.statusCode;
    const text = await response.body.text();
    if (status !== 200) {
      fail(counts, status, text);
      return;
    }
    if (text.trimEnd().endsWith("data: [DONE]")) counts.ok++;
    else counts.cut++;
  } catch (error) {
    // A 200 whose body broke is cut; anything before the status line is a failure.
    if (status === 200) counts.cut++;
    else fail(counts, 0, String(error));
  }
}

function fail(counts: LoadCounts, status: number, text: string): void {
  counts.failed++;
  if (text.includes("kv format mismatch")) counts.kvMismatch++;
  counts.failedByStatus[status] = (counts.failedByStatus[status] ?? 0) + 1;
  if (counts.samples.length < MAX_SAMPLES) counts.samples.push(`${status}: ${text.slice(0, 300)}`);
}
