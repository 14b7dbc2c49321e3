/**
 * The ModelServing CRD (DESIGN §1) and the ModelRoute CRD (§7) on a real kube-apiserver: accepted
 * and Established, the examples stored unchanged with the same defaults `parseModelServing` and
 * `parseModelRoute` apply, invalid specs refused with messages a person can act on, and the status
 * and scale subresources.
 *
 * Needs the binaries from `bash hack/kube-testenv/build.sh`. Run: node --test test/e2e/crd.e2e.ts
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { isDeepStrictEqual } from "node:util";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parse, parseAllDocuments } from "yaml";
import { parseModelRoute, parseModelServing } from "../../src/api/parse.ts";
import { type Cluster, startCluster } from "./cluster.ts";
import {
  CRDS,
  type KubeClient,
  KubeError,
  MODEL_ROUTES,
  MODEL_SERVINGS,
  NAMESPACES,
  type Resource,
  resourcePath,
} from "./client.ts";
import { waitFor } from "./wait.ts";

const REPO_ROOT = join(import.meta.dirname, "..", "..");
const [CRD, ROUTE_CRD] = parseAllDocuments(readFileSync(join(REPO_ROOT, "deploy", "crd.yaml"), "utf8")).map(
  (document): any => document.toJS(),
);
const EXAMPLES_DIR = join(REPO_ROOT, "deploy", "examples");
const EXAMPLE_FILES = readdirSync(EXAMPLES_DIR)
  .filter((file) => file.endsWith(".yaml"))
  .sort();
const SPEC_SCHEMA = CRD.spec.versions[0].schema.openAPIV3Schema.properties.spec;
const ROUTE_SPEC_SCHEMA = ROUTE_CRD.spec.versions[0].schema.openAPIV3Schema.properties.spec;

const CLUSTER_START_TIMEOUT_MS = 180_000;
const TEST_TIMEOUT_MS = 60_000;

/** A small valid ModelServing to mutate into invalid ones. */
function validModelServing(name: string, namespace: string): any {
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name, namespace },
    spec: {
      replicas: 1,
      template: {
        roles: [{ name: "server", entryTemplate: { spec: { containers: [{ name: "c", image: "img:v1" }] } } }],
      },
    },
  };
}

async function ensureNamespace(client: KubeClient, name: string): Promise<void> {
  await client.apply(NAMESPACES, { apiVersion: "v1", kind: "Namespace", metadata: { name } });
}

/**
 * Creates a CRD, waits for Established and NamesAccepted, then for a LIST to succeed: right after
 * Established the API server still answers 429 "storage is (re)initializing" while the resource's
 * watch cache fills. Resolves with the create response's warnings.
 */
async function installCrd(client: KubeClient, crd: any, resource: Resource): Promise<readonly string[]> {
  const response = await client.request("POST", resourcePath(CRDS), crd);
  if (response.status !== 201) throw new KubeError("POST", resourcePath(CRDS), response);
  await waitFor(
    async () => {
      const stored = await client.get(CRDS, crd.metadata.name);
      const conditions: any[] = stored.status?.conditions ?? [];
      const isTrue = (type: string): boolean => conditions.some((c) => c.type === type && c.status === "True");
      return isTrue("Established") && isTrue("NamesAccepted") ? true : undefined;
    },
    { timeoutMs: 30_000, what: `CRD ${crd.metadata.name} Established` },
  );
  await waitFor(
    async () => {
      const list = await client.request("GET", resourcePath(resource));
      return list.status === 200 ? true : undefined;
    },
    { timeoutMs: 30_000, what: `LIST ${resource.plural} to succeed (watch cache ready)` },
  );
  return response.warnings;
}

/**
 * Paths under `schema` that carry a `default` where the API server's value differs from `parsed`.
 * Walks properties, array items and map values wherever either side has a value, so a default the
 * CRD applies and parse does not (or the reverse, through a defaulted parent) both show.
 */
function defaultMismatches(schema: any, served: unknown, parsed: unknown, path: string): string[] {
  const found: string[] = [];
  if (schema.default !== undefined && !isDeepStrictEqual(served, parsed)) {
    found.push(`${path}: API server ${JSON.stringify(served)}, parse ${JSON.stringify(parsed)}`);
  }
  const asObject = (value: unknown): Record<string, unknown> | undefined =>
    typeof value === "object" && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  if (schema.properties !== undefined && (asObject(served) !== undefined || asObject(parsed) !== undefined)) {
    for (const [key, child] of Object.entries<any>(schema.properties)) {
      found.push(...defaultMismatches(child, asObject(served)?.[key], asObject(parsed)?.[key], `${path}.${key}`));
    }
  }
  if (schema.items !== undefined && (Array.isArray(served) || Array.isArray(parsed))) {
    const length = Math.max(Array.isArray(served) ? served.length : 0, Array.isArray(parsed) ? parsed.length : 0);
    for (let i = 0; i < length; i++) {
      found.push(
        ...defaultMismatches(
          schema.items,
          (served as unknown[] | undefined)?.[i],
          (parsed as unknown[] | undefined)?.[i],
          `${path}[${i}]`,
        ),
      );
    }
  }
  return found;
}

/** Paths where `served` lacks or changes a value `written` holds (pruning, coercion). */
function lostValues(written: unknown, served: unknown, path: string): string[] {
  if (typeof written === "object" && written !== null) {
    if (typeof served !== "object" || served === null)
      return [`${path}: written ${JSON.stringify(written)}, served ${JSON.stringify(served)}`];
    return Object.entries(written).flatMap(([key, value]) =>
      lostValues(value, (served as Record<string, unknown>)[key], `${path}.${key}`),
    );
  }
  return isDeepStrictEqual(written, served)
    ? []
    : [`${path}: written ${JSON.stringify(written)}, served ${JSON.stringify(served)}`];
}

describe("ModelServing CRD on kube-apiserver", { timeout: CLUSTER_START_TIMEOUT_MS + 10 * TEST_TIMEOUT_MS }, () => {
  let cluster: Cluster | undefined;
  let crdWarnings: readonly string[] = [];
  let routeCrdWarnings: readonly string[] = [];
  const admin = (): KubeClient => {
    assert.ok(cluster, "cluster not started");
    return cluster.admin;
  };

  before(
    async () => {
      cluster = await startCluster({ startTimeoutMs: CLUSTER_START_TIMEOUT_MS });
      crdWarnings = await installCrd(cluster.admin, CRD, MODEL_SERVINGS);
      routeCrdWarnings = await installCrd(cluster.admin, ROUTE_CRD, MODEL_ROUTES);
    },
    { timeout: CLUSTER_START_TIMEOUT_MS + TEST_TIMEOUT_MS },
  );

  after(async () => {
    await cluster?.stop();
  });

  test("the CRD is accepted without warnings and serves v1alpha1", { timeout: TEST_TIMEOUT_MS }, async () => {
    assert.deepEqual(crdWarnings, [], "the API server warned about the CRD");
    const crd = await admin().get(CRDS, CRD.metadata.name);
    assert.deepEqual(crd.status.acceptedNames.shortNames, ["msv"]);
    assert.deepEqual(crd.status.storedVersions, ["v1alpha1"]);
    const list = await admin().list(MODEL_SERVINGS, "default");
    assert.equal(list.kind, "ModelServingList");
  });

  test(
    "the ModelRoute CRD is accepted without warnings and serves v1alpha1",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      assert.deepEqual(routeCrdWarnings, [], "the API server warned about the ModelRoute CRD");
      const crd = await admin().get(CRDS, ROUTE_CRD.metadata.name);
      assert.deepEqual(crd.status.acceptedNames.shortNames, ["mr"]);
      const list = await admin().list(MODEL_ROUTES, "default");
      assert.equal(list.kind, "ModelRouteList");
    },
  );

  test(
    "the controller identity is authenticated but gets nothing without RBAC",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      assert.ok(cluster);
      const response = await cluster.controller.request("GET", resourcePath(MODEL_SERVINGS));
      assert.equal(response.status, 403);
      assert.match(
        response.body.message,
        /"system:serviceaccount:tandem-system:tandem-controller" cannot list resource "modelservings"/,
      );
    },
  );

  describe("examples", () => {
    for (const file of EXAMPLE_FILES) {
      test(
        `deploy/examples/${file} is stored as written, with parseModelServing's or parseModelRoute's defaults`,
        { timeout: TEST_TIMEOUT_MS },
        async () => {
          const example = parse(readFileSync(join(EXAMPLES_DIR, file), "utf8"));
          const route = example.kind === "ModelRoute";
          const [resource, schema] = route ? [MODEL_ROUTES, ROUTE_SPEC_SCHEMA] : [MODEL_SERVINGS, SPEC_SCHEMA];
          const parsed = route ? parseModelRoute(example) : parseModelServing(example);
          assert.ok(parsed.ok, `${file} does not parse: ${JSON.stringify(parsed)}`);
          await ensureNamespace(admin(), example.metadata.namespace ?? "default");
          const path = resourcePath(resource, {
            namespace: example.metadata.namespace ?? "default",
            query: { fieldValidation: "Strict" },
          });
          const response = await admin().request("POST", path, example);
          if (response.status !== 201) throw new KubeError("POST", path, response);
          assert.deepEqual(response.warnings, [], "the API server warned about the example");
          const created = response.body;
          const served = await admin().get(resource, example.metadata.name, example.metadata.namespace);
          assert.deepEqual(served.spec, created.spec, "read back differs from the create response");
          assert.deepEqual(
            lostValues(example.spec, served.spec, "spec"),
            [],
            "the API server dropped or changed written fields",
          );
          assert.deepEqual(defaultMismatches(schema, served.spec, parsed.value.spec, "spec"), [], "defaults differ");
          assert.equal(served.metadata.generation, 1);
        },
      );
    }
  });

  describe("invalid specs are rejected with readable messages", () => {
    const namespace = "e2e-invalid";
    const cases: readonly {
      readonly name: string;
      readonly mutate: (spec: any) => void;
      readonly expect: readonly RegExp[];
    }[] = [
      {
        name: "negative replicas",
        mutate: (spec) => {
          spec.replicas = -1;
        },
        expect: [/spec\.replicas/, /greater than or equal to 0/],
      },
      {
        name: "a percent of 150%",
        mutate: (spec) => {
          spec.rolloutStrategy = { rollingUpdateConfiguration: { maxUnavailable: "150%" } };
        },
        expect: [/spec\.rolloutStrategy\.rollingUpdateConfiguration\.maxUnavailable/, /"150%"/],
      },
      {
        name: "coordination with ServingGroupRollingUpdate (CEL)",
        mutate: (spec) => {
          spec.rolloutStrategy = { type: "ServingGroupRollingUpdate", coordination: { maxSkew: "10%" } };
        },
        expect: [/spec\.rolloutStrategy/, /coordination applies only to type RoleRollingUpdate/],
      },
      {
        name: "workerReplicas > 0 without workerTemplate (CEL)",
        mutate: (spec) => {
          spec.template.roles[0].workerReplicas = 2;
        },
        expect: [/spec\.template\.roles\[0\]/, /workerTemplate is required when workerReplicas > 0/],
      },
      {
        name: "an unknown enum value",
        mutate: (spec) => {
          spec.recoveryPolicy = "Sometimes";
        },
        expect: [/spec\.recoveryPolicy/, /Unsupported value: "Sometimes"/, /"RoleRecreate"/],
      },
      {
        name: "role-level budgets without RoleRollingUpdate (CEL)",
        mutate: (spec) => {
          spec.template.roles[0].maxSurge = 1;
        },
        expect: [
          /^ModelServing.tandem.dev "invalid-\d+" is invalid: spec: Invalid value: /,
          /role-level maxUnavailable, maxSurge and partition apply only to rolloutStrategy.type RoleRollingUpdate/,
        ],
      },
      {
        name: "duplicate role names (list-type map)",
        mutate: (spec) => {
          spec.template.roles.push(structuredClone(spec.template.roles[0]));
        },
        expect: [/spec\.template\.roles\[1\]/, /Duplicate value/, /"server"/],
      },
    ];

    before(async () => {
      await ensureNamespace(admin(), namespace);
    });

    cases.forEach((c, index) => {
      test(c.name, { timeout: TEST_TIMEOUT_MS }, async (t) => {
        const object = validModelServing(`invalid-${index}`, namespace);
        c.mutate(object.spec);
        const response = await admin().request("POST", resourcePath(MODEL_SERVINGS, { namespace }), object);
        assert.equal(
          response.status,
          422,
          `expected 422 Invalid, got ${response.status}: ${JSON.stringify(response.body)}`,
        );
        assert.equal(response.body.reason, "Invalid");
        t.diagnostic(`message: ${response.body.message}`);
        for (const pattern of c.expect) assert.match(response.body.message, pattern);
      });
    });

    test(
      "an unknown field is refused under fieldValidation=Strict (kubectl's default)",
      { timeout: TEST_TIMEOUT_MS },
      async (t) => {
        const object = validModelServing("unknown-field", namespace);
        object.spec.replicaz = 3;
        const response = await admin().request(
          "POST",
          resourcePath(MODEL_SERVINGS, { namespace, query: { fieldValidation: "Strict" } }),
          object,
        );
        assert.equal(response.status, 400, JSON.stringify(response.body));
        t.diagnostic(`message: ${response.body.message}`);
        assert.match(response.body.message, /unknown field "spec\.replicaz"/);
      },
    );

    test(
      "the valid base object is accepted (the cases above fail for their own reason)",
      { timeout: TEST_TIMEOUT_MS },
      async () => {
        await admin().create(MODEL_SERVINGS, validModelServing("valid-base", namespace));
      },
    );
  });

  describe("invalid ModelRoutes are rejected with readable messages", () => {
    const namespace = "e2e-invalid-routes";
    const validRoute = (name: string): any => ({
      apiVersion: "tandem.dev/v1alpha1",
      kind: "ModelRoute",
      metadata: { name, namespace },
      spec: { model: "m", modelServing: "llm", engine: "vllm", roles: { prefill: "prefill", decode: "decode" } },
    });
    const cases: readonly {
      readonly name: string;
      readonly mutate: (spec: any) => void;
      readonly expect: readonly RegExp[];
    }[] = [
      {
        name: "serve with decode (CEL)",
        mutate: (spec) => {
          spec.roles = { serve: "server", decode: "decode" };
        },
        expect: [/spec\.roles/, /roles must be \{serve\} \(aggregated\) or \{prefill, decode\} \(disaggregated\)/],
      },
      {
        name: "prefill without decode (CEL)",
        mutate: (spec) => {
          spec.roles = { prefill: "prefill" };
        },
        expect: [/spec\.roles/, /roles must be/],
      },
      {
        name: "the same role twice (CEL)",
        mutate: (spec) => {
          spec.roles = { prefill: "pd", decode: "pd" };
        },
        expect: [/spec\.roles/, /prefill and decode must be different roles/],
      },
      {
        name: "kvConnector on an aggregated route (CEL)",
        mutate: (spec) => {
          spec.roles = { serve: "server" };
          spec.kvConnector = "nixl";
        },
        expect: [/spec: Invalid value/, /kvConnector applies only to a disaggregated route/],
      },
      {
        name: "kvConnector nixl with engine sglang (CEL)",
        mutate: (spec) => {
          spec.engine = "sglang";
          spec.kvConnector = "nixl";
        },
        expect: [/kvConnector nixl needs engine vllm/],
      },
      {
        name: "port 0",
        mutate: (spec) => {
          spec.port = 0;
        },
        expect: [/spec\.port/, /greater than or equal to 1/],
      },
      {
        name: "an unknown engine",
        mutate: (spec) => {
          spec.engine = "trt";
        },
        expect: [/spec\.engine/, /Unsupported value: "trt"/],
      },
    ];

    before(async () => {
      await ensureNamespace(admin(), namespace);
    });

    cases.forEach((c, index) => {
      test(c.name, { timeout: TEST_TIMEOUT_MS }, async (t) => {
        const object = validRoute(`invalid-${index}`);
        c.mutate(object.spec);
        assert.equal(parseModelRoute(object).ok, false, "parseModelRoute accepts it");
        const response = await admin().request("POST", resourcePath(MODEL_ROUTES, { namespace }), object);
        assert.equal(
          response.status,
          422,
          `expected 422 Invalid, got ${response.status}: ${JSON.stringify(response.body)}`,
        );
        t.diagnostic(`message: ${response.body.message}`);
        for (const pattern of c.expect) assert.match(response.body.message, pattern);
      });
    });

    test(
      "the valid base route is accepted, and its status written through /status",
      { timeout: TEST_TIMEOUT_MS },
      async () => {
        await admin().create(MODEL_ROUTES, validRoute("valid-base"));
        const status = {
          mode: "Disaggregated",
          endpoints: [
            { role: "decode", ready: 1, draining: 0, revisions: [{ revision: "llm-1", ready: 1, draining: 0 }] },
          ],
          conditions: [{ type: "Ready", status: "True", reason: "EndpointsReady" }],
        };
        const written = await admin().mergePatch(
          MODEL_ROUTES,
          { namespace, name: "valid-base", subresource: "status" },
          { status },
        );
        assert.deepEqual(written.status, status);
      },
    );
  });

  describe("subresources", () => {
    const namespace = "e2e-subresources";

    before(async () => {
      await ensureNamespace(admin(), namespace);
    });

    test("status: /status writes only status, the main resource only spec", { timeout: TEST_TIMEOUT_MS }, async () => {
      const name = "status-demo";
      await admin().create(MODEL_SERVINGS, validModelServing(name, namespace));
      const statusWrite = await admin().mergePatch(
        MODEL_SERVINGS,
        { namespace, name, subresource: "status" },
        {
          spec: { replicas: 7 },
          status: {
            observedGeneration: 1,
            replicas: 1,
            conditions: [{ type: "Available", status: "False", reason: "Starting", message: "waiting" }],
          },
        },
      );
      assert.equal(statusWrite.spec.replicas, 1, "a /status write changed spec");
      assert.equal(statusWrite.status.replicas, 1);
      assert.equal(statusWrite.metadata.generation, 1, "a status write bumped generation");

      const specWrite = await admin().mergePatch(
        MODEL_SERVINGS,
        { namespace, name },
        { spec: { replicas: 2 }, status: { replicas: 99 } },
      );
      assert.equal(specWrite.spec.replicas, 2);
      assert.equal(specWrite.status.replicas, 1, "a main-resource write changed status");
      assert.equal(specWrite.metadata.generation, 2);

      const badStatus = await admin().request(
        "PATCH",
        resourcePath(MODEL_SERVINGS, { namespace, name, subresource: "status" }),
        { status: { conditions: [{ type: "Available", status: "Maybe" }] } },
        "application/merge-patch+json",
      );
      assert.equal(badStatus.status, 422);
      assert.match(badStatus.body.message, /status\.conditions\[0\]\.status: Unsupported value: "Maybe"/);
    });

    test("scale: GET and PUT .../scale, selector from status.labelSelector", { timeout: TEST_TIMEOUT_MS }, async () => {
      const name = "scale-demo";
      const scalePath = resourcePath(MODEL_SERVINGS, { namespace, name, subresource: "scale" });
      const object = validModelServing(name, namespace);
      object.spec.replicas = 2;
      await admin().create(MODEL_SERVINGS, object);

      const initial = await admin().call("GET", scalePath);
      assert.equal(initial.apiVersion, "autoscaling/v1");
      assert.equal(initial.kind, "Scale");
      assert.equal(initial.spec.replicas, 2);

      const selector = `tandem.dev/modelserving=${name}`;
      await admin().mergePatch(
        MODEL_SERVINGS,
        { namespace, name, subresource: "status" },
        { status: { replicas: 2, labelSelector: selector } },
      );
      const observed = await admin().call("GET", scalePath);
      assert.equal(observed.status.replicas, 2);
      assert.equal(observed.status.selector, selector);

      const scaled = await admin().call("PUT", scalePath, { ...observed, spec: { replicas: 5 } });
      assert.equal(scaled.spec.replicas, 5);
      const stored = await admin().get(MODEL_SERVINGS, name, namespace);
      assert.equal(stored.spec.replicas, 5);
      assert.equal(stored.metadata.generation, 2);

      const negative = await admin().request("PUT", scalePath, { ...scaled, spec: { replicas: -1 } });
      assert.equal(negative.status, 422);
      assert.match(negative.body.message, /spec\.replicas/);
    });
  });
});
