/**
 * The answering leg's body to the client, as it arrives: each chunk written at once, the engine's
 * stream paused while the client's socket is full (backpressure), nothing accumulated. A client
 * that goes away destroys the engine's stream (the request's AbortSignal has already aborted the
 * leg); an engine stream that fails cuts the client's response (its status is sent: a cut is all
 * that is left to say).
 *
 * Not `stream.pipeline`: it builds an AbortController and an AbortError for every response it
 * finishes, a few percent of a proxied request's CPU. And the headers are not flushed on their
 * own: they leave with the first body chunk — one socket write instead of two for an answer that
 * arrives whole — or, when no chunk is there yet (a stream waiting for its first token), on the
 * next turn of the event loop, so a client still gets the status as soon as the engine sent it.
 */
import type { ServerResponse } from "node:http";
import type { Readable } from "node:stream";

/** Resolves when the client's response has closed: complete, cut, or the client gone. Never rejects. */
export function relay(source: Readable, res: ServerResponse, onChunk: (chunk: Buffer) => void): Promise<void> {
  return new Promise((resolve) => {
    // Cancelled by the first chunk or the end; `headersSent` is no guide, as it is true from
    // `writeHead` on, before anything went out.
    const flush = setImmediate(() => {
      if (!res.destroyed && !res.writableEnded) res.flushHeaders();
    });
    const onDrain = (): void => {
      source.resume();
    };
    source.on("data", (chunk: Buffer) => {
      clearImmediate(flush);
      // Destroyed by the client's leaving; the engine's stream is destroyed once "close" comes.
      if (res.destroyed) return;
      onChunk(chunk);
      if (!res.write(chunk)) source.pause();
    });
    source.once("end", () => {
      clearImmediate(flush);
      res.end();
    });
    source.once("error", () => {
      res.destroy();
    });
    res.on("drain", onDrain);
    res.once("close", () => {
      clearImmediate(flush);
      res.off("drain", onDrain);
      if (!source.readableEnded) source.destroy();
      resolve();
    });
  });
}
