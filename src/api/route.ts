/**
 * The ModelRoute API (DESIGN §7), as one zod schema beside the ModelServing one (`schema.ts`),
 * with the same conventions: the TypeScript types, defaulting, structural errors
 * (`parseModelRoute`) and the CRD's OpenAPI v3 schema (`crd.ts`) all derive from it; the rules that
 * span fields live in `validate-route.ts`.
 *
 * A route maps a request's `model` to the entry pods of one ModelServing in the route's namespace:
 * one role serves it whole (aggregated), or a prefill role and a decode role serve it together
 * (disaggregated), the KV cache moving between them by `kvConnector`.
 */
import { z } from "zod";
import { Condition, ModelServingName, RoleName, tandemObject } from "./schema.ts";

export const ROUTE_KIND = "ModelRoute";
export const ROUTE_PLURAL = "modelroutes";
export const ROUTE_SHORT_NAME = "mr";

/** The engine behind the route: its metric names and its disaggregation protocol. */
export const Engine = z.enum(["vllm", "sglang"]);
export type Engine = z.infer<typeof Engine>;

/**
 * How the KV cache of a disaggregated request reaches the decode: `nixl` is vLLM's NIXL protocol
 * (prefill first, its `kv_transfer_params` passed to the decode), `sglang` SGLang's bootstrap
 * protocol (both legs at once, paired by a bootstrap room), `none` two legs without KV parameters.
 */
export const KvConnector = z.enum(["nixl", "sglang", "none"]);
export type KvConnector = z.infer<typeof KvConnector>;

/** The connector of a disaggregated route that names none (DESIGN §7). */
export const DEFAULT_KV_CONNECTOR: Readonly<Record<Engine, KvConnector>> = { vllm: "nixl", sglang: "sglang" };

/** Which prefill may serve a decode (DESIGN §7 "Pairing"). */
export const Pairing = z.enum(["SameGroup", "SameRevision", "Any"]);
export type Pairing = z.infer<typeof Pairing>;

export const RouteMode = z.enum(["Aggregated", "Disaggregated"]);
export type RouteMode = z.infer<typeof RouteMode>;

/**
 * The roles of the ModelServing that serve the route: exactly `{serve}` (aggregated) or exactly
 * `{prefill, decode}` (disaggregated) — `validate-route.ts` checks which keys are set, the CRD by a
 * CEL rule. One object with optional keys rather than a union, so the CRD schema stays structural.
 */
export const RouteRoles = z.strictObject({
  serve: RoleName.optional().describe("The role that serves requests whole (aggregated)."),
  prefill: RoleName.optional().describe("The role that runs the prefill leg (disaggregated, with decode)."),
  decode: RoleName.optional().describe(
    "The role that runs the decode leg and streams the answer (disaggregated, with prefill).",
  ),
});
export type RouteRoles = z.infer<typeof RouteRoles>;

const ModelRouteSpecFields = z.strictObject({
  model: z
    .string({ error: "is required" })
    .min(1)
    .max(256)
    .regex(/^\S*$/, { error: "must not contain whitespace" })
    .describe(
      "The request's `model` value this route serves; unique among the routes a router sees (the older route wins).",
    ),
  modelServing: ModelServingName.describe(
    "The ModelServing in the route's namespace whose entry pods serve the route.",
  ),
  engine: Engine.describe("The engine on the entry pods: metric names and disaggregation protocol."),
  port: z.int32().min(1).max(65_535).default(8000).describe("The engine's port on the entry pods."),
  roles: RouteRoles.describe("Aggregated {serve: ROLE} or disaggregated {prefill: ROLE, decode: ROLE}."),
  kvConnector: KvConnector.optional().describe(
    "KV transfer protocol of a disaggregated route (default nixl for vllm, sglang for sglang); not allowed on an aggregated route.",
  ),
  pairing: Pairing.default("SameGroup").describe(
    "Which prefill may serve a decode: SameGroup, SameRevision (also the prefill's role spec is the decode's revision's) or Any.",
  ),
  retries: z
    .strictObject({
      attempts: z
        .int32()
        .min(0)
        .max(10)
        .default(2)
        .describe("Further endpoints tried, only before the first byte reaches the client."),
    })
    .prefault({})
    .describe("Retrying a request on another endpoint (another pair) when it fails before the first byte."),
  timeouts: z
    .strictObject({
      firstByteSeconds: z.int32().min(1).default(60).describe("Longest wait for the engine's first byte."),
      idleSeconds: z.int32().min(1).default(300).describe("Longest silence of an engine in the middle of a response."),
    })
    .prefault({})
    .describe(
      "How long the router waits for an engine; a timeout fails the request (or retries it before the first byte).",
    ),
});

/** The route's mode, read from which roles it names (`{prefill, decode}` or not). */
export function routeMode(roles: RouteRoles): RouteMode {
  return roles.prefill !== undefined || roles.decode !== undefined ? "Disaggregated" : "Aggregated";
}

/**
 * The spec, with `kvConnector` defaulted from `engine` on a disaggregated route: a default that
 * depends on another field, so a transform (the CRD, which cannot say it, leaves it unset).
 */
export const ModelRouteSpec = ModelRouteSpecFields.transform((spec) =>
  spec.kvConnector === undefined && routeMode(spec.roles) === "Disaggregated"
    ? { ...spec, kvConnector: DEFAULT_KV_CONNECTOR[spec.engine] }
    : spec,
);
export type ModelRouteSpec = z.infer<typeof ModelRouteSpec>;

const count = () => z.int32().min(0);

/** Endpoints of one role at one revision. */
export const RevisionEndpoints = z.strictObject({
  revision: z.string().describe("The ControllerRevision the pods were built from (label tandem.dev/revision)."),
  ready: count().describe("Eligible entry pods: Running, Ready, serving gate True, not draining."),
  draining: count().describe("Entry pods marked draining that still have requests."),
});

/** Endpoints of one role of the route, in total and per revision. */
export const RoleEndpoints = z.strictObject({
  role: z.string().describe("The ModelServing role."),
  ready: count(),
  draining: count(),
  revisions: z.array(RevisionEndpoints).optional(),
});
export type RoleEndpoints = z.infer<typeof RoleEndpoints>;

/** The condition types a route's status carries: Accepted (the spec is usable) and Ready (it can serve). */
export const RouteConditionType = z.enum(["Accepted", "Ready"]);
export type RouteConditionType = z.infer<typeof RouteConditionType>;

/** Condition Accepted False when another, older route serves the same model (DESIGN §7). */
export const REASON_MODEL_CONFLICT = "ModelConflict";

export const ModelRouteStatus = z.strictObject({
  observedGeneration: z.int32().optional(),
  mode: RouteMode.optional().describe("Aggregated or Disaggregated, as spec.roles says."),
  endpoints: z.array(RoleEndpoints).optional(),
  conditions: z.array(Condition.extend({ type: RouteConditionType })).optional(),
});
export type ModelRouteStatus = z.infer<typeof ModelRouteStatus>;

export const ModelRoute = tandemObject(
  ROUTE_KIND,
  ModelRouteSpec.describe("Which model, served by which ModelServing's roles, and how."),
  ModelRouteStatus.describe("Observed state, written by the router."),
).describe("ModelRoute sends the requests for one model to the entry pods of a ModelServing in the same namespace.");

/** A ModelRoute with every default applied (the output of `parseModelRoute`). */
export type ModelRoute = z.infer<typeof ModelRoute>;
/** A ModelRoute as a user may write it: defaulted fields optional. */
export type ModelRouteInput = z.input<typeof ModelRoute>;
