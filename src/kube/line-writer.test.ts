import assert from "node:assert/strict";
import { mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { LineWriter } from "./line-writer.ts";
import type { LineWriterIo } from "./line-writer.ts";

/** System calls under the test's control: writes complete when it says, timers run when it says. */
class FakeIo implements LineWriterIo {
  readonly written: string[] = [];
  /** Writes handed over and not yet completed. */
  readonly open: { buffer: Buffer; done: (error: NodeJS.ErrnoException | null, written: number) => void }[] = [];
  readonly timers: { run: () => void; ms: number }[] = [];

  write(_fd: number, buffer: Buffer, done: (error: NodeJS.ErrnoException | null, written: number) => void): void {
    this.open.push({ buffer, done });
  }
  writeSync(_fd: number, buffer: Buffer): number {
    this.written.push(buffer.toString("utf8"));
    return buffer.length;
  }
  later(run: () => void, ms: number): void {
    this.timers.push({ run, ms });
  }
  /** Completes the oldest open write with `bytes` written (all by default) or `code` failing it. */
  complete(outcome: { bytes?: number; code?: string } = {}): void {
    const write = this.open.shift();
    assert.ok(write !== undefined, "no write is open");
    if (outcome.code !== undefined) {
      write.done(Object.assign(new Error(outcome.code), { code: outcome.code }), 0);
      return;
    }
    const bytes = outcome.bytes ?? write.buffer.length;
    this.written.push(write.buffer.subarray(0, bytes).toString("utf8"));
    write.done(null, bytes);
  }
  /** Runs the timers due after `ms` (each once), in the order they were set. */
  runTimers(ms: number): void {
    const due = this.timers.filter((timer) => timer.ms === ms);
    for (const timer of due) this.timers.splice(this.timers.indexOf(timer), 1);
    for (const timer of due) timer.run();
  }
}

const line = (n: number): string => `{"n":${n}}\n`;

describe("LineWriter", () => {
  it("gathers lines and writes them in one write, in order, once flushChars have gathered", () => {
    const io = new FakeIo();
    const writer = new LineWriter(1, { flushChars: 24, io });
    writer.write(line(1));
    writer.write(line(2));
    assert.equal(io.open.length, 0, "16 characters: still gathering");
    writer.write(line(3));
    assert.equal(io.open.length, 1);
    writer.write(line(4));
    assert.equal(io.open.length, 1, "one write at a time");
    io.complete();
    assert.deepEqual(io.written, [line(1) + line(2) + line(3)]);
    assert.equal(io.open.length, 0, "line 4 alone waits for the interval");
    io.runTimers(1000);
    io.complete();
    assert.deepEqual(io.written.slice(1), [line(4)]);
    assert.ok(
      io.timers.some((timer) => timer.ms === 1000),
      "the interval goes on",
    );
  });

  it("sends the rest of a partial write first, and tries a descriptor that is not ready again after retryMs", () => {
    const io = new FakeIo();
    const writer = new LineWriter(1, { flushChars: 8, retryMs: 10, io });
    writer.write(line(1));
    io.complete({ bytes: 3 });
    io.complete({ code: "EAGAIN" });
    writer.write(line(2));
    assert.equal(io.open.length, 0, "nothing is sent while the refused write waits");
    io.runTimers(10);
    io.complete();
    io.complete();
    assert.equal(io.written.join(""), line(1) + line(2));
  });

  it("drops lines past maxPendingChars and lines whose write failed, and says how many once writing resumes", () => {
    const io = new FakeIo();
    const writer = new LineWriter(1, { flushChars: 8, maxPendingChars: 16, io });
    writer.write(line(1));
    io.complete({ code: "EAGAIN" });
    assert.equal(writer.write(line(2)), true);
    assert.equal(writer.write(line(3)), true);
    assert.equal(writer.write(line(4)), false, "24 characters would wait: dropped");
    io.runTimers(10);
    io.complete({ code: "EPIPE" });
    // Lines 2 and 3 went out after the failed write, led by the count of the 2 lines lost.
    io.complete();
    const [report, ...rest] = io.written.join("").split("\n");
    assert.match(report ?? "", /"level":40,.*"msg":"2 log line\(s\) lost/);
    assert.deepEqual(rest, ['{"n":2}', '{"n":3}', ""]);
  });

  it("writes what has gathered synchronously with flushSync, to a real file", () => {
    const dir = mkdtempSync(join(tmpdir(), "line-writer-"));
    try {
      const path = join(dir, "log");
      const writer = new LineWriter(openSync(path, "a"));
      writer.write(line(1));
      writer.write(line(2));
      writer.flushSync();
      writer.flushSync();
      assert.equal(readFileSync(path, "utf8"), line(1) + line(2));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
