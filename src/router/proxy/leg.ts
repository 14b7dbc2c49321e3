/**
 * One leg to an engine over undici's dispatch handler API, and what can be done with its answer's
 * body: relay it to the client, read it (bounded), drop it. The handler is the only buffer there
 * is: no Readable and no promise per chunk stand between the engine's socket and the client's,
 * which is about a fifth of a proxied request's CPU against `Agent.request` (docs/design/router.md).
 *
 * Relaying keeps the data plane's rules: each chunk is written to the client as it arrives, the
 * engine's socket is paused while the client's is full (backpressure) and resumed on `drain`, a
 * client that goes away aborts the leg, an engine that fails midway cuts the client's response.
 * The status and headers leave with the first body chunk — one socket write for an answer that
 * arrives whole — or, when no chunk is there yet (a stream waiting for its first token), on the
 * next turn of the event loop, so a client still gets the status as soon as the engine sent it.
 */
import type { IncomingHttpHeaders, ServerResponse } from "node:http";
import type { Dispatcher } from "undici";
import type { BodyRead } from "./body.ts";

/** At most this much of a dropped answer is read to keep its connection (undici's `dump` default). */
export const DUMP_LIMIT_BYTES = 128 * 1024;

/** What a body's consumer is told, in order: chunks, then one end or one error. */
interface Sink {
  data(chunk: Buffer): void;
  end(): void;
  error(error: Error): void;
}

/** The answer's body. Exactly one of `relay`, `read`, `dump` or `destroy` may be called, once. */
export interface LegBody {
  /**
   * Relays the body to the client, `onChunk` seeing each chunk before it is written. Resolves
   * when the client's response has closed: complete, cut, or the client gone. Never rejects.
   */
  relay(res: ServerResponse, onChunk: (chunk: Buffer) => void): Promise<void>;
  /** Reads the body to its end; past `maxBytes` the leg is aborted and the read is refused. */
  read(maxBytes: number): Promise<BodyRead>;
  /**
   * Reads the body to its end and drops it, keeping the connection for the next leg; a body past
   * `DUMP_LIMIT_BYTES` is not worth its connection, and the leg is aborted instead.
   */
  dump(): Promise<void>;
  /** Aborts the leg: the engine sees its request closed. */
  destroy(): void;
}

export interface LegResponse {
  readonly statusCode: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: LegBody;
}

/**
 * The dispatch handler of one leg and its body. `response` resolves when the answer's headers
 * arrive and rejects with undici's error when none does (connect failure, timeout, abort).
 */
export class Leg implements Dispatcher.DispatchHandler, LegBody {
  readonly response: Promise<LegResponse>;
  #controller: Dispatcher.DispatchController | undefined;
  /** An abort asked for before undici handed over the controller. */
  #abortReason: Error | undefined;
  #headersArrived = false;
  #rejectResponse: (error: Error) => void = () => undefined;
  #resolveResponse: (response: LegResponse) => void = () => undefined;
  /** Chunks, end or error that came before a consumer did. */
  #queued: Buffer[] = [];
  #done: { error: Error | undefined } | undefined;
  #sink: Sink | undefined;
  readonly #onSettled: () => void;

  /** `onSettled` runs once, when the body has ended or failed or the leg was aborted. */
  constructor(onSettled: () => void) {
    this.#onSettled = onSettled;
    this.response = new Promise((resolve, reject) => {
      this.#resolveResponse = resolve;
      this.#rejectResponse = reject;
    });
  }

  /** Aborts the leg with `reason`, now or as soon as undici starts it. */
  abort(reason: Error): void {
    if (this.#done !== undefined) return;
    if (this.#controller !== undefined) {
      this.#controller.abort(reason);
      return;
    }
    // Still waiting for a connection: the leg fails now (undici aborts it once it starts), so
    // a client that left, or a retry, never waits out a connect.
    this.#abortReason = reason;
    if (!this.#headersArrived) this.#rejectResponse(reason);
    this.#settle(reason);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.#abortReason !== undefined) controller.abort(this.#abortReason);
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    this.#headersArrived = true;
    this.#resolveResponse({ statusCode, headers, body: this });
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#sink === undefined) this.#queued.push(chunk);
    else this.#sink.data(chunk);
  }

  onResponseEnd(): void {
    this.#settle(undefined);
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    if (!this.#headersArrived) this.#rejectResponse(error);
    this.#settle(error);
  }

  relay(res: ServerResponse, onChunk: (chunk: Buffer) => void): Promise<void> {
    return new Promise((resolve) => {
      // Nothing to send with the headers yet: they go on their own at the next turn, unless a
      // chunk or the end comes first (`headersSent` is no guide: it is true from `writeHead` on).
      let flush =
        this.#queued.length === 0 && this.#done === undefined
          ? setImmediate(() => {
              if (!res.destroyed && !res.writableEnded) res.flushHeaders();
            })
          : undefined;
      const cancelFlush = (): void => {
        if (flush !== undefined) clearImmediate(flush);
        flush = undefined;
      };
      // Pause and resume act on the connection's parser: once this body is done, it is the next request's.
      const onDrain = (): void => {
        if (this.#done === undefined) this.#controller?.resume();
      };
      res.on("drain", onDrain);
      res.once("close", () => {
        cancelFlush();
        res.off("drain", onDrain);
        // An Error is costly to build (its stack): only when there is a leg left to abort.
        if (this.#done === undefined) this.abort(new Error("the client closed the connection"));
        resolve();
      });
      this.#attach({
        data: (chunk) => {
          cancelFlush();
          if (res.destroyed) return;
          onChunk(chunk);
          if (!res.write(chunk) && this.#done === undefined) this.#controller?.pause();
        },
        end: () => {
          cancelFlush();
          res.end();
        },
        error: () => res.destroy(),
      });
    });
  }

  read(maxBytes: number): Promise<BodyRead> {
    return new Promise((resolve) => {
      const chunks: Buffer[] = [];
      let length = 0;
      this.#attach({
        data: (chunk) => {
          length += chunk.length;
          if (length <= maxBytes) chunks.push(chunk);
          else if (length - chunk.length <= maxBytes) {
            this.abort(new Error("body too large"));
            resolve({ ok: false, tooLarge: true, reason: `body larger than ${maxBytes} bytes` });
          }
        },
        end: () => {
          resolve({ ok: true, bytes: Buffer.concat(chunks, length) });
        },
        error: (error) => {
          resolve({ ok: false, tooLarge: length > maxBytes, reason: error.message });
        },
      });
    });
  }

  dump(): Promise<void> {
    return new Promise((resolve) => {
      let length = 0;
      this.#attach({
        data: (chunk) => {
          length += chunk.length;
          if (length > DUMP_LIMIT_BYTES) this.abort(new Error("dropped answer too long to read to its end"));
        },
        end: resolve,
        error: () => {
          resolve();
        },
      });
    });
  }

  destroy(): void {
    this.abort(new Error("the leg's answer was dropped"));
  }

  /** Hands what is queued to `sink`, then everything that comes. */
  #attach(sink: Sink): void {
    const queued = this.#queued;
    this.#queued = [];
    for (const chunk of queued) sink.data(chunk);
    this.#sink = sink;
    if (this.#done === undefined) return;
    if (this.#done.error === undefined) sink.end();
    else sink.error(this.#done.error);
  }

  #settle(error: Error | undefined): void {
    if (this.#done !== undefined) return;
    this.#done = { error };
    this.#onSettled();
    if (this.#sink === undefined) return;
    if (error === undefined) this.#sink.end();
    else this.#sink.error(error);
  }
}
