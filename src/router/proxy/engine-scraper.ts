/**
 * Engine readings for selection (DESIGN §7: the engine's running and waiting requests, "scraped
 * from the pod's /metrics at most every second"). Pull-driven: asking for an endpoint's reading
 * starts a scrape of it when the last one began at least `intervalMs` ago, and answers with the
 * reading it has, so endpoints nobody asks about are never scraped, no timer runs, and at most
 * one scrape per endpoint is in flight. A reading's age counts from the start of its scrape. A
 * failed scrape keeps the last good reading, which ages out of selection after
 * `ENGINE_METRICS_MAX_AGE_MS` (select.ts).
 *
 * The drain confirmation (DESIGN §3.4) needs a reading of a marked pod, which selection no longer
 * asks about, taken after the mark was seen: it asks with `scrapeSoon` (the same interval holds),
 * compares scrape sequence numbers (`sequence`, `queueAfter`: clock-free, so a scrape that began
 * in the same millisecond as the look but before it never counts) and is told of each finished
 * scrape through `onScrape`.
 */
import type { Endpoint } from "../endpoints.ts";
import { parseEngineQueue } from "../engine-metrics.ts";
import type { EngineQueue } from "../engine-metrics.ts";
import type { EngineKind } from "../route.ts";
import type { EngineLoad } from "../select.ts";
import { readBounded } from "./body.ts";
import type { Upstreams } from "./upstream.ts";

export interface EngineScraperOptions {
  readonly upstreams: Upstreams;
  /** Wall time in ms; readings' ages are measured on it. */
  readonly nowMs: () => number;
  /** Default 1000. */
  readonly intervalMs?: number;
  /** Bounds the headers and the body of one scrape. Default 2000. */
  readonly timeoutMs?: number;
  /** Larger pages are refused. Default 4 MiB. */
  readonly maxPageBytes?: number;
  /** Endpoints not asked about for this long are forgotten. Default 60 000. */
  readonly forgetAfterMs?: number;
}

/** What a scrape needs of an endpoint. */
export type ScrapeTarget = Pick<Endpoint, "key" | "address">;

interface Scraped {
  reading: { running: number; waiting: number; atMs: number } | undefined;
  lastStartMs: number;
  lastAskedMs: number;
  inFlight: Promise<void> | undefined;
  /** Why the last scrape failed, for diagnostics; undefined after a success. */
  lastError: string | undefined;
  /** The outcome of the last scrape that finished, with its sequence number. */
  last: { readonly seq: number; readonly queue: EngineQueue } | undefined;
}

export class EngineScraper {
  readonly #options: EngineScraperOptions;
  readonly #byKey = new Map<string, Scraped>();
  readonly #onScrape = new Set<(key: string) => void>();
  #lastForgetMs = Number.NEGATIVE_INFINITY;
  /** Scrapes started so far, of every endpoint: each scrape's sequence number. */
  #seq = 0;

  constructor(options: EngineScraperOptions) {
    this.#options = options;
  }

  /** The latest reading of `endpoint` with its age, starting a scrape when one is due. */
  reading(endpoint: Endpoint, engine: EngineKind): EngineLoad | undefined {
    const nowMs = this.#options.nowMs();
    const scraped = this.#entry(endpoint.key, nowMs);
    scraped.lastAskedMs = nowMs;
    if (scraped.inFlight === undefined && nowMs - scraped.lastStartMs >= (this.#options.intervalMs ?? 1_000))
      void this.refresh(endpoint, engine);
    const reading = scraped.reading;
    return reading === undefined
      ? undefined
      : { running: reading.running, waiting: reading.waiting, ageMs: Math.max(0, nowMs - reading.atMs) };
  }

  /** The sequence number of the last scrape started, of any endpoint; later scrapes have higher ones. */
  sequence(): number {
    return this.#seq;
  }

  /** The outcome of `key`'s last finished scrape when it started after scrape number `after`. */
  queueAfter(key: string, after: number): EngineQueue | undefined {
    const last = this.#byKey.get(key)?.last;
    return last !== undefined && last.seq > after ? last.queue : undefined;
  }

  /**
   * Starts a scrape of `target` unless one is in flight or the last began less than the interval
   * ago; answers the ms until one may start (0: one has started or is in flight).
   */
  scrapeSoon(target: ScrapeTarget, engine: EngineKind): number {
    const nowMs = this.#options.nowMs();
    const scraped = this.#entry(target.key, nowMs);
    scraped.lastAskedMs = nowMs;
    if (scraped.inFlight !== undefined) return 0;
    const waitMs = scraped.lastStartMs + (this.#options.intervalMs ?? 1_000) - nowMs;
    if (waitMs > 0) return waitMs;
    void this.refresh(target, engine);
    return 0;
  }

  /** Calls `listener` with the endpoint key after each scrape finishes; returns the unsubscribe. */
  onScrape(listener: (key: string) => void): () => void {
    this.#onScrape.add(listener);
    return () => this.#onScrape.delete(listener);
  }

  /** Why the last scrape of `key` failed, if it did. */
  lastError(key: string): string | undefined {
    return this.#byKey.get(key)?.lastError;
  }

  /** Scrapes `endpoint` now (joining a scrape in flight); never rejects. */
  refresh(endpoint: ScrapeTarget, engine: EngineKind): Promise<void> {
    const nowMs = this.#options.nowMs();
    const scraped = this.#entry(endpoint.key, nowMs);
    if (scraped.inFlight !== undefined) return scraped.inFlight;
    scraped.lastStartMs = nowMs;
    const seq = ++this.#seq;
    this.#forgetIdle(nowMs);
    const inFlight = this.#scrape(endpoint, engine).then((result) => {
      if (typeof result === "string") {
        scraped.lastError = result;
        scraped.last = { seq, queue: { ok: false, reason: result } };
      } else {
        scraped.reading = { ...result, atMs: nowMs };
        scraped.lastError = undefined;
        scraped.last = { seq, queue: { ok: true, ...result } };
      }
      scraped.inFlight = undefined;
      for (const listener of this.#onScrape) listener(endpoint.key);
    });
    scraped.inFlight = inFlight;
    return inFlight;
  }

  async #scrape(endpoint: ScrapeTarget, engine: EngineKind): Promise<{ running: number; waiting: number } | string> {
    try {
      const response = await this.#options.upstreams.get(
        endpoint.address,
        "/metrics",
        this.#options.timeoutMs ?? 2_000,
      );
      const page = await readBounded(response.body, this.#options.maxPageBytes ?? 4 * 1024 * 1024);
      if (response.statusCode !== 200) return `GET /metrics answered ${response.statusCode}`;
      if (!page.ok) return page.reason;
      const queue = parseEngineQueue(page.bytes.toString("utf8"), engine);
      return queue.ok ? { running: queue.running, waiting: queue.waiting } : queue.reason;
    } catch (error) {
      return error instanceof Error ? error.message : String(error);
    }
  }

  #entry(key: string, nowMs: number): Scraped {
    let scraped = this.#byKey.get(key);
    if (scraped === undefined) {
      scraped = {
        reading: undefined,
        lastStartMs: Number.NEGATIVE_INFINITY,
        lastAskedMs: nowMs,
        inFlight: undefined,
        lastError: undefined,
        last: undefined,
      };
      this.#byKey.set(key, scraped);
    }
    return scraped;
  }

  /** Drops endpoints nobody asked about lately (pods come and go; the map must not grow forever). */
  #forgetIdle(nowMs: number): void {
    const forgetAfterMs = this.#options.forgetAfterMs ?? 60_000;
    // A sweep at most once per interval keeps it O(endpoints) per second, not per scrape.
    if (nowMs - this.#lastForgetMs < (this.#options.intervalMs ?? 1_000)) return;
    this.#lastForgetMs = nowMs;
    for (const [key, scraped] of this.#byKey)
      if (scraped.inFlight === undefined && nowMs - scraped.lastAskedMs > forgetAfterMs) this.#byKey.delete(key);
  }
}
