/**
 * Where each kind lives in the Kubernetes REST API, and the one list of API permissions the
 * adapter uses. RBAC (`deploy/rbac.yaml`) is generated from `PERMISSIONS`, and the transport
 * refuses any request outside it, so the shipped ClusterRole and the code cannot drift apart.
 */
import type { Kind } from "../engine/ports.ts";

export interface Resource {
  /** API group; "" for the core group. */
  readonly group: string;
  readonly version: string;
  readonly plural: string;
  readonly namespaced: boolean;
}

/** The resource of every kind the adapter reads or writes. */
export const RESOURCES: Readonly<Record<Kind, Resource>> = {
  ModelServing: { group: "tandem.dev", version: "v1alpha1", plural: "modelservings", namespaced: true },
  ModelRoute: { group: "tandem.dev", version: "v1alpha1", plural: "modelroutes", namespaced: true },
  Pod: { group: "", version: "v1", plural: "pods", namespaced: true },
  Service: { group: "", version: "v1", plural: "services", namespaced: true },
  ControllerRevision: { group: "apps", version: "v1", plural: "controllerrevisions", namespaced: true },
  Event: { group: "", version: "v1", plural: "events", namespaced: true },
  Lease: { group: "coordination.k8s.io", version: "v1", plural: "leases", namespaced: true },
  Node: { group: "", version: "v1", plural: "nodes", namespaced: false },
  Namespace: { group: "", version: "v1", plural: "namespaces", namespaced: false },
};

/** Kubernetes API verbs (RBAC names). */
export type Verb = "get" | "list" | "watch" | "create" | "update" | "patch" | "delete";

/**
 * One RBAC rule: `verbs` on `resource` (optionally a subresource, `pods/status`) in `group`, where:
 * "cluster": every namespace the component watches (a ClusterRole; under a namespace scope, a Role
 * in that namespace); "allNamespaces": every namespace even under a namespace scope (a ClusterRole);
 * "controller": only the install namespace, where the controller and the router run (a Role).
 */
export interface Permission {
  readonly group: string;
  readonly resource: string;
  readonly verbs: readonly Verb[];
  readonly scope: "cluster" | "allNamespaces" | "controller";
}

/**
 * Everything the controller may do, and nothing more (least privilege). Reads: the informers
 * list and watch the four kinds the engine observes, and router Leases in every namespace (DESIGN
 * §3.1, the router registry). Writes: exactly the requests the engine
 * sends through `KubeWriter`, the `EventRecorder`'s among them (core/v1 Events, created, and
 * patched to count repeats), plus `LeaderElector`'s Lease.
 */
export const PERMISSIONS: readonly Permission[] = [
  { group: "tandem.dev", resource: "modelservings", verbs: ["list", "watch"], scope: "cluster" },
  { group: "tandem.dev", resource: "modelservings/status", verbs: ["patch"], scope: "cluster" },
  // Never sent by the adapter: the OwnerReferencesPermissionEnforcement admission plugin requires
  // it to create children whose owner reference has blockOwnerDeletion (all of ours do).
  { group: "tandem.dev", resource: "modelservings/finalizers", verbs: ["update"], scope: "cluster" },
  { group: "", resource: "pods", verbs: ["list", "watch", "create", "patch", "delete"], scope: "cluster" },
  { group: "", resource: "pods/status", verbs: ["patch"], scope: "cluster" },
  { group: "", resource: "services", verbs: ["list", "watch", "create", "delete"], scope: "cluster" },
  {
    group: "apps",
    resource: "controllerrevisions",
    verbs: ["list", "watch", "create", "patch", "delete"],
    scope: "cluster",
  },
  { group: "", resource: "events", verbs: ["create", "patch"], scope: "cluster" },
  // Router Leases from every namespace, also when the controller watches one: a router routing it may run elsewhere.
  { group: "coordination.k8s.io", resource: "leases", verbs: ["list", "watch"], scope: "allNamespaces" },
  { group: "coordination.k8s.io", resource: "leases", verbs: ["get", "create", "update"], scope: "controller" },
];

/**
 * Everything `tandem router` may do (its own ServiceAccount and ClusterRole), and nothing more.
 * Reads: its discovery lists and watches ModelRoutes, the entry Pods and ControllerRevisions
 * behind them, and ModelServings (a route naming a missing one is not Accepted). Writes: the
 * route status it computes, as a merge patch of the status subresource; its drain confirmations,
 * merge patches of pods (DESIGN §3.4); and its registration Lease (DESIGN §3.1: created, taken
 * over and renewed by merge patch, deleted on stop) — in its own namespace only, a Role
 * (scope "controller": the install namespace, where the router runs), not across the cluster.
 */
export const ROUTER_PERMISSIONS: readonly Permission[] = [
  { group: "tandem.dev", resource: "modelroutes", verbs: ["list", "watch"], scope: "cluster" },
  { group: "tandem.dev", resource: "modelroutes/status", verbs: ["patch"], scope: "cluster" },
  { group: "tandem.dev", resource: "modelservings", verbs: ["list", "watch"], scope: "cluster" },
  { group: "", resource: "pods", verbs: ["list", "watch", "patch"], scope: "cluster" },
  { group: "apps", resource: "controllerrevisions", verbs: ["list", "watch"], scope: "cluster" },
  { group: "coordination.k8s.io", resource: "leases", verbs: ["create", "patch", "delete"], scope: "controller" },
];

/**
 * What `tandem dashboard` (run as the user) needs, and nothing more: its feed lists and watches
 * ModelServings, their Pods and ControllerRevisions in the namespaces it shows, router Leases in
 * every namespace (a router routing them may register anywhere, DESIGN §3.1), and the router
 * pods in the install namespace — their IPs and metrics port, to read request rates (scope
 * "controller"; redundant with the pods rule when the dashboard reads every namespace). Read-only.
 * `tandem manifests` renders it as the ClusterRole (and Roles) `tandem-dashboard`, to bind to the
 * people who run the dashboard.
 */
export const DASHBOARD_PERMISSIONS: readonly Permission[] = [
  { group: "tandem.dev", resource: "modelservings", verbs: ["list", "watch"], scope: "cluster" },
  { group: "", resource: "pods", verbs: ["list", "watch"], scope: "cluster" },
  { group: "apps", resource: "controllerrevisions", verbs: ["list", "watch"], scope: "cluster" },
  { group: "coordination.k8s.io", resource: "leases", verbs: ["list", "watch"], scope: "allNamespaces" },
  { group: "", resource: "pods", verbs: ["list", "watch"], scope: "controller" },
];

/**
 * What the rollout commands (`tandem rollout ...`, run as the user) need: read a ModelServing, its
 * revisions and pods, and update or patch its spec.
 */
export const ROLLOUT_PERMISSIONS: readonly Permission[] = [
  { group: "tandem.dev", resource: "modelservings", verbs: ["list", "update", "patch"], scope: "cluster" },
  { group: "", resource: "pods", verbs: ["list"], scope: "cluster" },
  { group: "apps", resource: "controllerrevisions", verbs: ["list"], scope: "cluster" },
];

/** True when `permissions` allow `verb` on `resource` (with subresource, `pods/status`) in `group`. */
export function isPermitted(permissions: readonly Permission[], group: string, resource: string, verb: Verb): boolean {
  return permissions.some(
    (permission) => permission.group === group && permission.resource === resource && permission.verbs.includes(verb),
  );
}

/** What one request addresses; `name` absent = the collection. */
export interface Target {
  readonly namespace?: string | undefined;
  readonly name?: string | undefined;
  readonly subresource?: string | undefined;
}

/** The URL path (no query) of `target` within `resource`; all namespaces when none is given. */
export function resourcePath(resource: Resource, target: Target = {}): string {
  const root = resource.group === "" ? `/api/${resource.version}` : `/apis/${resource.group}/${resource.version}`;
  const scope =
    resource.namespaced && target.namespace !== undefined ? `/namespaces/${encodeURIComponent(target.namespace)}` : "";
  const name = target.name === undefined ? "" : `/${encodeURIComponent(target.name)}`;
  const subresource = target.subresource === undefined ? "" : `/${target.subresource}`;
  return `${root}${scope}/${resource.plural}${name}${subresource}`;
}
