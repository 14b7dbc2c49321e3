/** Bounded reading of request and small response bodies: never more than the limit in memory. */
import type { IncomingMessage } from "node:http";

export type BodyRead =
  | { readonly ok: true; readonly bytes: Buffer }
  | { readonly ok: false; readonly tooLarge: boolean; readonly reason: string };

/**
 * Reads `stream` to its end, refusing (and destroying it) past `maxBytes`. A stream that fails
 * or is aborted midway reads as not ok with `tooLarge` false.
 */
export async function readBounded(
  stream: AsyncIterable<unknown> & { destroy(): void },
  maxBytes: number,
): Promise<BodyRead> {
  const chunks: Buffer[] = [];
  let length = 0;
  try {
    for await (const chunk of stream) {
      const bytes = typeof chunk === "string" ? Buffer.from(chunk) : (chunk as Buffer);
      length += bytes.length;
      if (length > maxBytes) {
        stream.destroy();
        return { ok: false, tooLarge: true, reason: `body larger than ${maxBytes} bytes` };
      }
      chunks.push(bytes);
    }
  } catch (error) {
    return { ok: false, tooLarge: false, reason: error instanceof Error ? error.message : String(error) };
  }
  return { ok: true, bytes: Buffer.concat(chunks, length) };
}

/**
 * Reads a client's request body up to `maxBytes`. Past the limit it stops keeping bytes and
 * resolves at once, leaving the socket open so a 413 can still be sent (with `Connection: close`,
 * which ends the rest of the upload). A `Content-Length` over the limit is refused unread.
 */
export function readRequestBody(req: IncomingMessage, maxBytes: number): Promise<BodyRead> {
  const tooLarge: BodyRead = { ok: false, tooLarge: true, reason: `request body larger than ${maxBytes} bytes` };
  const declared = Number(req.headers["content-length"] ?? Number.NaN);
  if (declared > maxBytes) {
    req.resume();
    return Promise.resolve(tooLarge);
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let length = 0;
    const onData = (chunk: Buffer): void => {
      length += chunk.length;
      if (length <= maxBytes) {
        chunks.push(chunk);
        return;
      }
      req.off("data", onData);
      req.resume();
      resolve(tooLarge);
    };
    req.on("data", onData);
    req.once("end", () => {
      resolve({ ok: true, bytes: Buffer.concat(chunks, length) });
    });
    req.once("error", (error) => {
      resolve({ ok: false, tooLarge: false, reason: error.message });
    });
    req.once("close", () => {
      resolve({ ok: false, tooLarge: false, reason: "the client closed the connection" });
    });
  });
}
