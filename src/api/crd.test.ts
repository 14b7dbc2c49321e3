import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Ajv, type ErrorObject } from "ajv";
import { parseAllDocuments } from "yaml";
import { z } from "zod";
import {
  applyOverlays,
  buildCrd,
  buildOpenApiSchema,
  CEL_RULES,
  CRD_SOURCES,
  MODEL_ROUTE_CRD,
  MODEL_SERVING_CRD,
  renderCrdYaml,
  ROUTE_CEL_RULES,
  type SchemaNode,
  toStructural,
} from "./crd.ts";
import { ModelRoute } from "./route.ts";
import { ModelServing } from "./schema.ts";

const REPO_ROOT = join(import.meta.dirname, "..", "..");
const CRD_FILE = join(REPO_ROOT, "deploy", "crd.yaml");
const EXAMPLES_DIR = join(REPO_ROOT, "deploy", "examples");

const SCHEMA = buildOpenApiSchema(MODEL_SERVING_CRD);
const ROUTE_SCHEMA = buildOpenApiSchema(MODEL_ROUTE_CRD);

// ---------------------------------------------------------------------------------------------
// A checker for the structural-schema rules the CRD relies on (Kubernetes docs, "Specifying a
// structural schema", plus the CRD-only restrictions on keywords).

const FORBIDDEN_KEYWORDS = [
  "$ref",
  "$defs",
  "$schema",
  "definitions",
  "const",
  "patternProperties",
  "allOf",
  "oneOf",
  "not",
  "uniqueItems",
  "examples",
];
const SCALAR_TYPES = new Set(["string", "integer", "number", "boolean"]);

interface Visit {
  readonly node: SchemaNode;
  readonly path: string;
  /** Schema nodes from the root to this node's parent. */
  readonly ancestors: readonly SchemaNode[];
}

function isNode(value: unknown): value is SchemaNode {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Every schema node under `root` (properties, additionalProperties, items), depth first. */
function visitAll(root: SchemaNode): Visit[] {
  const visits: Visit[] = [];
  const walk = (node: SchemaNode, path: string, ancestors: readonly SchemaNode[]): void => {
    visits.push({ node, path, ancestors });
    const below = [...ancestors, node];
    if (isNode(node.properties))
      for (const [name, child] of Object.entries(node.properties))
        if (isNode(child)) walk(child, `${path}.${name}`, below);
    if (isNode(node.additionalProperties)) walk(node.additionalProperties, `${path}.*`, below);
    if (isNode(node.items)) walk(node.items, `${path}[*]`, below);
  };
  walk(root, "$", []);
  return visits;
}

function isIntOrStringAnyOf(anyOf: unknown): boolean {
  return JSON.stringify(anyOf) === JSON.stringify([{ type: "integer" }, { type: "string" }]);
}

function nodeViolations({ node, path, ancestors }: Visit): string[] {
  const found: string[] = [];
  const intOrString = node["x-kubernetes-int-or-string"] === true;
  const preserve = node["x-kubernetes-preserve-unknown-fields"] === true;
  for (const keyword of FORBIDDEN_KEYWORDS) if (keyword in node) found.push(`${path}: forbidden keyword ${keyword}`);
  if (node.type === undefined && !intOrString && !preserve) found.push(`${path}: no type`);
  if (intOrString && (node.type !== undefined || preserve))
    found.push(`${path}: int-or-string with a type or preserve-unknown-fields`);
  if ("anyOf" in node && !(intOrString && isIntOrStringAnyOf(node.anyOf)))
    found.push(`${path}: anyOf other than the IntOrString form`);
  if (node.additionalProperties === false || (node.additionalProperties !== undefined && ancestors.length === 0))
    found.push(`${path}: additionalProperties false or at the root`);
  if (node.additionalProperties !== undefined && isNode(node.properties) && Object.keys(node.properties).length > 0)
    found.push(`${path}: properties and additionalProperties`);
  if (node.type === "array" && !isNode(node.items)) found.push(`${path}: array without items`);
  for (const value of Object.values(node))
    if (Math.abs(Number(value)) === Number.MAX_SAFE_INTEGER) found.push(`${path}: zod safe-integer bound`);
  found.push(...listTypeViolations(node, path), ...celViolations(node, path, ancestors));
  return found;
}

function listTypeViolations(node: SchemaNode, path: string): string[] {
  const listType = node["x-kubernetes-list-type"];
  if (node.type !== "array") return listType === undefined ? [] : [`${path}: list type on a non-array`];
  const items = isNode(node.items) ? node.items : {};
  if (listType === "atomic") return [];
  if (listType === "set") return SCALAR_TYPES.has(String(items.type)) ? [] : [`${path}: set of non-scalars`];
  if (listType !== "map") return [`${path}: list type ${String(listType)}`];
  const keys = node["x-kubernetes-list-map-keys"];
  const required = Array.isArray(items.required) ? items.required : [];
  const properties = isNode(items.properties) ? items.properties : {};
  if (!Array.isArray(keys) || keys.length === 0) return [`${path}: map list without keys`];
  return keys.flatMap((key: unknown) => {
    const property = properties[String(key)];
    const scalar = isNode(property) && SCALAR_TYPES.has(String(property.type));
    const present = required.includes(key) || (isNode(property) && "default" in property);
    return scalar && present ? [] : [`${path}: map key ${String(key)} must be a required or defaulted scalar`];
  });
}

/** CEL rules carry a rule and a message, and every enclosing list or map is bounded (cost budget). */
function celViolations(node: SchemaNode, path: string, ancestors: readonly SchemaNode[]): string[] {
  const rules = node["x-kubernetes-validations"];
  if (rules === undefined) return [];
  const found: string[] = [];
  if (
    !Array.isArray(rules) ||
    !rules.every((rule) => isNode(rule) && typeof rule.rule === "string" && typeof rule.message === "string")
  )
    found.push(`${path}: malformed x-kubernetes-validations`);
  for (const ancestor of ancestors) {
    if (ancestor.type === "array" && ancestor.maxItems === undefined)
      found.push(`${path}: CEL rule inside a list without maxItems`);
    if (isNode(ancestor.additionalProperties) && ancestor.maxProperties === undefined)
      found.push(`${path}: CEL rule inside a map without maxProperties`);
  }
  return found;
}

/** Every structural-schema violation in `root`, as `path: problem`. */
function structuralViolations(root: SchemaNode): string[] {
  const found = visitAll(root).flatMap(nodeViolations);
  const properties = isNode(root.properties) ? root.properties : {};
  if (root.type !== "object") found.push("$: root type must be object");
  if (JSON.stringify(properties.metadata) !== JSON.stringify({ type: "object" }))
    found.push("$.metadata: must be just {type: object}");
  for (const field of ["apiVersion", "kind"])
    if (!isNode(properties[field]) || properties[field].type !== "string") found.push(`$.${field}: must be a string`);
  return found;
}

/** The schema node describing the data at a `$.a.b[*].c` path (of the ModelServing schema unless said). */
function nodeAt(path: string, root: SchemaNode = SCHEMA): SchemaNode {
  const visit = visitAll(root).find((candidate) => candidate.path === path);
  assert.ok(visit, `no schema node at ${path}`);
  return visit.node;
}

test("the openAPIV3Schemas are structural", () => {
  assert.deepEqual(structuralViolations(SCHEMA), []);
  assert.deepEqual(structuralViolations(ROUTE_SCHEMA), []);
});

test("the structural checker itself catches what it looks for", () => {
  const bad: SchemaNode = {
    type: "object",
    properties: {
      metadata: { type: "object", properties: { labels: { type: "object" } } },
      untyped: { description: "no type" },
      union: { anyOf: [{ type: "string" }, { type: "boolean" }] },
      ref: { $ref: "#/x" },
      strict: { type: "object", additionalProperties: false },
      unbounded: {
        type: "array",
        items: { type: "object", "x-kubernetes-validations": [{ rule: "true", message: "m" }] },
      },
      roles: {
        type: "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        items: { type: "object", properties: { name: { type: "string" } } },
      },
    },
  };
  const found = structuralViolations(bad).join("\n");
  for (const expected of [
    "$.metadata: must be just",
    "$.untyped: no type",
    "$.union: anyOf",
    "$.ref: forbidden keyword $ref",
    "$.strict: additionalProperties false",
    "$.unbounded[*]: CEL rule inside a list without maxItems",
    "$.roles: map key name",
    "$.apiVersion: must be a string",
  ]) {
    assert.ok(found.includes(expected), `expected "${expected}" in:\n${found}`);
  }
});

// ---------------------------------------------------------------------------------------------
// The post-processor: rewrites and loud failures.

const openApi = (schema: z.ZodType): unknown => z.toJSONSchema(schema, { target: "openapi-3.0", io: "input" });

test("toStructural drops zod's safe-integer bounds and marks int32 bounds with format int32", () => {
  assert.deepEqual(toStructural(openApi(z.int()), "$.x"), { type: "integer" });
  assert.deepEqual(toStructural(openApi(z.int().min(0)), "$.x"), { type: "integer", minimum: 0 });
  assert.deepEqual(toStructural(openApi(z.int32().min(0)), "$.x"), {
    type: "integer",
    format: "int32",
    maximum: 2147483647,
    minimum: 0,
  });
});

test("toStructural turns strict objects into pruned ones and loose objects into preserved ones", () => {
  const strict = toStructural(openApi(z.strictObject({ a: z.string() })), "$");
  assert.equal("additionalProperties" in strict, false);
  assert.equal("x-kubernetes-preserve-unknown-fields" in strict, false);
  const loose = toStructural(openApi(z.looseObject({ a: z.string() })), "$");
  assert.equal("additionalProperties" in loose, false);
  assert.equal(loose["x-kubernetes-preserve-unknown-fields"], true);
  const map = toStructural(openApi(z.record(z.string(), z.string())), "$");
  assert.deepEqual(map.additionalProperties, { type: "string" });
});

test("toStructural moves IntOrString checks out of anyOf into the accepted form", () => {
  const intOrPercent = z
    .union([z.int32().min(0), z.string().regex(/^\d+%$/)])
    .meta({ "x-kubernetes-int-or-string": true });
  assert.deepEqual(toStructural(openApi(intOrPercent), "$.x"), {
    anyOf: [{ type: "integer" }, { type: "string" }],
    maximum: 2147483647,
    minimum: 0,
    pattern: "^\\d+%$",
    "x-kubernetes-int-or-string": true,
  });
});

test("toStructural fails loudly, naming the JSON path, on constructs it cannot make structural", () => {
  const cases: [string, unknown, RegExp][] = [
    [
      "a union without the IntOrString marker",
      openApi(z.object({ u: z.union([z.string(), z.boolean()]) })),
      /at \$\.u: anyOf/,
    ],
    [
      "an IntOrString with a third branch",
      openApi(
        z.object({ u: z.union([z.int(), z.string(), z.boolean()]).meta({ "x-kubernetes-int-or-string": true }) }),
      ),
      /at \$\.u: .*anyOf/,
    ],
    ["a $ref", { type: "object", properties: { r: { $ref: "#/$defs/x" } } }, /at \$\.r: keyword "\$ref"/],
    ["a const", { type: "object", properties: { c: { type: "string", const: "x" } } }, /at \$\.c: keyword "const"/],
    [
      "patternProperties",
      { type: "object", patternProperties: { "^a": { type: "string" } } },
      /at \$: keyword "patternProperties"/,
    ],
    ["an untyped field (z.unknown)", openApi(z.object({ any: z.unknown() })), /at \$\.any: a node needs a type/],
    ["a lookahead pattern", openApi(z.object({ p: z.string().regex(/^(?!-)[a-z]+$/) })), /at \$\.p: pattern .* RE2/],
    [
      "properties beside an additionalProperties schema",
      { type: "object", properties: { a: { type: "string" } }, additionalProperties: { type: "string" } },
      /at \$: an object may not have both/,
    ],
    [
      "items on a non-array",
      { type: "object", properties: { t: { type: "string", items: { type: "string" } } } },
      /at \$\.t: items on a node of type "string"/,
    ],
    [
      "an array item inside",
      { type: "object", properties: { list: { type: "array", items: { type: "string", uniqueItems: true } } } },
      /at \$\.list\[\*\]: keyword "uniqueItems"/,
    ],
  ];
  for (const [what, schema, message] of cases) {
    assert.throws(() => toStructural(schema, "$"), message, what);
  }
});

test("an overlay for a path the schema no longer has fails loudly", () => {
  const root = { type: "object", properties: { spec: { type: "object", properties: {} } } };
  assert.throws(() => {
    applyOverlays(root, [{ path: "spec.gone[*]", keywords: { "x-kubernetes-list-type": "set" } }]);
  }, /\$\.spec\.gone\[\*\] \(no property "gone"\)/);
  assert.throws(() => {
    applyOverlays(
      {
        type: "object",
        properties: { l: { type: "array", items: { type: "string" }, "x-kubernetes-list-type": "atomic" } },
      },
      [{ path: "l", keywords: { "x-kubernetes-list-type": "set" } }],
    );
  }, /already set by the zod schema/);
});

// ---------------------------------------------------------------------------------------------
// The CRD object.

test("the CRD names, scope, version, subresources and printer columns", () => {
  const crd = buildCrd(MODEL_SERVING_CRD);
  assert.equal(crd.metadata.name, "modelservings.tandem.dev");
  assert.deepEqual(crd.spec.names, {
    kind: "ModelServing",
    listKind: "ModelServingList",
    plural: "modelservings",
    singular: "modelserving",
    shortNames: ["msv"],
  });
  assert.equal(crd.spec.scope, "Namespaced");
  assert.equal(crd.spec.versions.length, 1);
  const version = crd.spec.versions[0]!;
  assert.deepEqual([version.name, version.served, version.storage], ["v1alpha1", true, true]);
  assert.deepEqual(version.subresources, {
    status: {},
    scale: {
      specReplicasPath: ".spec.replicas",
      statusReplicasPath: ".status.replicas",
      labelSelectorPath: ".status.labelSelector",
    },
  });
  assert.deepEqual(
    version.additionalPrinterColumns.map(({ name, type, jsonPath }) => [name, type, jsonPath]),
    [
      ["Replicas", "integer", ".spec.replicas"],
      ["Ready", "integer", ".status.readyReplicas"],
      ["Updated", "integer", ".status.updatedReplicas"],
      ["Revision", "string", ".status.updateRevision"],
      ["Age", "date", ".metadata.creationTimestamp"],
    ],
  );
});

test("the scale subresource and printer columns point at schema fields of the right type", () => {
  assert.equal(nodeAt("$.spec.replicas").type, "integer");
  assert.equal(nodeAt("$.status.replicas").type, "integer");
  assert.equal(nodeAt("$.status.labelSelector").type, "string");
  for (const column of buildCrd(MODEL_SERVING_CRD).spec.versions[0]!.additionalPrinterColumns) {
    if (column.jsonPath.startsWith(".metadata.")) continue;
    assert.equal(nodeAt(`$${column.jsonPath}`).type, column.type, column.name);
  }
});

test("role names are the keys of a map list, so the API server enforces unique roles", () => {
  const roles = nodeAt("$.spec.template.roles");
  assert.equal(roles["x-kubernetes-list-type"], "map");
  assert.deepEqual(roles["x-kubernetes-list-map-keys"], ["name"]);
  assert.equal(roles.maxItems, 8);
  assert.equal(nodeAt("$.status.conditions")["x-kubernetes-list-type"], "map");
  assert.equal(nodeAt("$.spec.rolloutStrategy.coordination.roles")["x-kubernetes-list-type"], "set");
  assert.equal(nodeAt("$.spec.template.roles[*].entryTemplate.spec.containers")["x-kubernetes-list-type"], "atomic");
});

test("the CEL rules sit on the nodes they check", () => {
  assert.deepEqual(nodeAt("$.spec.template.roles[*]")["x-kubernetes-validations"], [CEL_RULES.workerTemplate]);
  assert.deepEqual(nodeAt("$.spec.rolloutStrategy")["x-kubernetes-validations"], [CEL_RULES.coordination]);
  assert.deepEqual(nodeAt("$.spec")["x-kubernetes-validations"], [CEL_RULES.roleBudgets]);
  assert.match(CEL_RULES.workerTemplate.rule, /self\.workerReplicas == 0 \|\| has\(self\.workerTemplate\)/);
  assert.match(CEL_RULES.coordination.rule, /self\.type == 'RoleRollingUpdate'/);
  const rules = visitAll(SCHEMA).flatMap(({ node }): unknown[] =>
    Array.isArray(node["x-kubernetes-validations"]) ? node["x-kubernetes-validations"] : [],
  );
  assert.equal(rules.length, Object.keys(CEL_RULES).length, "every CEL rule is placed exactly once");
});

test("IntOrString budgets keep their range checks next to the accepted anyOf", () => {
  for (const path of [
    "$.spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable",
    "$.spec.template.roles[*].maxSurge",
    "$.spec.template.roles[*].partition",
  ]) {
    const node = nodeAt(path);
    assert.equal(node["x-kubernetes-int-or-string"], true, path);
    assert.deepEqual(node.anyOf, [{ type: "integer" }, { type: "string" }], path);
    assert.equal(node.minimum, 0, path);
    assert.equal(node.pattern, "^(100|[1-9]?[0-9])%$", path);
  }
});

test("every zod description reaches the CRD", () => {
  const described = (root: SchemaNode): string[] =>
    visitAll(root).flatMap(({ node }) => (typeof node.description === "string" ? [node.description] : []));
  const crdDescriptions = new Set(described(SCHEMA));
  const zodDescriptions = described(openApi(ModelServing) as SchemaNode);
  assert.ok(zodDescriptions.length > 10);
  for (const description of zodDescriptions) assert.ok(crdDescriptions.has(description), description);
  const routeDescriptions = new Set(described(ROUTE_SCHEMA));
  for (const description of described(openApi(ModelRoute) as SchemaNode))
    assert.ok(routeDescriptions.has(description), description);
  assert.equal(nodeAt("$.spec.replicas").description, "Number of ServingGroups.");
});

// ---------------------------------------------------------------------------------------------
// Manifests against the schema the API server sees (ajv, OpenAPI 3.0 dialect).

function newAjv(): Ajv {
  // strictTypes off: an IntOrString node carries number and string checks without a `type` of its
  // own, which is exactly how the API server wants it. Every other strict check stays on.
  const ajv = new Ajv({ allErrors: true, strict: true, strictTypes: false });
  for (const keyword of [
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
    "x-kubernetes-embedded-resource",
  ]) {
    ajv.addKeyword({ keyword }); // annotations for the API server; CEL is not evaluated here
  }
  ajv.addFormat("int32", {
    type: "number",
    validate: (value: number) => Number.isInteger(value) && value >= -(2 ** 31) && value < 2 ** 31,
  });
  return ajv;
}

const validateManifest = newAjv().compile(SCHEMA);

function schemaErrors(manifest: unknown): ErrorObject[] {
  return validateManifest(manifest) ? [] : [...(validateManifest.errors ?? [])];
}

const validateRouteManifest = newAjv().compile(ROUTE_SCHEMA);

function routeSchemaErrors(manifest: unknown): ErrorObject[] {
  return validateRouteManifest(manifest) ? [] : [...(validateRouteManifest.errors ?? [])];
}

const container = (image: string) => ({
  name: "vllm",
  image,
  args: ["--model", "m"],
  resources: { limits: { "nvidia.com/gpu": "1" } },
});

const SINGLE_ROLE = {
  apiVersion: "tandem.dev/v1alpha1",
  kind: "ModelServing",
  metadata: { name: "llama", namespace: "inference", labels: { app: "llama" } },
  spec: {
    replicas: 2,
    template: {
      roles: [{ name: "serve", entryTemplate: { spec: { containers: [container("vllm/vllm-openai:v0.11.0")] } } }],
    },
  },
};

const PREFILL_DECODE = {
  apiVersion: "tandem.dev/v1alpha1",
  kind: "ModelServing",
  metadata: { name: "llama-pd" },
  spec: {
    replicas: 3,
    recoveryPolicy: "RoleRecreate",
    drain: { timeoutSeconds: 600 },
    rolloutStrategy: {
      type: "RoleRollingUpdate",
      rollingUpdateConfiguration: { maxUnavailable: 1, partition: "25%" },
      coordination: { maxSkew: "10%", dependencies: [{ role: "decode", dependsOn: ["prefill"] }] },
    },
    template: {
      restartGracePeriodSeconds: 30,
      gangPolicy: { minRoleReplicas: { prefill: 1, decode: 1 } },
      roles: [
        {
          name: "prefill",
          replicas: 2,
          maxUnavailable: "25%",
          entryTemplate: { metadata: { labels: { tier: "prefill" } }, spec: { containers: [container("vllm:v1")] } },
        },
        {
          name: "decode",
          replicas: 1,
          maxUnavailable: 0,
          maxSurge: 1,
          workerReplicas: 1,
          entryTemplate: { spec: { containers: [container("vllm:v1")] } },
          workerTemplate: {
            spec: { containers: [{ name: "worker", image: "vllm:v1", env: [{ name: "NCCL_DEBUG", value: "INFO" }] }] },
          },
        },
      ],
    },
  },
};

test("realistic ModelServings pass the CRD schema (and zod agrees)", () => {
  for (const manifest of [SINGLE_ROLE, PREFILL_DECODE]) {
    assert.deepEqual(schemaErrors(manifest), [], manifest.metadata.name);
    assert.equal(ModelServing.safeParse(manifest).success, true, manifest.metadata.name);
  }
});

/** A copy of `manifest` with `edit` applied to its spec. */
function withSpec(manifest: typeof PREFILL_DECODE, edit: (spec: Record<string, unknown>) => void): unknown {
  const copy = structuredClone(manifest) as { spec: Record<string, unknown> };
  edit(copy.spec);
  return copy;
}

const roleAt = (spec: Record<string, unknown>, index: number): Record<string, unknown> =>
  (spec.template as { roles: Record<string, unknown>[] }).roles[index]!;

test("bad ModelServings fail the CRD schema at the offending field (and zod agrees)", () => {
  const cases: [string, unknown, string, string][] = [
    [
      "negative replicas",
      withSpec(PREFILL_DECODE, (spec) => {
        spec.replicas = -1;
      }),
      "/spec/replicas",
      "minimum",
    ],
    [
      "a percent above 100%",
      withSpec(PREFILL_DECODE, (spec) => {
        (
          spec.rolloutStrategy as { rollingUpdateConfiguration: Record<string, unknown> }
        ).rollingUpdateConfiguration.maxUnavailable = "150%";
      }),
      "/spec/rolloutStrategy/rollingUpdateConfiguration/maxUnavailable",
      "pattern",
    ],
    [
      "a negative role budget",
      withSpec(PREFILL_DECODE, (spec) => {
        roleAt(spec, 1).maxSurge = -2;
      }),
      "/spec/template/roles/1/maxSurge",
      "minimum",
    ],
    [
      "a fractional budget",
      withSpec(PREFILL_DECODE, (spec) => {
        roleAt(spec, 0).maxUnavailable = 1.5;
      }),
      "/spec/template/roles/0/maxUnavailable",
      "anyOf",
    ],
    [
      "an unknown recovery policy",
      withSpec(PREFILL_DECODE, (spec) => {
        spec.recoveryPolicy = "Recreate";
      }),
      "/spec/recoveryPolicy",
      "enum",
    ],
    [
      "a missing entryTemplate",
      withSpec(PREFILL_DECODE, (spec) => {
        delete roleAt(spec, 0).entryTemplate;
      }),
      "/spec/template/roles/0",
      "required",
    ],
    [
      "a role name that is not DNS-1035",
      withSpec(PREFILL_DECODE, (spec) => {
        roleAt(spec, 0).name = "Prefill";
      }),
      "/spec/template/roles/0/name",
      "pattern",
    ],
    [
      "no containers",
      withSpec(PREFILL_DECODE, (spec) => {
        roleAt(spec, 0).entryTemplate = { spec: { containers: [] } };
      }),
      "/spec/template/roles/0/entryTemplate/spec/containers",
      "minItems",
    ],
    [
      "nine roles",
      withSpec(PREFILL_DECODE, (spec) => {
        (spec.template as { roles: unknown[] }).roles = Array.from({ length: 9 }, (_, index) => ({
          ...roleAt(spec, 0),
          name: `r${index}`,
        }));
      }),
      "/spec/template/roles",
      "maxItems",
    ],
  ];
  for (const [what, manifest, instancePath, keyword] of cases) {
    const errors = schemaErrors(manifest);
    assert.ok(
      errors.some((error) => error.instancePath === instancePath && error.keyword === keyword),
      `${what}: expected ${keyword} at ${instancePath}, got ${JSON.stringify(errors.map((e) => [e.instancePath, e.keyword]))}`,
    );
    assert.equal(ModelServing.safeParse(manifest).success, false, `${what}: zod should reject it too`);
  }
  const missing = schemaErrors(
    withSpec(PREFILL_DECODE, (spec) => {
      delete roleAt(spec, 0).entryTemplate;
    }),
  ).find((error) => error.keyword === "required");
  assert.deepEqual(missing?.params, { missingProperty: "entryTemplate" });
});

test("every default in the schema is valid for its own field (the API server rejects the CRD otherwise)", () => {
  const ajv = newAjv();
  for (const { node, path } of [...visitAll(SCHEMA), ...visitAll(ROUTE_SCHEMA)]) {
    if (!("default" in node)) continue;
    assert.equal(
      ajv.validate(node, node.default),
      true,
      `${path}: default ${JSON.stringify(node.default)}: ${ajv.errorsText()}`,
    );
  }
});

/**
 * The fields of `value` the API server would prune (or reject under strict field validation):
 * fields that neither a property, an additionalProperties schema nor preserve-unknown-fields admit.
 */
function prunedFields(value: unknown, node: SchemaNode, path: string): string[] {
  if (Array.isArray(value))
    return isNode(node.items)
      ? value.flatMap((item, index) => prunedFields(item, node.items as SchemaNode, `${path}[${index}]`))
      : [];
  if (!isNode(value) || path === ".metadata") return []; // the API server owns metadata
  const properties = isNode(node.properties) ? node.properties : {};
  return Object.entries(value).flatMap(([key, child]) => {
    const childNode = properties[key] ?? node.additionalProperties;
    if (isNode(childNode)) return prunedFields(child, childNode, `${path}.${key}`);
    return node["x-kubernetes-preserve-unknown-fields"] === true ? [] : [`${path}.${key}`];
  });
}

test("the API server would prune nothing from the realistic manifests, but would prune a typo", () => {
  assert.deepEqual(prunedFields(PREFILL_DECODE, SCHEMA, ""), []);
  assert.deepEqual(
    prunedFields(
      withSpec(PREFILL_DECODE, (spec) => {
        spec.replica = 3;
      }),
      SCHEMA,
      "",
    ),
    [".spec.replica"],
  );
});

const exampleFiles = existsSync(EXAMPLES_DIR)
  ? readdirSync(EXAMPLES_DIR)
      .filter((file) => /\.ya?ml$/.test(file))
      .sort()
  : [];

for (const file of exampleFiles) {
  test(`deploy/examples/${file} passes the CRD schema`, () => {
    const documents = parseAllDocuments(readFileSync(join(EXAMPLES_DIR, file), "utf8")).map(
      (document) => document.toJS() as unknown,
    );
    const ours = documents.filter(
      (document) => isNode(document) && (document.kind === "ModelServing" || document.kind === "ModelRoute"),
    );
    assert.ok(ours.length > 0, "no ModelServing or ModelRoute in the file");
    for (const manifest of ours) {
      const route = isNode(manifest) && manifest.kind === "ModelRoute";
      assert.deepEqual(route ? routeSchemaErrors(manifest) : schemaErrors(manifest), []);
      assert.deepEqual(
        prunedFields(manifest, route ? ROUTE_SCHEMA : SCHEMA, ""),
        [],
        "fields the API server would prune",
      );
    }
  });
}

// ---------------------------------------------------------------------------------------------
// The ModelRoute CRD (DESIGN §7).

const ROUTE = {
  apiVersion: "tandem.dev/v1alpha1",
  kind: "ModelRoute",
  metadata: { name: "llama-pd", namespace: "inference" },
  spec: {
    model: "meta-llama/Llama-3.1-8B-Instruct",
    modelServing: "llama-pd",
    engine: "vllm",
    roles: { prefill: "prefill", decode: "decode" },
  },
};

test("the ModelRoute CRD names, status subresource (no scale) and printer columns", () => {
  const crd = buildCrd(MODEL_ROUTE_CRD);
  assert.equal(crd.metadata.name, "modelroutes.tandem.dev");
  assert.deepEqual(crd.spec.names, {
    kind: "ModelRoute",
    listKind: "ModelRouteList",
    plural: "modelroutes",
    singular: "modelroute",
    shortNames: ["mr"],
  });
  const version = crd.spec.versions[0]!;
  assert.deepEqual(version.subresources, { status: {} });
  assert.deepEqual(
    version.additionalPrinterColumns.map(({ name, type, jsonPath }) => [name, type, jsonPath]),
    [
      ["Model", "string", ".spec.model"],
      ["ModelServing", "string", ".spec.modelServing"],
      ["Mode", "string", ".status.mode"],
      ["Ready", "string", '.status.conditions[?(@.type=="Ready")].status'],
      ["Age", "date", ".metadata.creationTimestamp"],
    ],
  );
  assert.deepEqual(nodeAt("$.status.mode", ROUTE_SCHEMA).enum, ["Aggregated", "Disaggregated"]);
  assert.deepEqual(nodeAt("$.status.conditions[*].type", ROUTE_SCHEMA).enum, ["Accepted", "Ready"]);
});

test("the ModelRoute schema carries the defaults of DESIGN §7 and its CEL rules where they check", () => {
  assert.equal(nodeAt("$.spec.port", ROUTE_SCHEMA).default, 8000);
  assert.equal(nodeAt("$.spec.pairing", ROUTE_SCHEMA).default, "SameGroup");
  assert.equal(nodeAt("$.spec.retries.attempts", ROUTE_SCHEMA).default, 2);
  assert.equal(nodeAt("$.spec.timeouts.firstByteSeconds", ROUTE_SCHEMA).default, 60);
  assert.equal(nodeAt("$.spec.timeouts.idleSeconds", ROUTE_SCHEMA).default, 300);
  assert.equal(
    "default" in nodeAt("$.spec.kvConnector", ROUTE_SCHEMA),
    false,
    "depends on engine: parseModelRoute defaults it",
  );
  assert.deepEqual(nodeAt("$.spec.roles", ROUTE_SCHEMA)["x-kubernetes-validations"], [
    ROUTE_CEL_RULES.roles,
    ROUTE_CEL_RULES.distinctRoles,
  ]);
  assert.deepEqual(nodeAt("$.spec", ROUTE_SCHEMA)["x-kubernetes-validations"], [
    ROUTE_CEL_RULES.kvConnector,
    ROUTE_CEL_RULES.kvConnectorEngine,
  ]);
  assert.equal(nodeAt("$.status.endpoints", ROUTE_SCHEMA)["x-kubernetes-list-type"], "map");
  assert.deepEqual(nodeAt("$.status.endpoints[*].revisions", ROUTE_SCHEMA)["x-kubernetes-list-map-keys"], ["revision"]);
});

test("bad ModelRoutes fail the CRD schema at the offending field (and zod agrees)", () => {
  const withRouteSpec = (edit: (spec: Record<string, any>) => void): unknown => {
    const copy = structuredClone(ROUTE) as { spec: Record<string, any> };
    edit(copy.spec);
    return copy;
  };
  const cases: [string, unknown, string, string][] = [
    [
      "an unknown engine",
      withRouteSpec((spec) => {
        spec.engine = "trt";
      }),
      "/spec/engine",
      "enum",
    ],
    [
      "port 0",
      withRouteSpec((spec) => {
        spec.port = 0;
      }),
      "/spec/port",
      "minimum",
    ],
    [
      "port 65536",
      withRouteSpec((spec) => {
        spec.port = 65_536;
      }),
      "/spec/port",
      "maximum",
    ],
    [
      "a ModelServing name that is not DNS-1035",
      withRouteSpec((spec) => {
        spec.modelServing = "Llama_PD";
      }),
      "/spec/modelServing",
      "pattern",
    ],
    [
      "a model with a space",
      withRouteSpec((spec) => {
        spec.model = "llama 3";
      }),
      "/spec/model",
      "pattern",
    ],
    [
      "no roles",
      withRouteSpec((spec) => {
        delete spec.roles;
      }),
      "/spec",
      "required",
    ],
    [
      "negative retries",
      withRouteSpec((spec) => {
        spec.retries = { attempts: -1 };
      }),
      "/spec/retries/attempts",
      "minimum",
    ],
    [
      "an unknown pairing",
      withRouteSpec((spec) => {
        spec.pairing = "SameNode";
      }),
      "/spec/pairing",
      "enum",
    ],
  ];
  for (const [what, manifest, instancePath, keyword] of cases) {
    const errors = routeSchemaErrors(manifest);
    assert.ok(
      errors.some((error) => error.instancePath === instancePath && error.keyword === keyword),
      `${what}: expected ${keyword} at ${instancePath}, got ${JSON.stringify(errors.map((e) => [e.instancePath, e.keyword]))}`,
    );
    assert.equal(ModelRoute.safeParse(manifest).success, false, `${what}: zod should reject it too`);
  }
  assert.deepEqual(routeSchemaErrors(ROUTE), []);
  assert.deepEqual(
    prunedFields(
      withRouteSpec((spec) => {
        spec.kvConector = "nixl";
      }),
      ROUTE_SCHEMA,
      "",
    ),
    [".spec.kvConector"],
  );
});

// ---------------------------------------------------------------------------------------------
// deploy/crd.yaml

test("deploy/crd.yaml is what `npm run crd` generates", () => {
  const committed = existsSync(CRD_FILE) ? readFileSync(CRD_FILE, "utf8") : "(missing)";
  assert.ok(
    committed === renderCrdYaml(),
    "deploy/crd.yaml is out of date with src/api/schema.ts: run `npm run crd` and commit the result",
  );
});

test("the YAML is deterministic, starts with the do-not-edit header and parses back to every CRD, ModelServing first", () => {
  const yaml = renderCrdYaml();
  assert.equal(renderCrdYaml(), yaml);
  assert.match(yaml, /^# Generated by `npm run crd`.*Do not edit by hand\.\n/);
  const documents = parseAllDocuments(yaml).map((document) => document.toJS() as unknown);
  assert.deepEqual(documents, JSON.parse(JSON.stringify(CRD_SOURCES.map(buildCrd))));
  assert.deepEqual(
    documents.map((document: any) => document.metadata.name),
    ["modelservings.tandem.dev", "modelroutes.tandem.dev"],
  );
});
