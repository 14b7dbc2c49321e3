/**
 * Requests per second for the dashboard's timeline, from counters that only grow: one source for
 * the simulator or `demo --serve`'s router, one per router replica on a real cluster. Pure.
 *
 * - `routerRequestTotals`: a Tandem router's `/metrics` page → its requests by outcome.
 * - `meterRequests`: the sources' latest readings → per-second rates summed over the sources,
 *   each differenced against its own previous reading. A counter that went down (the router
 *   restarted) counts from zero again, so a rate is never negative; a source whose newest reading
 *   is older than `STALE_MS` is left out, and with none left the rate is unknown — a gap on the
 *   chart, never a zero.
 */
import { parseCounts } from "../router/engine-metrics.ts";
import type { Outcomes } from "../router/outcomes.ts";

/** Requests finished so far, by outcome (counts only grow, except across a restart). */
export type RequestTotals = Readonly<Outcomes>;

/** Requests finished per second, by outcome. */
export type RequestRates = RequestTotals;

/** One source's totals as read at `atMs` (the scrape's start; virtual time for the simulator). */
export interface RequestReading {
  readonly totals: RequestTotals;
  readonly atMs: number;
}

/** A reading older than this no longer counts: its source is not reporting. */
export const STALE_MS = 5_000;

export const REQUESTS_METRIC = "tandem_router_requests_total";
export const REQUESTS_CUT_METRIC = "tandem_router_requests_cut_total";

/**
 * A router's requests by outcome, over every model and role: ok — a 2xx response sent whole;
 * cut — a 2xx response that ended early, or code 0 (the client left before any status); failed —
 * any other status. Refused when the page is not a Prometheus page or declares no
 * `tandem_router_requests_total` (it is not a Tandem router's: a wrong URL must not read as zero).
 */
export function routerRequestTotals(
  page: string,
): { readonly ok: true; readonly totals: RequestTotals } | { readonly ok: false; readonly reason: string } {
  const read = parseCounts(page, new Set([REQUESTS_METRIC, REQUESTS_CUT_METRIC]));
  if (!read.ok) return read;
  if (!read.declared.has(REQUESTS_METRIC))
    return { ok: false, reason: `no ${REQUESTS_METRIC} on the page: not a Tandem router's /metrics` };
  const totals = { ok: 0, failed: 0, cut: 0 };
  for (const sample of read.samples) {
    const code = sample.labels["code"] ?? "";
    const success = /^2\d\d$/.test(code);
    if (sample.name === REQUESTS_CUT_METRIC) {
      if (success) {
        totals.ok -= sample.value;
        totals.cut += sample.value;
      }
    } else if (success) totals.ok += sample.value;
    else if (code === "0") totals.cut += sample.value;
    else totals.failed += sample.value;
  }
  // Both counters are read in one scrape; a cut count above its total cannot happen, but never show less than none.
  return { ok: true, totals: { ...totals, ok: Math.max(0, totals.ok) } };
}

/** Per source: its last reading and the rate it gave. */
export type RequestMeter = Readonly<
  Record<string, { readonly reading: RequestReading; readonly rates: RequestRates | undefined }>
>;

export interface MeteredRequests {
  readonly meter: RequestMeter;
  /** Summed over the reporting sources; undefined when none reports (a gap). */
  readonly rates: RequestRates | undefined;
  /** Sources with a fresh rate, of the sources given. */
  readonly reporting: number;
  readonly known: number;
}

/**
 * The meter after `readings` (the latest reading of every source there is now, undefined for one
 * not read yet; sources absent are forgotten) at `nowMs`. A source with a newer reading than the meter's gets the rate between
 * the two; one whose reading has not changed keeps its rate while the reading is fresh (a
 * sample can fall between two scrapes); its first reading gives no rate yet.
 */
export function meterRequests(
  meter: RequestMeter,
  readings: Readonly<Record<string, RequestReading | undefined>>,
  nowMs: number,
): MeteredRequests {
  const next: Record<string, RequestMeter[string]> = {};
  const sum = { ok: 0, failed: 0, cut: 0 };
  let reporting = 0;
  for (const [source, reading] of Object.entries(readings)) {
    if (reading === undefined) continue;
    const before = meter[source];
    const rates =
      before === undefined
        ? undefined
        : reading.atMs > before.reading.atMs
          ? ratesBetween(before.reading, reading)
          : before.rates;
    next[source] = { reading, rates };
    if (rates === undefined || nowMs - reading.atMs > STALE_MS) continue;
    reporting += 1;
    sum.ok += rates.ok;
    sum.failed += rates.failed;
    sum.cut += rates.cut;
  }
  return { meter: next, rates: reporting === 0 ? undefined : sum, reporting, known: Object.keys(readings).length };
}

/** Per second from `before` to `after` (later); after a counter went down, `after` counts from zero. */
export function ratesBetween(before: RequestReading, after: RequestReading): RequestRates {
  const seconds = (after.atMs - before.atMs) / 1000;
  const then = before.totals;
  const now = after.totals;
  const reset = now.ok < then.ok || now.failed < then.failed || now.cut < then.cut;
  const base = reset ? { ok: 0, failed: 0, cut: 0 } : then;
  return {
    ok: (now.ok - base.ok) / seconds,
    failed: (now.failed - base.failed) / seconds,
    cut: (now.cut - base.cut) / seconds,
  };
}
