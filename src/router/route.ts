/**
 * The route as the router reads it (DESIGN §7 `ModelRoute`), defaults applied. This is the
 * router's own minimal shape: the ModelRoute API type (zod schema and validation in `src/api/`)
 * replaces it once both exist, so nothing here validates — a discovery implementation hands over
 * routes that its source has already validated and defaulted.
 */
import type { ModelRoute } from "../api/route.ts";
import { compareStrings } from "../core/maps.ts";

export type EngineKind = "vllm" | "sglang";
/** How prefill hands its KV cache to decode; `none` means no disaggregation protocol. */
export type KvConnector = "nixl" | "sglang" | "none";
/** Which prefill may serve a decode (DESIGN §7). */
export type PairingMode = "SameGroup" | "SameRevision" | "Any";

/** Aggregated (one role serves the whole request) or disaggregated (prefill then decode). */
export type RouteRoles = { readonly serve: string } | { readonly prefill: string; readonly decode: string };

export interface RouterRoute {
  readonly namespace: string;
  readonly name: string;
  /** RFC 3339; the older route wins a model conflict. Absent sorts as the oldest. */
  readonly creationTimestamp?: string;
  /** The request's `model` value. */
  readonly model: string;
  /** A ModelServing in `namespace`. */
  readonly modelServing: string;
  readonly engine: EngineKind;
  /** The engine port on entry pods (default 8000). */
  readonly port: number;
  readonly roles: RouteRoles;
  /** Used by disaggregated routes only (default nixl for vllm, sglang for sglang). */
  readonly kvConnector: KvConnector;
  readonly pairing: PairingMode;
  /** Further attempts on another endpoint, only before the first byte reached the client (default 2). */
  readonly retries: { readonly attempts: number };
  /** Defaults 60 and 300. */
  readonly timeouts: { readonly firstByteSeconds: number; readonly idleSeconds: number };
}

/**
 * The router's view of a ModelRoute that `parseModelRoute` accepted (defaults applied, roles
 * exactly `{serve}` or `{prefill, decode}`), in `namespace` (the object's own when it has one).
 * An aggregated route has no KV connector: `none`.
 */
export function routerRouteOf(route: ModelRoute, namespace: string): RouterRoute {
  const { metadata, spec } = route;
  const { serve, prefill, decode } = spec.roles;
  const roles: RouteRoles = prefill !== undefined && decode !== undefined ? { prefill, decode } : { serve: serve ?? "" };
  const created = typeof metadata["creationTimestamp"] === "string" ? { creationTimestamp: metadata["creationTimestamp"] } : {};
  return {
    namespace: metadata.namespace ?? namespace,
    name: metadata.name,
    ...created,
    model: spec.model,
    modelServing: spec.modelServing,
    engine: spec.engine,
    port: spec.port,
    roles,
    kvConnector: spec.kvConnector ?? "none",
    pairing: spec.pairing,
    retries: { attempts: spec.retries.attempts },
    timeouts: { firstByteSeconds: spec.timeouts.firstByteSeconds, idleSeconds: spec.timeouts.idleSeconds },
  };
}

export function isDisaggregated(roles: RouteRoles): roles is { readonly prefill: string; readonly decode: string } {
  return "prefill" in roles;
}

/** The roles a route sends traffic to, prefill first. */
export function routeRoleNames(roles: RouteRoles): string[] {
  return isDisaggregated(roles) ? [roles.prefill, roles.decode] : [roles.serve];
}

/**
 * The route that serves each model (DESIGN §7): among routes with the same `model`, the oldest
 * by creationTimestamp wins (ties: namespace, then name, in code-unit order); the others lose with
 * reason ModelConflict. Pure; the order of `routes` does not matter.
 */
export function routesByModel(routes: readonly RouterRoute[]): { winners: Map<string, RouterRoute>; conflicted: RouterRoute[] } {
  const sorted = [...routes].sort(compareAge);
  const winners = new Map<string, RouterRoute>();
  const conflicted: RouterRoute[] = [];
  for (const route of sorted) {
    if (winners.has(route.model)) conflicted.push(route);
    else winners.set(route.model, route);
  }
  return { winners, conflicted };
}

function compareAge(a: RouterRoute, b: RouterRoute): number {
  const aMs = ageKeyMs(a.creationTimestamp);
  const bMs = ageKeyMs(b.creationTimestamp);
  if (aMs !== bMs) return aMs - bMs;
  return compareStrings(`${a.namespace}/${a.name}`, `${b.namespace}/${b.name}`);
}

/** A missing or unreadable timestamp sorts first, as the oldest: it cannot be shown to be newer. */
function ageKeyMs(timestamp: string | undefined): number {
  const ms = timestamp === undefined ? Number.NaN : Date.parse(timestamp);
  return Number.isNaN(ms) ? Number.NEGATIVE_INFINITY : ms;
}
