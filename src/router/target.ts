/**
 * Where one attempt of a request goes: the decision the data plane carries out and the simulator's
 * traffic model will share. Pure: the world, loads and the random stream are arguments.
 */
import { roleEndpoints } from "./endpoints.ts";
import type { DiscoveredPod, Endpoint, RoleEndpoints } from "./endpoints.ts";
import { drawBootstrapRoom } from "./legs.ts";
import { choosePair } from "./pairing.ts";
import type { RevisionLookup } from "./pairing.ts";
import { isDisaggregated } from "./route.ts";
import type { RouterRoute } from "./route.ts";
import { select } from "./select.ts";
import type { EndpointLoad, TieBreak } from "./select.ts";

export type Target =
  | { readonly protocol: "aggregated"; readonly endpoint: Endpoint }
  | { readonly protocol: "nixl"; readonly prefill: Endpoint; readonly decode: Endpoint }
  | {
      readonly protocol: "sglang";
      readonly prefill: Endpoint;
      readonly decode: Endpoint;
      readonly bootstrapRoom: number;
    };

/** A target, or why there is none (the data plane's 503 message). */
export type TargetResult =
  { readonly ok: true; readonly target: Target } | { readonly ok: false; readonly reason: string };

export interface TargetInput {
  readonly route: RouterRoute;
  /** `Discovery.pods(route)`. */
  readonly pods: readonly DiscoveredPod[];
  readonly revisions: RevisionLookup;
  readonly loadOf: (endpoint: Endpoint) => EndpointLoad;
  readonly rng: TieBreak;
  /** Endpoint keys an earlier attempt of this request failed on: never chosen again. */
  readonly excluded: ReadonlySet<string>;
}

/**
 * The endpoint (aggregated) or pair (disaggregated) for one attempt, by least load. A
 * disaggregated route with `kvConnector: none` has no protocol to join its legs and gets no target.
 * SGLang targets carry a fresh bootstrap room (two draws after the pairing's).
 */
export function chooseTarget(input: TargetInput): TargetResult {
  const { route } = input;
  const roles = route.roles;
  if (!isDisaggregated(roles)) {
    const serve = eligibleFor(input, roles.serve);
    const endpoint = select(serve.endpoints, input.loadOf, input.rng);
    if (endpoint === undefined) return { ok: false, reason: `no eligible ${roles.serve} endpoint (${serve.summary})` };
    return { ok: true, target: { protocol: "aggregated", endpoint } };
  }
  if (route.kvConnector === "none")
    return {
      ok: false,
      reason: `route ${route.namespace}/${route.name} is disaggregated but kvConnector is none: set nixl or sglang`,
    };
  const pair = choosePair({
    mode: route.pairing,
    prefills: eligibleFor(input, roles.prefill),
    decodes: eligibleFor(input, roles.decode),
    revisions: input.revisions,
    loadOf: input.loadOf,
    rng: input.rng,
  });
  if (!pair.ok) return pair;
  const { prefill, decode } = pair;
  if (route.kvConnector === "nixl") return { ok: true, target: { protocol: "nixl", prefill, decode } };
  return { ok: true, target: { protocol: "sglang", prefill, decode, bootstrapRoom: drawBootstrapRoom(input.rng) } };
}

/** The eligible endpoints of `role` minus the excluded ones, the summary saying how many those are. */
function eligibleFor(input: TargetInput, role: string): RoleEndpoints {
  const all = roleEndpoints(input.pods, input.route, role);
  const endpoints = all.endpoints.filter((endpoint) => !input.excluded.has(endpoint.key));
  const excluded = all.endpoints.length - endpoints.length;
  return excluded === 0
    ? all
    : { role, endpoints, summary: `${all.summary}; ${excluded} failed earlier in this request` };
}

/** The endpoints a target uses, prefill first. */
export function targetEndpoints(target: Target): Endpoint[] {
  return target.protocol === "aggregated" ? [target.endpoint] : [target.prefill, target.decode];
}
