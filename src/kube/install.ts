/**
 * The install manifests, generated from code: the controller's Namespace, ServiceAccount,
 * least-privilege ClusterRole (+ binding) and Lease Role (+ binding) built from `PERMISSIONS`, and
 * its Deployment (2 replicas with leader election, probes, resource requests, non-root, read-only
 * root filesystem); the router's ServiceAccount, ClusterRole and Lease Role (+ bindings) built from
 * `ROUTER_PERMISSIONS`, its Deployment (2 replicas, the same image and security context) and its
 * Service (port 8000, and metrics). `tandem manifests` prints them with the CRD; `npm run manifests` writes
 * deploy/rbac.yaml and deploy/deployment.yaml, and a unit test keeps those files current.
 */
import { stringify } from "yaml";
import { PERMISSIONS, ROUTER_PERMISSIONS } from "./resources.ts";
import type { Permission } from "./resources.ts";

export interface InstallOptions {
  /** Namespace of the controller (its ServiceAccount, Deployment and Lease). Default "tandem-system". */
  readonly namespace?: string;
  /** Container image. Default DEFAULT_IMAGE. */
  readonly image?: string;
}

export const DEFAULT_NAMESPACE = "tandem-system";
export const CONTROLLER_NAME = "tandem-controller";
export const DEFAULT_IMAGE = "ghcr.io/tandem-dev/tandem:0.1.0";
/** The Lease the controller replicas elect a leader on (in the controller namespace). */
export const LEASE_NAME = "tandem-controller-leader";
const METRICS_PORT = 8080;
export const ROUTER_NAME = "tandem-router";
/** The router's OpenAI port (container and Service), DESIGN §7's default. */
export const ROUTER_PORT = 8000;
const ROUTER_METRICS_PORT = 9090;

type Manifest = Record<string, unknown>;

const labels = { "app.kubernetes.io/name": "tandem", "app.kubernetes.io/component": "controller" };
const routerLabels = { "app.kubernetes.io/name": "tandem", "app.kubernetes.io/component": "router" };

/** PolicyRules for `scope`, one per resource, in `PERMISSIONS` order. */
export function policyRules(scope: Permission["scope"], permissions: readonly Permission[] = PERMISSIONS): Manifest[] {
  return permissions
    .filter((permission) => permission.scope === scope)
    .map((permission) => ({
      apiGroups: [permission.group],
      resources: [permission.resource],
      verbs: [...permission.verbs],
    }));
}

/** Namespace, ServiceAccount, ClusterRole, ClusterRoleBinding, Role and RoleBinding. */
export function rbacManifests(options: InstallOptions = {}): Manifest[] {
  const namespace = options.namespace ?? DEFAULT_NAMESPACE;
  const subject = { kind: "ServiceAccount", name: CONTROLLER_NAME, namespace };
  const meta = (scoped: boolean): Manifest => ({ name: CONTROLLER_NAME, ...(scoped ? { namespace } : {}), labels });
  return [
    { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace, labels } },
    { apiVersion: "v1", kind: "ServiceAccount", metadata: meta(true) },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: meta(false),
      rules: policyRules("cluster"),
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: meta(false),
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: CONTROLLER_NAME },
      subjects: [subject],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: meta(true),
      rules: policyRules("controller"),
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: meta(true),
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: CONTROLLER_NAME },
      subjects: [subject],
    },
  ];
}

/**
 * The router's ServiceAccount, ClusterRole and ClusterRoleBinding, and the Role and RoleBinding
 * of its Leases in the install namespace (from ROUTER_PERMISSIONS).
 */
export function routerRbacManifests(options: InstallOptions = {}): Manifest[] {
  const namespace = options.namespace ?? DEFAULT_NAMESPACE;
  const meta = (scoped: boolean): Manifest => ({
    name: ROUTER_NAME,
    ...(scoped ? { namespace } : {}),
    labels: routerLabels,
  });
  const subjects = [{ kind: "ServiceAccount", name: ROUTER_NAME, namespace }];
  return [
    { apiVersion: "v1", kind: "ServiceAccount", metadata: meta(true) },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: meta(false),
      rules: policyRules("cluster", ROUTER_PERMISSIONS),
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: meta(false),
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: ROUTER_NAME },
      subjects,
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: meta(true),
      rules: policyRules("controller", ROUTER_PERMISSIONS),
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: meta(true),
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: ROUTER_NAME },
      subjects,
    },
  ];
}

/**
 * The router Deployment: 2 replicas of `tandem router` on port 8000, metrics on 9090, probes on
 * /healthz and /readyz (ready once its caches have synced and its Lease is registered); 30 s to
 * finish requests on SIGTERM. POD_NAME and POD_NAMESPACE (downward API) are each replica's
 * `--id` and Lease namespace.
 */
export function routerDeploymentManifest(options: InstallOptions = {}): Manifest {
  return tandemDeployment({
    name: ROUTER_NAME,
    namespace: options.namespace ?? DEFAULT_NAMESPACE,
    labels: routerLabels,
    container: "router",
    image: options.image ?? DEFAULT_IMAGE,
    args: ["router", `--listen=0.0.0.0:${ROUTER_PORT}`, `--metrics-addr=0.0.0.0:${ROUTER_METRICS_PORT}`],
    ports: [
      { name: "http", containerPort: ROUTER_PORT, protocol: "TCP" },
      { name: "metrics", containerPort: ROUTER_METRICS_PORT, protocol: "TCP" },
    ],
    resources: { requests: { cpu: "250m", memory: "256Mi" }, limits: { memory: "1Gi" } },
    env: [{ name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } }],
  });
}

interface DeploymentParts {
  readonly name: string;
  readonly namespace: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly container: string;
  readonly image: string;
  readonly args: readonly string[];
  /** Must include one named "metrics": the probes' port. */
  readonly ports: readonly Manifest[];
  readonly resources: Manifest;
  /** Environment besides POD_NAME. */
  readonly env?: readonly Manifest[];
}

/**
 * A Deployment of 2 replicas of the tandem image under the ServiceAccount `name`: non-root,
 * read-only root filesystem, no capabilities, probes on /healthz and /readyz of the metrics port.
 */
function tandemDeployment(parts: DeploymentParts): Manifest {
  const container = {
    name: parts.container,
    image: parts.image,
    args: [...parts.args],
    env: [{ name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } }, ...(parts.env ?? [])],
    ports: [...parts.ports],
    livenessProbe: probe("/healthz", 10),
    readinessProbe: probe("/readyz", 5),
    resources: parts.resources,
    securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
  };
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: parts.name, namespace: parts.namespace, labels: parts.labels },
    spec: {
      replicas: 2,
      selector: { matchLabels: parts.labels },
      template: {
        metadata: { labels: parts.labels },
        spec: {
          serviceAccountName: parts.name,
          securityContext: {
            runAsNonRoot: true,
            runAsUser: 65532,
            runAsGroup: 65532,
            seccompProfile: { type: "RuntimeDefault" },
          },
          terminationGracePeriodSeconds: 30,
          containers: [container],
        },
      },
    },
  };
}

function probe(path: string, periodSeconds: number): Manifest {
  return { httpGet: { path, port: "metrics" }, periodSeconds, timeoutSeconds: 2, failureThreshold: 3 };
}

/** The router Service: port 8000 (the OpenAI API) and metrics, to the router pods. */
export function routerServiceManifest(options: InstallOptions = {}): Manifest {
  const namespace = options.namespace ?? DEFAULT_NAMESPACE;
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: ROUTER_NAME, namespace, labels: routerLabels },
    spec: {
      selector: routerLabels,
      ports: [
        { name: "http", port: ROUTER_PORT, targetPort: "http", protocol: "TCP" },
        { name: "metrics", port: ROUTER_METRICS_PORT, targetPort: "metrics", protocol: "TCP" },
      ],
    },
  };
}

/** The controller Deployment: 2 replicas electing a leader on LEASE_NAME. */
export function deploymentManifest(options: InstallOptions = {}): Manifest {
  const namespace = options.namespace ?? DEFAULT_NAMESPACE;
  return tandemDeployment({
    name: CONTROLLER_NAME,
    namespace,
    labels,
    container: "controller",
    image: options.image ?? DEFAULT_IMAGE,
    args: [
      "controller",
      "--leader-elect",
      `--leader-elect-namespace=${namespace}`,
      `--metrics-addr=0.0.0.0:${METRICS_PORT}`,
    ],
    ports: [{ name: "metrics", containerPort: METRICS_PORT, protocol: "TCP" }],
    resources: { requests: { cpu: "100m", memory: "128Mi" }, limits: { memory: "512Mi" } },
  });
}

/** Renders manifests as multi-document YAML after `header` (a `#` comment block). */
export function renderYaml(header: string, manifests: readonly Manifest[]): string {
  return (
    header +
    manifests.map((manifest) => `---\n${stringify(manifest, { lineWidth: 0, aliasDuplicateObjects: false })}`).join("")
  );
}

export const RBAC_YAML_HEADER =
  "# Generated by `npm run manifests` from src/kube/resources.ts (PERMISSIONS, ROUTER_PERMISSIONS) and src/kube/install.ts. Do not edit by hand.\n";
export const DEPLOYMENT_YAML_HEADER =
  "# Generated by `npm run manifests` from src/kube/install.ts. Do not edit by hand.\n";

export function renderRbacYaml(options: InstallOptions = {}): string {
  return renderYaml(RBAC_YAML_HEADER, [...rbacManifests(options), ...routerRbacManifests(options)]);
}

export function renderDeploymentYaml(options: InstallOptions = {}): string {
  return renderYaml(DEPLOYMENT_YAML_HEADER, [
    deploymentManifest(options),
    routerDeploymentManifest(options),
    routerServiceManifest(options),
  ]);
}
