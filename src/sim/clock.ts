/**
 * Virtual time for the simulator: integer milliseconds that move only when the driver says so.
 * Timers fire in (dueMs, sequence) order, so timers due at the same instant fire in the order they
 * were set — unlike a comparator on due time alone, which leaves ties to the sort algorithm.
 */
import type { Clock, Timer } from "../engine/ports.ts";

export interface VirtualClockOptions {
  /** Virtual time at construction. */
  startMs?: number;
  /** Upper bound on live timers; exceeding it is a bug (a leak or a runaway loop). */
  maxTimers?: number;
  /** Upper bound on timers fired by one `advance`/`runUntil`, catching zero-delay loops. */
  maxFiresPerRun?: number;
  /** Wall-clock instant that virtual time 0 stands for, used only to format timestamps. */
  epochMs?: number;
}

/** 2026-01-01T00:00:00Z: a fixed epoch, so reports hold no wall-clock time. */
export const DEFAULT_EPOCH_MS = Date.UTC(2026, 0, 1);

/** Bound on the clock's cache of formatted timestamps. */
const MAX_FORMATTED_TIMESTAMPS = 4096;

/**
 * A timer's heap entry, which is also the handle `setTimer` returns (one object per timer, not an
 * entry plus a handle and its closure). `onCancel` is the owning clock's live-count keeping.
 */
class Entry implements Timer {
  readonly dueMs: number;
  readonly seq: number;
  readonly callback: () => void;
  readonly #onCancel: () => void;
  live = true;

  constructor(dueMs: number, seq: number, callback: () => void, onCancel: () => void) {
    this.dueMs = dueMs;
    this.seq = seq;
    this.callback = callback;
    this.#onCancel = onCancel;
  }

  cancel(): boolean {
    if (!this.live) return false;
    this.live = false;
    this.#onCancel();
    return true;
  }
}

export class VirtualClock implements Clock {
  readonly #maxTimers: number;
  readonly #maxFiresPerRun: number;
  readonly #epochMs: number;
  /** A binary min-heap on (dueMs, seq); cancelled entries stay until popped (`live` = false). */
  readonly #heap: Entry[] = [];
  #nowMs: number;
  #seq = 0;
  #liveCount = 0;
  /** What a live timer's `cancel` does to the clock: made once, shared by every entry. */
  readonly #cancelled = (): void => {
    this.#liveCount--;
  };
  /**
   * Timestamps `rfc3339` formatted, keyed on the wall-clock instant cut to whole seconds, which is
   * all the text depends on: components format the same few instants (now, container starts)
   * over and over. Emptied when full, so it stays small.
   */
  readonly #formattedBySecondMs = new Map<number, string>();

  constructor(options: VirtualClockOptions = {}) {
    this.#nowMs = options.startMs ?? 0;
    this.#maxTimers = options.maxTimers ?? 100_000;
    this.#maxFiresPerRun = options.maxFiresPerRun ?? 1_000_000;
    this.#epochMs = options.epochMs ?? DEFAULT_EPOCH_MS;
    assertTimeMs(this.#nowMs, "startMs");
  }

  nowMs(): number {
    return this.#nowMs;
  }

  /** `nowMs` as RFC 3339 with second precision, the form of Kubernetes timestamps. */
  nowRfc3339(): string {
    return this.rfc3339(this.#nowMs);
  }

  /** Formats a virtual instant as RFC 3339 with second precision. */
  rfc3339(atMs: number): string {
    const secondMs = wholeSecondMs(this.#epochMs + atMs);
    let formatted = this.#formattedBySecondMs.get(secondMs);
    if (formatted === undefined) {
      if (this.#formattedBySecondMs.size >= MAX_FORMATTED_TIMESTAMPS) this.#formattedBySecondMs.clear();
      formatted = formatRfc3339(secondMs);
      this.#formattedBySecondMs.set(secondMs, formatted);
    }
    return formatted;
  }

  /** Parses an RFC 3339 timestamp written by `rfc3339` back to virtual milliseconds. */
  parseRfc3339(timestamp: string): number {
    const wallMs = Date.parse(timestamp);
    if (Number.isNaN(wallMs)) throw new Error(`not an RFC 3339 timestamp: ${timestamp}`);
    return wallMs - this.#epochMs;
  }

  /**
   * This clock on the wall-clock epoch it renders timestamps in, as the controller's `Clock`:
   * `nowMs` and every timer's `dueMs` count milliseconds since 1970, as production's clock does, so
   * they compare with each other (the work queue keeps the sooner of two requeues by `dueMs`) and
   * with the timestamps the simulated components write. The bare clock counts from virtual 0.
   */
  onEpoch(): Clock {
    const epochMs = this.#epochMs;
    return {
      nowMs: () => epochMs + this.#nowMs,
      setTimer: (delayMs, callback) => {
        const timer = this.setTimer(delayMs, callback);
        return { dueMs: epochMs + timer.dueMs, cancel: () => timer.cancel() };
      },
    };
  }

  setTimer(delayMs: number, callback: () => void): Timer {
    assertTimeMs(delayMs, "delayMs");
    if (this.#liveCount >= this.#maxTimers) throw new Error(`more than ${this.#maxTimers} live timers`);
    const entry = new Entry(this.#nowMs + delayMs, this.#seq++, callback, this.#cancelled);
    heapPush(this.#heap, entry);
    this.#liveCount++;
    // Cancelled timers stay in the heap until popped; rebuild before they outnumber live ones.
    if (this.#heap.length > 2 * this.#maxTimers) compact(this.#heap);
    return entry;
  }

  /** Number of timers set and neither fired nor cancelled. */
  pendingCount(): number {
    return this.#liveCount;
  }

  /** Timers ever set; only grows, so a driver can tell whether anything was scheduled since. */
  setCount(): number {
    return this.#seq;
  }

  /** Due time of the next live timer, or undefined when none is pending. */
  nextDueMs(): number | undefined {
    this.#dropCancelledHead();
    return this.#heap[0]?.dueMs;
  }

  /**
   * Moves time to the next live timer's due time and fires every timer due then (including those
   * that timers set for the same instant). Returns false, leaving time alone, when none is pending.
   */
  next(): boolean {
    const dueMs = this.nextDueMs();
    if (dueMs === undefined) return false;
    this.runUntil(dueMs);
    return true;
  }

  /**
   * Fires only the earliest live timer due at or before `targetMs`, moving the time to its due
   * time. Returns false, leaving time alone, when there is none. A driver that lets promise
   * callbacks run between timers steps with this instead of `runUntil`.
   */
  fireNext(targetMs: number): boolean {
    assertTimeMs(targetMs, "targetMs");
    const head = this.#popDue(targetMs);
    if (head === undefined) return false;
    this.#nowMs = head.dueMs;
    head.callback();
    return true;
  }

  /** `runUntil(nowMs() + ms)`. Returns the number of timers fired. */
  advance(ms: number): number {
    assertTimeMs(ms, "ms");
    return this.runUntil(this.#nowMs + ms);
  }

  /**
   * Fires, in order, every timer due at or before `targetMs`, setting the time to each timer's due
   * time as it fires, then sets the time to `targetMs`. Throws when `targetMs` is in the past.
   * Returns the number of timers fired.
   */
  runUntil(targetMs: number): number {
    assertTimeMs(targetMs, "targetMs");
    if (targetMs < this.#nowMs) {
      throw new Error(`cannot go back in time: now ${this.#nowMs} ms, asked for ${targetMs} ms`);
    }
    let fired = 0;
    for (;;) {
      const head = this.#popDue(targetMs);
      if (head === undefined) break;
      fired++;
      if (fired > this.#maxFiresPerRun) throw new Error(`more than ${this.#maxFiresPerRun} timers in one run`);
      this.#nowMs = head.dueMs;
      head.callback();
    }
    this.#nowMs = targetMs;
    return fired;
  }

  #popDue(targetMs: number): Entry | undefined {
    this.#dropCancelledHead();
    const head = this.#heap[0];
    if (head === undefined || head.dueMs > targetMs) return undefined;
    heapPop(this.#heap);
    head.live = false;
    this.#liveCount--;
    return head;
  }

  #dropCancelledHead(): void {
    while (this.#heap[0]?.live === false) heapPop(this.#heap);
  }
}

function assertTimeMs(value: number, name: string): void {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new Error(`${name} must be a non-negative integer number of milliseconds, got ${value}`);
  }
}

/** `wallMs` without its milliseconds: Kubernetes timestamps have whole seconds. */
function wholeSecondMs(wallMs: number): number {
  return wallMs - (wallMs % 1000);
}

function formatRfc3339(secondMs: number): string {
  // toISOString gives milliseconds, all zero here.
  return new Date(secondMs).toISOString().replace(/\.\d{3}Z$/, "Z");
}

function before(a: Entry, b: Entry): boolean {
  return a.dueMs < b.dueMs || (a.dueMs === b.dueMs && a.seq < b.seq);
}

/** Adds `entry`: the entries above it that come after it move down one level each, then it takes the hole. */
function heapPush(heap: Entry[], entry: Entry): void {
  let i = heap.length;
  heap.push(entry);
  while (i > 0) {
    const parent = (i - 1) >> 1;
    const above = at(heap, parent);
    if (!before(entry, above)) break;
    heap[i] = above;
    i = parent;
  }
  heap[i] = entry;
}

function heapPop(heap: Entry[]): void {
  const last = heap.pop();
  if (last === undefined || heap.length === 0) return;
  heap[0] = last;
  siftDown(heap, 0);
}

/** Moves the entry at `start` down: the earlier of its children moves up into its place until neither comes before it. */
function siftDown(heap: Entry[], start: number): void {
  const moving = at(heap, start);
  let i = start;
  // Each step moves one level down, so the loop ends within log2(heap.length) steps.
  for (;;) {
    const left = 2 * i + 1;
    if (left >= heap.length) break;
    let child = left;
    let earliest = at(heap, left);
    if (left + 1 < heap.length) {
      const right = at(heap, left + 1);
      if (before(right, earliest)) {
        child = left + 1;
        earliest = right;
      }
    }
    if (!before(earliest, moving)) break;
    heap[i] = earliest;
    i = child;
  }
  heap[i] = moving;
}

/** Rebuilds the heap without cancelled entries (Floyd's bottom-up heap construction). */
function compact(heap: Entry[]): void {
  const live = heap.filter((entry) => entry.live);
  heap.length = 0;
  heap.push(...live);
  for (let i = (heap.length >> 1) - 1; i >= 0; i--) siftDown(heap, i);
}

function at(heap: Entry[], index: number): Entry {
  const entry = heap[index];
  if (entry === undefined) throw new Error(`heap index ${index} out of range`);
  return entry;
}
