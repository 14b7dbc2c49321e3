/**
 * Semantic validation of a ModelRoute (DESIGN §7, README "ModelRoute"): the rules that span fields.
 * Input is a structurally valid, defaulted route; output is every problem found, each naming the
 * field path and the reason. Whether the ModelServing and its roles exist is not a property of the
 * route alone: the router reports that in the route's condition Accepted.
 */
import type { PathSegment, Problem } from "./problems.ts";
import { problem } from "./problems.ts";
import type { Engine, KvConnector, ModelRoute, RouteRoles } from "./route.ts";
import { DEFAULT_KV_CONNECTOR, routeMode } from "./route.ts";

const ROLES = ["spec", "roles"] as const;

/** A DNS-1123 subdomain (the API server's rule for object names), without its length limit. */
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const MAX_SUBDOMAIN_LENGTH = 253;

/** The engine each connector's protocol speaks; `none` works with either. */
const CONNECTOR_ENGINE: Readonly<Partial<Record<KvConnector, Engine>>> = { nixl: "vllm", sglang: "sglang" };

/** Returns every semantic problem of `route`; an empty list means valid. */
export function validateModelRoute(route: ModelRoute): Problem[] {
  return [...validateRouteName(route.metadata.name), ...validateRoles(route.spec.roles), ...validateKvConnector(route)];
}

function validateRouteName(name: string): Problem[] {
  const path: PathSegment[] = ["metadata", "name"];
  if (name.length > MAX_SUBDOMAIN_LENGTH)
    return [problem(path, `must be at most ${MAX_SUBDOMAIN_LENGTH} characters (it has ${name.length})`)];
  if (!DNS1123_SUBDOMAIN.test(name))
    return [
      problem(
        path,
        "must be a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit",
      ),
    ];
  return [];
}

function validateRoles(roles: RouteRoles): Problem[] {
  const { serve, prefill, decode } = roles;
  if (serve !== undefined) {
    return (["prefill", "decode"] as const)
      .filter((key) => roles[key] !== undefined)
      .map((key) =>
        problem(
          [...ROLES, key],
          "cannot be set with serve: a route is aggregated {serve} or disaggregated {prefill, decode}",
        ),
      );
  }
  if (prefill === undefined && decode === undefined)
    return [problem(ROLES, "must name serve (aggregated) or prefill and decode (disaggregated)")];
  if (prefill === undefined)
    return [problem([...ROLES, "prefill"], "is required with decode: a disaggregated route names both roles")];
  if (decode === undefined)
    return [problem([...ROLES, "decode"], "is required with prefill: a disaggregated route names both roles")];
  if (prefill === decode)
    return [
      problem(
        [...ROLES, "decode"],
        `names the same role as prefill ("${decode}"): prefill and decode must be different roles`,
      ),
    ];
  return [];
}

function validateKvConnector(route: ModelRoute): Problem[] {
  const { kvConnector, engine, roles } = route.spec;
  if (kvConnector === undefined) return [];
  const path = ["spec", "kvConnector"];
  if (routeMode(roles) === "Aggregated")
    return [problem(path, "applies only to a disaggregated route (roles prefill and decode); remove it")];
  const needs = CONNECTOR_ENGINE[kvConnector];
  if (needs !== undefined && needs !== engine) {
    return [
      problem(
        path,
        `${kvConnector} is the ${needs} protocol, but engine is ${engine}: use ${DEFAULT_KV_CONNECTOR[engine]} or none`,
      ),
    ];
  }
  return [];
}
