/**
 * The Helm chart (deploy/helm/tandem) rendered by a real helm, built from helm.sh/helm/v4 by
 * `bash hack/helm/build.sh`: `helm lint`, then `helm template --include-crds` compared object by
 * object with `tandem manifests` for the same settings — defaults, a namespace scope, the router
 * disabled, another image, metrics off, other replicas and ports — and the values only the chart
 * has (scheduling, pod annotations, pull secrets, resources, ServiceAccounts) checked where
 * Kubernetes reads them. The comparison ignores only what Helm adds or leaves to itself: its four
 * labels (HELM_LABELS) on object metadata, and the Namespace, which `helm install
 * --create-namespace` makes. Bad values are refused by values.schema.json naming the field.
 *
 * On a real kube-apiserver (hack/kube-testenv): every rendered object is accepted by a strict
 * server-side dry run, and a namespace-scoped install works: the controller, watching one
 * namespace under the chart's Roles, runs a ModelServing there without one refused request, and
 * is refused elsewhere.
 *
 * Run: node --test test/e2e/helm.e2e.ts (after both build scripts).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, parseAllDocuments } from "yaml";
import { type ProcessResult, runProcess, runTandem } from "../cli-process.ts";
import { type Cluster, startCluster } from "./cluster.ts";
import { APPLY_PATCH, type KubeClient, KubeError, MODEL_SERVINGS, type Resource, resourcePath } from "./client.ts";
import {
  ensureNamespace,
  forbiddenLines,
  installCrd,
  RBAC_RESOURCES,
  startTestController,
  type TestController,
} from "./env.ts";
import { waitUntil } from "./observe.ts";
import { waitFor } from "./wait.ts";

const REPO_ROOT = join(import.meta.dirname, "..", "..");
const CHART = join(REPO_ROOT, "deploy", "helm", "tandem");
/** The labels the chart adds to object metadata beside Tandem's own; the only difference the comparison ignores. */
const HELM_LABELS = [
  "helm.sh/chart",
  "app.kubernetes.io/managed-by",
  "app.kubernetes.io/instance",
  "app.kubernetes.io/version",
];
const RELEASE = "tandem";
const NAMESPACE = "tandem-system";
const HELM_TIMEOUT_MS = 60_000;
const CLUSTER_START_TIMEOUT_MS = 180_000;
const TEST_TIMEOUT_MS = 120_000;

type KubeObject = Record<string, any>;

/** `$TANDEM_HELM_BIN/helm`, else where hack/helm/build.sh puts it for the current go.sum. */
function helmPath(): string {
  const explicit = process.env["TANDEM_HELM_BIN"];
  const dir =
    explicit !== undefined && explicit !== ""
      ? explicit
      : spawnSync("bash", [join(REPO_ROOT, "hack", "helm", "build.sh"), "--print-bin-dir"], {
          encoding: "utf8",
        }).stdout.trim();
  const path = join(dir, "helm");
  if (!existsSync(path)) throw new Error(`${path} not found; run: bash hack/helm/build.sh`);
  return path;
}

/** Helm's config, cache and data under one throwaway directory: nothing of the user's is read or written. */
const HELM_HOME = mkdtempSync(join(tmpdir(), "tandem-helm-"));
after(() => rmSync(HELM_HOME, { recursive: true, force: true }));

function helm(args: readonly string[]): Promise<ProcessResult> {
  const env = {
    ...process.env,
    HELM_CONFIG_HOME: join(HELM_HOME, "config"),
    HELM_CACHE_HOME: join(HELM_HOME, "cache"),
    HELM_DATA_HOME: join(HELM_HOME, "data"),
  };
  return runProcess(helmPath(), args, { env, timeoutMs: HELM_TIMEOUT_MS });
}

function documents(yaml: string): KubeObject[] {
  return parseAllDocuments(yaml)
    .map((document) => document.toJS() as KubeObject | null)
    .filter((object): object is KubeObject => object !== null);
}

const keyOf = (object: KubeObject): string =>
  `${object["kind"]} ${object["metadata"]?.namespace ?? "-"}/${object["metadata"]?.name}`;

/** Objects by `kind namespace/name`, in key order. */
function byKey(objects: readonly KubeObject[]): Map<string, KubeObject> {
  const map = new Map(objects.map((object) => [keyOf(object), object]));
  assert.equal(map.size, objects.length, "two objects with one kind, namespace and name");
  return new Map([...map].sort(([a], [b]) => a.localeCompare(b)));
}

/** `helm template` of the chart with its CRDs; each object's Helm labels checked present, then removed. */
async function chartObjects(args: readonly string[], namespace = NAMESPACE): Promise<Map<string, KubeObject>> {
  const result = await helm(["template", RELEASE, CHART, "--namespace", namespace, "--include-crds", ...args]);
  assert.equal(result.code, 0, result.stderr);
  const objects = documents(result.stdout);
  for (const object of objects) {
    if (object["kind"] === "CustomResourceDefinition") continue; // crds/ is copied verbatim: `tandem crd`
    const labels = object["metadata"].labels as Record<string, string>;
    assert.deepEqual(
      HELM_LABELS.filter((label) => labels[label] === undefined),
      [],
      `${keyOf(object)} lacks Helm's labels`,
    );
    object["metadata"].labels = Object.fromEntries(
      Object.entries(labels).filter(([label]) => !HELM_LABELS.includes(label)),
    );
  }
  return byKey(objects);
}

/** `tandem manifests` (run as a process), without its Namespace. */
async function manifestObjects(flags: readonly string[], namespace = NAMESPACE): Promise<Map<string, KubeObject>> {
  const result = await runTandem(["manifests", "--namespace", namespace, ...flags]);
  assert.equal(result.code, 0, result.stderr);
  return byKey(documents(result.stdout).filter((object) => object["kind"] !== "Namespace"));
}

function assertSameObjects(chart: Map<string, KubeObject>, manifests: Map<string, KubeObject>): void {
  assert.deepEqual([...chart.keys()], [...manifests.keys()]);
  for (const [key, object] of chart) assert.deepEqual(object, manifests.get(key), key);
}

interface Variant {
  readonly name: string;
  /** helm template arguments (--set ...). */
  readonly helm: readonly string[];
  /** tandem manifests flags for the same settings. */
  readonly manifests: readonly string[];
  readonly namespace?: string;
}

const VARIANTS: readonly Variant[] = [
  { name: "default values", helm: [], manifests: [] },
  {
    name: "one namespace watched (Roles there), installed in another",
    namespace: "ops",
    helm: ["--set", "watchNamespace=ml"],
    manifests: ["--watch-namespace", "ml"],
  },
  {
    name: "the release namespace watched",
    helm: ["--set", `watchNamespace=${NAMESPACE}`],
    manifests: ["--watch-namespace", NAMESPACE],
  },
  { name: "router disabled", helm: ["--set", "router.enabled=false"], manifests: ["--no-router"] },
  {
    name: "dashboard roles left out",
    helm: ["--set", "dashboardRole.create=false"],
    manifests: ["--no-dashboard-role"],
  },
  {
    name: "another image and pull policy",
    helm: [
      "--set",
      "image.repository=registry.example/ml/tandem",
      "--set-string",
      "image.tag=0.2.0-rc.1",
      "--set",
      "image.pullPolicy=Always",
    ],
    manifests: ["--image", "registry.example/ml/tandem:0.2.0-rc.1", "--image-pull-policy", "Always"],
  },
  { name: "metrics off", helm: ["--set", "metrics.enabled=false"], manifests: ["--no-metrics"] },
  {
    name: "replicas and metrics ports",
    helm: [
      "--set",
      "controller.replicas=1",
      "--set",
      "router.replicas=5",
      "--set",
      "controller.metricsPort=18080",
      "--set",
      "router.metricsPort=19090",
    ],
    manifests: [
      "--controller-replicas",
      "1",
      "--router-replicas",
      "5",
      "--controller-metrics-port",
      "18080",
      "--router-metrics-port",
      "19090",
    ],
  },
];

describe("helm chart", { timeout: 10 * HELM_TIMEOUT_MS }, () => {
  test(
    "helm lint --strict passes with the default values and with a namespace scope",
    { timeout: HELM_TIMEOUT_MS },
    async () => {
      for (const args of [[], ["--set", "watchNamespace=ml", "--set", "router.enabled=false"]]) {
        const result = await helm(["lint", CHART, "--strict", ...args]);
        assert.equal(result.code, 0, `${result.stdout}${result.stderr}`);
        assert.match(result.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
      }
    },
  );

  for (const variant of VARIANTS) {
    test(
      `helm template renders what tandem manifests does: ${variant.name}`,
      { timeout: HELM_TIMEOUT_MS },
      async () => {
        assertSameObjects(
          await chartObjects(variant.helm, variant.namespace),
          await manifestObjects(variant.manifests, variant.namespace),
        );
      },
    );
  }

  test(
    "the CRDs are crds/, exactly `tandem crd`; helm template leaves them out without --include-crds",
    { timeout: HELM_TIMEOUT_MS },
    async () => {
      const crds = [...(await chartObjects([])).values()].filter(
        (object) => object["kind"] === "CustomResourceDefinition",
      );
      assert.deepEqual(crds, [...byKey(documents((await runTandem(["crd"])).stdout)).values()]);
      const withoutCrds = await helm(["template", RELEASE, CHART, "--namespace", NAMESPACE]);
      assert.deepEqual(
        documents(withoutCrds.stdout).filter((object) => object["kind"] === "CustomResourceDefinition"),
        [],
      );
    },
  );

  test(
    "values only the chart has land where Kubernetes reads them; the rest is tandem manifests' defaults",
    { timeout: HELM_TIMEOUT_MS },
    async () => {
      const chart = await chartObjects(["--values", join(import.meta.dirname, "helm-values-extra.yaml")]);
      const expected = await manifestObjects([]);
      applyExtraValues(expected, parse(readFileSync(join(import.meta.dirname, "helm-values-extra.yaml"), "utf8")));
      assertSameObjects(chart, expected);
    },
  );

  test(
    "NOTES.txt says where Tandem runs, what it watches, how to wait for it and that CRDs are not upgraded",
    { timeout: HELM_TIMEOUT_MS },
    async () => {
      const result = await helm([
        "install",
        RELEASE,
        CHART,
        "--namespace",
        "ops",
        "--set",
        "watchNamespace=ml",
        "--dry-run=client",
      ]);
      assert.equal(result.code, 0, result.stderr);
      const notes = result.stdout.slice(result.stdout.indexOf("NOTES:"));
      for (const line of [
        `Tandem ${parse(readFileSync(join(CHART, "Chart.yaml"), "utf8")).appVersion} is installed in namespace ops, managing ModelServings in namespace ml only.`,
        "kubectl -n ops rollout status deployment/tandem-controller",
        "kubectl -n ops rollout status deployment/tandem-router",
        "kubectl get modelservings -n ml",
        "tandem crd | kubectl apply --server-side -f -",
      ]) {
        assert.ok(notes.includes(line), `NOTES lack ${JSON.stringify(line)}:\n${notes}`);
      }
    },
  );

  test("bad values are refused before anything renders, naming the field", { timeout: HELM_TIMEOUT_MS }, async () => {
    const cases: readonly (readonly [string, RegExp])[] = [
      ["controller.replica=3", /at '\/controller': additional properties 'replica' not allowed/],
      ["router.replicas=-1", /at '\/router\/replicas': minimum: got -1, want 0/],
      ["controller.replicas=two", /at '\/controller\/replicas': got string, want integer/],
      ["watchNamespace=Team_A", /at '\/watchNamespace': 'Team_A' does not match pattern/],
      [
        "image.pullPolicy=Sometimes",
        /at '\/image\/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'/,
      ],
      ["router.metricsPort=8000", /router\.metricsPort: must differ from 8000, the router's OpenAI API port/],
    ];
    for (const [value, message] of cases) {
      const result = await helm(["template", RELEASE, CHART, "--set", value]);
      assert.equal(result.code, 1, value);
      assert.equal(result.stdout, "", value);
      assert.match(result.stderr, message, value);
    }
  });
});

/**
 * What helm-values-extra.yaml asks of `tandem manifests`' default objects: scheduling, pull
 * secrets, pod annotations beside the metrics ones and resources on both pods; the controller's
 * ServiceAccount renamed and annotated, the router's not created but still bound and used.
 */
function applyExtraValues(objects: Map<string, KubeObject>, values: any): void {
  const components = [
    { name: "tandem-controller", values: values.controller, defaultAccount: "tandem-controller" },
    { name: "tandem-router", values: values.router, defaultAccount: "tandem-router" },
  ];
  for (const component of components) {
    const pod = objects.get(`Deployment ${NAMESPACE}/${component.name}`)!["spec"].template;
    Object.assign(pod.metadata.annotations, component.values.podAnnotations);
    Object.assign(pod.spec, {
      imagePullSecrets: values.imagePullSecrets,
      nodeSelector: component.values.nodeSelector,
      tolerations: component.values.tolerations,
      affinity: component.values.affinity,
    });
    pod.spec.containers[0].resources = component.values.resources;
    const account = component.values.serviceAccount;
    pod.spec.serviceAccountName = account.name;
    for (const object of objects.values()) {
      for (const subject of object["subjects"] ?? [])
        if (subject.name === component.defaultAccount) subject.name = account.name;
    }
    const serviceAccount = objects.get(`ServiceAccount ${NAMESPACE}/${component.defaultAccount}`)!;
    objects.delete(`ServiceAccount ${NAMESPACE}/${component.defaultAccount}`);
    if (account.create === true) {
      serviceAccount["metadata"].name = account.name;
      serviceAccount["metadata"].annotations = account.annotations;
      objects.set(keyOf(serviceAccount), serviceAccount);
    }
  }
  const sorted = byKey([...objects.values()]);
  objects.clear();
  for (const [key, object] of sorted) objects.set(key, object);
}

const DEPLOYMENTS: Resource = { group: "apps", version: "v1", plural: "deployments", namespaced: true };
const SERVICES: Resource = { group: "", version: "v1", plural: "services", namespaced: true };
const PODS: Resource = { group: "", version: "v1", plural: "pods", namespaced: true };
const EVENTS: Resource = { group: "", version: "v1", plural: "events", namespaced: true };

function resourceOf(object: KubeObject): Resource {
  const resource = { ...RBAC_RESOURCES, Deployment: DEPLOYMENTS, Service: SERVICES }[object["kind"] as string];
  if (resource === undefined) throw new Error(`no resource for ${keyOf(object)}`);
  return resource;
}

/** Server-side apply of `object`; with `dryRun` validated strictly (unknown fields refused) and not stored. */
async function apply(admin: KubeClient, object: KubeObject, dryRun: boolean): Promise<void> {
  const query: Record<string, string> = {
    fieldManager: "helm-e2e",
    force: "true",
    fieldValidation: "Strict",
    ...(dryRun ? { dryRun: "All" } : {}),
  };
  const path = resourcePath(resourceOf(object), {
    name: object["metadata"].name,
    namespace: object["metadata"].namespace,
    query,
  });
  const response = await admin.request("PATCH", path, object, APPLY_PATCH);
  if (response.status !== 200 && response.status !== 201) throw new KubeError("PATCH", path, response);
  assert.deepEqual(response.warnings, [], keyOf(object));
}

describe("helm chart on kube-apiserver", { timeout: CLUSTER_START_TIMEOUT_MS + 3 * TEST_TIMEOUT_MS }, () => {
  let cluster: Cluster;
  let controller: TestController | undefined;

  before(
    async () => {
      // One KWOK node runs the namespace-scoped install's pods.
      cluster = await startCluster({ startTimeoutMs: CLUSTER_START_TIMEOUT_MS, nodes: { count: 1, gpusPerNode: 8 } });
      await installCrd(cluster.admin);
      for (const name of [NAMESPACE, "ml", "other"]) await ensureNamespace(cluster.admin, name);
    },
    { timeout: CLUSTER_START_TIMEOUT_MS + TEST_TIMEOUT_MS },
  );

  after(async () => {
    await controller?.running.stop();
    await cluster.stop();
  });

  test(
    "every object the chart renders, with every value set, passes a strict server-side dry run",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const variants = [
        [],
        ["--set", "watchNamespace=ml"],
        ["--values", join(import.meta.dirname, "helm-values-extra.yaml")],
      ];
      for (const args of variants) {
        for (const object of (await chartObjects(args)).values()) {
          if (object["kind"] !== "CustomResourceDefinition") await apply(cluster.admin, object, true);
        }
      }
    },
  );

  test(
    "a namespace-scoped install: the controller runs a ModelServing in its namespace under the chart's Roles, and is refused elsewhere",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const objects = [...(await chartObjects(["--set", "watchNamespace=ml"])).values()];
      for (const object of objects.filter((candidate) => candidate["kind"] in RBAC_RESOURCES))
        await apply(cluster.admin, object, false);
      controller = await startTestController(cluster, { namespace: "ml" });
      const serving = parse(readFileSync(join(REPO_ROOT, "deploy", "examples", "single-role.yaml"), "utf8"));
      serving.metadata.namespace = "ml";
      await cluster.admin.create(MODEL_SERVINGS, serving);
      await waitUntil(cluster.admin, "ml", serving.metadata.name, "Available", 60_000);
      assert.deepEqual(forbiddenLines(controller.logger), [], "the controller was refused by the chart's RBAC");
      // A refused Event is dropped without a log line, so look for the Events themselves.
      const events = await waitFor(
        async () => {
          const items: KubeObject[] = (await cluster.admin.list(EVENTS, "ml")).items;
          const ours = items.filter((event) => event["involvedObject"].name === serving.metadata.name);
          return ours.length > 0 ? ours : undefined;
        },
        { timeoutMs: 30_000, what: "the controller's Events on the ModelServing in ml" },
      );
      assert.ok(events.some((event) => event["reason"] === "InstanceCreated"));
      assert.equal((await cluster.controller.request("GET", resourcePath(PODS, { namespace: "ml" }))).status, 200);
      assert.equal((await cluster.controller.request("GET", resourcePath(PODS, { namespace: "other" }))).status, 403);
      assert.equal(
        (await cluster.controller.request("GET", resourcePath(PODS))).status,
        403,
        "no pods across the cluster",
      );
    },
  );
});
