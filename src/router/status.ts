/**
 * A ModelRoute's status as the router computes it (DESIGN §7 `status`): the mode, the endpoints
 * {ready, draining} per role and per revision, and the conditions Accepted and Ready with reason
 * and message. Pure: the time of a transition is an argument, and a condition that keeps its
 * status keeps its `lastTransitionTime`, so every router replica that sees the same world computes
 * the same status — which is what keeps their writes idempotent (a replica writes only when the
 * status differs from the stored one).
 */
import type { Condition } from "../api/schema.ts";
import type { ModelRouteStatus, RoleEndpoints as RoleEndpointCounts, RouteConditionType } from "../api/route.ts";
import { REASON_MODEL_CONFLICT } from "../api/route.ts";
import { LABEL_ENTRY, LABEL_MODEL_SERVING, LABEL_REVISION, LABEL_ROLE } from "../api/wellknown.ts";
import { isTerminating } from "../core/health.ts";
import { isDraining } from "../core/invariants.ts";
import { compareStrings } from "../core/maps.ts";
import type { DiscoveredPod } from "./endpoints.ts";
import { roleEndpoints } from "./endpoints.ts";
import { isDisaggregated, routeRoleNames } from "./route.ts";
import type { RouterRoute } from "./route.ts";

export const REASON_ACCEPTED = "Accepted";
export const REASON_INVALID_SPEC = "InvalidSpec";
export const REASON_MODEL_SERVING_NOT_FOUND = "ModelServingNotFound";
export const REASON_ROLE_NOT_FOUND = "RoleNotFound";
export const REASON_READY = "EndpointsReady";
export const REASON_NO_READY_ENDPOINTS = "NoReadyEndpoints";
export const REASON_NOT_ACCEPTED = "NotAccepted";

/** What decides one route's status. */
export interface RouteStatusInput {
  /** The route's parsed spec, or why it does not parse (`invalid`). */
  readonly route: { readonly ok: true; readonly value: RouterRoute } | { readonly ok: false; readonly invalid: string };
  readonly generation: number | undefined;
  /** The status stored now (for transition times); undefined when none was written yet. */
  readonly previous: ModelRouteStatus | undefined;
  /** `namespace/name` of the older route that serves the same model, when this one lost it. */
  readonly conflictWinner: string | undefined;
  /** The role names of the route's ModelServing; undefined when there is no such ModelServing. */
  readonly modelServingRoles: readonly string[] | undefined;
  /** The entry pods of the route's ModelServing (discovery's `pods(route)`). */
  readonly pods: readonly DiscoveredPod[];
  /** RFC 3339: the transition time of a condition that changes status now. */
  readonly nowIso: string;
}

/** The status to store; equal (`jsonEqual`) to `previous` when nothing changed. */
export function routeStatus(input: RouteStatusInput): ModelRouteStatus {
  const accepted = acceptance(input);
  const route = input.route.ok ? input.route.value : undefined;
  const endpoints = route === undefined ? [] : routeEndpointCounts(input.pods, route);
  const ready =
    route === undefined || accepted.status !== "True"
      ? { status: "False" as const, reason: REASON_NOT_ACCEPTED, message: "the route is not Accepted" }
      : readiness(input.pods, route);
  const conditions = [condition(input, "Accepted", accepted), condition(input, "Ready", ready)];
  return {
    ...(input.generation === undefined ? {} : { observedGeneration: input.generation }),
    ...(route === undefined
      ? {}
      : { mode: isDisaggregated(route.roles) ? ("Disaggregated" as const) : ("Aggregated" as const) }),
    endpoints,
    conditions,
  };
}

interface Verdict {
  readonly status: "True" | "False";
  readonly reason: string;
  readonly message: string;
}

function acceptance(input: RouteStatusInput): Verdict {
  if (!input.route.ok) return { status: "False", reason: REASON_INVALID_SPEC, message: input.route.invalid };
  const route = input.route.value;
  if (input.conflictWinner !== undefined) {
    return {
      status: "False",
      reason: REASON_MODEL_CONFLICT,
      message: `model ${route.model} is served by the older route ${input.conflictWinner}`,
    };
  }
  const roles = input.modelServingRoles;
  if (roles === undefined) {
    return {
      status: "False",
      reason: REASON_MODEL_SERVING_NOT_FOUND,
      message: `ModelServing ${route.namespace}/${route.modelServing} does not exist`,
    };
  }
  const missing = routeRoleNames(route.roles).filter((role) => !roles.includes(role));
  if (missing.length > 0) {
    return {
      status: "False",
      reason: REASON_ROLE_NOT_FOUND,
      message: `ModelServing ${route.namespace}/${route.modelServing} has no role ${missing.join(", ")} (its roles: ${roles.join(", ")})`,
    };
  }
  return {
    status: "True",
    reason: REASON_ACCEPTED,
    message: `serves model ${route.model} from ModelServing ${route.modelServing}`,
  };
}

/** Ready when every role the route sends traffic to has an eligible endpoint. */
function readiness(pods: readonly DiscoveredPod[], route: RouterRoute): Verdict {
  const roles = routeRoleNames(route.roles).map((role) => roleEndpoints(pods, route, role));
  const empty = roles.filter((role) => role.endpoints.length === 0);
  if (empty.length > 0) {
    return {
      status: "False",
      reason: REASON_NO_READY_ENDPOINTS,
      message: empty.map((role) => `no ready ${role.role} endpoint (${role.summary})`).join("; "),
    };
  }
  return {
    status: "True",
    reason: REASON_READY,
    message: roles.map((role) => `${role.endpoints.length} ready ${role.role}`).join(", "),
  };
}

/** Per role of `route` (prefill first): its ready and draining entry pods, in total and per revision. */
export function routeEndpointCounts(pods: readonly DiscoveredPod[], route: RouterRoute): RoleEndpointCounts[] {
  return routeRoleNames(route.roles).map((role) => roleCounts(pods, route, role));
}

/** Ready (eligible) and draining entry pods of `role`, in total and per revision (sorted). */
function roleCounts(pods: readonly DiscoveredPod[], route: RouterRoute, role: string): RoleEndpointCounts {
  const ready = new Set(roleEndpoints(pods, route, role).endpoints.map((endpoint) => endpoint.pod));
  const byRevision = new Map<string, { ready: number; draining: number }>();
  for (const { pod } of pods) {
    const labels = pod.metadata.labels ?? {};
    if (
      labels[LABEL_ROLE] !== role ||
      labels[LABEL_MODEL_SERVING] !== route.modelServing ||
      labels[LABEL_ENTRY] !== "true" ||
      pod.metadata.namespace !== route.namespace
    )
      continue;
    const isReady = ready.has(pod.metadata.name);
    // A draining pod counts until it is gone or finished: it may still hold requests.
    const isDrainingPod = !isReady && isDraining(pod) && !isTerminating(pod) && pod.status?.phase === "Running";
    if (!isReady && !isDrainingPod) continue;
    const revision = labels[LABEL_REVISION] ?? "";
    const counts = byRevision.get(revision) ?? { ready: 0, draining: 0 };
    if (isReady) counts.ready++;
    else counts.draining++;
    byRevision.set(revision, counts);
  }
  const revisions = [...byRevision]
    .sort(([a], [b]) => compareStrings(a, b))
    .map(([revision, counts]) => ({ revision, ...counts }));
  return { role, ready: sum(revisions, "ready"), draining: sum(revisions, "draining"), revisions };
}

function sum(revisions: readonly { ready: number; draining: number }[], field: "ready" | "draining"): number {
  return revisions.reduce((total, revision) => total + revision[field], 0);
}

/** A condition that keeps the previous transition time while its status is unchanged. */
function condition(
  input: RouteStatusInput,
  type: RouteConditionType,
  verdict: Verdict,
): Condition & { type: RouteConditionType } {
  const before = input.previous?.conditions?.find((candidate) => candidate.type === type);
  const lastTransitionTime =
    before?.status === verdict.status && before.lastTransitionTime !== undefined
      ? before.lastTransitionTime
      : input.nowIso;
  return {
    type,
    status: verdict.status,
    reason: verdict.reason,
    message: verdict.message,
    lastTransitionTime,
    ...(input.generation === undefined ? {} : { observedGeneration: input.generation }),
  };
}
