import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Prng, sfc32Next } from "./prng.ts";

const MASK = 0xffff_ffffn;

/** sfc32 written from its description with BigInt arithmetic, independent of the int32 tricks. */
function referenceStep(state: { a: bigint; b: bigint; c: bigint; d: bigint }): bigint {
  const t = (state.a + state.b + state.d) & MASK;
  state.d = (state.d + 1n) & MASK;
  state.a = state.b ^ (state.b >> 9n);
  state.b = (state.c + (state.c << 3n)) & MASK;
  const rotated = ((state.c << 21n) | (state.c >> 11n)) & MASK;
  state.c = (rotated + t) & MASK;
  return t;
}

function draws(rng: Prng, count: number): number[] {
  return Array.from({ length: count }, () => rng.nextUint32());
}

describe("sfc32Next", () => {
  it("matches a BigInt implementation of the published step, including wrap-around", () => {
    const words = [0xdeadbeef, 0xffffffff, 0x80000001, 0xfffffffe];
    const state = { a: words[0]! | 0, b: words[1]! | 0, c: words[2]! | 0, d: words[3]! | 0 };
    const reference = { a: BigInt(words[0]!), b: BigInt(words[1]!), c: BigInt(words[2]!), d: BigInt(words[3]!) };
    for (let i = 0; i < 1000; i++) assert.equal(BigInt(sfc32Next(state)), referenceStep(reference), `step ${i}`);
  });
});

describe("Prng", () => {
  it("gives the same sequence for the same seed (golden first outputs for seed 1)", () => {
    assert.deepEqual(draws(new Prng(1), 5), [907719866, 2142536363, 2805267771, 853508223, 4125773245]);
    assert.deepEqual(draws(new Prng(1).fork("faults"), 3), [4089320791, 3578393643, 220086673]);
    const seven = new Prng(7);
    assert.deepEqual(
      Array.from({ length: 10 }, () => seven.int(0, 100)),
      [21, 42, 77, 82, 73, 44, 58, 2, 33, 23],
    );
    assert.deepEqual(draws(new Prng(123), 100), draws(new Prng(123), 100));
  });

  it("gives different sequences for different seeds, including seeds that differ above 32 bits", () => {
    assert.notDeepEqual(draws(new Prng(1), 4), draws(new Prng(2), 4));
    assert.notDeepEqual(draws(new Prng(1), 4), draws(new Prng(1 + 2 ** 32), 4));
    assert.throws(() => new Prng(-1), /non-negative safe integer/);
    assert.throws(() => new Prng(1.5), /non-negative safe integer/);
  });

  it("forks streams that depend only on (seed, name path), never on other draws", () => {
    const quiet = new Prng(9);
    const expected = draws(quiet.fork("network"), 20);

    const busy = new Prng(9);
    draws(busy, 1000); // the parent's own draws
    const faults = busy.fork("faults");
    draws(faults, 1000); // a sibling's draws
    const network = busy.fork("network");
    draws(faults, 10); // interleaved sibling draws after forking
    assert.deepEqual(draws(network, 20), expected);
  });

  it("forks distinct names and nested paths into distinct streams", () => {
    const root = new Prng(3);
    const streams = [root, root.fork("a"), root.fork("b"), root.fork("a").fork("b"), root.fork("b").fork("a")];
    const firsts = new Set(streams.map((stream) => draws(stream, 2).join(",")));
    assert.equal(firsts.size, streams.length);
    assert.equal(root.fork("a").fork("b").path, "a/b");
    assert.deepEqual(draws(root.fork("a").fork("b"), 5), draws(new Prng(3).fork("a").fork("b"), 5));
    assert.throws(() => root.fork(""), /non-empty/);
    assert.throws(() => root.fork("a/b"), /without "\/"/);
  });

  it("draws integers within [min, max), covering the range without gross bias", () => {
    const rng = new Prng(5);
    const counts = new Map<number, number>();
    for (let i = 0; i < 6000; i++) {
      const value = rng.int(-3, 3);
      counts.set(value, (counts.get(value) ?? 0) + 1);
    }
    assert.deepEqual(
      [...counts.keys()].sort((a, b) => a - b),
      [-3, -2, -1, 0, 1, 2],
    );
    for (const count of counts.values()) assert.ok(count > 850 && count < 1150, `count ${count}`);
    assert.equal(rng.int(7, 8), 7);
    const full = rng.int(0, 2 ** 32);
    assert.ok(full >= 0 && full < 2 ** 32);
    assert.throws(() => rng.int(5, 5), /span/);
    assert.throws(() => rng.int(0, 2 ** 32 + 1), /span/);
    assert.throws(() => rng.int(0.5, 3), /span/);
  });

  it("decides exact-ratio chances: 0/d never, d/d always, one draw each whatever the ratio", () => {
    const rng = new Prng(11);
    for (let i = 0; i < 1000; i++) {
      assert.equal(rng.chance(0, 7), false);
      assert.equal(rng.chance(7, 7), true);
    }
    const never = new Prng(12);
    const always = new Prng(12);
    never.chance(0, 1);
    always.chance(1, 1);
    assert.equal(never.nextUint32(), always.nextUint32());

    const quarter = new Prng(13);
    let hits = 0;
    for (let i = 0; i < 10_000; i++) if (quarter.chance(1, 4)) hits++;
    assert.ok(hits > 2300 && hits < 2700, `hits ${hits}`);
    assert.equal(new Prng(1).chance(2 ** 32, 2 ** 32), true);
  });

  it("rejects malformed ratios", () => {
    const rng = new Prng(1);
    assert.throws(() => rng.chance(1, 0), /denominator/);
    assert.throws(() => rng.chance(2, 1), /numerator/);
    assert.throws(() => rng.chance(-1, 2), /numerator/);
    assert.throws(() => rng.chance(0.5, 2), /integers/);
    assert.throws(() => rng.chance(1, 2 ** 32 + 1), /2\^32/);
  });

  it("picks elements and shuffles copies deterministically", () => {
    const items = ["a", "b", "c", "d", "e", "f", "g", "h"];
    const shuffled = new Prng(21).shuffle(items);
    assert.deepEqual(shuffled, new Prng(21).shuffle(items));
    assert.deepEqual([...shuffled].sort(), items);
    assert.notDeepEqual(shuffled, items);
    assert.deepEqual(items, ["a", "b", "c", "d", "e", "f", "g", "h"]);
    assert.deepEqual(new Prng(1).shuffle([]), []);
    const rng = new Prng(22);
    const picked = new Set(Array.from({ length: 200 }, () => rng.pick(items)));
    assert.equal(picked.size, items.length);
    assert.throws(() => rng.pick([]), /empty/);
  });
});
