/**
 * How requests (or their legs) ended, the one shape every count of them shares — the simulator's
 * traffic, the report's steps and totals, the dashboard's rates, the load generator.
 */
export interface Outcomes {
  /** Answered whole. */
  ok: number;
  /** Refused or failed before any of the answer reached the client. */
  failed: number;
  /** Cut midway: the client left or the engine's stream broke. */
  cut: number;
}
