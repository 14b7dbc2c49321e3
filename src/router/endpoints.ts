/**
 * Which pods may take a request (DESIGN §7 "Eligible endpoint"), decided from plain Pod objects
 * with the predicates the controller itself uses (src/core/health.ts), so the router and the
 * controller mean the same thing by Ready, serving and draining. Pure.
 */
import type { Pod } from "../api/kube.ts";
import {
  LABEL_ENTRY,
  LABEL_GROUP,
  LABEL_MODEL_SERVING,
  LABEL_REVISION,
  LABEL_ROLE,
  LABEL_ROLE_HASH,
  SERVING_GATE,
} from "../api/wellknown.ts";
import { isPodReady, isTerminating, podCondition } from "../core/health.ts";
import { isDraining } from "../core/invariants.ts";
import { compareStrings } from "../core/maps.ts";
import type { RouterRoute } from "./route.ts";

/** SGLang's prefill bootstrap server port: the pod annotation, else SGLang's default. */
export const ANNOTATION_BOOTSTRAP_PORT = "sglang.ai/bootstrap-port";
export const DEFAULT_BOOTSTRAP_PORT = 8998;

/** Where a pod's engine listens: the pod IP and the route's port on a cluster. */
export interface Address {
  readonly host: string;
  readonly port: number;
}

/** A pod as discovery reports it: the object, and how to reach its engine (absent: no IP yet). */
export interface DiscoveredPod {
  readonly pod: Pod;
  readonly address: Address | undefined;
}

/** An eligible endpoint: what selection, pairing, legs and the data plane need of a pod. */
export interface Endpoint {
  /** `<namespace>/<pod>`: the key of in-flight counts and engine loads. */
  readonly key: string;
  readonly pod: string;
  readonly namespace: string;
  readonly role: string;
  /** The ServingGroup index label, verbatim. */
  readonly group: string;
  /** The ControllerRevision the pod was built from. */
  readonly revision: string;
  readonly roleHash: string;
  readonly address: Address;
  /** SGLang bootstrap port (annotation or default); meaningful on SGLang prefill pods only. */
  readonly bootstrapPort: number;
}

export type Eligibility =
  { readonly ok: true; readonly endpoint: Endpoint } | { readonly ok: false; readonly reason: string };

/**
 * Whether `discovered` may take new requests for `role` of `route`: an entry pod of that role of
 * the route's ModelServing, in the route's namespace, phase Running, Ready, serving gate True, not
 * marked draining, not being deleted, with an address. The reason names the first check failed.
 */
export function eligibility(discovered: DiscoveredPod, route: RouterRoute, role: string): Eligibility {
  const { pod, address } = discovered;
  const reason = ineligibility(pod, route, role);
  if (reason !== undefined) return { ok: false, reason };
  if (address === undefined) return { ok: false, reason: "no pod IP" };
  const bootstrapPort = bootstrapPortOf(pod);
  if (typeof bootstrapPort === "string") return { ok: false, reason: bootstrapPort };
  const labels = pod.metadata.labels ?? {};
  const endpoint: Endpoint = {
    key: `${pod.metadata.namespace ?? ""}/${pod.metadata.name}`,
    pod: pod.metadata.name,
    namespace: pod.metadata.namespace ?? "",
    role,
    group: labels[LABEL_GROUP] ?? "",
    revision: labels[LABEL_REVISION] ?? "",
    roleHash: labels[LABEL_ROLE_HASH] ?? "",
    address,
    bootstrapPort,
  };
  return { ok: true, endpoint };
}

function ineligibility(pod: Pod, route: RouterRoute, role: string): string | undefined {
  const labels = pod.metadata.labels ?? {};
  if ((pod.metadata.namespace ?? "") !== route.namespace) return `not in namespace ${route.namespace}`;
  if (labels[LABEL_MODEL_SERVING] !== route.modelServing) return `not a pod of ModelServing ${route.modelServing}`;
  if (labels[LABEL_ROLE] !== role) return `not of role ${role}`;
  if (labels[LABEL_ENTRY] !== "true") return "not an entry pod";
  if (isTerminating(pod)) return "being deleted";
  if (isDraining(pod)) return "draining";
  if (pod.status?.phase !== "Running") return `phase ${pod.status?.phase ?? "unknown"}`;
  if (!isPodReady(pod)) return "not Ready";
  if (podCondition(pod, SERVING_GATE)?.status !== "True") return `${SERVING_GATE} not True`;
  return undefined;
}

/** The bootstrap port from the annotation (a decimal 1..65535), the default when absent, or why not. */
function bootstrapPortOf(pod: Pod): number | string {
  const value = pod.metadata.annotations?.[ANNOTATION_BOOTSTRAP_PORT];
  if (value === undefined) return DEFAULT_BOOTSTRAP_PORT;
  const port = /^[1-9][0-9]{0,4}$/.test(value) ? Number(value) : Number.NaN;
  return port <= 65535
    ? port
    : `annotation ${ANNOTATION_BOOTSTRAP_PORT} ${JSON.stringify(value)} is not a port 1..65535`;
}

/** The eligible endpoints of `role`, sorted by key, and a summary of why the others are not. */
export interface RoleEndpoints {
  readonly role: string;
  readonly endpoints: readonly Endpoint[];
  /** E.g. `3 pods: 1 draining, 2 not Ready`; only pods of this role and ModelServing are counted. */
  readonly summary: string;
}

/** `roleEndpoints` results by pod list, route and role: a discovery keeps a list while its pods are unchanged. */
const roleEndpointsMemo = new WeakMap<readonly DiscoveredPod[], WeakMap<RouterRoute, Map<string, RoleEndpoints>>>();

/**
 * Sorts `discovered` into the eligible endpoints of `role` and a count of the reasons of the rest.
 * A pure function of its arguments, computed once per pod list, route and role (the router asks
 * for every request; the list changes only when a pod does).
 */
export function roleEndpoints(discovered: readonly DiscoveredPod[], route: RouterRoute, role: string): RoleEndpoints {
  let byRoute = roleEndpointsMemo.get(discovered);
  if (byRoute === undefined) roleEndpointsMemo.set(discovered, (byRoute = new WeakMap()));
  let byRole = byRoute.get(route);
  if (byRole === undefined) byRoute.set(route, (byRole = new Map<string, RoleEndpoints>()));
  let result = byRole.get(role);
  if (result === undefined) byRole.set(role, (result = computeRoleEndpoints(discovered, route, role)));
  return result;
}

function computeRoleEndpoints(discovered: readonly DiscoveredPod[], route: RouterRoute, role: string): RoleEndpoints {
  const endpoints: Endpoint[] = [];
  const reasons = new Map<string, number>();
  let counted = 0;
  for (const candidate of discovered) {
    const labels = candidate.pod.metadata.labels ?? {};
    const ofRole =
      labels[LABEL_ROLE] === role &&
      labels[LABEL_MODEL_SERVING] === route.modelServing &&
      labels[LABEL_ENTRY] === "true";
    const verdict = eligibility(candidate, route, role);
    if (ofRole) counted++;
    if (verdict.ok) endpoints.push(verdict.endpoint);
    else if (ofRole) reasons.set(verdict.reason, (reasons.get(verdict.reason) ?? 0) + 1);
  }
  endpoints.sort((a, b) => compareStrings(a.key, b.key));
  const parts = [...reasons].sort(([a], [b]) => compareStrings(a, b)).map(([reason, count]) => `${count} ${reason}`);
  const summary = `${counted} ${counted === 1 ? "pod" : "pods"}${parts.length > 0 ? `: ${parts.join(", ")}` : ""}`;
  return { role, endpoints, summary };
}
