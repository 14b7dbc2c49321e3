import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { VirtualClock } from "../sim/clock.ts";
import { Prng } from "../sim/prng.ts";
import { WorkQueue } from "./queue.ts";
import type { WorkQueueOptions } from "./queue.ts";

function setup(options: WorkQueueOptions = {}) {
  const clock = new VirtualClock();
  let readyCalls = 0;
  const queue = new WorkQueue(clock, { ...options, onReady: () => readyCalls++ });
  return { clock, queue, readyCalls: () => readyCalls };
}

/** Takes every ready key, in order, marking each done at once. */
function drain(queue: WorkQueue): string[] {
  const keys: string[] = [];
  for (let key = queue.get(); key !== undefined; key = queue.get()) {
    keys.push(key);
    queue.done(key);
  }
  return keys;
}

describe("work queue", () => {
  it("holds a key once and hands keys out first in, first out", () => {
    const { queue, readyCalls } = setup();
    for (const key of ["a", "b", "a", "c", "b"]) assert.equal(queue.add(key), true);
    assert.equal(queue.readyCount(), 3);
    assert.equal(readyCalls(), 3, "a duplicate does not wake workers");
    assert.deepEqual(drain(queue), ["a", "b", "c"]);
    assert.equal(queue.get(), undefined);
  });

  it("never hands out a key being processed; a key added meanwhile comes back after done", () => {
    const { queue } = setup();
    queue.add("a");
    queue.add("b");
    assert.equal(queue.get(), "a");
    queue.add("a");
    queue.add("a");
    assert.equal(queue.get(), "b", "a is being processed");
    assert.equal(queue.get(), undefined);
    assert.deepEqual([queue.readyCount(), queue.processingCount()], [0, 2]);
    queue.done("b");
    assert.equal(queue.get(), undefined, "a is still being processed");
    queue.done("a");
    assert.deepEqual(drain(queue), ["a"], "re-queued once, after done");
    assert.throws(() => queue.done("a"), /without get/);
  });

  it("releases held-back keys at their due time, the earlier of two, in due order", () => {
    const { clock, queue } = setup();
    queue.addAfter("late", 100);
    queue.addAfter("early", 50);
    queue.addAfter("late", 200);
    assert.equal(queue.waitingCount(), 2);
    clock.advance(49);
    assert.equal(queue.get(), undefined);
    clock.advance(1);
    assert.deepEqual(drain(queue), ["early"]);
    queue.addAfter("late", 10);
    clock.advance(10);
    assert.deepEqual(drain(queue), ["late"], "the shorter delay replaced the longer");
    clock.advance(1_000);
    assert.deepEqual(drain(queue), [], "the replaced timer was cancelled");
    assert.equal(clock.pendingCount(), 0);
  });

  it("leaves a ready key alone on addAfter; a zero delay is an add", () => {
    const { clock, queue } = setup();
    queue.add("a");
    queue.addAfter("a", 100);
    assert.equal(queue.waitingCount(), 0);
    queue.addAfter("b", 0);
    assert.deepEqual(drain(queue), ["a", "b"]);
    assert.equal(clock.pendingCount(), 0);
  });

  it("backs off exponentially per key, capped, and forget resets it", () => {
    const { clock, queue } = setup({ baseDelayMs: 5, maxDelayMs: 300_000 });
    const delays: (number | undefined)[] = [];
    for (let i = 0; i < 18; i++) {
      delays.push(queue.addRateLimited("a"));
      clock.advance(300_000);
      assert.deepEqual(drain(queue), ["a"]);
    }
    assert.deepEqual(
      delays,
      [
        5, 10, 20, 40, 80, 160, 320, 640, 1_280, 2_560, 5_120, 10_240, 20_480, 40_960, 81_920, 163_840, 300_000,
        300_000,
      ],
    );
    assert.equal(queue.failures("a"), 18);
    assert.equal(queue.addRateLimited("b"), 5, "backoff is per key");
    queue.forget("a");
    assert.equal(queue.failures("a"), 0);
    assert.equal(queue.addRateLimited("a"), 5);
  });

  it("jitters backoff within [delay/2, delay] from the seeded stream, reproducibly", () => {
    const run = (seed: number) => {
      const queue = new WorkQueue(new VirtualClock(), { rng: new Prng(seed), maxKeys: 100 });
      return Array.from({ length: 12 }, (_, i) => queue.addRateLimited(`k${i % 3}`));
    };
    const delays = run(7);
    assert.deepEqual(run(7), delays);
    for (const [i, delay] of delays.entries()) {
      const exact = 5 * 2 ** Math.floor(i / 3);
      assert.ok(
        delay !== undefined && delay >= exact / 2 && delay <= exact,
        `${delay} within [${exact / 2}, ${exact}]`,
      );
    }
  });

  it("refuses new keys beyond its bound but keeps taking keys it holds", () => {
    const { queue } = setup({ maxKeys: 2 });
    assert.equal(queue.add("a"), true);
    assert.equal(queue.add("b"), true);
    assert.equal(queue.add("c"), false);
    assert.equal(queue.add("a"), true);
    assert.equal(queue.get(), "a");
    assert.equal(queue.add("c"), false, "a key being processed still counts");
    assert.equal(queue.add("a"), true, "re-adding a key being processed is not a new key");
    assert.equal(queue.addAfter("x", 10), true);
    assert.equal(queue.addAfter("y", 10), true);
    assert.equal(queue.addAfter("z", 10), false, "held-back keys have their own bound");
    assert.equal(queue.addRateLimited("z"), undefined);
    assert.equal(queue.failures("z"), 0, "a refused retry counts no failure");
    assert.equal(queue.refusedCount(), 4);
  });

  it("shuts down: refuses adds, drops ready keys, cancels every timer", () => {
    const { clock, queue } = setup();
    queue.add("a");
    queue.add("b");
    assert.equal(queue.get(), "a");
    queue.add("a");
    queue.addAfter("c", 100);
    queue.addRateLimited("d");
    queue.shutDown();
    assert.equal(clock.pendingCount(), 0);
    assert.equal(queue.add("e"), false);
    assert.equal(queue.get(), undefined);
    queue.done("a");
    assert.equal(queue.get(), undefined, "not re-queued after shutdown");
  });
});
