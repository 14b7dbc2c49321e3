import { test } from "node:test";
import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import { runTandem } from "../../test/cli-process.ts";
import { renderDeploymentYaml, renderRbacYaml } from "../kube/install.ts";
import { installOptionsOf, runManifests } from "./install.ts";

test("tandem manifests: the install flags become the install options (the Helm chart's values)", () => {
  const flags = {
    namespace: "ops",
    watchNamespace: "ml",
    image: "registry.example/tandem:1",
    imagePullPolicy: "Never",
    controllerReplicas: "1",
    routerReplicas: "0",
    router: true,
    dashboardRole: false,
    metrics: false,
    controllerMetricsPort: "18080",
    routerMetricsPort: "19090",
  };
  const { options, problems } = installOptionsOf(flags);
  assert.deepEqual(problems, []);
  assert.deepEqual(options, {
    namespace: "ops",
    watchNamespace: "ml",
    image: "registry.example/tandem:1",
    imagePullPolicy: "Never",
    controllerReplicas: 1,
    routerReplicas: 0,
    router: true,
    dashboardRole: false,
    metrics: false,
    controllerMetricsPort: 18080,
    routerMetricsPort: 19090,
  });
  assert.deepEqual(runManifests({ ...flags, only: "rbac" }), {
    exitCode: 0,
    stdout: renderRbacYaml(options),
    stderr: "",
  });
  assert.deepEqual(runManifests({ router: false, only: "deployment" }), {
    exitCode: 0,
    stdout: renderDeploymentYaml({ router: false }),
    stderr: "",
  });
});

test("tandem manifests with bad flags names every one and why, prints nothing else, and exits 1 (process)", async () => {
  const result = await runTandem([
    "manifests",
    "--watch-namespace",
    "Team_A",
    "--controller-replicas",
    "-1",
    "--router-replicas",
    "2.5",
    "--router-metrics-port",
    "8000",
    "--controller-metrics-port",
    "0",
    "--image-pull-policy",
    "sometimes",
    "--image",
    " ",
    "--only",
    "all",
  ]);
  assert.equal(result.code, 1);
  assert.equal(result.stdout, "");
  assert.equal(
    result.stderr,
    [
      `tandem manifests: --watch-namespace: must be a namespace name (a DNS-1123 label: lower-case letters, digits and '-', at most 63), not "Team_A"`,
      "tandem manifests: --image: must name an image, such as registry.example/tandem:0.1.0",
      `tandem manifests: --image-pull-policy: must be one of Always, IfNotPresent, Never, not "sometimes"`,
      `tandem manifests: --controller-replicas: must be a whole number of replicas, 0 to 100, not "-1"`,
      `tandem manifests: --router-replicas: must be a whole number of replicas, 0 to 100, not "2.5"`,
      `tandem manifests: --controller-metrics-port: must be a TCP port, 1 to 65535, not "0"`,
      "tandem manifests: --router-metrics-port: must differ from the router's API port 8000",
      `tandem manifests: --only: must be one of crd, rbac, deployment, not "all"`,
      "",
    ].join("\n"),
  );
});

test("tandem manifests --watch-namespace ml --no-router: Roles in ml, no router objects (process)", async () => {
  const result = await runTandem(["manifests", "--only", "rbac", "--watch-namespace", "ml", "--no-router"]);
  assert.equal(result.code, 0, result.stderr);
  const objects = parseAllDocuments(result.stdout)
    .map((document) => document.toJS() as { kind: string; metadata: { name: string; namespace?: string } } | null)
    .filter((object) => object !== null);
  assert.deepEqual(
    objects
      .filter((object) => object.metadata.namespace === "ml")
      .map((object) => `${object.kind}/${object.metadata.name}`),
    // The dashboard's Role in ml stays unbound: `tandem manifests` cannot know its users.
    ["Role/tandem-controller-watched", "RoleBinding/tandem-controller-watched", "Role/tandem-dashboard-watched"],
  );
  assert.ok(!objects.some((object) => object.metadata.name.startsWith("tandem-router")));
});
