/**
 * Least-load selection (DESIGN §7 "Selection"). Pure: loads and the tie-breaking stream are
 * arguments, so the simulator and the data plane make the same choice from the same inputs.
 */
import type { Rng } from "../engine/ports.ts";

/** Engine figures older than this are ignored: the load falls back to the router's own in-flight count. */
export const ENGINE_METRICS_MAX_AGE_MS = 5_000;

/** The engine's own queue, from its `/metrics`, and how old that reading is at decision time. */
export interface EngineLoad {
  readonly running: number;
  readonly waiting: number;
  readonly ageMs: number;
}

/** What one endpoint carries now. */
export interface EndpointLoad {
  /** Legs this router replica has sent to the endpoint and not yet seen end. */
  readonly inFlight: number;
  /** Absent when never scraped or the last scrape failed. */
  readonly engine: EngineLoad | undefined;
}

/** The randomness selection needs: uniform integers from a seeded stream (the Rng port). */
export type TieBreak = Pick<Rng, "int">;

/**
 * The load selection compares: own in-flight plus the engine's running and waiting when the
 * reading is fresh (at most `ENGINE_METRICS_MAX_AGE_MS` old). Own requests are usually in the
 * engine's figures too; counting them twice is deliberate: in-flight moves at once, the scrape
 * lags by up to a second, so a burst does not all land on the endpoint that looked idle.
 */
export function loadScore(load: EndpointLoad): number {
  const engine = load.engine;
  const fresh = engine !== undefined && engine.ageMs <= ENGINE_METRICS_MAX_AGE_MS;
  return load.inFlight + (fresh ? engine.running + engine.waiting : 0);
}

/**
 * The candidate with the least `loadScore`; among equal scores, one drawn uniformly from `rng`.
 * Consumes exactly one draw whenever `candidates` is non-empty (none when empty), so the stream
 * advances the same way whatever the loads are. Ties are drawn among candidates in the order
 * given: callers pass them in a stable order (endpoints sorted by key).
 */
export function select<T>(
  candidates: readonly T[],
  loadOf: (candidate: T) => EndpointLoad,
  rng: TieBreak,
): T | undefined {
  if (candidates.length === 0) return undefined;
  let best = Number.POSITIVE_INFINITY;
  let tied: T[] = [];
  for (const candidate of candidates) {
    const score = loadScore(loadOf(candidate));
    if (score < best) {
      best = score;
      tied = [candidate];
    } else if (score === best) tied.push(candidate);
  }
  return tied[rng.int(0, tied.length)];
}
