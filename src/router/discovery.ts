/**
 * The discovery port: everything the router reads about the world, and nothing it writes. Three
 * implementations: `StaticDiscovery` here (tests; fixed objects), the Kubernetes one (reflectors
 * over ModelRoutes, Pods and ControllerRevisions) and the simulator's (its lagged router cache),
 * the last two to come. Reads never block and never fail: a cache answers with what it has.
 */
import type { RevisionData } from "../core/revision/index.ts";
import type { DiscoveredPod } from "./endpoints.ts";
import type { RouterRoute } from "./route.ts";

export interface Discovery {
  /** Every route the router sees, conflicts included (`routesByModel` resolves them). */
  routes(): readonly RouterRoute[];
  /**
   * The entry pods of `route`'s ModelServing in its namespace, in any state, each with the
   * address of its engine (pod IP and `route.port` on a cluster). Eligibility is the router's
   * decision (`eligibility`), not discovery's, so every implementation filters the same way.
   * A list that keeps its identity while its pods are unchanged (KubeDiscovery's does) lets the
   * decisions over it be computed once per list (`roleEndpoints`); a new list per call is correct,
   * only not memoised.
   */
  pods(route: RouterRoute): readonly DiscoveredPod[];
  /** The data of ControllerRevision `name` in `namespace`; undefined when unknown or unreadable. */
  revision(namespace: string, name: string): RevisionData | undefined;
}

/** Fixed routes, pods and revisions; `set` replaces them (a test moving the world on). */
export class StaticDiscovery implements Discovery {
  #routes: readonly RouterRoute[];
  #pods: readonly DiscoveredPod[];
  #revisions: ReadonlyMap<string, RevisionData>;

  /** `revisions` are keyed `<namespace>/<name>`. */
  constructor(world: {
    routes: readonly RouterRoute[];
    pods: readonly DiscoveredPod[];
    revisions?: ReadonlyMap<string, RevisionData>;
  }) {
    this.#routes = world.routes;
    this.#pods = world.pods;
    this.#revisions = world.revisions ?? new Map();
  }

  set(world: {
    routes?: readonly RouterRoute[];
    pods?: readonly DiscoveredPod[];
    revisions?: ReadonlyMap<string, RevisionData>;
  }): void {
    this.#routes = world.routes ?? this.#routes;
    this.#pods = world.pods ?? this.#pods;
    this.#revisions = world.revisions ?? this.#revisions;
  }

  routes(): readonly RouterRoute[] {
    return this.#routes;
  }

  pods(route: RouterRoute): readonly DiscoveredPod[] {
    return this.#pods.filter(({ pod }) => pod.metadata.namespace === route.namespace);
  }

  revision(namespace: string, name: string): RevisionData | undefined {
    return this.#revisions.get(`${namespace}/${name}`);
  }
}
