/**
 * Watch streams of the simulated API server. Every committed change is queued on each open stream
 * whose filter it concerns and delivered through the virtual clock `lagMs` later, so a consumer's
 * cache is stale for that long. A stream's lag is fixed, so each stream delivers in commit
 * (resourceVersion) order; streams are independent of each other, as separate watches are (an
 * informer of several kinds may see one kind's changes of an instant before another's).
 *
 * The changes one stream receives at one instant, until it delivers them, arrive together in one
 * timer: a burst from a real API server reaches an informer far faster than its controller makes
 * a pass, so a controller makes one pass over a burst of N events (its queue dedups the keys),
 * not N passes over caches that each hold one more event. Caches are still stale by the lag; at
 * lag 0, changes committed at the same instant after a burst was delivered make the next burst.
 *
 * A stream ends by `stop()` (the consumer's choice, no callback), by `drop` (a fault: undelivered
 * events are lost and `onClose` is called, after which the consumer must relist), or by falling
 * more than `maxBacklog` events behind (closed the same way, as a real server closes slow watchers).
 *
 * Delivered objects are the server's stored objects themselves: deeply frozen and shared by every
 * stream (no copy per subscriber). A consumer that wants to change one copies it first; an attempt
 * to mutate a delivered object throws (ES modules are strict mode).
 */
import type { Clock, Kind, KubeObject, Timer, WatchEvent, WatchEventType } from "../engine/ports.ts";
import { matchesSelector, parseSelector } from "../engine/labels.ts";
import type { LabelSelector } from "../engine/labels.ts";

export interface WatchOptions {
  /** Only objects in this namespace; all when absent. */
  namespace?: string;
  /** Label selector (string form). An object leaving the selection is delivered as DELETED and one entering it as ADDED. */
  labelSelector?: string;
  /** Delivery delay for this stream; the hub's default when absent. */
  lagMs?: number;
}

export interface WatchHandlers {
  onEvent(event: WatchEvent): void;
  /** Called once, through the clock, when the server ends the stream; never after `stop()`. */
  onClose(reason: string): void;
}

export interface WatchStream {
  /** Ends the stream; pending events are discarded and `onClose` is not called. */
  stop(): void;
  isOpen(): boolean;
}

export interface WatchHubOptions {
  defaultLagMs: number;
  /** Undelivered events per stream before the server closes it. */
  maxBacklog: number;
  /** Open streams at once; opening more is a bug (a consumer that leaks streams). */
  maxStreams: number;
}

interface Watcher {
  readonly kind: Kind;
  readonly namespace: string | undefined;
  readonly selector: LabelSelector;
  /** No namespace and an empty selector: every change of the kind, as it is. */
  readonly unfiltered: boolean;
  readonly lagMs: number;
  readonly handlers: WatchHandlers;
  /** Undelivered events by delivery instant, oldest first. */
  readonly pending: Burst[];
  /** Events in `pending`, the backlog a slow stream is closed for. */
  pendingEvents: number;
  open: boolean;
}

/** Events one stream delivers at one instant (`timer.dueMs`), in commit order. */
interface Burst {
  readonly events: WatchEvent[];
  readonly timer: Timer;
}

export class WatchHub {
  readonly #clock: Clock;
  readonly #options: WatchHubOptions;
  /** Open streams, oldest first. */
  readonly #watchers: Watcher[] = [];
  /**
   * The same streams per kind, oldest first: what `publish` visits. Each array is replaced, never
   * edited, when a stream opens or closes, so `publish` goes through it as it was when it began
   * while a stream too far behind is closed.
   */
  readonly #watchersByKind = new Map<Kind, readonly Watcher[]>();

  constructor(clock: Clock, options: WatchHubOptions) {
    this.#clock = clock;
    this.#options = options;
  }

  /** Opens a stream of changes committed from now on. Throws ApiError(Invalid) for a bad selector. */
  open(kind: Kind, options: WatchOptions, handlers: WatchHandlers): WatchStream {
    if (this.#watchers.length >= this.#options.maxStreams)
      throw new Error(`more than ${this.#options.maxStreams} open watch streams`);
    const selector = parseSelector(options.labelSelector ?? "");
    const watcher: Watcher = {
      kind,
      namespace: options.namespace,
      selector,
      unfiltered: options.namespace === undefined && selector.requirements.length === 0,
      lagMs: options.lagMs ?? this.#options.defaultLagMs,
      handlers,
      pending: [],
      pendingEvents: 0,
      open: true,
    };
    this.#watchers.push(watcher);
    this.#watchersByKind.set(kind, [...(this.#watchersByKind.get(kind) ?? []), watcher]);
    return {
      stop: () => {
        this.#close(watcher);
      },
      isOpen: () => watcher.open,
    };
  }

  /** Number of open streams, for tests and bounds. */
  openCount(): number {
    return this.#watchers.length;
  }

  /**
   * Queues a committed change on every open stream it concerns: `object` as stored, `previous` the
   * state before a MODIFIED change. `object` must be deeply frozen (the server's stored object): it
   * is delivered as is, to every stream, in one frozen event per way a stream sees the change.
   */
  publish(kind: Kind, type: WatchEventType, object: KubeObject, previous?: KubeObject): void {
    const ofKind = this.#watchersByKind.get(kind);
    if (ofKind === undefined) return;
    const nowMs = this.#clock.nowMs();
    // The event as committed, which every unfiltered stream (and most others) sees.
    let asCommitted: WatchEvent | undefined;
    for (const watcher of ofKind) {
      const seenAs = eventTypeFor(watcher, type, object, previous);
      if (seenAs === undefined) continue;
      // Frozen, as its object is: a consumer may keep it or hand it on as it is, never mutate it.
      const event =
        seenAs === type ? (asCommitted ??= Object.freeze({ type, object })) : Object.freeze({ type: seenAs, object });
      this.#enqueue(watcher, event, nowMs);
    }
  }

  /** Ends every open stream of `kind` (all kinds when absent) as a fault. Returns how many. */
  drop(kind?: Kind, reason = "watch dropped"): number {
    const dropped = this.#watchers.filter((watcher) => kind === undefined || watcher.kind === kind);
    for (const watcher of dropped) this.#closeByServer(watcher, reason);
    return dropped.length;
  }

  /** Queues `event`, published at `nowMs`, for delivery `watcher.lagMs` later. */
  #enqueue(watcher: Watcher, event: WatchEvent, nowMs: number): void {
    if (watcher.pendingEvents >= this.#options.maxBacklog) {
      this.#closeByServer(watcher, `more than ${this.#options.maxBacklog} undelivered events`);
      return;
    }
    watcher.pendingEvents++;
    const last = watcher.pending[watcher.pending.length - 1];
    if (last?.timer.dueMs === nowMs + watcher.lagMs) {
      last.events.push(event);
      return;
    }
    const events = [event];
    const timer = this.#clock.setTimer(watcher.lagMs, () => {
      watcher.pending.shift();
      watcher.pendingEvents -= events.length;
      this.#deliver(watcher, events);
    });
    watcher.pending.push({ events, timer });
  }

  /**
   * Hands a burst to the consumer, one event at a time. A consumer that stops its stream meanwhile
   * gets none of the rest; one whose handler throws loses the rest too, so its stream is closed
   * (it relists, as after any lost event) before the error goes on to the driver.
   */
  #deliver(watcher: Watcher, events: readonly WatchEvent[]): void {
    let handed = 0;
    try {
      for (const event of events) {
        if (!watcher.open) return;
        handed++;
        watcher.handlers.onEvent(event);
      }
    } finally {
      if (handed < events.length && watcher.open)
        this.#closeByServer(watcher, "a handler failed with events left undelivered");
    }
  }

  #closeByServer(watcher: Watcher, reason: string): void {
    this.#close(watcher);
    // Through the clock, so a consumer never relists from inside the write that caused the close.
    this.#clock.setTimer(0, () => {
      watcher.handlers.onClose(reason);
    });
  }

  #close(watcher: Watcher): void {
    if (!watcher.open) return;
    watcher.open = false;
    for (const burst of watcher.pending) burst.timer.cancel();
    watcher.pending.length = 0;
    watcher.pendingEvents = 0;
    this.#watchers.splice(this.#watchers.indexOf(watcher), 1);
    this.#watchersByKind.set(
      watcher.kind,
      (this.#watchersByKind.get(watcher.kind) ?? []).filter((other) => other !== watcher),
    );
  }
}

/** How a change of `type` to `object` from `previous` appears on a stream with `watcher`'s filter, or undefined when it does not. */
function eventTypeFor(
  watcher: Watcher,
  type: WatchEventType,
  object: KubeObject,
  previous: KubeObject | undefined,
): WatchEventType | undefined {
  const now = selected(watcher, object);
  if (type !== "MODIFIED") return now ? type : undefined;
  const before = previous !== undefined && selected(watcher, previous);
  if (before && now) return "MODIFIED";
  if (now) return "ADDED";
  return before ? "DELETED" : undefined;
}

function selected(watcher: Watcher, object: KubeObject): boolean {
  if (watcher.unfiltered) return true;
  if (watcher.namespace !== undefined && object.metadata.namespace !== watcher.namespace) return false;
  return matchesSelector(watcher.selector, object.metadata.labels);
}
