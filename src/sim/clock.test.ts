import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { VirtualClock } from "./clock.ts";
import type { Timer } from "../engine/ports.ts";

/** One step of a random timer workload: set a timer, cancel one, or run the clock forward. */
type ClockOp = { set: number } | { cancel: number } | { run: number };

describe("VirtualClock", () => {
  it("fires timers by due time, and timers due together in the order they were set", () => {
    const clock = new VirtualClock();
    const fired: string[] = [];
    clock.setTimer(20, () => fired.push("b@20"));
    clock.setTimer(10, () => fired.push("a@10"));
    clock.setTimer(20, () => fired.push("c@20"));
    clock.setTimer(0, () => fired.push("z@0"));
    for (let i = 0; i < 50; i++) clock.setTimer(15, () => fired.push(`tie${i}`));
    assert.equal(clock.advance(100), 54);
    assert.deepEqual(fired.slice(0, 2), ["z@0", "a@10"]);
    assert.deepEqual(
      fired.slice(2, 52),
      Array.from({ length: 50 }, (_, i) => `tie${i}`),
    );
    assert.deepEqual(fired.slice(52), ["b@20", "c@20"]);
    assert.equal(clock.nowMs(), 100);
  });

  it("shows each callback its own due time, and ends at the target", () => {
    const clock = new VirtualClock({ startMs: 5 });
    const seen: number[] = [];
    clock.setTimer(3, () => seen.push(clock.nowMs()));
    clock.setTimer(7, () => seen.push(clock.nowMs()));
    clock.runUntil(30);
    assert.deepEqual(seen, [8, 12]);
    assert.equal(clock.nowMs(), 30);
  });

  it("fires timers set by a callback for the same run, but not those beyond the target", () => {
    const clock = new VirtualClock();
    const fired: string[] = [];
    clock.setTimer(10, () => {
      fired.push("first");
      clock.setTimer(0, () => fired.push("same instant"));
      clock.setTimer(5, () => fired.push("later"));
    });
    clock.advance(12);
    assert.deepEqual(fired, ["first", "same instant"]);
    clock.advance(3);
    assert.deepEqual(fired, ["first", "same instant", "later"]);
  });

  it("next() jumps to the next due time and fires everything due then", () => {
    const clock = new VirtualClock();
    const fired: number[] = [];
    clock.setTimer(40, () => fired.push(1));
    clock.setTimer(40, () => fired.push(2));
    clock.setTimer(90, () => fired.push(3));
    assert.equal(clock.nextDueMs(), 40);
    assert.equal(clock.next(), true);
    assert.equal(clock.nowMs(), 40);
    assert.deepEqual(fired, [1, 2]);
    assert.equal(clock.next(), true);
    assert.equal(clock.next(), false);
    assert.equal(clock.nowMs(), 90);
  });

  it("cancelled timers never fire and do not count as pending", () => {
    const clock = new VirtualClock();
    let fired = false;
    const timer = clock.setTimer(10, () => (fired = true));
    assert.equal(clock.pendingCount(), 1);
    assert.equal(timer.cancel(), true);
    assert.equal(timer.cancel(), false);
    assert.equal(clock.pendingCount(), 0);
    assert.equal(clock.nextDueMs(), undefined);
    clock.advance(20);
    assert.equal(fired, false);
  });

  it("compacts cancelled timers so set-and-cancel loops stay within the bound", () => {
    const clock = new VirtualClock({ maxTimers: 4 });
    for (let i = 0; i < 1000; i++) clock.setTimer(1000 + i, () => undefined).cancel();
    clock.setTimer(1, () => undefined);
    assert.equal(clock.pendingCount(), 1);
    assert.equal(clock.nextDueMs(), 1);
  });

  it("fires exactly what a sorted list of live timers says, in (due time, order set) order, through sets, cancels and compaction", () => {
    const op = fc.oneof(
      fc.record({ set: fc.integer({ min: 0, max: 50 }) }),
      fc.record({ cancel: fc.nat() }),
      fc.record({ run: fc.integer({ min: 0, max: 20 }) }),
    ) as fc.Arbitrary<ClockOp>;
    fc.assert(
      fc.property(fc.array(op, { maxLength: 300 }), (ops) => {
        const clock = new VirtualClock({ maxTimers: 60 });
        const fired: number[] = [];
        // The reference: live timers with their due time and the order they were set.
        let live: { id: number; dueMs: number; timer: Timer }[] = [];
        let nextId = 0;
        for (const step of ops) {
          if ("set" in step) {
            if (clock.pendingCount() >= 60) continue;
            const id = nextId++;
            live.push({ id, dueMs: clock.nowMs() + step.set, timer: clock.setTimer(step.set, () => fired.push(id)) });
          } else if ("cancel" in step) {
            const [cancelled] = live.length === 0 ? [] : live.splice(step.cancel % live.length, 1);
            cancelled?.timer.cancel();
          } else {
            const targetMs = clock.nowMs() + step.run;
            const due = live
              .filter((entry) => entry.dueMs <= targetMs)
              .sort((a, b) => a.dueMs - b.dueMs || a.id - b.id);
            const before = fired.length;
            clock.runUntil(targetMs);
            assert.deepEqual(
              fired.slice(before),
              due.map((entry) => entry.id),
            );
            live = live.filter((entry) => entry.dueMs > targetMs);
          }
          assert.equal(clock.pendingCount(), live.length);
        }
      }),
      { seed: 7, numRuns: 200 },
    );
  });

  it("refuses to go back in time and rejects non-integer or negative durations", () => {
    const clock = new VirtualClock({ startMs: 100 });
    assert.throws(() => clock.runUntil(99), /back in time/);
    assert.throws(() => clock.setTimer(-1, () => undefined), /non-negative integer/);
    assert.throws(() => clock.setTimer(1.5, () => undefined), /non-negative integer/);
    assert.throws(() => clock.advance(Number.NaN), /non-negative integer/);
    assert.equal(clock.nowMs(), 100);
  });

  it("bounds live timers and timers fired per run", () => {
    const small = new VirtualClock({ maxTimers: 2 });
    small.setTimer(1, () => undefined);
    small.setTimer(1, () => undefined);
    assert.throws(() => small.setTimer(1, () => undefined), /more than 2 live timers/);

    const looping = new VirtualClock({ maxFiresPerRun: 100 });
    const again = (): void => {
      looping.setTimer(0, again);
    };
    looping.setTimer(0, again);
    assert.throws(() => looping.advance(1), /more than 100 timers in one run/);
  });

  it("formats virtual instants as RFC 3339 with whole seconds and parses them back", () => {
    const clock = new VirtualClock({ epochMs: Date.UTC(2026, 0, 1) });
    assert.equal(clock.nowRfc3339(), "2026-01-01T00:00:00Z");
    clock.advance(61_999);
    assert.equal(clock.nowRfc3339(), "2026-01-01T00:01:01Z");
    assert.equal(clock.parseRfc3339("2026-01-01T00:01:01Z"), 61_000);
  });

  it("onEpoch: now and every timer's due time count from 1970, so they compare (a sooner requeue must be seen as sooner)", () => {
    const epochMs = Date.UTC(2026, 0, 1);
    const clock = new VirtualClock({ epochMs });
    clock.advance(5_000);
    const controllerClock = clock.onEpoch();
    assert.equal(controllerClock.nowMs(), epochMs + 5_000);
    const fired: string[] = [];
    const later = controllerClock.setTimer(30_000, () => fired.push("later"));
    const sooner = controllerClock.setTimer(5_000, () => fired.push("sooner"));
    assert.equal(later.dueMs, controllerClock.nowMs() + 30_000);
    assert.ok(sooner.dueMs < later.dueMs);
    assert.equal(later.cancel(), true);
    clock.advance(60_000);
    assert.deepEqual(fired, ["sooner"]);
    assert.equal(later.cancel(), false);
  });
});
