import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { QueueFullError, Slots } from "./slots.ts";
import { countTokens, naturalLength, tokenAt } from "./text.ts";

const SEED = 20261201;

describe("deterministic text", () => {
  it("is a pure function of the prompt: natural lengths 16..63, tokens are words with a leading space", () => {
    fc.assert(
      fc.property(fc.string(), fc.nat(100), (prompt, index) => {
        const length = naturalLength(prompt);
        assert.ok(length >= 16 && length <= 63);
        assert.equal(naturalLength(prompt), length);
        assert.match(tokenAt(prompt, index), /^ [a-z]+$/);
        assert.equal(tokenAt(prompt, index), tokenAt(prompt, index));
      }),
      { seed: SEED, numRuns: 200 },
    );
  });

  it("counts words as tokens, an empty prompt as one", () => {
    assert.deepEqual(["", "  ", "one", " two  words\nhere "].map(countTokens), [1, 1, 1, 3]);
  });
});

describe("Slots", () => {
  it("runs up to capacity, starts the waiting in arrival order, drops an aborted waiter, refuses beyond the queue bound", async () => {
    const slots = new Slots(1, 2);
    const never = new AbortController().signal;
    await slots.acquire(never);
    const order: string[] = [];
    const cancelled = new AbortController();
    const second = slots.acquire(never).then(() => order.push("second"));
    const third = slots.acquire(cancelled.signal).then(
      () => order.push("third"),
      () => order.push("third aborted"),
    );
    await assert.rejects(slots.acquire(never), QueueFullError);
    assert.deepEqual([slots.running, slots.waiting], [1, 2]);
    cancelled.abort(new Error("gone"));
    await third;
    assert.deepEqual([slots.running, slots.waiting], [1, 1]);
    slots.release();
    await second;
    assert.deepEqual(order, ["third aborted", "second"]);
    assert.deepEqual([slots.running, slots.waiting], [1, 0]);
    slots.release();
    assert.equal(slots.running, 0);
  });
});
