/**
 * The install manifests, generated from code: the controller's Namespace, ServiceAccount,
 * least-privilege ClusterRole (+ binding) and Lease Role (+ binding) built from `PERMISSIONS`, and
 * its Deployment (2 replicas with leader election, probes, resource requests, non-root, read-only
 * root filesystem); the router's ServiceAccount, ClusterRole and Lease Role (+ bindings) built from
 * `ROUTER_PERMISSIONS`, its Deployment (2 replicas, the same image and security context) and its
 * Service (port 8000, and metrics); and the roles of the people who run `tandem dashboard`, built
 * from `DASHBOARD_PERMISSIONS` and left unbound (deploy/dashboard-binding.example.yaml binds
 * them). Under a namespace scope (`watchNamespace`) the ClusterRoles keep
 * only what must span the cluster and the rest is a Role in the watched namespace.
 * `tandem manifests` prints them with the CRD; `npm run manifests` writes deploy/rbac.yaml and
 * deploy/deployment.yaml, and a unit test keeps those files current. The Helm chart
 * (deploy/helm/tandem) renders the same objects; test/e2e/helm.e2e.ts compares them.
 */
import { stringify } from "yaml";
import { DASHBOARD_PERMISSIONS, PERMISSIONS, ROUTER_PERMISSIONS } from "./resources.ts";
import type { Permission } from "./resources.ts";

export type ImagePullPolicy = "Always" | "IfNotPresent" | "Never";
export const IMAGE_PULL_POLICIES: readonly ImagePullPolicy[] = ["Always", "IfNotPresent", "Never"];

/** What an install may choose; every field has a default (the Helm chart's values.yaml has the same ones). */
export interface InstallOptions {
  /** Namespace of the controller and the router (their ServiceAccounts, Deployments and Leases). Default "tandem-system". */
  readonly namespace?: string | undefined;
  /** Container image of both. Default DEFAULT_IMAGE. */
  readonly image?: string | undefined;
  /** Default "IfNotPresent". */
  readonly imagePullPolicy?: ImagePullPolicy | undefined;
  /**
   * The one namespace the controller and the router watch (their `--namespace`), granted by Roles
   * there instead of ClusterRoles; every namespace when absent.
   */
  readonly watchNamespace?: string | undefined;
  /** Default 2 (one leads, one stands by). */
  readonly controllerReplicas?: number | undefined;
  /** Default 2. */
  readonly routerReplicas?: number | undefined;
  /** Install the router (its ServiceAccount, RBAC, Deployment and Service). Default true. */
  readonly router?: boolean | undefined;
  /** Install the `tandem-dashboard` roles (read-only, unbound: for the people who run `tandem dashboard`). Default true. */
  readonly dashboardRole?: boolean | undefined;
  /**
   * Advertise the metrics to Prometheus: scrape annotations on both pod templates and the metrics
   * port of the router Service. Default true. The metrics listeners stay either way: the kubelet's
   * probes ask their /healthz and /readyz.
   */
  readonly metrics?: boolean | undefined;
  /** The controller's /metrics, /healthz and /readyz port. Default 8080. */
  readonly controllerMetricsPort?: number | undefined;
  /** The router's /metrics, /healthz and /readyz port (besides ROUTER_PORT). Default 9090. */
  readonly routerMetricsPort?: number | undefined;
}

/** InstallOptions with the defaults filled in (`watchNamespace` stays absent for every namespace). */
export interface InstallSettings {
  readonly namespace: string;
  readonly image: string;
  readonly imagePullPolicy: ImagePullPolicy;
  readonly watchNamespace: string | undefined;
  readonly controllerReplicas: number;
  readonly routerReplicas: number;
  readonly router: boolean;
  readonly dashboardRole: boolean;
  readonly metrics: boolean;
  readonly controllerMetricsPort: number;
  readonly routerMetricsPort: number;
}

export const DEFAULT_NAMESPACE = "tandem-system";
export const CONTROLLER_NAME = "tandem-controller";
export const DEFAULT_IMAGE = "ghcr.io/tandem-dev/tandem:0.1.0";
/** The Lease the controller replicas elect a leader on (in the controller namespace). */
export const LEASE_NAME = "tandem-controller-leader";
export const ROUTER_NAME = "tandem-router";
/** The roles `tandem dashboard` users are bound to. */
export const DASHBOARD_ROLE_NAME = "tandem-dashboard";
/** The router's OpenAI port (container and Service), DESIGN §7's default. */
export const ROUTER_PORT = 8000;
/** Appended to a component's name for its Role in the watched namespace (a namespace scope). */
export const WATCHED_ROLE_SUFFIX = "-watched";

export function installSettings(options: InstallOptions = {}): InstallSettings {
  return {
    namespace: options.namespace ?? DEFAULT_NAMESPACE,
    image: options.image ?? DEFAULT_IMAGE,
    imagePullPolicy: options.imagePullPolicy ?? "IfNotPresent",
    watchNamespace: options.watchNamespace,
    controllerReplicas: options.controllerReplicas ?? 2,
    routerReplicas: options.routerReplicas ?? 2,
    router: options.router ?? true,
    dashboardRole: options.dashboardRole ?? true,
    metrics: options.metrics ?? true,
    controllerMetricsPort: options.controllerMetricsPort ?? 8080,
    routerMetricsPort: options.routerMetricsPort ?? 9090,
  };
}

type Manifest = Record<string, unknown>;
type Labels = Readonly<Record<string, string>>;

const labels = { "app.kubernetes.io/name": "tandem", "app.kubernetes.io/component": "controller" };
const routerLabels = { "app.kubernetes.io/name": "tandem", "app.kubernetes.io/component": "router" };
const dashboardLabels = { "app.kubernetes.io/name": "tandem", "app.kubernetes.io/component": "dashboard" };
const RBAC_API = "rbac.authorization.k8s.io/v1";

/** PolicyRules of the permissions in `scopes`, one per resource, in `permissions` order. */
export function policyRules(
  scopes: Permission["scope"] | readonly Permission["scope"][],
  permissions: readonly Permission[] = PERMISSIONS,
): Manifest[] {
  const wanted: readonly string[] = typeof scopes === "string" ? [scopes] : scopes;
  return permissions
    .filter((permission) => wanted.includes(permission.scope))
    .map((permission) => ({
      apiGroups: [permission.group],
      resources: [permission.resource],
      verbs: [...permission.verbs],
    }));
}

/**
 * A Role (namespace given) or ClusterRole of `rules` and its binding to `subject` (none without
 * one); nothing when there are no rules.
 */
function roleWithBinding(
  name: string,
  namespace: string | undefined,
  rules: readonly Manifest[],
  objectLabels: Labels,
  subject: Manifest | undefined,
): Manifest[] {
  if (rules.length === 0) return [];
  const kind = namespace === undefined ? "ClusterRole" : "Role";
  const metadata = { name, ...(namespace === undefined ? {} : { namespace }), labels: objectLabels };
  if (subject === undefined) return [{ apiVersion: RBAC_API, kind, metadata, rules }];
  return [
    { apiVersion: RBAC_API, kind, metadata, rules },
    {
      apiVersion: RBAC_API,
      kind: `${kind}Binding`,
      metadata,
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind, name },
      subjects: [subject],
    },
  ];
}

/**
 * The permission scopes each role of a component holds: its ClusterRole when it watches every
 * namespace (`clusterRole`) or one (`scopedClusterRole`), its Role `<name>-watched` in the watched
 * namespace (`watchedRole`, under a namespace scope only) and its Role in the install namespace
 * (`installRole`). The Helm chart's roles are generated from the same table (`renderHelmRules`).
 */
export const ROLE_SCOPES = {
  clusterRole: ["cluster", "allNamespaces"],
  scopedClusterRole: ["allNamespaces"],
  watchedRole: ["cluster"],
  installRole: ["controller"],
} as const satisfies Readonly<Record<string, readonly Permission["scope"][]>>;

/** A component's ServiceAccount `name` and its roles (`componentRoles`), bound to it. */
function componentRbac(
  name: string,
  objectLabels: Labels,
  permissions: readonly Permission[],
  settings: InstallSettings,
): Manifest[] {
  const { namespace } = settings;
  return [
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace, labels: objectLabels } },
    ...componentRoles(name, objectLabels, permissions, settings, { kind: "ServiceAccount", name, namespace }),
  ];
}

/**
 * What `permissions` grant, by ROLE_SCOPES: a ClusterRole `name`, a Role `name` in the install
 * namespace and, under a namespace scope, a Role `<name>-watched` in the watched namespace; each
 * bound to `subject` when there is one.
 */
function componentRoles(
  name: string,
  objectLabels: Labels,
  permissions: readonly Permission[],
  settings: InstallSettings,
  subject: Manifest | undefined,
): Manifest[] {
  const { namespace, watchNamespace } = settings;
  const clusterScopes = watchNamespace === undefined ? ROLE_SCOPES.clusterRole : ROLE_SCOPES.scopedClusterRole;
  return [
    ...roleWithBinding(name, undefined, policyRules(clusterScopes, permissions), objectLabels, subject),
    ...roleWithBinding(name, namespace, policyRules(ROLE_SCOPES.installRole, permissions), objectLabels, subject),
    ...(watchNamespace === undefined
      ? []
      : roleWithBinding(
          `${name}${WATCHED_ROLE_SUFFIX}`,
          watchNamespace,
          policyRules(ROLE_SCOPES.watchedRole, permissions),
          objectLabels,
          subject,
        )),
  ];
}

export const HELM_RULES_HEADER =
  "{{- /* Generated by `npm run manifests` from src/kube/resources.ts (PERMISSIONS, ROUTER_PERMISSIONS, DASHBOARD_PERMISSIONS) and ROLE_SCOPES in src/kube/install.ts. Do not edit by hand. */ -}}\n";

/**
 * The Helm chart's `templates/_rules.tpl`: for the controller, the router and the dashboard's users, one named template
 * `tandem.rules.<component>.<role>` per ROLE_SCOPES entry, holding that role's rules as YAML
 * (empty when it has none), so the chart grants exactly what `tandem manifests` does.
 */
export function renderHelmRules(): string {
  const components = { controller: PERMISSIONS, router: ROUTER_PERMISSIONS, dashboard: DASHBOARD_PERMISSIONS };
  const blocks = Object.entries(components).flatMap(([component, permissions]) =>
    Object.entries(ROLE_SCOPES).map(([role, scopes]) => {
      const rules = policyRules(scopes, permissions);
      const body = rules.length === 0 ? "" : stringify(rules, { lineWidth: 0 });
      return `{{- define "tandem.rules.${component}.${role}" -}}\n${body}{{- end }}\n`;
    }),
  );
  return HELM_RULES_HEADER + blocks.join("");
}

/** The Namespace, and the controller's ServiceAccount, roles and bindings (from PERMISSIONS). */
export function rbacManifests(options: InstallOptions = {}): Manifest[] {
  const settings = installSettings(options);
  return [
    { apiVersion: "v1", kind: "Namespace", metadata: { name: settings.namespace, labels } },
    ...componentRbac(CONTROLLER_NAME, labels, PERMISSIONS, settings),
  ];
}

/** The router's ServiceAccount, roles and bindings (from ROUTER_PERMISSIONS): its Leases in the install namespace only. */
export function routerRbacManifests(options: InstallOptions = {}): Manifest[] {
  return componentRbac(ROUTER_NAME, routerLabels, ROUTER_PERMISSIONS, installSettings(options));
}

/**
 * The roles of the people who run `tandem dashboard` (from DASHBOARD_PERMISSIONS), unbound:
 * read-only access to what the dashboard shows, to bind to users or groups
 * (deploy/dashboard-binding.example.yaml).
 */
export function dashboardRbacManifests(options: InstallOptions = {}): Manifest[] {
  return componentRoles(
    DASHBOARD_ROLE_NAME,
    dashboardLabels,
    DASHBOARD_PERMISSIONS,
    installSettings(options),
    undefined,
  );
}

/** `--namespace=NS` under a namespace scope. */
function scopeArgs(settings: InstallSettings): string[] {
  return settings.watchNamespace === undefined ? [] : [`--namespace=${settings.watchNamespace}`];
}

/**
 * The router Deployment: `routerReplicas` of `tandem router` on port 8000, metrics on
 * `routerMetricsPort`, probes on /healthz and /readyz (ready once its caches have synced and its
 * Lease is registered); 30 s to finish requests on SIGTERM. POD_NAME and POD_NAMESPACE (downward
 * API) are each replica's `--id` and Lease namespace.
 */
export function routerDeploymentManifest(options: InstallOptions = {}): Manifest {
  const settings = installSettings(options);
  const metricsPort = settings.routerMetricsPort;
  return tandemDeployment(settings, {
    name: ROUTER_NAME,
    labels: routerLabels,
    container: "router",
    replicas: settings.routerReplicas,
    metricsPort,
    args: [
      "router",
      `--listen=0.0.0.0:${ROUTER_PORT}`,
      `--metrics-addr=0.0.0.0:${metricsPort}`,
      ...scopeArgs(settings),
    ],
    ports: [
      { name: "http", containerPort: ROUTER_PORT, protocol: "TCP" },
      { name: "metrics", containerPort: metricsPort, protocol: "TCP" },
    ],
    resources: { requests: { cpu: "250m", memory: "256Mi" }, limits: { memory: "1Gi" } },
    env: [{ name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } }],
  });
}

interface DeploymentParts {
  readonly name: string;
  readonly labels: Labels;
  readonly container: string;
  readonly replicas: number;
  readonly args: readonly string[];
  /** Must include one named "metrics": the probes' port. */
  readonly ports: readonly Manifest[];
  /** The "metrics" port's number, for the scrape annotations. */
  readonly metricsPort: number;
  readonly resources: Manifest;
  /** Environment besides POD_NAME. */
  readonly env?: readonly Manifest[];
}

/**
 * A Deployment of the tandem image under the ServiceAccount `name`: non-root, read-only root
 * filesystem, no capabilities, probes on /healthz and /readyz of the metrics port, and with
 * `metrics` the Prometheus scrape annotations.
 */
function tandemDeployment(settings: InstallSettings, parts: DeploymentParts): Manifest {
  const container = {
    name: parts.container,
    image: settings.image,
    imagePullPolicy: settings.imagePullPolicy,
    args: [...parts.args],
    env: [{ name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } }, ...(parts.env ?? [])],
    ports: [...parts.ports],
    livenessProbe: probe("/healthz", 10),
    readinessProbe: probe("/readyz", 5),
    resources: parts.resources,
    securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
  };
  const annotations = {
    "prometheus.io/scrape": "true",
    "prometheus.io/port": String(parts.metricsPort),
    "prometheus.io/path": "/metrics",
  };
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: parts.name, namespace: settings.namespace, labels: parts.labels },
    spec: {
      replicas: parts.replicas,
      selector: { matchLabels: parts.labels },
      template: {
        metadata: { labels: parts.labels, ...(settings.metrics ? { annotations } : {}) },
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

/** The router Service: port 8000 (the OpenAI API) and, with `metrics`, the metrics port, to the router pods. */
export function routerServiceManifest(options: InstallOptions = {}): Manifest {
  const settings = installSettings(options);
  const metricsPort = { name: "metrics", port: settings.routerMetricsPort, targetPort: "metrics", protocol: "TCP" };
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: ROUTER_NAME, namespace: settings.namespace, labels: routerLabels },
    spec: {
      selector: routerLabels,
      ports: [
        { name: "http", port: ROUTER_PORT, targetPort: "http", protocol: "TCP" },
        ...(settings.metrics ? [metricsPort] : []),
      ],
    },
  };
}

/** The controller Deployment: `controllerReplicas` electing a leader on LEASE_NAME. */
export function deploymentManifest(options: InstallOptions = {}): Manifest {
  const settings = installSettings(options);
  const metricsPort = settings.controllerMetricsPort;
  return tandemDeployment(settings, {
    name: CONTROLLER_NAME,
    labels,
    container: "controller",
    replicas: settings.controllerReplicas,
    metricsPort,
    args: [
      "controller",
      "--leader-elect",
      `--leader-elect-namespace=${settings.namespace}`,
      `--metrics-addr=0.0.0.0:${metricsPort}`,
      ...scopeArgs(settings),
    ],
    ports: [{ name: "metrics", containerPort: metricsPort, protocol: "TCP" }],
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
  "# Generated by `npm run manifests` from src/kube/resources.ts (PERMISSIONS, ROUTER_PERMISSIONS, DASHBOARD_PERMISSIONS) and src/kube/install.ts. Do not edit by hand.\n";
export const DEPLOYMENT_YAML_HEADER =
  "# Generated by `npm run manifests` from src/kube/install.ts. Do not edit by hand.\n";

/** The RBAC objects of the controller and, unless `router` / `dashboardRole` is false, of the router and the dashboard's users. */
export function renderRbacYaml(options: InstallOptions = {}): string {
  const { router, dashboardRole } = installSettings(options);
  return renderYaml(RBAC_YAML_HEADER, [
    ...rbacManifests(options),
    ...(router ? routerRbacManifests(options) : []),
    ...(dashboardRole ? dashboardRbacManifests(options) : []),
  ]);
}

/** The controller Deployment and, unless `router` is false, the router Deployment and Service. */
export function renderDeploymentYaml(options: InstallOptions = {}): string {
  const router = installSettings(options).router;
  return renderYaml(DEPLOYMENT_YAML_HEADER, [
    deploymentManifest(options),
    ...(router ? [routerDeploymentManifest(options), routerServiceManifest(options)] : []),
  ]);
}
