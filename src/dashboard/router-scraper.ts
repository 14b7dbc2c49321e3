/**
 * The request counters of Tandem routers, for the dashboard's timeline on a real cluster: where
 * the routers' `/metrics` are (`routerTargets`: the router pods' IPs and their `metrics` port, or
 * the `--router-metrics` URLs given) and a `RouterScraper` that reads them all at once, each
 * bounded by a timeout, keeping every target's latest reading while it answers (requests.ts
 * turns readings into rates). A target's failures are said once when it starts failing and once when it answers
 * again — never once per scrape.
 */
import { Agent } from "undici";
import type { KubeObject } from "../engine/ports.ts";
import { readBounded } from "../router/proxy/body.ts";
import { routerRequestTotals } from "./requests.ts";
import type { RequestReading } from "./requests.ts";
import { compareStrings } from "../core/maps.ts";

/** The labels of the router pods (`tandem manifests`, the Helm chart: app.kubernetes.io name and component). */
export const ROUTER_POD_SELECTOR = "app.kubernetes.io/name=tandem,app.kubernetes.io/component=router";

/** One router's metrics page: `key` names it (`namespace/pod`, or the URL given). */
export interface RouterTarget {
  readonly key: string;
  readonly url: string;
}

/**
 * The metrics pages of the running router pods: phase Running, an IP, not being deleted, and a
 * container port named `metrics` (the port the install gives `--metrics-addr`). Sorted by key.
 */
export function routerTargets(pods: readonly KubeObject[]): RouterTarget[] {
  const targets: RouterTarget[] = [];
  for (const pod of pods) {
    const ip = pod.status?.["podIP"];
    if (
      pod.status?.["phase"] !== "Running" ||
      typeof ip !== "string" ||
      ip === "" ||
      pod.metadata.deletionTimestamp !== undefined
    )
      continue;
    const port = metricsPort(pod);
    if (port === undefined) continue;
    const host = ip.includes(":") ? `[${ip}]` : ip;
    targets.push({
      key: `${pod.metadata.namespace ?? ""}/${pod.metadata.name}`,
      url: `http://${host}:${port}/metrics`,
    });
  }
  return targets.sort((a, b) => compareStrings(a.key, b.key));
}

/** The `containerPort` of the container port named `metrics` (the object as the API sent it: read with care). */
function metricsPort(pod: KubeObject): number | undefined {
  const containers = pod.spec?.["containers"];
  for (const container of Array.isArray(containers) ? (containers as unknown[]) : []) {
    const ports: unknown =
      typeof container === "object" && container !== null ? (container as Record<string, unknown>)["ports"] : undefined;
    if (!Array.isArray(ports)) continue;
    for (const port of ports as unknown[]) {
      if (typeof port !== "object" || port === null) continue;
      const { name, containerPort } = port as Record<string, unknown>;
      if (name === "metrics" && typeof containerPort === "number") return containerPort;
    }
  }
  return undefined;
}

export interface RouterScraperOptions {
  /** Wall time in ms: a reading's time is its scrape's start. */
  readonly nowMs: () => number;
  /** One line per change of a target's state (first read, failing and why, reading again). */
  readonly log: (line: string) => void;
  /** Bounds the headers and the body of one scrape. Default 2000. */
  readonly timeoutMs?: number;
  /** Larger pages are refused. Default 4 MiB. */
  readonly maxPageBytes?: number;
}

interface Scraped {
  reading: RequestReading | undefined;
  /** Whether the last scrape answered; undefined before the first. */
  answering: boolean | undefined;
}

export class RouterScraper {
  readonly #options: RouterScraperOptions;
  readonly #agent: Agent;
  readonly #byKey = new Map<string, Scraped>();

  constructor(options: RouterScraperOptions) {
    this.#options = options;
    const timeoutMs = options.timeoutMs ?? 2_000;
    this.#agent = new Agent({ connect: { timeout: timeoutMs }, headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
  }

  /** Scrapes every target at once (targets not given any more are forgotten); never rejects. */
  async scrape(targets: readonly RouterTarget[]): Promise<void> {
    const keys = new Set(targets.map((target) => target.key));
    for (const key of this.#byKey.keys()) if (!keys.has(key)) this.#byKey.delete(key);
    await Promise.all(targets.map((target) => this.#scrapeOne(target)));
  }

  /**
   * The latest reading of every target of the last round (undefined: none yet, or its last scrape
   * failed); undefined without targets.
   */
  readings(): Record<string, RequestReading | undefined> | undefined {
    if (this.#byKey.size === 0) return undefined;
    return Object.fromEntries([...this.#byKey].map(([key, scraped]) => [key, scraped.reading]));
  }

  close(): Promise<void> {
    return this.#agent.close();
  }

  async #scrapeOne(target: RouterTarget): Promise<void> {
    let scraped = this.#byKey.get(target.key);
    if (scraped === undefined) {
      scraped = { reading: undefined, answering: undefined };
      this.#byKey.set(target.key, scraped);
    }
    const atMs = this.#options.nowMs();
    const result = await this.#read(target.url);
    const where = target.key === target.url ? target.url : `${target.key} (${target.url})`;
    if (typeof result === "string") {
      if (scraped.answering !== false)
        this.#options.log(
          `router metrics ${where}: cannot read: ${result} (its requests are left out of the timeline until it answers)`,
        );
      scraped.answering = false;
      // It is not reporting now: a gap from this scrape on, not its last rate held.
      scraped.reading = undefined;
      return;
    }
    if (scraped.answering !== true)
      this.#options.log(`router metrics ${where}: ${scraped.answering === false ? "answers again" : "reading"}`);
    scraped.answering = true;
    scraped.reading = { totals: result, atMs };
  }

  async #read(url: string): Promise<RequestReading["totals"] | string> {
    try {
      const response = await this.#agent.request({ origin: new URL(url).origin, path: pathOf(url), method: "GET" });
      const page = await readBounded(response.body, this.#options.maxPageBytes ?? 4 * 1024 * 1024);
      if (response.statusCode !== 200) return `GET answered ${response.statusCode}`;
      if (!page.ok) return page.reason;
      const read = routerRequestTotals(page.bytes.toString("utf8"));
      return read.ok ? read.totals : read.reason;
    } catch (error) {
      return error instanceof Error ? (error.message === "" ? error.name : error.message) : String(error);
    }
  }
}

function pathOf(url: string): string {
  const parsed = new URL(url);
  return `${parsed.pathname}${parsed.search}`;
}
