/**
 * The wall clock: the Clock port on `Date.now` and `setTimeout` (src/kube may touch real time;
 * the engine, core and simulator may not).
 */
import type { Clock, Timer } from "../engine/ports.ts";

/** Wall time in ms since the epoch, never decreasing (a clock stepped back holds still). */
export class WallClock implements Clock {
  #lastMs = 0;

  nowMs(): number {
    this.#lastMs = Math.max(this.#lastMs, Date.now());
    return this.#lastMs;
  }

  /** Timers due at the same instant fire in the order set (Node keeps timer order per duration; equal due times with different delays may not). */
  setTimer(delayMs: number, callback: () => void): Timer {
    const dueMs = this.nowMs() + delayMs;
    let pending = true;
    const handle = setTimeout(() => {
      pending = false;
      callback();
    }, delayMs);
    return {
      dueMs,
      cancel: () => {
        if (!pending) return false;
        pending = false;
        clearTimeout(handle);
        return true;
      },
    };
  }
}
