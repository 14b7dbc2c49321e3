import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { renderManifests } from "../cli/install.ts";
import {
  deploymentManifest,
  policyRules,
  rbacManifests,
  renderDeploymentYaml,
  renderRbacYaml,
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
  const rules = policyRules("cluster");
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
