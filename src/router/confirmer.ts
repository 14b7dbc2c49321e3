/**
 * The router replica's drain confirmations (DESIGN §3.4): for every entry pod of every route it
 * sees that is marked draining, it decides with `confirmDrain` (confirm.ts) from this replica's
 * own in-flight legs on the pod and an engine scrape that began after this replica first saw the
 * mark, and writes `confirmationPatch` (a merge patch with the pod's uid as precondition).
 * Written against ports (Clock, ClusterWriter, and the three below), so `tandem router` and
 * `tandem demo --serve` run this code.
 *
 * Event driven, never polling: it looks again when discovery's cache changes, when this
 * replica's last leg on a pod ends (`LegCounts.onIdle`), when a scrape finishes
 * (`EngineProbe.onScrape`), and at the times it set itself (a scrape not yet due — engines are
 * scraped at most every second — or a retry). Looks are coalesced into one pass. Nothing is
 * confirmed before the caches have synced (a restarted replica has nothing in flight and then
 * confirms every marked pod whose engine is idle); until then it looks every SYNC_CHECK_MS.
 *
 * A write that fails with Conflict, ServerError or Timeout is retried (after a fresh look) with
 * capped exponential backoff; NotFound (the pod is gone) ends it; anything else is logged and
 * given up for that mark. One confirmation per pod uid and mark.
 */
import type { Pod } from "../api/kube.ts";
import { drainedAnnotation } from "../api/router-lease.ts";
import { ANNOTATION_DRAINING } from "../api/wellknown.ts";
import { isTerminating } from "../core/health.ts";
import type { Logger } from "../engine/logger.ts";
import { isApiError } from "../engine/ports.ts";
import type { Clock, ClusterWriter, Timer } from "../engine/ports.ts";
import { confirmDrain, confirmationPatch } from "./confirm.ts";
import type { Discovery } from "./discovery.ts";
import type { Address } from "./endpoints.ts";
import type { EngineQueue } from "./engine-metrics.ts";
import type { EngineKind } from "./route.ts";

/** First retry of a failed confirmation; doubled per failure up to CONFIRM_RETRY_CAP_MS. */
export const CONFIRM_RETRY_BASE_MS = 200;
export const CONFIRM_RETRY_CAP_MS = 10_000;
/** How often to look whether the caches have synced, until they have. */
export const SYNC_CHECK_MS = 200;

/** Discovery, told of cache changes. */
export interface ConfirmerDiscovery extends Discovery {
  hasSynced(): boolean;
  onChange(listener: () => void): () => void;
}

/** This replica's legs in flight per endpoint key (`<namespace>/<pod>`): the proxy's `InFlight`. */
export interface LegCounts {
  count(key: string): number;
  /** Calls `listener` when a key's count drops to 0; returns the unsubscribe. */
  onIdle(listener: (key: string) => void): () => void;
}

/** Engine scrapes by sequence number: the proxy's `EngineScraper`. */
export interface EngineProbe {
  /** The number of the last scrape started, of any endpoint. */
  sequence(): number;
  /** `key`'s last finished scrape when it started after scrape number `after`. */
  queueAfter(key: string, after: number): EngineQueue | undefined;
  /** Starts a scrape when one is due; answers the ms until one may start (0: started or in flight). */
  scrapeSoon(target: { readonly key: string; readonly address: Address }, engine: EngineKind): number;
  onScrape(listener: (key: string) => void): () => void;
}

export interface ConfirmerOptions {
  readonly routerId: string;
  readonly discovery: ConfirmerDiscovery;
  readonly legs: LegCounts;
  readonly engine: EngineProbe;
  readonly writer: ClusterWriter;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Told of every confirmation written (the metrics counter). */
  readonly onConfirmed?: (pod: Pod) => void;
}

/** A marked pod as this replica follows it. */
interface Tracked {
  readonly uid: string;
  readonly mark: string;
  /** The probe's sequence when the mark was first seen: only later scrapes count. */
  readonly seenSeq: number;
  phase: "waiting" | "writing" | "done";
  failures: number;
  /** No write before this (`clock.nowMs()`), after a failure. */
  notBeforeMs: number;
}

interface Marked {
  readonly pod: Pod;
  readonly address: Address | undefined;
  readonly engine: EngineKind;
}

export class DrainConfirmer {
  readonly #options: ConfirmerOptions;
  readonly #tracked = new Map<string, Tracked>();
  readonly #writes = new Set<Promise<void>>();
  #unsubscribe: (() => void)[] = [];
  #look: Timer | undefined;
  #stopped = false;

  constructor(options: ConfirmerOptions) {
    this.#options = options;
  }

  start(): void {
    const { discovery, legs, engine } = this.#options;
    // Legs end and scrapes finish on every pod all the time; only a followed (marked) one matters.
    const lookIfFollowed = (key: string): void => {
      if (this.#tracked.has(key)) this.#lookIn(0);
    };
    this.#unsubscribe = [
      discovery.onChange(() => {
        this.#lookIn(0);
      }),
      legs.onIdle(lookIfFollowed),
      engine.onScrape(lookIfFollowed),
    ];
    this.#lookIn(0);
  }

  /** Stops looking; resolves once the writes in flight have settled. */
  async stop(): Promise<void> {
    this.#stopped = true;
    for (const unsubscribe of this.#unsubscribe) unsubscribe();
    this.#look?.cancel();
    await Promise.all(this.#writes);
  }

  /** One look after `delayMs`, unless one is due sooner. */
  #lookIn(delayMs: number): void {
    if (this.#stopped) return;
    const dueMs = this.#options.clock.nowMs() + delayMs;
    if (this.#look !== undefined && this.#look.dueMs <= dueMs) return;
    this.#look?.cancel();
    this.#look = this.#options.clock.setTimer(Math.max(0, Math.ceil(delayMs)), () => {
      this.#look = undefined;
      this.#lookNow();
    });
  }

  #lookNow(): void {
    if (this.#stopped) return;
    if (!this.#options.discovery.hasSynced()) {
      this.#lookIn(SYNC_CHECK_MS);
      return;
    }
    const marked = this.#markedPods();
    for (const [key, tracked] of this.#tracked) {
      const pod = marked.get(key)?.pod;
      if (pod?.metadata.uid !== tracked.uid || pod.metadata.annotations?.[ANNOTATION_DRAINING] !== tracked.mark)
        this.#tracked.delete(key);
    }
    for (const [key, entry] of marked) this.#check(key, entry);
  }

  /** The marked entry pods of every route, by `<namespace>/<pod>`. */
  #markedPods(): Map<string, Marked> {
    const { discovery } = this.#options;
    const marked = new Map<string, Marked>();
    for (const route of discovery.routes()) {
      for (const { pod, address } of discovery.pods(route)) {
        if (pod.metadata.annotations?.[ANNOTATION_DRAINING] === undefined) continue;
        marked.set(`${pod.metadata.namespace ?? ""}/${pod.metadata.name}`, { pod, address, engine: route.engine });
      }
    }
    return marked;
  }

  #check(key: string, { pod, address, engine }: Marked): void {
    const { routerId, legs, clock } = this.#options;
    const mark = pod.metadata.annotations?.[ANNOTATION_DRAINING] ?? "";
    let tracked = this.#tracked.get(key);
    if (tracked === undefined) {
      const done = pod.metadata.annotations?.[drainedAnnotation(routerId)] === "true";
      tracked = {
        uid: pod.metadata.uid ?? "",
        mark,
        seenSeq: this.#options.engine.sequence(),
        phase: done ? "done" : "waiting",
        failures: 0,
        notBeforeMs: 0,
      };
      this.#tracked.set(key, tracked);
    }
    if (tracked.phase !== "waiting") return;
    const waitMs = tracked.notBeforeMs - clock.nowMs();
    if (waitMs > 0) {
      this.#lookIn(waitMs);
      return;
    }
    const inFlight = legs.count(key);
    const queue = this.#options.engine.queueAfter(key, tracked.seenSeq);
    if (confirmDrain({ pod, routerId, inFlight, engine: queue }).confirm) {
      this.#write(key, tracked, pod);
      return;
    }
    // A leg ending or the pod changing brings the next look; only an engine figure needs asking for.
    const idle = queue?.ok === true && queue.running + queue.waiting === 0;
    if (inFlight === 0 && !idle && !isTerminating(pod) && address !== undefined) {
      const dueInMs = this.#options.engine.scrapeSoon({ key, address }, engine);
      if (dueInMs > 0) this.#lookIn(dueInMs);
    }
  }

  #write(key: string, tracked: Tracked, pod: Pod): void {
    const { writer, logger, routerId } = this.#options;
    tracked.phase = "writing";
    const ref = { kind: "Pod" as const, namespace: pod.metadata.namespace ?? "", name: pod.metadata.name };
    const write = writer.patch(ref, confirmationPatch(pod, routerId)).then(
      () => {
        tracked.phase = "done";
        logger.info({ pod: key, mark: tracked.mark }, "drain confirmed");
        this.#options.onConfirmed?.(pod);
      },
      (error: unknown) => {
        this.#failed(key, tracked, error);
      },
    );
    this.#writes.add(write);
    void write.finally(() => this.#writes.delete(write));
  }

  #failed(key: string, tracked: Tracked, error: unknown): void {
    const { logger } = this.#options;
    if (isApiError(error, "NotFound")) {
      tracked.phase = "done";
      return;
    }
    if (!isApiError(error, "Conflict", "ServerError", "Timeout")) {
      tracked.phase = "done";
      logger.error({ pod: key, mark: tracked.mark, error: String(error) }, "drain confirmation failed; not retried");
      return;
    }
    tracked.failures++;
    tracked.phase = "waiting";
    const delayMs = Math.min(CONFIRM_RETRY_BASE_MS * 2 ** (tracked.failures - 1), CONFIRM_RETRY_CAP_MS);
    tracked.notBeforeMs = this.#options.clock.nowMs() + delayMs;
    logger.warn(
      { pod: key, mark: tracked.mark, failures: tracked.failures, retryInMs: delayMs, error: error.message },
      "drain confirmation failed; retrying",
    );
    this.#lookIn(delayMs);
  }
}
