/**
 * The simulator's implementation of the router's Discovery port (src/router/discovery.ts): the
 * real router's view of a simulated cluster, read from its own informer (client
 * "router-discovery", watch-lagged like a real router's cache) over ModelRoutes, Pods and
 * ControllerRevisions. `tandem demo --serve` puts the real data plane on it.
 *
 * Where a pod's engine listens is not the pod's: the simulated `podIP` (10.x) reaches nothing, so
 * `addressOf` maps it (the demo: to the engine-mock started for that pod on 127.0.0.1).
 */
import { parseModelRoute } from "../api/parse.ts";
import type { Pod } from "../api/kube.ts";
import { LABEL_ENTRY, LABEL_MODEL_SERVING } from "../api/wellknown.ts";
import { decodeControllerRevision } from "../core/revision/controller-revision.ts";
import type { RevisionData } from "../core/revision/index.ts";
import type { Discovery } from "../router/discovery.ts";
import type { Address, DiscoveredPod } from "../router/endpoints.ts";
import { routerRouteOf } from "../router/route.ts";
import type { RouterRoute } from "../router/route.ts";
import type { KubeObject, WatchEvent } from "../engine/ports.ts";
import type { SimCluster } from "./cluster.ts";
import type { SimInformer } from "./informer.ts";

/** The kinds the router's cache holds (ModelServings for the simulated traffic's implicit routes). */
export const ROUTER_DISCOVERY_KINDS = ["ModelRoute", "ModelServing", "Pod", "ControllerRevision"] as const;

export interface SimDiscoveryOptions {
  /** The engine address of a pod as the cache shows it; undefined while it has none. */
  readonly addressOf: (pod: Pod) => Address | undefined;
  /** Watch lag of the cache. Default: the cluster's informer lag. */
  readonly lagMs?: number;
  /** The client the cache lists and watches through (one per router replica). Default "router-discovery". */
  readonly clientName?: string;
}

export class SimDiscovery implements Discovery {
  readonly #cache: SimInformer;
  readonly #addressOf: (pod: Pod) => Address | undefined;
  readonly #unsubscribe: () => void;
  /** Parsed routes, kept until a ModelRoute event: the router memoizes by this array's identity. */
  #routes: readonly RouterRoute[] | undefined;

  /** Starts the cache on `cluster`; stop it with `stop()`. */
  constructor(cluster: SimCluster, options: SimDiscoveryOptions) {
    this.#cache = cluster.reader({
      clientName: options.clientName ?? "router-discovery",
      kinds: ROUTER_DISCOVERY_KINDS,
      ...(options.lagMs === undefined ? {} : { lagMs: options.lagMs }),
    });
    this.#addressOf = options.addressOf;
    this.#unsubscribe = this.#cache.subscribe((event) => {
      if (event.object.kind === "ModelRoute") this.#routes = undefined;
    });
  }

  /** Every route in the cache that parses; one that does not is left out (the CRD would refuse it). */
  routes(): readonly RouterRoute[] {
    this.#routes ??= this.#cache.list("ModelRoute").flatMap((object) => {
      const parsed = parseModelRoute(object);
      return parsed.ok ? [routerRouteOf(parsed.value)] : [];
    });
    return this.#routes;
  }

  pods(route: RouterRoute): readonly DiscoveredPod[] {
    const labelSelector = `${LABEL_MODEL_SERVING}=${route.modelServing},${LABEL_ENTRY}=true`;
    return this.#cache.list("Pod", { namespace: route.namespace, labelSelector }).map((object) => {
      const pod = object as unknown as Pod;
      return { pod, address: this.#addressOf(pod) };
    });
  }

  revision(namespace: string, name: string): RevisionData | undefined {
    const decoded = decodeControllerRevision(this.#cache.get("ControllerRevision", namespace, name));
    return decoded.ok ? decoded.revision.data : undefined;
  }

  /** Every entry pod in the cache, in any state (the drain confirmations look at them). */
  entryPods(): readonly Pod[] {
    return this.#cache.list("Pod", { labelSelector: `${LABEL_ENTRY}=true` }) as unknown as Pod[];
  }

  /** Every ModelServing in the cache. */
  modelServings(): readonly KubeObject[] {
    return this.#cache.list("ModelServing");
  }

  /** Pod `namespace/name` as the cache shows it. */
  pod(namespace: string, name: string): Pod | undefined {
    return this.#cache.get("Pod", namespace, name) as unknown as Pod | undefined;
  }

  /** Calls `handler` after each change the cache applies. Returns the unsubscribe function. */
  subscribe(handler: (event: WatchEvent) => void): () => void {
    return this.#cache.subscribe(handler);
  }

  /** Every kind has been listed once. */
  hasSynced(): boolean {
    return this.#cache.hasSynced();
  }

  stop(): void {
    this.#unsubscribe();
    this.#cache.stop();
  }
}
