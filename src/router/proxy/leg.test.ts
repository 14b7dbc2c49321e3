import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import type { ServerResponse } from "node:http";
import { describe, it } from "node:test";
import type { Dispatcher } from "undici";
import { DUMP_LIMIT_BYTES, Leg } from "./leg.ts";

/** What the leg did to undici's side of the connection. */
class FakeController implements Dispatcher.DispatchController {
  readonly calls: string[] = [];
  aborted = false;
  paused = false;
  reason: Error | null = null;
  abort(reason: Error): void {
    this.calls.push(`abort: ${reason.message}`);
    this.aborted = true;
    this.reason = reason;
  }
  pause(): void {
    this.calls.push("pause");
    this.paused = true;
  }
  resume(): void {
    this.calls.push("resume");
    this.paused = false;
  }
}

/** A client's response whose socket takes `room` more chunks before it is full. */
class FakeResponse extends EventEmitter {
  readonly written: string[] = [];
  destroyed = false;
  writableEnded = false;
  flushed = 0;
  room: number;
  constructor(room: number) {
    super();
    this.room = room;
  }
  write(chunk: Buffer): boolean {
    this.written.push(chunk.toString());
    return --this.room > 0;
  }
  end(): void {
    this.writableEnded = true;
    this.emit("close");
  }
  destroy(): void {
    this.destroyed = true;
    this.emit("close");
  }
  flushHeaders(): void {
    this.flushed++;
  }
}

function started(): { leg: Leg; controller: FakeController } {
  const leg = new Leg(() => undefined);
  const controller = new FakeController();
  leg.onRequestStart(controller);
  leg.onResponseStart(controller, 200, {});
  return { leg, controller };
}

const chunk = (text: string) => Buffer.from(text);

describe("Leg.relay", () => {
  it("pauses the engine while the client's socket is full and resumes it on drain", async () => {
    const { leg, controller } = started();
    const res = new FakeResponse(2);
    const seen: string[] = [];
    const relayed = leg.relay(res as unknown as ServerResponse, (c) => seen.push(c.toString()));
    leg.onResponseData(controller, chunk("a"));
    assert.deepEqual(controller.calls, []);
    leg.onResponseData(controller, chunk("b"));
    assert.deepEqual(controller.calls, ["pause"]);
    res.room = 10;
    res.emit("drain");
    assert.deepEqual(controller.calls, ["pause", "resume"]);
    leg.onResponseData(controller, chunk("c"));
    leg.onResponseEnd();
    await relayed;
    assert.deepEqual(res.written, ["a", "b", "c"]);
    assert.deepEqual(seen, ["a", "b", "c"]);
    assert.equal(res.writableEnded, true);
    assert.deepEqual(controller.calls, ["pause", "resume"], "a finished leg is not aborted");
  });

  it("writes what came before the relay began, and the end, at once; never pauses or resumes a finished leg", async () => {
    const { leg, controller } = started();
    leg.onResponseData(controller, chunk("whole answer"));
    leg.onResponseEnd();
    // The client's socket is full after this chunk: a finished leg must not pause, nor resume on
    // drain (both act on the connection's parser, which is the next request's by then).
    const res = new FakeResponse(1);
    await leg.relay(res as unknown as ServerResponse, () => undefined);
    res.emit("drain");
    assert.deepEqual(res.written, ["whole answer"]);
    assert.equal(res.writableEnded, true);
    assert.equal(res.flushed, 0, "the headers leave with the body, not on their own");
    assert.deepEqual(controller.calls, []);
  });

  it("a client that leaves aborts the leg; an engine that fails midway cuts the client's response", async () => {
    const gone = started();
    const left = new FakeResponse(10);
    const relayed = gone.leg.relay(left as unknown as ServerResponse, () => undefined);
    gone.leg.onResponseData(gone.controller, chunk("a"));
    left.destroy();
    await relayed;
    assert.deepEqual(gone.controller.calls, ["abort: the client closed the connection"]);

    const broken = started();
    const cut = new FakeResponse(10);
    const cutRelay = broken.leg.relay(cut as unknown as ServerResponse, () => undefined);
    broken.leg.onResponseData(broken.controller, chunk("a"));
    broken.leg.onResponseError(broken.controller, new Error("socket hang up"));
    await cutRelay;
    assert.equal(cut.destroyed, true);
    assert.equal(cut.writableEnded, false);
  });
});

describe("Leg", () => {
  it("aborted while waiting for a connection, fails at once, and aborts as soon as undici starts it", async () => {
    let settled = 0;
    const leg = new Leg(() => settled++);
    leg.abort(new Error("client gone"));
    await assert.rejects(leg.response, /client gone/);
    assert.equal(settled, 1);
    const controller = new FakeController();
    leg.onRequestStart(controller);
    assert.deepEqual(controller.calls, ["abort: client gone"]);
    leg.onResponseError(controller, new Error("aborted"));
    assert.equal(settled, 1);
  });

  it("rejects its response when undici fails before any headers", async () => {
    const leg = new Leg(() => undefined);
    const controller = new FakeController();
    leg.onRequestStart(controller);
    leg.onResponseError(controller, new Error("connect ECONNREFUSED"));
    await assert.rejects(leg.response, /ECONNREFUSED/);
  });

  it("read refuses a body past its limit and aborts the leg", async () => {
    const { leg, controller } = started();
    const read = leg.read(3);
    leg.onResponseData(controller, chunk("ab"));
    leg.onResponseData(controller, chunk("cd"));
    assert.deepEqual(await read, { ok: false, tooLarge: true, reason: "body larger than 3 bytes" });
    assert.deepEqual(controller.calls, ["abort: body too large"]);
  });

  it("dump reads a dropped answer to its end, or aborts it past DUMP_LIMIT_BYTES", async () => {
    const short = started();
    const dumped = short.leg.dump();
    short.leg.onResponseData(short.controller, chunk("error body"));
    short.leg.onResponseEnd();
    await dumped;
    assert.deepEqual(short.controller.calls, []);

    const long = started();
    const aborted = long.leg.dump();
    long.leg.onResponseData(long.controller, Buffer.alloc(DUMP_LIMIT_BYTES + 1));
    assert.deepEqual(long.controller.calls, ["abort: dropped answer too long to read to its end"]);
    long.leg.onResponseError(long.controller, new Error("aborted"));
    await aborted;
  });

  it("calls onSettled once, at the end or the failure", () => {
    let settled = 0;
    const leg = new Leg(() => settled++);
    const controller = new FakeController();
    leg.onRequestStart(controller);
    leg.onResponseStart(controller, 200, {});
    leg.onResponseEnd();
    leg.onResponseError(controller, new Error("late"));
    assert.equal(settled, 1);
  });
});
