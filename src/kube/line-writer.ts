/**
 * A pino destination for a process's JSON lines (the router's access log above all): lines are
 * gathered in memory and written to a file descriptor with one asynchronous write per
 * `flushChars` gathered, and at least every `intervalMs`, so a line per request is not a write
 * per request and the event loop never waits on the output.
 *
 * Why not `pino.destination` (sonic-boom) in its asynchronous mode: in the router at one access
 * line per request it cost about 7 µs more CPU per request than this writer, a tenth of the
 * router's own (docs/design/router.md, "The access log's writer"); its synchronous mode blocks the
 * event loop on a full pipe, stalling every request on a slow log reader.
 *
 * Contract: lines are written whole and in order. A descriptor that is not ready (`EAGAIN`: a
 * full non-blocking pipe) is tried again after `retryMs` while lines keep gathering; past
 * `maxPendingChars` waiting, new lines are dropped and counted, and once writing resumes one line
 * says how many were lost. Another write error (`EPIPE`: nobody reads) loses the lines of that
 * write, counted the same way. `flushSync` writes what is gathered, synchronously (at exit); a
 * write already handed to the system completes on its own, so at exit those older lines may land
 * after the ones `flushSync` wrote.
 */
import { write as fsWrite, writeSync as fsWriteSync } from "node:fs";

/** The system calls the writer makes; tests pass fakes. */
export interface LineWriterIo {
  write(fd: number, buffer: Buffer, done: (error: NodeJS.ErrnoException | null, written: number) => void): void;
  writeSync(fd: number, buffer: Buffer): number;
  /** Runs `run` after `ms`, not keeping the process alive for it. */
  later(run: () => void, ms: number): void;
}

export interface LineWriterOptions {
  /** A write starts once this many characters have gathered. Default 16 Ki. */
  readonly flushChars?: number;
  /** Lines beyond this many characters waiting are dropped (counted). Default 4 Mi. */
  readonly maxPendingChars?: number;
  /** What gathered is written at least this often. Default 1 s (Envoy's access-log flush). */
  readonly intervalMs?: number;
  /** A descriptor not ready is tried again after this long. Default 10 ms. */
  readonly retryMs?: number;
  readonly io?: LineWriterIo;
}

const NODE_IO: LineWriterIo = {
  write: (fd, buffer, done) => {
    fsWrite(fd, buffer, 0, buffer.length, null, done);
  },
  writeSync: (fd, buffer) => fsWriteSync(fd, buffer, 0, buffer.length),
  later: (run, ms) => {
    setTimeout(run, ms).unref();
  },
};

export class LineWriter {
  readonly #fd: number;
  readonly #flushChars: number;
  readonly #maxPendingChars: number;
  readonly #retryMs: number;
  readonly #io: LineWriterIo;
  #pending: string[] = [];
  #pendingChars = 0;
  /** A write is with the system (or waiting to be retried): the next one waits for it. */
  #writing = false;
  /** Lines lost since the last report of them. */
  #dropped = 0;

  constructor(fd: number, options: LineWriterOptions = {}) {
    this.#fd = fd;
    this.#flushChars = options.flushChars ?? 16 * 1024;
    this.#maxPendingChars = options.maxPendingChars ?? 4 * 1024 * 1024;
    this.#retryMs = options.retryMs ?? 10;
    this.#io = options.io ?? NODE_IO;
    const intervalMs = options.intervalMs ?? 1000;
    const tick = (): void => {
      this.#flush();
      this.#io.later(tick, intervalMs);
    };
    this.#io.later(tick, intervalMs);
  }

  /** Takes one line (pino's lines end with a newline); false when it was dropped. */
  write(line: string): boolean {
    if (this.#pendingChars + line.length > this.#maxPendingChars) {
      this.#dropped += 1;
      return false;
    }
    this.#pending.push(line);
    this.#pendingChars += line.length;
    if (this.#pendingChars >= this.#flushChars) this.#flush();
    return true;
  }

  /** Writes what has gathered now, synchronously; lines a full pipe refuses are counted as lost. */
  flushSync(): void {
    const buffer = this.#take();
    if (buffer === undefined) return;
    try {
      for (let offset = 0; offset < buffer.length;) offset += this.#io.writeSync(this.#fd, buffer.subarray(offset));
    } catch {
      this.#dropped += countLines(buffer);
    }
  }

  /** Starts writing what has gathered, unless a write is under way (its end starts the next). */
  #flush(): void {
    if (this.#writing) return;
    const buffer = this.#take();
    if (buffer !== undefined) this.#send(buffer);
  }

  /** What has gathered as one buffer, led by a line counting the lines lost before it. */
  #take(): Buffer | undefined {
    if (this.#pending.length === 0 && this.#dropped === 0) return undefined;
    const lost = this.#dropped === 0 ? "" : droppedLine(this.#dropped);
    this.#dropped = 0;
    const buffer = Buffer.from(lost + this.#pending.join(""), "utf8");
    this.#pending = [];
    this.#pendingChars = 0;
    return buffer;
  }

  #send(buffer: Buffer): void {
    this.#writing = true;
    this.#io.write(this.#fd, buffer, (error, written) => {
      if (error?.code === "EAGAIN") {
        this.#io.later(() => {
          this.#send(buffer);
        }, this.#retryMs);
        return;
      }
      if (error === null && written < buffer.length) {
        this.#send(buffer.subarray(written));
        return;
      }
      if (error !== null) this.#dropped += countLines(buffer);
      this.#writing = false;
      if (this.#pendingChars >= this.#flushChars) this.#flush();
    });
  }
}

/** The line that reports `count` lost lines, in pino's shape (level 40: warn). */
function droppedLine(count: number): string {
  return `${JSON.stringify({ level: 40, time: new Date().toISOString(), msg: `${count} log line(s) lost: the output did not keep up or failed` })}\n`;
}

function countLines(buffer: Buffer): number {
  let lines = 0;
  for (let at = buffer.indexOf(10); at >= 0; at = buffer.indexOf(10, at + 1)) lines += 1;
  return lines;
}
