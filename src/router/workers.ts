/**
 * The pure rules of `tandem router --workers N` (the process supervision is
 * `src/router/proxy/workers.ts`): how many workers a flag means, each worker's replica id, when a
 * worker that died is started again, and when the whole process is ready.
 *
 * Each worker is a router replica of its own for the drain handshake (DESIGN §3): its own Lease
 * and confirmation key `<router-id>-w<index>`, its own in-flight counts. So the controller waits
 * for every worker's confirmation, and a worker never has to know what the others have in flight.
 */

/** The `--workers` error, whatever was wrong with the value. */
export const WORKERS_FLAG_ERROR = '--workers: must be a positive integer or "auto"';

/**
 * The worker count `--workers` asks for: a positive integer, or `auto` for `availableParallelism`
 * (the cores this process may use). Throws `WORKERS_FLAG_ERROR` (with the value) for anything else.
 */
export function parseWorkerCount(flag: string, availableParallelism: number): number {
  if (flag === "auto") return Math.max(1, availableParallelism);
  const count = /^[0-9]+$/.test(flag) ? Number(flag) : Number.NaN;
  if (!Number.isSafeInteger(count) || count < 1) throw new Error(`${WORKERS_FLAG_ERROR}, got "${flag}"`);
  return count;
}

/** Worker `index`'s replica id: its Lease's name and its drain confirmations' key. */
export function workerReplicaId(routerId: string, index: number): string {
  return `${routerId}-w${index}`;
}

/** The first restart of a worker that died waits this long; each further quick death doubles it. */
export const RESTART_BASE_MS = 100;
/** Restarts never wait longer than this. */
export const RESTART_CAP_MS = 10_000;
/** A worker that ran this long before dying counts as healthy: its next restart waits the base delay again. */
export const STABLE_UPTIME_MS = 30_000;

/**
 * How many quick deaths in a row a worker slot has had, after a worker that ran `uptimeMs` died:
 * one more, or a fresh count of 1 when it had run for `STABLE_UPTIME_MS` or more.
 */
export function quickDeaths(previous: number, uptimeMs: number): number {
  return uptimeMs >= STABLE_UPTIME_MS ? 1 : previous + 1;
}

/** The wait before starting a worker again after its slot's `deaths`-th quick death in a row (≥ 1). */
export function restartDelayMs(deaths: number): number {
  return Math.min(RESTART_CAP_MS, RESTART_BASE_MS * 2 ** Math.min(Math.max(deaths, 1) - 1, 20));
}

/**
 * The process is ready when each of its `expected` workers answered and every answer is ready:
 * a worker that is starting (caches not synced, Lease not written), restarting or silent is not.
 */
export function allWorkersReady(answers: readonly boolean[], expected: number): boolean {
  return answers.length === expected && answers.every((ready) => ready);
}
