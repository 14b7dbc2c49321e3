/**
 * Disaggregated pairing (DESIGN §7): which prefill serves which decode. Pure: endpoints, loads,
 * revision data and the tie-breaking stream are arguments.
 *
 * Decode first, then its prefill: the decode leg holds the request for the whole generation while
 * the prefill leg is one forward pass, so balancing decodes is what keeps latency even (llm-d and
 * Kthena choose the same way). A combined pair score would let a briefly idle prefill drag a
 * loaded decode along. Only decodes that have a compatible prefill compete, so one decode whose
 * group has lost its prefill never fails a request another decode could serve.
 */
import { compareStrings } from "../core/maps.ts";
import type { RevisionData } from "../core/revision/index.ts";
import { roleHash, sameRoleSpec } from "../core/role-hash.ts";
import type { Endpoint, RoleEndpoints } from "./endpoints.ts";
import type { PairingMode } from "./route.ts";
import { select } from "./select.ts";
import type { EndpointLoad, TieBreak } from "./select.ts";

/** Revision data by ControllerRevision name in the route's namespace; undefined: unknown or unreadable. */
export type RevisionLookup = (name: string) => RevisionData | undefined;

export interface PairInput {
  readonly mode: PairingMode;
  readonly prefills: RoleEndpoints;
  readonly decodes: RoleEndpoints;
  /** Needed by SameRevision only. */
  readonly revisions: RevisionLookup;
  readonly loadOf: (endpoint: Endpoint) => EndpointLoad;
  readonly rng: TieBreak;
}

/** A pair, or why none: the data plane answers 503 with the reason, never another pairing. */
export type PairResult =
  | { readonly ok: true; readonly prefill: Endpoint; readonly decode: Endpoint }
  | { readonly ok: false; readonly reason: string };

/**
 * The least-loaded decode that has a compatible prefill, and the least-loaded compatible prefill
 * for it (ties drawn from `rng`: two draws on success, none on failure).
 * - `Any`: every prefill is compatible;
 * - `SameGroup`: the prefill's `tandem.dev/group` equals the decode's;
 * - `SameRevision`: SameGroup, and the decode's revision builds the prefill's role spec: its
 *   role view of the prefill role equals that of the prefill's own revision (`sameRoleSpec`, the
 *   comparison the controller uses, equal to comparing the prefill's `tandem.dev/role-hash` with
 *   the prefill role's hash in the decode's revision but immune to labels of another controller
 *   version). An unknown or unreadable revision is never guessed: it pairs with nothing.
 */
export function choosePair(input: PairInput): PairResult {
  const { prefills, decodes } = input;
  if (decodes.endpoints.length === 0)
    return { ok: false, reason: `no eligible ${decodes.role} endpoint (${decodes.summary})` };
  if (prefills.endpoints.length === 0)
    return { ok: false, reason: `no eligible ${prefills.role} endpoint (${prefills.summary})` };
  const compatible = compatibility(input);
  const options = decodes.endpoints.map((decode) => ({
    decode,
    prefills: prefills.endpoints.filter((prefill) => compatible(decode, prefill)),
  }));
  const feasible = options.filter((option) => option.prefills.length > 0);
  const chosen = select(feasible, (option) => input.loadOf(option.decode), input.rng);
  const prefill = chosen === undefined ? undefined : select(chosen.prefills, input.loadOf, input.rng);
  if (chosen === undefined || prefill === undefined) return { ok: false, reason: noPairReason(input) };
  return { ok: true, prefill, decode: chosen.decode };
}

function compatibility(input: PairInput): (decode: Endpoint, prefill: Endpoint) => boolean {
  switch (input.mode) {
    case "Any":
      return () => true;
    case "SameGroup":
      return (decode, prefill) => decode.group === prefill.group;
    case "SameRevision":
      return (decode, prefill) => decode.group === prefill.group && buildsPrefillSpec(input, decode, prefill);
  }
}

function buildsPrefillSpec(input: PairInput, decode: Endpoint, prefill: Endpoint): boolean {
  const decodeData = input.revisions(decode.revision);
  const prefillData = input.revisions(prefill.revision);
  if (decodeData === undefined || prefillData === undefined) return false;
  return roleHash(decodeData, prefill.role) !== undefined && sameRoleSpec(decodeData, prefillData, prefill.role);
}

/** Why no decode found a prefill under `mode`: the groups and revisions on each side. */
function noPairReason(input: PairInput): string {
  const { mode, prefills, decodes } = input;
  const groups = (endpoints: readonly Endpoint[]): string =>
    distinct(endpoints.map((endpoint) => endpoint.group)).join(", ");
  const sides = `${decodes.role} groups ${groups(decodes.endpoints)}; ${prefills.role} groups ${groups(prefills.endpoints)}`;
  if (mode !== "SameRevision")
    return `pairing ${mode}: no eligible ${prefills.role} in the ServingGroup of any eligible ${decodes.role} (${sides})`;
  const all = [...decodes.endpoints, ...prefills.endpoints];
  const unknown = distinct(
    all.map((endpoint) => endpoint.revision).filter((name) => input.revisions(name) === undefined),
  );
  const revisions = (endpoints: readonly Endpoint[]): string =>
    distinct(endpoints.map((endpoint) => endpoint.revision)).join(", ");
  return (
    `pairing SameRevision: no eligible ${prefills.role} in the ServingGroup of an eligible ${decodes.role} runs the ${prefills.role} spec ` +
    `of that ${decodes.role}'s revision (${sides}; ${decodes.role} revisions ${revisions(decodes.endpoints)}; ` +
    `${prefills.role} revisions ${revisions(prefills.endpoints)}${unknown.length > 0 ? `; unknown or unreadable: ${unknown.join(", ")}` : ""})`
  );
}

function distinct(values: readonly string[]): string[] {
  return [...new Set(values)].sort(compareStrings);
}
