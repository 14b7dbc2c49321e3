/** Bounded polling for the e2e tests: every wait has a timeout and says what it waited for. */
import { setTimeout as sleep } from "node:timers/promises";

export interface WaitOptions {
  /** Give up after this long. */
  readonly timeoutMs: number;
  /** Pause between attempts. Default 200. */
  readonly intervalMs?: number;
  /** What is awaited, for the timeout message ("CRD modelservings.tandem.dev Established"). */
  readonly what: string;
}

/**
 * Calls `check` until it returns a value other than `undefined`, and resolves with that value.
 * A throwing `check` counts as "not yet"; its last error is quoted when the wait times out.
 * `check` may also throw a `StopWaiting` to fail immediately (a process that exited, say).
 */
export async function waitFor<T>(check: () => Promise<T | undefined>, options: WaitOptions): Promise<T> {
  const deadline = Date.now() + options.timeoutMs;
  let lastError: unknown = undefined;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      if (error instanceof StopWaiting) throw error;
      lastError = error;
    }
    if (Date.now() >= deadline) {
      const cause = lastError instanceof Error ? `; last error: ${lastError.message}` : "";
      throw new Error(`timed out after ${options.timeoutMs} ms waiting for ${options.what}${cause}`);
    }
    await sleep(options.intervalMs ?? 200);
  }
}

/** Thrown by a `waitFor` check to end the wait with this error at once. */
export class StopWaiting extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StopWaiting";
  }
}
