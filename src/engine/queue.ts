/**
 * A keyed work queue on the Clock port, with the semantics of client-go's rate-limited queue:
 *
 * - a key is held at most once: adding a key that is already waiting to be processed does nothing;
 * - a key is never processed concurrently: a key added while it is being processed (between
 *   `get` and `done`) is queued again by `done`;
 * - `addAfter` holds a key back; a key held back twice is released at the earlier of the two times;
 * - `addRateLimited` holds a key back for its own exponential backoff, reset by `forget`;
 * - ready keys come out first in, first out; keys released by timers come out in (due time,
 *   order set) order, as the Clock fires them.
 *
 * Bounded: at most `maxKeys` keys are ready or being processed, and at most `maxKeys` are held back;
 * a new key beyond either bound is refused (the add returns false and is counted). Keys already
 * held are never refused, so a full queue still takes every change to the objects it holds.
 */
import type { Clock, Rng, Timer } from "./ports.ts";

export interface WorkQueueOptions {
  /** First backoff delay of `addRateLimited`. Default 5 ms. */
  baseDelayMs?: number;
  /** Upper bound of the backoff delay. Default 300 000 ms (5 minutes). */
  maxDelayMs?: number;
  /** Bound on ready-or-processing keys and, separately, on held-back keys. Default 10 000. */
  maxKeys?: number;
  /**
   * With a random stream, each backoff delay is drawn uniformly from [delay/2, delay] so keys that
   * failed together (an API server outage) do not retry together; without one it is exact.
   */
  rng?: Rng;
  /** Called synchronously each time a key becomes ready (by an add, a timer or `done`). */
  onReady?: () => void;
}

/** Past this many consecutive failures the delay is at its cap anyway; stops 2^n overflowing. */
const MAX_BACKOFF_EXPONENT = 30;

export class WorkQueue {
  readonly #clock: Clock;
  readonly #baseDelayMs: number;
  readonly #maxDelayMs: number;
  readonly #maxKeys: number;
  readonly #rng: Rng | undefined;
  readonly #onReady: () => void;
  /** Keys to hand out, in insertion (FIFO) order; never contains a key being processed. */
  readonly #ready = new Set<string>();
  readonly #processing = new Set<string>();
  /** Keys added while being processed, queued again by `done`. */
  readonly #dirtyWhileProcessing = new Set<string>();
  readonly #waiting = new Map<string, Timer>();
  readonly #failures = new Map<string, number>();
  #refusedCount = 0;
  #shutDown = false;

  constructor(clock: Clock, options: WorkQueueOptions = {}) {
    this.#clock = clock;
    this.#baseDelayMs = options.baseDelayMs ?? 5;
    this.#maxDelayMs = options.maxDelayMs ?? 300_000;
    this.#maxKeys = options.maxKeys ?? 10_000;
    this.#rng = options.rng;
    this.#onReady = options.onReady ?? (() => undefined);
    if (this.#baseDelayMs < 1 || this.#maxDelayMs < this.#baseDelayMs) {
      throw new Error(`backoff needs 1 <= baseDelayMs <= maxDelayMs, got ${this.#baseDelayMs} and ${this.#maxDelayMs}`);
    }
  }

  /**
   * Makes `key` ready now. Returns false when the key was refused (the queue is full or shut
   * down); true when it is ready, being processed (and will be queued again), or already ready.
   */
  add(key: string): boolean {
    if (this.#shutDown) return false;
    if (this.#ready.has(key) || this.#dirtyWhileProcessing.has(key)) return true;
    if (this.#processing.has(key)) {
      this.#dirtyWhileProcessing.add(key);
      return true;
    }
    if (this.#ready.size + this.#processing.size >= this.#maxKeys) return this.#refuse();
    this.#ready.add(key);
    this.#onReady();
    return true;
  }

  /**
   * Makes `key` ready `delayMs` from now (now when `delayMs` ≤ 0). A key that will be processed
   * anyway (already ready) is left alone: that processing decides afresh. Returns false when
   * refused, as `add`.
   */
  addAfter(key: string, delayMs: number): boolean {
    if (this.#shutDown) return false;
    // The Clock takes whole milliseconds; rounding up never releases a key early.
    const wholeDelayMs = Math.ceil(delayMs);
    if (wholeDelayMs <= 0) return this.add(key);
    if (this.#ready.has(key) || this.#dirtyWhileProcessing.has(key)) return true;
    const dueMs = this.#clock.nowMs() + wholeDelayMs;
    const existing = this.#waiting.get(key);
    if (existing !== undefined) {
      // The earlier release wins; the later one would only repeat it.
      if (existing.dueMs <= dueMs) return true;
      existing.cancel();
    } else if (this.#waiting.size >= this.#maxKeys) {
      return this.#refuse();
    }
    const timer = this.#clock.setTimer(wholeDelayMs, () => {
      this.#waiting.delete(key);
      this.add(key);
    });
    this.#waiting.set(key, timer);
    return true;
  }

  /**
   * Holds `key` back for its backoff delay and counts one more failure for it: the delay is
   * `baseDelayMs · 2^failures`, capped at `maxDelayMs` (5 ms, 10 ms, 20 ms, … 5 min by default).
   * Returns the delay used, or undefined when the key was refused.
   */
  addRateLimited(key: string): number | undefined {
    const failures = this.#failures.get(key) ?? 0;
    const delayMs = this.#backoffMs(failures);
    if (!this.addAfter(key, delayMs)) return undefined;
    this.#failures.set(key, failures + 1);
    return delayMs;
  }

  /** Resets `key`'s backoff (call after a successful pass). Does not remove the key. */
  forget(key: string): void {
    this.#failures.delete(key);
  }

  /** Consecutive failures counted for `key` since it was last forgotten. */
  failures(key: string): number {
    return this.#failures.get(key) ?? 0;
  }

  /**
   * The oldest ready key, now marked as being processed, or undefined when none is ready. The
   * caller must call `done(key)` when it has finished with it.
   */
  get(): string | undefined {
    const next = this.#ready.values().next();
    if (next.done === true) return undefined;
    const key = next.value;
    this.#ready.delete(key);
    this.#processing.add(key);
    return key;
  }

  /** Ends processing of `key`; if it was added meanwhile it becomes ready again. */
  done(key: string): void {
    if (!this.#processing.delete(key)) throw new Error(`done("${key}") without get`);
    if (!this.#dirtyWhileProcessing.delete(key) || this.#shutDown) return;
    this.#ready.add(key);
    this.#onReady();
  }

  /** Keys ready to `get`. */
  readyCount(): number {
    return this.#ready.size;
  }

  /** Keys between `get` and `done`. */
  processingCount(): number {
    return this.#processing.size;
  }

  /** Keys held back by `addAfter`/`addRateLimited`. */
  waitingCount(): number {
    return this.#waiting.size;
  }

  /** Adds refused because the queue was full. */
  refusedCount(): number {
    return this.#refusedCount;
  }

  /**
   * Refuses every later add, drops ready keys and cancels every timer; keys being processed may
   * still be passed to `done`. Leaves nothing scheduled on the clock.
   */
  shutDown(): void {
    this.#shutDown = true;
    for (const timer of this.#waiting.values()) timer.cancel();
    this.#waiting.clear();
    this.#ready.clear();
    this.#dirtyWhileProcessing.clear();
    this.#failures.clear();
  }

  #backoffMs(failures: number): number {
    const exactMs = Math.min(this.#maxDelayMs, this.#baseDelayMs * 2 ** Math.min(failures, MAX_BACKOFF_EXPONENT));
    if (this.#rng === undefined) return exactMs;
    const lowMs = Math.ceil(exactMs / 2);
    return this.#rng.int(lowMs, exactMs + 1);
  }

  #refuse(): false {
    this.#refusedCount++;
    return false;
  }
}
