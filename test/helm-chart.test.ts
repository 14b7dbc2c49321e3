/**
 * The Helm chart's files that must not drift from the code (no helm needed; test/e2e/helm.e2e.ts
 * renders the chart with a real helm): crds/ is exactly `tandem crd`, templates/_rules.tpl is
 * generated from the same permissions as `tandem manifests`, appVersion is the package's version,
 * and values.yaml passes values.schema.json with the defaults `tandem manifests` has.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Ajv } from "ajv";
import { parse } from "yaml";
import { renderCrdYaml } from "../src/api/crd.ts";
import { DEFAULT_IMAGE, installSettings, renderHelmRules } from "../src/kube/install.ts";

const ROOT = join(import.meta.dirname, "..");
const CHART = join(ROOT, "deploy", "helm", "tandem");
const read = (path: string): string => readFileSync(join(CHART, path), "utf8");
const values = (): any => parse(read("values.yaml"));

function validator(): (data: unknown) => string[] {
  const ajv = new Ajv({ allErrors: true, strict: true, strictTypes: false });
  const validate = ajv.compile(JSON.parse(read("values.schema.json")));
  return (data) =>
    validate(data) ? [] : (validate.errors ?? []).map((error) => `${error.instancePath} ${error.message ?? ""}`);
}

test("the chart's crds/ holds exactly what `tandem crd` prints (regenerate with `npm run crd`)", () => {
  assert.ok(
    read("crds/tandem.yaml") === renderCrdYaml(),
    "deploy/helm/tandem/crds/tandem.yaml is out of date: run `npm run crd`",
  );
});

test("the chart's RBAC rules are generated from PERMISSIONS and ROUTER_PERMISSIONS (regenerate with `npm run manifests`)", () => {
  assert.ok(
    read("templates/_rules.tpl") === renderHelmRules(),
    "deploy/helm/tandem/templates/_rules.tpl is out of date: run `npm run manifests`",
  );
});

test("Chart.yaml: apiVersion v2, appVersion the package's version, and the default image that version of `tandem manifests`", () => {
  const chart = parse(read("Chart.yaml"));
  const packageJson = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
  assert.equal(chart.apiVersion, "v2");
  assert.equal(chart.appVersion, packageJson.version);
  assert.equal(`${values().image.repository}:${chart.appVersion}`, DEFAULT_IMAGE);
});

test("values.yaml passes values.schema.json and has the defaults of `tandem manifests`", () => {
  const defaults = values();
  assert.deepEqual(validator()(defaults), []);
  const settings = installSettings();
  assert.deepEqual(
    [
      defaults.image.pullPolicy,
      defaults.watchNamespace,
      defaults.metrics.enabled,
      defaults.controller.replicas,
      defaults.controller.metricsPort,
      defaults.router.enabled,
      defaults.router.replicas,
      defaults.router.metricsPort,
      defaults.dashboardRole.create,
    ],
    [
      settings.imagePullPolicy,
      "",
      settings.metrics,
      settings.controllerReplicas,
      settings.controllerMetricsPort,
      settings.router,
      settings.routerReplicas,
      settings.routerMetricsPort,
      settings.dashboardRole,
    ],
  );
});

test("values.schema.json refuses a misspelt value, a wrong type and a value out of range, naming the field", () => {
  const validate = validator();
  const withValue = (change: (v: any) => void): string[] => {
    const v = values();
    change(v);
    return validate(v);
  };
  assert.ok(
    withValue((v) => (v.controller.replica = 3)).some(
      (line) => line.startsWith("/controller ") && line.includes("additional properties"),
    ),
  );
  assert.ok(withValue((v) => (v.router.replicas = "two")).some((line) => line.startsWith("/router/replicas ")));
  assert.ok(
    withValue((v) => (v.controller.metricsPort = 70_000)).some((line) => line.startsWith("/controller/metricsPort ")),
  );
  assert.ok(withValue((v) => (v.watchNamespace = "Team_A")).some((line) => line.startsWith("/watchNamespace ")));
  assert.ok(withValue((v) => (v.image.pullPolicy = "Sometimes")).some((line) => line.startsWith("/image/pullPolicy ")));
  assert.deepEqual(
    withValue((v) => (v.watchNamespace = "team-a")),
    [],
  );
});
