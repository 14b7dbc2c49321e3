/**
 * The router's `Discovery` on a Kubernetes API server: one `KubeReader` (the controller's
 * reflectors — paginated list, watch with bookmarks, relist on 410, backoff, watchdog) over
 * ModelRoutes, entry Pods (label selector `tandem.dev/entry=true`), ControllerRevisions and
 * ModelServings (whether a route's ModelServing and roles exist), in one namespace or all.
 *
 * Reads never block and never fail: they answer from the caches, memoized until the next event of
 * their kind, so a request does not re-filter every pod. ModelRoutes are parsed and validated with
 * `parseModelRoute` (memoized per object); a route that does not parse is not served, and its
 * problem is kept for the route's status (Accepted False, InvalidSpec).
 */
import type { Pod } from "../../api/kube.ts";
import { parseModelRoute } from "../../api/parse.ts";
import { LABEL_ENTRY, LABEL_MODEL_SERVING } from "../../api/wellknown.ts";
import type { RevisionData } from "../../core/revision/index.ts";
import { decodeControllerRevision } from "../../core/revision/index.ts";
import type { Logger } from "../../engine/logger.ts";
import type { Clock, Kind, KubeObject, WatchEvent } from "../../engine/ports.ts";
import { KubeReader } from "../../kube/reader.ts";
import type { KubeReaderOptions } from "../../kube/reader.ts";
import type { KubeTransport } from "../../kube/transport.ts";
import type { Discovery } from "../discovery.ts";
import type { DiscoveredPod } from "../endpoints.ts";
import { isJsonObject } from "../../engine/json.ts";
import { routerRouteOf } from "../route.ts";
import type { RouterRoute } from "../route.ts";

/** The kinds the router watches. */
export const ROUTER_KINDS: readonly Kind[] = ["ModelRoute", "Pod", "ControllerRevision", "ModelServing"];

export interface KubeDiscoveryOptions {
  readonly transport: KubeTransport;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Only this namespace; all namespaces when absent. */
  readonly namespace?: string | undefined;
  readonly reflector?: KubeReaderOptions["reflector"];
}

/** One ModelRoute object as stored, with its parse: the route served, or why it is not. */
export interface StoredRoute {
  readonly object: KubeObject<"ModelRoute">;
  readonly parsed:
    { readonly ok: true; readonly value: RouterRoute } | { readonly ok: false; readonly invalid: string };
}

export class KubeDiscovery implements Discovery {
  readonly #reader: KubeReader;
  readonly #onChange = new Set<(kind: Kind) => void>();
  #stored: readonly StoredRoute[] | undefined;
  #routes: readonly RouterRoute[] | undefined;
  #pods = new Map<string, readonly DiscoveredPod[]>();
  #revisions = new Map<string, { resourceVersion: string | undefined; data: RevisionData | undefined }>();
  readonly #parsed = new WeakMap<object, StoredRoute["parsed"]>();

  constructor(options: KubeDiscoveryOptions) {
    // Only entry pods: the router never reads workers, and a cluster may hold many other pods.
    this.#reader = new KubeReader({ ...options, kinds: ROUTER_KINDS, labelSelectors: { Pod: `${LABEL_ENTRY}=true` } });
    this.#reader.subscribe((event) => {
      this.#invalidate(event);
    });
  }

  start(): void {
    this.#reader.start();
  }

  stop(): Promise<void> {
    return this.#reader.stop();
  }

  /** True once every kind has been listed (the router's /readyz). */
  hasSynced(): boolean {
    return this.#reader.hasSynced();
  }

  /** Calls `listener` after every cache change, with its kind; returns the unsubscribe. */
  onChange(listener: (kind: Kind) => void): () => void {
    this.#onChange.add(listener);
    return () => this.#onChange.delete(listener);
  }

  routes(): readonly RouterRoute[] {
    this.#routes ??= this.storedRoutes().flatMap((stored) => (stored.parsed.ok ? [stored.parsed.value] : []));
    return this.#routes;
  }

  /** Every ModelRoute object, parsed or not, sorted by namespace and name (for status). */
  storedRoutes(): readonly StoredRoute[] {
    this.#stored ??= this.#reader.list("ModelRoute").map((object) => ({ object, parsed: this.#parse(object) }));
    return this.#stored;
  }

  /** The role names of ModelServing `namespace/name`, in spec order; undefined when there is none. */
  modelServingRoles(namespace: string, name: string): readonly string[] | undefined {
    const object = this.#reader.get("ModelServing", namespace, name);
    if (object === undefined) return undefined;
    const template = object.spec?.["template"];
    const roles = isJsonObject(template) && Array.isArray(template["roles"]) ? template["roles"] : [];
    return roles.flatMap((role) => (isJsonObject(role) && typeof role["name"] === "string" ? [role["name"]] : []));
  }

  pods(route: RouterRoute): readonly DiscoveredPod[] {
    const key = `${route.namespace}\u0000${route.modelServing}\u0000${route.port}`;
    let pods = this.#pods.get(key);
    if (pods === undefined) {
      const selector = `${LABEL_MODEL_SERVING}=${route.modelServing},${LABEL_ENTRY}=true`;
      pods = this.#reader
        .list("Pod", { namespace: route.namespace, labelSelector: selector })
        .map((object) => discovered(object as unknown as Pod, route.port));
      this.#pods.set(key, pods);
    }
    return pods;
  }

  revision(namespace: string, name: string): RevisionData | undefined {
    const object = this.#reader.get("ControllerRevision", namespace, name);
    if (object === undefined) return undefined;
    const key = `${namespace}\u0000${name}`;
    const memo = this.#revisions.get(key);
    if (memo !== undefined && memo.resourceVersion === object.metadata.resourceVersion) return memo.data;
    const decoded = decodeControllerRevision(object);
    const data = decoded.ok ? decoded.revision.data : undefined;
    this.#revisions.set(key, { resourceVersion: object.metadata.resourceVersion, data });
    return data;
  }

  #parse(object: KubeObject<"ModelRoute">): StoredRoute["parsed"] {
    let parsed = this.#parsed.get(object);
    if (parsed === undefined) {
      const result = parseModelRoute(object);
      parsed = result.ok
        ? { ok: true, value: routerRouteOf(result.value) }
        : { ok: false, invalid: result.problems.map((problem) => `${problem.path}: ${problem.reason}`).join("; ") };
      this.#parsed.set(object, parsed);
    }
    return parsed;
  }

  #invalidate(event: WatchEvent): void {
    const kind = event.object.kind;
    if (kind === "ModelRoute") {
      this.#stored = undefined;
      this.#routes = undefined;
      // A route's port is part of its pods' addresses.
      this.#pods = new Map();
    } else if (kind === "Pod") this.#pods = new Map();
    else if (kind === "ControllerRevision" && event.type === "DELETED")
      this.#revisions.delete(`${event.object.metadata.namespace ?? ""}\u0000${event.object.metadata.name}`);
    for (const listener of this.#onChange) listener(kind);
  }
}

/** A pod with its engine's address: pod IP and the route's port; none before it has an IP. */
function discovered(pod: Pod, port: number): DiscoveredPod {
  const ip = pod.status?.podIP;
  return { pod, address: ip === undefined || ip === "" ? undefined : { host: ip, port } };
}
