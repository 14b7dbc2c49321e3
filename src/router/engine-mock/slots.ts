/**
 * The engine's batch: at most `capacity` requests run at once, the rest wait in arrival order
 * (vLLM's max_num_seqs, SGLang's max_running_requests). The queue is bounded: beyond
 * `maxWaiting` a request is refused at once rather than held without limit.
 */

/** Thrown by `acquire` when the queue is full. */
export class QueueFullError extends Error {}

export class Slots {
  #running = 0;
  readonly #queue: (() => void)[] = [];

  readonly capacity: number;
  readonly maxWaiting: number;

  constructor(capacity: number, maxWaiting: number) {
    this.capacity = capacity;
    this.maxWaiting = maxWaiting;
  }

  get running(): number {
    return this.#running;
  }

  get waiting(): number {
    return this.#queue.length;
  }

  /**
   * Resolves once the caller runs; it must then call `release` exactly once. Rejects with the
   * signal's reason if aborted while waiting (the caller then holds nothing), or QueueFullError.
   */
  acquire(signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    if (this.#running < this.capacity) {
      this.#running += 1;
      return Promise.resolve();
    }
    if (this.#queue.length >= this.maxWaiting)
      return Promise.reject(new QueueFullError(`${this.maxWaiting} requests are already waiting`));
    return new Promise((resolve, reject) => {
      const start = (): void => {
        signal.removeEventListener("abort", onAbort);
        this.#running += 1;
        resolve();
      };
      const onAbort = (): void => {
        this.#queue.splice(this.#queue.indexOf(start), 1);
        reject(signal.reason as Error);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.#queue.push(start);
    });
  }

  /** Ends one running request and starts the longest-waiting one, if any. */
  release(): void {
    this.#running -= 1;
    this.#queue.shift()?.();
  }
}
