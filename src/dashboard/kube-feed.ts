/**
 * The dashboard over a real cluster (`tandem dashboard`): a KubeReader (list + watch, the same
 * informers as the controller's) of ModelServings, their pods and ControllerRevisions, and router
 * Leases from every namespace; the state is published when something changed (coalesced over
 * COALESCE_MS) and once a second for the timeline. Requests per second come from the routers'
 * `/metrics` (router-scraper.ts), scraped every SCRAPE_MS: the `routerMetrics` URLs when given,
 * else the router pods found in `routerNamespace` by their labels. Read-only: it never writes, and
 * its transport refuses anything DASHBOARD_PERMISSIONS (the `tandem-dashboard` role) does not grant.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { LABEL_MODEL_SERVING, LABEL_ROUTER } from "../api/wellknown.ts";
import type { Logger } from "../engine/logger.ts";
import { WallClock } from "../kube/clock.ts";
import { KubeReader } from "../kube/reader.ts";
import { DASHBOARD_PERMISSIONS } from "../kube/resources.ts";
import { KubeTransport } from "../kube/transport.ts";
import type { Send } from "../kube/transport.ts";
import { ROUTER_POD_SELECTOR, RouterScraper, routerTargets } from "./router-scraper.ts";
import type { RouterTarget } from "./router-scraper.ts";
import { DashboardModel, SAMPLE_MS } from "./state.ts";
import type { DashboardState } from "./state.ts";

/** Changes within this long make one published state. */
const COALESCE_MS = 200;
/** One round of router scrapes per this long at most. */
export const SCRAPE_MS = 1_000;

export interface KubeFeedOptions {
  /** How requests reach the API server (`clientNodeSend` of a kubeconfig; a fake in tests). */
  readonly send: Send;
  /** Watch this namespace only; every namespace when undefined. */
  readonly namespace: string | undefined;
  /** Where the router pods run (the install namespace); their metrics give the request rates. */
  readonly routerNamespace: string;
  /** Router metrics URLs to scrape instead of finding router pods (the dashboard runs outside the cluster). */
  readonly routerMetrics: readonly string[];
  readonly title: string;
  readonly publish: (state: DashboardState) => void;
  readonly logger: Logger;
  /** A router's metrics start or stop answering: one line per change (stderr). */
  readonly say: (line: string) => void;
}

export interface KubeFeed {
  stop(): Promise<void>;
}

export function startKubeFeed(options: KubeFeedOptions): KubeFeed {
  const clock = new WallClock();
  const transport = new KubeTransport(options.send, { permissions: DASHBOARD_PERMISSIONS });
  const reader = new KubeReader({
    transport,
    clock,
    kinds: ["ModelServing", "Pod", "ControllerRevision", "Lease"],
    namespace: options.namespace,
    labelSelectors: {
      Pod: LABEL_MODEL_SERVING,
      ControllerRevision: LABEL_MODEL_SERVING,
      Lease: `${LABEL_ROUTER}=true`,
    },
    clusterWideKinds: ["Lease"],
    logger: options.logger,
  });
  const routers = routerFinder(options, transport, clock);
  const scraper = new RouterScraper({
    nowMs: () => clock.nowMs(),
    log: options.say,
  });
  const model = new DashboardModel({ kind: "cluster", title: options.title }, clock.nowMs());
  model.setStep(
    options.namespace === undefined ? "Watching every namespace" : `Watching namespace ${options.namespace}`,
  );
  const publish = (): void => {
    if (!reader.hasSynced()) return;
    options.publish(
      model.state(
        {
          modelServings: reader.list("ModelServing"),
          pods: reader.list("Pod"),
          revisions: reader.list("ControllerRevision"),
          leases: reader.list("Lease"),
          nowMs: clock.nowMs(),
        },
        scraper.readings(),
      ),
    );
  };
  let pending: NodeJS.Timeout | undefined;
  const unsubscribe = reader.subscribe(() => {
    pending ??= setTimeout(() => {
      pending = undefined;
      publish();
    }, COALESCE_MS);
  });
  const sampler = setInterval(publish, SAMPLE_MS);
  const stopping = new AbortController();
  const scraping = scrapeLoop(scraper, routers.targets, stopping.signal);
  reader.start();
  routers.start();
  return {
    stop: async () => {
      clearInterval(sampler);
      if (pending !== undefined) clearTimeout(pending);
      unsubscribe();
      stopping.abort();
      await scraping;
      await Promise.all([reader.stop(), routers.stop(), scraper.close()]);
    },
  };
}

/** Where the routers' metrics are: the URLs given, else the router pods a reader of their namespace sees. */
function routerFinder(
  options: KubeFeedOptions,
  transport: KubeTransport,
  clock: WallClock,
): { targets: () => RouterTarget[]; start: () => void; stop: () => Promise<void> } {
  if (options.routerMetrics.length > 0) {
    const given = options.routerMetrics.map((url) => ({ key: url, url }));
    return { targets: () => given, start: () => undefined, stop: () => Promise.resolve() };
  }
  const pods = new KubeReader({
    transport,
    clock,
    kinds: ["Pod"],
    namespace: options.routerNamespace,
    labelSelectors: { Pod: ROUTER_POD_SELECTOR },
    logger: options.logger,
  });
  return {
    targets: () => routerTargets(pods.list("Pod")),
    start: () => {
      pods.start();
    },
    stop: () => pods.stop(),
  };
}

/** Scrapes the targets every SCRAPE_MS (a round that takes longer starts the next at once) until `signal`. */
async function scrapeLoop(scraper: RouterScraper, targets: () => RouterTarget[], signal: AbortSignal): Promise<void> {
  while (!signal.aborted) {
    const startedMs = Date.now();
    await scraper.scrape(targets());
    const waitMs = SCRAPE_MS - (Date.now() - startedMs);
    if (waitMs > 0) await sleep(waitMs, undefined, { signal }).catch(() => undefined);
  }
}
