/**
 * The CustomResourceDefinitions of ModelServing (DESIGN §1) and ModelRoute (§7), generated from the
 * zod schemas in `schema.ts` and `route.ts` so the API server and Tandem accept the same objects.
 *
 * `z.toJSONSchema(ModelServing, { target: "openapi-3.0", io: "input" })` is close to what the API
 * server wants but not structural (see the Kubernetes docs, "Specifying a structural schema").
 * `toStructural` rewrites the constructs zod emits and throws, naming the JSON path, on anything it
 * does not know how to rewrite, so a schema change can never silently yield a CRD the API server
 * rejects or reads differently. Kubernetes-only annotations that have no zod counterpart (list
 * types, CEL rules) are attached by path in `SCHEMA_OVERLAYS`.
 */
import { z } from "zod";
import { stringify } from "yaml";
import { ModelRoute, ROUTE_KIND, ROUTE_PLURAL, ROUTE_SHORT_NAME } from "./route.ts";
import { API_GROUP, API_VERSION, KIND, ModelServing, PLURAL, SHORT_NAME } from "./schema.ts";

/** One node of a JSON Schema / OpenAPI v3 schema, as plain JSON data. */
export type SchemaNode = Record<string, unknown>;

/** A CEL rule of `x-kubernetes-validations`. */
export interface ValidationRule {
  readonly rule: string;
  readonly message: string;
}

export interface PrinterColumn {
  readonly name: string;
  readonly type: "integer" | "string" | "date";
  readonly jsonPath: string;
  readonly description: string;
}

export interface Subresources {
  readonly status: Record<string, never>;
  readonly scale?: {
    readonly specReplicasPath: string;
    readonly statusReplicasPath: string;
    readonly labelSelectorPath: string;
  };
}

/** The subset of apiextensions.k8s.io/v1 CustomResourceDefinition that Tandem uses. */
export interface CustomResourceDefinition {
  readonly apiVersion: "apiextensions.k8s.io/v1";
  readonly kind: "CustomResourceDefinition";
  readonly metadata: { readonly name: string };
  readonly spec: {
    readonly group: string;
    readonly names: {
      readonly kind: string;
      readonly listKind: string;
      readonly plural: string;
      readonly singular: string;
      readonly shortNames: readonly string[];
    };
    readonly scope: "Namespaced";
    readonly versions: readonly {
      readonly name: string;
      readonly served: boolean;
      readonly storage: boolean;
      readonly schema: { readonly openAPIV3Schema: SchemaNode };
      readonly subresources: Subresources;
      readonly additionalPrinterColumns: readonly PrinterColumn[];
    }[];
  };
}

const PRESERVE_UNKNOWN = "x-kubernetes-preserve-unknown-fields";
const INT_OR_STRING = "x-kubernetes-int-or-string";
const LIST_TYPE = "x-kubernetes-list-type";
const VALIDATIONS = "x-kubernetes-validations";

/** The keywords a structural CRD schema node may carry (apiextensions.k8s.io/v1 JSONSchemaProps). */
const NUMBER_KEYWORDS = new Set(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]);
const STRING_KEYWORDS = new Set(["minLength", "maxLength", "pattern"]);
const KNOWN_KEYWORDS = new Set([
  "type",
  "description",
  "title",
  "default",
  "nullable",
  "enum",
  "format",
  ...NUMBER_KEYWORDS,
  ...STRING_KEYWORDS,
  "items",
  "minItems",
  "maxItems",
  "properties",
  "required",
  "additionalProperties",
  "minProperties",
  "maxProperties",
  "anyOf", // only in the x-kubernetes-int-or-string form, checked in `intOrString`
  PRESERVE_UNKNOWN,
  INT_OR_STRING,
  LIST_TYPE,
  "x-kubernetes-list-map-keys",
  "x-kubernetes-map-type",
  VALIDATIONS,
  "x-kubernetes-embedded-resource",
]);
/** What an int-or-string node may carry besides the checks hoisted out of its anyOf branches. */
const INT_OR_STRING_KEYWORDS = new Set(["description", "title", "default", "anyOf", INT_OR_STRING, VALIDATIONS]);
const SCHEMA_TYPES = new Set(["object", "array", "string", "integer", "number", "boolean"]);

/** zod's bounds for `z.int()` (a safe integer); meaningless to the API server, which stores int64. */
const SAFE_INTEGER_BOUND = Number.MAX_SAFE_INTEGER;
const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

/** Lookaround and backreferences: JavaScript regex syntax the API server's Go RE2 engine rejects. */
const NON_RE2_SYNTAX = /\(\?<?[=!]|\\[1-9]|\\k</;

/** Throws the post-processor's error for the schema node at `path`. */
function unstructural(path: string, reason: string): never {
  throw new Error(`CRD schema at ${path}: ${reason}`);
}

function isNode(value: unknown): value is SchemaNode {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function asNode(value: unknown, path: string): SchemaNode {
  if (!isNode(value)) unstructural(path, `expected a schema object, got ${JSON.stringify(value)}`);
  return value;
}

/** Keywords shown first and last in a node, so a reader sees what a node is before its children. */
const LEADING_KEYWORDS = ["description", "type"];
const TRAILING_KEYWORDS = ["additionalProperties", "items", "properties"];

function keywordRank(keyword: string): string {
  const leading = LEADING_KEYWORDS.indexOf(keyword);
  if (leading >= 0) return `0${leading}`;
  return TRAILING_KEYWORDS.includes(keyword) ? `2${keyword}` : `1${keyword}`;
}

/** Orders a node's keywords (not its property names) so the YAML is stable and easy to scan. */
function sortKeywords(node: SchemaNode): SchemaNode {
  const ranked = Object.entries(node).map(([keyword, value]) => [keywordRank(keyword), keyword, value] as const);
  ranked.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return Object.fromEntries(ranked.map(([, keyword, value]) => [keyword, value]));
}

/** Drops zod's safe-integer bounds; keeps every other bound, which the API server enforces as zod does. */
function withoutSafeIntegerBounds(node: SchemaNode): SchemaNode {
  const out = { ...node };
  if (out.minimum === -SAFE_INTEGER_BOUND) delete out.minimum;
  if (out.maximum === SAFE_INTEGER_BOUND) delete out.maximum;
  return out;
}

/**
 * Rewrites one zod JSON Schema node (and its children) into a structural CRD schema node.
 * `path` is the JSON path of the data the node describes (`$.spec.template.roles[*]`), used in
 * errors. Throws on any construct without a known structural equivalent.
 */
export function toStructural(value: unknown, path: string): SchemaNode {
  const node = asNode(value, path);
  for (const keyword of Object.keys(node)) {
    if (!KNOWN_KEYWORDS.has(keyword))
      unstructural(path, `keyword "${keyword}" has no structural CRD equivalent that crd.ts knows`);
  }
  checkPattern(node.pattern, path);
  if (node[INT_OR_STRING] === true) return sortKeywords(intOrString(node, path));
  if ("anyOf" in node)
    unstructural(path, `anyOf (a zod union) is allowed only as an IntOrString marked ${INT_OR_STRING}`);
  const out = withInt32Format(withoutSafeIntegerBounds(node));
  structuralObject(out, path);
  structuralArray(out, path);
  checkType(out, path);
  return sortKeywords(out);
}

function checkPattern(pattern: unknown, path: string): void {
  if (pattern === undefined) return;
  if (typeof pattern !== "string") unstructural(path, "pattern must be a string");
  if (NON_RE2_SYNTAX.test(pattern))
    unstructural(
      path,
      `pattern ${pattern} uses lookaround or a backreference, which the API server's RE2 engine rejects`,
    );
}

/** Integers bounded to int32 (zod `z.int32()`) say so with `format: int32`, as Kubernetes types do. */
function withInt32Format(node: SchemaNode): SchemaNode {
  const { minimum, maximum } = node;
  const isInt32 =
    node.type === "integer" &&
    typeof minimum === "number" &&
    typeof maximum === "number" &&
    minimum >= INT32_MIN &&
    maximum <= INT32_MAX;
  return isInt32 && node.format === undefined ? { ...node, format: "int32" } : node;
}

/**
 * Objects. `additionalProperties: false` (zod strictObject) is forbidden in CRDs: the API server
 * prunes unknown fields instead. `additionalProperties: {}` (zod looseObject: unknown fields are
 * kept) becomes `x-kubernetes-preserve-unknown-fields`, the API server's way to keep them.
 * A schema-valued `additionalProperties` (zod record) is a map and stays.
 */
function structuralObject(out: SchemaNode, path: string): void {
  const additional = out.additionalProperties;
  if (additional === false) {
    delete out.additionalProperties;
  } else if (isNode(additional) && Object.keys(additional).length === 0) {
    delete out.additionalProperties;
    out[PRESERVE_UNKNOWN] = true;
  } else if (additional !== undefined) {
    if (isNode(out.properties) && Object.keys(out.properties).length > 0) {
      unstructural(path, "an object may not have both properties and an additionalProperties schema in a CRD");
    }
    out.additionalProperties = toStructural(additional, `${path}.*`);
  }
  if (out.properties !== undefined) {
    const properties = asNode(out.properties, path);
    out.properties = Object.fromEntries(
      Object.entries(properties).map(([name, child]) => [name, toStructural(child, `${path}.${name}`)]),
    );
  }
}

/** Arrays need an items schema; lists without an explicit list type are atomic (replaced whole). */
function structuralArray(out: SchemaNode, path: string): void {
  if (out.type !== "array") {
    if (out.items !== undefined) unstructural(path, `items on a node of type ${JSON.stringify(out.type)}`);
    return;
  }
  if (out.items === undefined) unstructural(path, "an array needs an items schema");
  out.items = toStructural(out.items, `${path}[*]`);
  out[LIST_TYPE] ??= "atomic";
}

/** Every node has a type, except int-or-string and preserve-unknown-fields nodes (structural rule 1). */
function checkType(out: SchemaNode, path: string): void {
  if (out.type === undefined) {
    if (out[PRESERVE_UNKNOWN] !== true)
      unstructural(
        path,
        "a node needs a type (a zod any/unknown has none; use a looseObject marked x-kubernetes-preserve-unknown-fields)",
      );
    return;
  }
  if (typeof out.type !== "string" || !SCHEMA_TYPES.has(out.type))
    unstructural(path, `type ${JSON.stringify(out.type)} is not one OpenAPI v3 type`);
}

/**
 * IntOrString. The API server accepts an int-or-string node's anyOf only in exactly the form
 * `[{type: integer}, {type: string}]`, so the branches' checks move up to the node itself, where the
 * API server (like any JSON Schema validator) applies number checks only to numbers and string
 * checks only to strings: zod's `int ≥ 0 | "0%".."100%"` keeps its meaning without CEL.
 */
function intOrString(node: SchemaNode, path: string): SchemaNode {
  const { anyOf, ...rest } = node;
  for (const keyword of Object.keys(rest)) {
    if (!INT_OR_STRING_KEYWORDS.has(keyword))
      unstructural(path, `keyword "${keyword}" is not allowed next to ${INT_OR_STRING}`);
  }
  if (!Array.isArray(anyOf) || anyOf.length !== 2)
    unstructural(path, `${INT_OR_STRING} needs an anyOf of one integer and one string schema`);
  const hoisted: SchemaNode = {};
  const types = new Set<unknown>();
  anyOf.forEach((branch: unknown, index) => {
    const branchPath = `${path} (anyOf[${index}])`;
    const { type, ...checks } = asNode(branch, branchPath);
    const allowed = type === "integer" ? NUMBER_KEYWORDS : type === "string" ? STRING_KEYWORDS : undefined;
    if (allowed === undefined)
      unstructural(branchPath, `${INT_OR_STRING} allows only integer and string branches, got ${JSON.stringify(type)}`);
    for (const keyword of Object.keys(checks)) {
      if (!allowed.has(keyword))
        unstructural(branchPath, `keyword "${keyword}" cannot move out of an IntOrString branch`);
    }
    checkPattern(checks.pattern, branchPath);
    types.add(type);
    Object.assign(hoisted, withoutSafeIntegerBounds(checks));
  });
  if (types.size !== 2) unstructural(path, `${INT_OR_STRING} needs one integer and one string branch`);
  return { ...rest, ...hoisted, anyOf: [{ type: "integer" }, { type: "string" }] };
}

/** Kubernetes-only annotations for the schema node that describes the data at `path`. */
export interface SchemaOverlay {
  /** Dotted data path from the root; `[*]` steps into array items, e.g. `spec.template.roles[*]`. */
  readonly path: string;
  readonly keywords: SchemaNode;
}

/** Lists of unique names are sets (the API server rejects duplicates); lists of named objects are maps. */
const SET = { [LIST_TYPE]: "set" };
const mapKeyedBy = (key: string): SchemaNode => ({ [LIST_TYPE]: "map", "x-kubernetes-list-map-keys": [key] });

/** CEL rules: cheap checks over ≤ 8 roles; the full rule set stays in `validate.ts`. */
export const CEL_RULES = {
  workerTemplate: {
    rule: "!has(self.workerReplicas) || self.workerReplicas == 0 || has(self.workerTemplate)",
    message: "workerTemplate is required when workerReplicas > 0",
  },
  coordination: {
    rule: "!has(self.coordination) || (has(self.type) && self.type == 'RoleRollingUpdate')",
    message: "coordination applies only to type RoleRollingUpdate",
  },
  roleBudgets: {
    rule: "(has(self.rolloutStrategy) && has(self.rolloutStrategy.type) && self.rolloutStrategy.type == 'RoleRollingUpdate') || self.template.roles.all(r, !has(r.maxUnavailable) && !has(r.maxSurge) && !has(r.partition))",
    message:
      "role-level maxUnavailable, maxSurge and partition apply only to rolloutStrategy.type RoleRollingUpdate; use rolloutStrategy.rollingUpdateConfiguration",
  },
} as const satisfies Record<string, ValidationRule>;

export const SCHEMA_OVERLAYS: readonly SchemaOverlay[] = [
  { path: "spec", keywords: { [VALIDATIONS]: [CEL_RULES.roleBudgets] } },
  { path: "spec.plugins[*].scope.roles", keywords: SET },
  { path: "spec.rolloutStrategy", keywords: { [VALIDATIONS]: [CEL_RULES.coordination] } },
  { path: "spec.rolloutStrategy.coordination.roles", keywords: SET },
  { path: "spec.rolloutStrategy.coordination.dependencies", keywords: mapKeyedBy("role") },
  { path: "spec.rolloutStrategy.coordination.dependencies[*].dependsOn", keywords: SET },
  { path: "spec.template.roles", keywords: mapKeyedBy("name") },
  { path: "spec.template.roles[*]", keywords: { [VALIDATIONS]: [CEL_RULES.workerTemplate] } },
  { path: "status.roles", keywords: mapKeyedBy("name") },
  { path: "status.conditions", keywords: mapKeyedBy("type") },
];

/** CEL rules of the ModelRoute: the structural part of `validate-route.ts`. */
export const ROUTE_CEL_RULES = {
  roles: {
    rule: "has(self.serve) ? !has(self.prefill) && !has(self.decode) : has(self.prefill) && has(self.decode)",
    message: "roles must be {serve} (aggregated) or {prefill, decode} (disaggregated)",
  },
  distinctRoles: {
    rule: "!has(self.prefill) || !has(self.decode) || self.prefill != self.decode",
    message: "prefill and decode must be different roles",
  },
  kvConnector: {
    rule: "!has(self.kvConnector) || !has(self.roles.serve)",
    message: "kvConnector applies only to a disaggregated route (roles prefill and decode)",
  },
  kvConnectorEngine: {
    rule: "!has(self.kvConnector) || self.kvConnector == 'none' || (self.kvConnector == 'nixl') == (self.engine == 'vllm')",
    message: "kvConnector nixl needs engine vllm and kvConnector sglang needs engine sglang",
  },
} as const satisfies Record<string, ValidationRule>;

export const ROUTE_SCHEMA_OVERLAYS: readonly SchemaOverlay[] = [
  { path: "spec", keywords: { [VALIDATIONS]: [ROUTE_CEL_RULES.kvConnector, ROUTE_CEL_RULES.kvConnectorEngine] } },
  { path: "spec.roles", keywords: { [VALIDATIONS]: [ROUTE_CEL_RULES.roles, ROUTE_CEL_RULES.distinctRoles] } },
  { path: "status.endpoints", keywords: mapKeyedBy("role") },
  { path: "status.endpoints[*].revisions", keywords: mapKeyedBy("revision") },
  { path: "status.conditions", keywords: mapKeyedBy("type") },
];

/** The schema node describing the data at a dotted overlay path; throws if the schema has none. */
function nodeAt(root: SchemaNode, path: string): SchemaNode {
  let node = root;
  for (const step of path.split(".")) {
    const name = step.endsWith("[*]") ? step.slice(0, -3) : step;
    const properties = isNode(node.properties) ? node.properties : {};
    node = asNode(properties[name], `$.${path} (no property "${name}")`);
    if (step.endsWith("[*]")) node = asNode(node.items, `$.${path} (not an array)`);
  }
  return node;
}

/**
 * Adds each overlay's keywords to `root` in place. Throws if an overlay's path is gone from the
 * schema or it would override a keyword the zod schema already sets.
 */
export function applyOverlays(root: SchemaNode, overlays: readonly SchemaOverlay[]): void {
  for (const overlay of overlays) {
    const node = nodeAt(root, overlay.path);
    for (const [keyword, value] of Object.entries(overlay.keywords)) {
      if (keyword in node)
        unstructural(`$.${overlay.path}`, `overlay keyword "${keyword}" is already set by the zod schema`);
      node[keyword] = value;
    }
  }
}

/**
 * apiVersion, kind and metadata are the API server's: the usual CRD form, with metadata a bare
 * object (structural schemas may only restrict metadata.name and generateName).
 */
function withKubernetesObjectFields(root: SchemaNode, kind: string): SchemaNode {
  const properties = asNode(root.properties, "$");
  for (const field of ["apiVersion", "kind", "metadata"]) {
    if (!(field in properties)) unstructural("$", `the root must be a Kubernetes object, but has no ${field}`);
  }
  const required = Array.isArray(root.required) ? root.required : [];
  return {
    ...root,
    properties: {
      ...properties,
      apiVersion: {
        type: "string",
        description: `Versioned schema of this representation of the object (${API_GROUP}/${API_VERSION}).`,
      },
      kind: { type: "string", description: `REST resource this object represents (${kind}).` },
      metadata: { type: "object" },
    },
    required: required.filter((field) => !["apiVersion", "kind", "metadata"].includes(String(field))),
  };
}

/** What one kind's CRD is made of: its names, its zod schema and what the schema cannot say. */
export interface CrdSource {
  readonly kind: string;
  readonly plural: string;
  readonly shortName: string;
  readonly schema: z.ZodType;
  readonly overlays: readonly SchemaOverlay[];
  readonly subresources: Subresources;
  readonly printerColumns: readonly PrinterColumn[];
}

const AGE_COLUMN: PrinterColumn = {
  name: "Age",
  type: "date",
  jsonPath: ".metadata.creationTimestamp",
  description: "Time since creation.",
};

export const MODEL_SERVING_CRD: CrdSource = {
  kind: KIND,
  plural: PLURAL,
  shortName: SHORT_NAME,
  schema: ModelServing,
  overlays: SCHEMA_OVERLAYS,
  subresources: {
    status: {},
    scale: {
      specReplicasPath: ".spec.replicas",
      statusReplicasPath: ".status.replicas",
      labelSelectorPath: ".status.labelSelector",
    },
  },
  printerColumns: [
    { name: "Replicas", type: "integer", jsonPath: ".spec.replicas", description: "Desired ServingGroups." },
    {
      name: "Ready",
      type: "integer",
      jsonPath: ".status.readyReplicas",
      description: "ServingGroups with every instance Ready.",
    },
    {
      name: "Updated",
      type: "integer",
      jsonPath: ".status.updatedReplicas",
      description: "ServingGroups at the update revision.",
    },
    {
      name: "Revision",
      type: "string",
      jsonPath: ".status.updateRevision",
      description: "The revision the rollout moves to.",
    },
    AGE_COLUMN,
  ],
};

export const MODEL_ROUTE_CRD: CrdSource = {
  kind: ROUTE_KIND,
  plural: ROUTE_PLURAL,
  shortName: ROUTE_SHORT_NAME,
  schema: ModelRoute,
  overlays: ROUTE_SCHEMA_OVERLAYS,
  subresources: { status: {} },
  printerColumns: [
    { name: "Model", type: "string", jsonPath: ".spec.model", description: "The request's model value." },
    {
      name: "ModelServing",
      type: "string",
      jsonPath: ".spec.modelServing",
      description: "The ModelServing that serves it.",
    },
    // A printer column is a JSONPath, which cannot compute the mode from spec.roles: the router writes it.
    { name: "Mode", type: "string", jsonPath: ".status.mode", description: "Aggregated or Disaggregated." },
    {
      name: "Ready",
      type: "string",
      jsonPath: '.status.conditions[?(@.type=="Ready")].status',
      description: "Whether the route has endpoints to serve.",
    },
    AGE_COLUMN,
  ],
};

/** Every CRD Tandem installs, in the order `tandem crd` prints them. */
export const CRD_SOURCES: readonly CrdSource[] = [MODEL_SERVING_CRD, MODEL_ROUTE_CRD];

/** The structural openAPIV3Schema of one kind. */
export function buildOpenApiSchema(source: CrdSource): SchemaNode {
  // A JSON round trip gives plain data whose nodes are never shared, so overlays touch one node.
  const generated: unknown = JSON.parse(
    JSON.stringify(z.toJSONSchema(source.schema, { target: "openapi-3.0", io: "input" })),
  );
  const root = withKubernetesObjectFields(asNode(generated, "$"), source.kind);
  applyOverlays(root, source.overlays);
  return toStructural(root, "$");
}

/** The CustomResourceDefinition of one kind (group tandem.dev, version v1alpha1). */
export function buildCrd(source: CrdSource): CustomResourceDefinition {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${source.plural}.${API_GROUP}` },
    spec: {
      group: API_GROUP,
      names: {
        kind: source.kind,
        listKind: `${source.kind}List`,
        plural: source.plural,
        singular: source.kind.toLowerCase(),
        shortNames: [source.shortName],
      },
      scope: "Namespaced",
      versions: [
        {
          name: API_VERSION,
          served: true,
          storage: true,
          schema: { openAPIV3Schema: buildOpenApiSchema(source) },
          subresources: source.subresources,
          additionalPrinterColumns: source.printerColumns,
        },
      ],
    },
  };
}

export const CRD_YAML_HEADER =
  "# Generated by `npm run crd` from src/api/schema.ts and src/api/route.ts (see src/api/crd.ts). Do not edit by hand.\n";

/**
 * Every CRD as the multi-document YAML committed in deploy/crd.yaml (ModelServing first); the same
 * input gives the same bytes.
 */
export function renderCrdYaml(): string {
  // lineWidth 0: never fold long descriptions, so a changed word changes one line of the diff.
  return CRD_YAML_HEADER + CRD_SOURCES.map((source) => stringify(buildCrd(source), { lineWidth: 0 })).join("---\n");
}
