/**
 * What the data plane reports about the requests it proxies, for metrics and the access log: one
 * record per completion request when its response has closed, every failed leg, every retry. The
 * router calls an observer synchronously and never waits on it; an observer must not throw.
 */
import type { RouterRoute } from "../route.ts";
import type { LegFailure } from "./upstream.ts";

/** One completion request, as the access log prints it. */
export interface RequestRecord {
  readonly id: string;
  readonly path: string;
  /** The request's `model`; "" when the body named none (a 400 before routing). */
  readonly model: string;
  /** The HTTP status sent to the client (0 when the client left before any). */
  readonly status: number;
  /** The pods of the attempt that answered (prefill first), or of the last attempt. */
  readonly endpoints: readonly string[];
  /** The role whose answer the client got (serve or decode role); "" when none answered. */
  readonly role: string;
  /** The revision of the pod that produced the tokens; "" when none answered. */
  readonly revision: string;
  readonly attempts: number;
  readonly durationMs: number;
  /** From the request's arrival to the first body byte sent to the client. */
  readonly ttftMs: number | undefined;
  /** The engine's `usage`, when its answer carried one (non-streamed, or `include_usage`). */
  readonly promptTokens: number | undefined;
  readonly completionTokens: number | undefined;
  /** False when the response was cut (the client left, or the engine's stream broke). */
  readonly complete: boolean;
}

export interface RouterObserver {
  requestDone(record: RequestRecord): void;
  /** A leg failed on `endpoint` (`<namespace>/<pod>`); the request may still succeed elsewhere. */
  legFailed(route: RouterRoute, endpoint: string, failure: LegFailure): void;
  /** The request is being tried again, on another endpoint or pair. */
  retried(route: RouterRoute): void;
}

/** Several observers as one. */
export function allObservers(observers: readonly RouterObserver[]): RouterObserver {
  return {
    requestDone: (record) => {
      for (const observer of observers) observer.requestDone(record);
    },
    legFailed: (route, endpoint, failure) => {
      for (const observer of observers) observer.legFailed(route, endpoint, failure);
    },
    retried: (route) => {
      for (const observer of observers) observer.retried(route);
    },
  };
}

/** Bytes of the answer's end kept to find its `usage`: the last SSE events, or a JSON body's tail. */
const TAIL_BYTES = 4_096;

/**
 * Sees each chunk of the answer on its way to the client (`observe`, before it is written): notes
 * when the first one passed and keeps the answer's tail, to read token counts from.
 */
export class AnswerTap {
  #tail = "";
  #first = false;
  readonly #onFirstChunk: () => void;

  constructor(onFirstChunk: () => void) {
    this.#onFirstChunk = onFirstChunk;
  }

  observe(chunk: Buffer): void {
    if (!this.#first) {
      this.#first = true;
      this.#onFirstChunk();
    }
    // Only the last TAIL_BYTES of the chunk can end up in the tail.
    const text = chunk.toString("latin1", Math.max(0, chunk.length - TAIL_BYTES));
    this.#tail =
      this.#tail.length + text.length <= TAIL_BYTES ? this.#tail + text : (this.#tail + text).slice(-TAIL_BYTES);
  }

  /** The last `usage` figures seen in the answer's tail. */
  usage(): { promptTokens: number | undefined; completionTokens: number | undefined } {
    return {
      promptTokens: lastCount(this.#tail, "prompt_tokens"),
      completionTokens: lastCount(this.#tail, "completion_tokens"),
    };
  }
}

/** `: 123` right where it is applied (sticky). */
const COUNT_AFTER_KEY = /\s*:\s*(\d+)/y;

/** The number after the last `"field":` that has one (JSON whitespace allowed around the colon). */
function lastCount(text: string, field: string): number | undefined {
  const key = `"${field}"`;
  // A scan from the end rather than a regular expression over the whole tail: this runs twice per request.
  for (let at = text.lastIndexOf(key); at >= 0; at = at === 0 ? -1 : text.lastIndexOf(key, at - 1)) {
    COUNT_AFTER_KEY.lastIndex = at + key.length;
    const digits = COUNT_AFTER_KEY.exec(text)?.[1];
    if (digits !== undefined) return Number(digits);
  }
  return undefined;
}
