import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { DASHBOARD_PERMISSIONS, ROUTER_PERMISSIONS } from "./resources.ts";
import { renderManifests } from "../cli/install.ts";
import {
  dashboardRbacManifests,
  deploymentManifest,
  policyRules,
  rbacManifests,
  renderDeploymentYaml,
  renderRbacYaml,
  ROLE_SCOPES,
  routerDeploymentManifest,
  routerRbacManifests,
  routerServiceManifest,
} from "./install.ts";

const DEPLOY_DIR = join(import.meta.dirname, "..", "..", "deploy");

test("deploy/rbac.yaml and deploy/deployment.yaml are current (regenerate with `npm run manifests`)", () => {
  assert.equal(readFileSync(join(DEPLOY_DIR, "rbac.yaml"), "utf8"), renderRbacYaml());
  assert.equal(readFileSync(join(DEPLOY_DIR, "deployment.yaml"), "utf8"), renderDeploymentYaml());
});

test("tandem manifests prints the CRDs (ModelServing, ModelRoute), the RBAC objects, the Deployments and the router Service, in install order", () => {
  const kinds = parseAllDocuments(renderManifests(undefined))
    .map((document) => (document.toJS() as { kind?: string } | null)?.kind)
    .filter((kind) => kind !== undefined);
  assert.deepEqual(kinds, [
    "CustomResourceDefinition",
    "CustomResourceDefinition",
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "Role",
    "Deployment",
    "Deployment",
    "Service",
  ]);
});

test("the router's ClusterRole and Role are exactly ROUTER_PERMISSIONS: reads of routes, servings, pods and revisions, route status and pod (confirmation) patches; its Leases only in its own namespace", () => {
  const role = routerRbacManifests().find((manifest) => manifest["kind"] === "ClusterRole");
  assert.deepEqual(role?.["rules"], [
    { apiGroups: ["tandem.dev"], resources: ["modelroutes"], verbs: ["list", "watch"] },
    { apiGroups: ["tandem.dev"], resources: ["modelroutes/status"], verbs: ["patch"] },
    { apiGroups: ["tandem.dev"], resources: ["modelservings"], verbs: ["list", "watch"] },
    { apiGroups: [""], resources: ["pods"], verbs: ["list", "watch", "patch"] },
    { apiGroups: ["apps"], resources: ["controllerrevisions"], verbs: ["list", "watch"] },
  ]);
  const manifests = routerRbacManifests({ namespace: "ops" });
  const leases = manifests.find((manifest) => manifest["kind"] === "Role");
  assert.deepEqual(
    [leases?.["metadata"], leases?.["rules"]],
    [
      {
        name: "tandem-router",
        namespace: "ops",
        labels: { "app.kubernetes.io/name": "tandem", "app.kubernetes.io/component": "router" },
      },
      [{ apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["create", "patch", "delete"] }],
    ],
  );
  for (const kind of ["ClusterRoleBinding", "RoleBinding"]) {
    assert.deepEqual(manifests.find((manifest) => manifest["kind"] === kind)?.["subjects"], [
      { kind: "ServiceAccount", name: "tandem-router", namespace: "ops" },
    ]);
  }
});

test("the router Deployment: 2 replicas of tandem router, the controller's image and security context, probes; the Service maps 8000 and metrics", () => {
  const deployment = routerDeploymentManifest({ image: "example/tandem:1" }) as any;
  const controller = deploymentManifest({ image: "example/tandem:1" }) as any;
  const pod = deployment.spec.template.spec;
  const container = pod.containers[0];
  assert.equal(deployment.spec.replicas, 2);
  assert.equal(container.image, controller.spec.template.spec.containers[0].image);
  assert.equal(container.args[0], "router");
  assert.ok(container.args.includes("--listen=0.0.0.0:8000"));
  assert.equal(container.livenessProbe.httpGet.path, "/healthz");
  assert.equal(container.readinessProbe.httpGet.path, "/readyz");
  assert.deepEqual(pod.securityContext, controller.spec.template.spec.securityContext);
  assert.deepEqual(container.securityContext, controller.spec.template.spec.containers[0].securityContext);
  assert.equal(pod.serviceAccountName, "tandem-router");
  // Each replica's --id and Lease namespace (DESIGN §3.1), from the downward API.
  assert.deepEqual(container.env, [
    { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
    { name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
  ]);
  const service = routerServiceManifest() as any;
  assert.deepEqual(
    service.spec.ports.map((port: any) => [port.port, port.targetPort]),
    [
      [8000, "http"],
      [9090, "metrics"],
    ],
  );
  assert.deepEqual(service.spec.selector, deployment.spec.selector.matchLabels);
});

test("the ClusterRole is least privilege: no wildcards, no secrets, Leases only read (router Leases) and written through the namespaced Role", () => {
  const rules = policyRules(ROLE_SCOPES.clusterRole);
  assert.ok(rules.every((rule) => !JSON.stringify(rule).includes("*")));
  assert.ok(!JSON.stringify(rules).includes("secrets"));
  assert.deepEqual(
    rules.filter((rule) => JSON.stringify(rule).includes("leases")),
    [{ apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["list", "watch"] }],
  );
  const role = rbacManifests().find((manifest) => manifest["kind"] === "Role");
  assert.deepEqual(role?.["rules"], [
    { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["get", "create", "update"] },
  ]);
});

test("the Deployment: 2 replicas electing a leader, probes, requests, non-root, read-only root filesystem", () => {
  const deployment = deploymentManifest({ image: "example/tandem:1" }) as any;
  const pod = deployment.spec.template.spec;
  const container = pod.containers[0];
  assert.equal(deployment.spec.replicas, 2);
  assert.equal(container.image, "example/tandem:1");
  assert.ok(container.args.includes("--leader-elect"));
  assert.ok(container.args.includes("--metrics-addr=0.0.0.0:8080"));
  assert.equal(container.livenessProbe.httpGet.path, "/healthz");
  assert.equal(container.readinessProbe.httpGet.path, "/readyz");
  assert.ok(container.resources.requests.cpu && container.resources.requests.memory);
  assert.equal(pod.securityContext.runAsNonRoot, true);
  assert.equal(container.securityContext.readOnlyRootFilesystem, true);
  assert.equal(container.securityContext.allowPrivilegeEscalation, false);
  assert.equal(pod.serviceAccountName, "tandem-controller");
});

const rbacApi = "rbac.authorization.k8s.io/v1";
const summary = (manifests: readonly Record<string, unknown>[]): string[] =>
  manifests.map((manifest) => {
    const metadata = manifest["metadata"] as { name: string; namespace?: string };
    return `${String(manifest["kind"])} ${metadata.namespace ?? "-"}/${metadata.name}`;
  });

test("a namespace scope: the watched namespace gets a Role of what the ClusterRole held; the controller's ClusterRole keeps only its reads of router Leases, the router has none", () => {
  const controller = rbacManifests({ namespace: "ops", watchNamespace: "ml" });
  assert.deepEqual(summary(controller), [
    "Namespace -/ops",
    "ServiceAccount ops/tandem-controller",
    "ClusterRole -/tandem-controller",
    "ClusterRoleBinding -/tandem-controller",
    "Role ops/tandem-controller",
    "RoleBinding ops/tandem-controller",
    "Role ml/tandem-controller-watched",
    "RoleBinding ml/tandem-controller-watched",
  ]);
  const rulesOf = (manifests: readonly Record<string, unknown>[], kind: string, namespace?: string): unknown =>
    manifests.find(
      (manifest) =>
        manifest["kind"] === kind && (manifest["metadata"] as { namespace?: string }).namespace === namespace,
    )?.["rules"];
  assert.deepEqual(rulesOf(controller, "ClusterRole"), [
    { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["list", "watch"] },
  ]);
  assert.deepEqual(rulesOf(controller, "Role", "ml"), policyRules("cluster"));
  assert.deepEqual(
    [...policyRules("cluster"), ...policyRules("allNamespaces")],
    policyRules(ROLE_SCOPES.clusterRole),
    "every rule is in one role or the other",
  );
  const binding = controller.find(
    (manifest) =>
      manifest["kind"] === "RoleBinding" && (manifest["metadata"] as { namespace: string }).namespace === "ml",
  );
  assert.deepEqual(binding, {
    apiVersion: rbacApi,
    kind: "RoleBinding",
    metadata: {
      name: "tandem-controller-watched",
      namespace: "ml",
      labels: { "app.kubernetes.io/name": "tandem", "app.kubernetes.io/component": "controller" },
    },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "tandem-controller-watched" },
    subjects: [{ kind: "ServiceAccount", name: "tandem-controller", namespace: "ops" }],
  });
  const router = routerRbacManifests({ namespace: "ops", watchNamespace: "ml" });
  assert.deepEqual(summary(router), [
    "ServiceAccount ops/tandem-router",
    "Role ops/tandem-router",
    "RoleBinding ops/tandem-router",
    "Role ml/tandem-router-watched",
    "RoleBinding ml/tandem-router-watched",
  ]);
  assert.deepEqual(rulesOf(router, "Role", "ml"), policyRules("cluster", ROUTER_PERMISSIONS));
  // Both watch only that namespace.
  assert.ok(
    (deploymentManifest({ watchNamespace: "ml" }) as any).spec.template.spec.containers[0].args.includes(
      "--namespace=ml",
    ),
  );
  assert.ok(
    (routerDeploymentManifest({ watchNamespace: "ml" }) as any).spec.template.spec.containers[0].args.includes(
      "--namespace=ml",
    ),
  );
  assert.ok(
    !(deploymentManifest() as any).spec.template.spec.containers[0].args.some((arg: string) =>
      arg.startsWith("--namespace"),
    ),
  );
});

test("the router can be left out, metrics unadvertised, replicas, ports and the pull policy chosen", () => {
  const kinds = (yaml: string): string[] =>
    parseAllDocuments(yaml)
      .map((document) => document.toJS() as { kind: string; metadata: { name: string } } | null)
      .filter((object) => object !== null)
      .map((object) => `${object.kind}/${object.metadata.name}`);
  assert.ok(!kinds(renderRbacYaml({ router: false })).some((name) => name.includes("tandem-router")));
  assert.deepEqual(kinds(renderDeploymentYaml({ router: false })), ["Deployment/tandem-controller"]);
  const quiet = { metrics: false } as const;
  assert.equal((deploymentManifest(quiet) as any).spec.template.metadata.annotations, undefined);
  assert.deepEqual(
    (routerServiceManifest(quiet) as any).spec.ports.map((port: any) => port.name),
    ["http"],
  );
  assert.deepEqual((deploymentManifest() as any).spec.template.metadata.annotations, {
    "prometheus.io/scrape": "true",
    "prometheus.io/port": "8080",
    "prometheus.io/path": "/metrics",
  });
  const chosen = {
    controllerReplicas: 1,
    routerReplicas: 4,
    controllerMetricsPort: 18080,
    routerMetricsPort: 19090,
    imagePullPolicy: "Always",
  } as const;
  const controller = deploymentManifest(chosen) as any;
  const router = routerDeploymentManifest(chosen) as any;
  assert.deepEqual([controller.spec.replicas, router.spec.replicas], [1, 4]);
  assert.ok(controller.spec.template.spec.containers[0].args.includes("--metrics-addr=0.0.0.0:18080"));
  assert.deepEqual(controller.spec.template.spec.containers[0].ports, [
    { name: "metrics", containerPort: 18080, protocol: "TCP" },
  ]);
  assert.equal(router.spec.template.metadata.annotations["prometheus.io/port"], "19090");
  assert.deepEqual((routerServiceManifest(chosen) as any).spec.ports[1], {
    name: "metrics",
    port: 19090,
    targetPort: "metrics",
    protocol: "TCP",
  });
  assert.equal(router.spec.template.spec.containers[0].imagePullPolicy, "Always");
});

test("the tandem-dashboard roles are DASHBOARD_PERMISSIONS, read-only and unbound; the example binding names exactly them", () => {
  const roles = dashboardRbacManifests();
  assert.deepEqual(summary(roles), ["ClusterRole -/tandem-dashboard", "Role tandem-system/tandem-dashboard"]);
  const verbs = roles.flatMap((role) => (role["rules"] as { verbs: string[] }[]).flatMap((rule) => rule.verbs));
  assert.deepEqual([...new Set(verbs)].sort(), ["list", "watch"]);
  assert.deepEqual(roles[0]?.["rules"], policyRules(ROLE_SCOPES.clusterRole, DASHBOARD_PERMISSIONS));
  assert.deepEqual(roles[1]?.["rules"], [{ apiGroups: [""], resources: ["pods"], verbs: ["list", "watch"] }]);
  assert.deepEqual(summary(dashboardRbacManifests({ namespace: "ops", watchNamespace: "ml" })), [
    "ClusterRole -/tandem-dashboard",
    "Role ops/tandem-dashboard",
    "Role ml/tandem-dashboard-watched",
  ]);
  assert.ok(!renderRbacYaml({ dashboardRole: false }).includes("tandem-dashboard"));
  const example = parseAllDocuments(readFileSync(join(DEPLOY_DIR, "dashboard-binding.example.yaml"), "utf8"))
    .map((document) => document.toJS() as Record<string, any> | null)
    .filter((document) => document !== null);
  assert.deepEqual(
    example.map(
      (binding) => `${binding["roleRef"].kind} ${binding["metadata"].namespace ?? "-"}/${binding["roleRef"].name}`,
    ),
    summary(roles),
  );
});
