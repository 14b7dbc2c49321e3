/**
 * The route as the router reads it (DESIGN §7 `ModelRoute`), defaults applied: one function,
 * `routerRouteOf`, derives it from a parsed ModelRoute (the zod type of `src/api/route.ts`), so
 * the API type is the one source and this shape only flattens it for the decisions — `roles` as
 * a union the type system can narrow, `kvConnector` always set. Nothing here validates: a
 * discovery implementation hands over routes `parseModelRoute` has already validated and defaulted.
 */
import type { Engine, KvConnector as ApiKvConnector, ModelRoute, Pairing } from "../api/route.ts";
import { DEFAULT_KV_CONNECTOR } from "../api/route.ts";
import { compareStrings } from "../core/maps.ts";

export type EngineKind = Engine;
/** How prefill hands its KV cache to decode; `none` means no disaggregation protocol. */
export type KvConnector = ApiKvConnector;
/** Which prefill may serve a decode (DESIGN §7). */
export type PairingMode = Pairing;

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
 * The router's view of a parsed, validated ModelRoute (`parseModelRoute`). Validation guarantees
 * `roles` is exactly `{serve}` or `{prefill, decode}`; `kvConnector` of an aggregated route is
 * unused, and set to the engine's default so the shape has no optional protocol.
 */
export function routerRouteOf(route: ModelRoute): RouterRoute {
  const { metadata, spec } = route;
  const { serve, prefill, decode } = spec.roles;
  const created = metadata["creationTimestamp"];
  const roles: RouteRoles =
    prefill !== undefined && decode !== undefined ? { prefill, decode } : { serve: serve ?? "" };
  return {
    namespace: metadata.namespace ?? "",
    name: metadata.name,
    ...(typeof created === "string" ? { creationTimestamp: created } : {}),
    model: spec.model,
    modelServing: spec.modelServing,
    engine: spec.engine,
    port: spec.port,
    roles,
    kvConnector: spec.kvConnector ?? DEFAULT_KV_CONNECTOR[spec.engine],
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
export function routesByModel(routes: readonly RouterRoute[]): {
  winners: Map<string, RouterRoute>;
  conflicted: RouterRoute[];
} {
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
