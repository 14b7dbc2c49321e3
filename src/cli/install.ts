/**
 * `tandem manifests [--only crd|rbac|deployment] [--namespace NS] [--watch-namespace NS] [--image IMAGE]
 * [--image-pull-policy P] [--controller-replicas N] [--router-replicas N] [--no-router] [--no-dashboard-role] [--no-metrics]
 * [--controller-metrics-port N] [--router-metrics-port N] [--out FILE]`: prints the install
 * manifests (CRD, Namespace, ServiceAccounts, RBAC, the dashboard users' roles, Deployments, the router Service) as one
 * multi-document YAML for `kubectl apply -f -`, or one part of them; `npm run manifests` writes
 * deploy/rbac.yaml and deploy/deployment.yaml this way. Every flag has a value of the Helm chart
 * (deploy/helm/tandem), which renders the same objects for the same settings.
 */
import type { Command } from "commander";
import { quote } from "../api/problems.ts";
import { renderCrdYaml } from "../api/crd.ts";
import { IMAGE_PULL_POLICIES, ROUTER_PORT, renderDeploymentYaml, renderRbacYaml } from "../kube/install.ts";
import type { ImagePullPolicy, InstallOptions } from "../kube/install.ts";
import type { CommandOutput, WriteTextFile } from "./io.ts";
import { emit, fail, printOrWrite } from "./io.ts";
import { DNS_LABEL } from "./router.ts";

export type ManifestPart = "crd" | "rbac" | "deployment";
const PARTS: readonly ManifestPart[] = ["crd", "rbac", "deployment"];

/** The flags as commander gives them: strings, and booleans for the `--no-` ones. */
export interface ManifestsFlags {
  readonly only?: string;
  readonly out?: string;
  readonly namespace?: string;
  readonly watchNamespace?: string;
  readonly image?: string;
  readonly imagePullPolicy?: string;
  readonly controllerReplicas?: string;
  readonly routerReplicas?: string;
  readonly router?: boolean;
  readonly dashboardRole?: boolean;
  readonly metrics?: boolean;
  readonly controllerMetricsPort?: string;
  readonly routerMetricsPort?: string;
}

/** The YAML of `part`, or of all parts in install order. */
export function renderManifests(part: ManifestPart | undefined, options: InstallOptions = {}): string {
  const render: Record<ManifestPart, () => string> = {
    crd: renderCrdYaml,
    rbac: () => renderRbacYaml(options),
    deployment: () => renderDeploymentYaml(options),
  };
  return (part === undefined ? PARTS : [part]).map((name) => render[name]()).join("");
}

type Parsed = { readonly options: InstallOptions; readonly problems: readonly string[] };

/** The install options the flags say, and every flag that cannot be used, each `--flag: reason`. */
export function installOptionsOf(flags: ManifestsFlags): Parsed {
  const problems: string[] = [];
  const namespace = (flag: string, value: string | undefined): string | undefined => {
    if (value !== undefined && !DNS_LABEL.test(value))
      problems.push(
        `${flag}: must be a namespace name (a DNS-1123 label: lower-case letters, digits and '-', at most 63), not ${quote(value)}`,
      );
    return value;
  };
  const whole = (
    flag: string,
    value: string | undefined,
    min: number,
    max: number,
    what: string,
  ): number | undefined => {
    if (value === undefined) return undefined;
    const number = /^\d+$/.test(value) ? Number(value) : Number.NaN;
    if (!(number >= min && number <= max)) problems.push(`${flag}: must be ${what}, not ${quote(value)}`);
    return number;
  };
  const image = (value: string | undefined): string | undefined => {
    if (value?.trim() === "") problems.push("--image: must name an image, such as registry.example/tandem:0.1.0");
    return value;
  };
  const pullPolicy = (value: string | undefined): ImagePullPolicy | undefined => {
    if (value !== undefined && !(IMAGE_PULL_POLICIES as readonly string[]).includes(value))
      problems.push(`--image-pull-policy: must be one of ${IMAGE_PULL_POLICIES.join(", ")}, not ${quote(value)}`);
    return value as ImagePullPolicy | undefined;
  };
  const options: InstallOptions = {
    namespace: namespace("--namespace", flags.namespace),
    watchNamespace: namespace("--watch-namespace", flags.watchNamespace),
    image: image(flags.image),
    imagePullPolicy: pullPolicy(flags.imagePullPolicy),
    controllerReplicas: whole(
      "--controller-replicas",
      flags.controllerReplicas,
      0,
      100,
      "a whole number of replicas, 0 to 100",
    ),
    routerReplicas: whole("--router-replicas", flags.routerReplicas, 0, 100, "a whole number of replicas, 0 to 100"),
    router: flags.router,
    dashboardRole: flags.dashboardRole,
    metrics: flags.metrics,
    controllerMetricsPort: whole(
      "--controller-metrics-port",
      flags.controllerMetricsPort,
      1,
      65_535,
      "a TCP port, 1 to 65535",
    ),
    routerMetricsPort: whole("--router-metrics-port", flags.routerMetricsPort, 1, 65_535, "a TCP port, 1 to 65535"),
  };
  if (options.routerMetricsPort === ROUTER_PORT)
    problems.push(`--router-metrics-port: must differ from the router's API port ${ROUTER_PORT}`);
  if (flags.only !== undefined && !(PARTS as readonly string[]).includes(flags.only))
    problems.push(`--only: must be one of ${PARTS.join(", ")}, not ${quote(flags.only)}`);
  return { options, problems };
}

export function runManifests(flags: ManifestsFlags, write?: WriteTextFile): CommandOutput {
  const { options, problems } = installOptionsOf(flags);
  if (problems.length > 0) return fail(problems.map((problem) => `tandem manifests: ${problem}\n`).join(""));
  return printOrWrite(
    "tandem manifests",
    renderManifests(flags.only as ManifestPart | undefined, options),
    flags.out,
    write,
  );
}

export function registerManifests(program: Command): void {
  program
    .command("manifests")
    .description(
      "Print the install manifests (CRDs; RBAC, ServiceAccounts and Deployments of the controller and the router; the router Service) for kubectl apply -f -.",
    )
    .option("--only <part>", "print one part: crd, rbac or deployment")
    .option("--namespace <namespace>", "namespace of the controller and the router", "tandem-system")
    .option(
      "--watch-namespace <namespace>",
      "watch and manage this namespace only, with Roles there instead of ClusterRoles (default: all namespaces)",
    )
    .option("--image <image>", "image of the controller and the router")
    .option("--image-pull-policy <policy>", "Always, IfNotPresent or Never (default: IfNotPresent)")
    .option("--controller-replicas <n>", "controller replicas; one leads, the others stand by (default: 2)")
    .option("--router-replicas <n>", "router replicas (default: 2)")
    .option("--no-router", "leave out the router (its ServiceAccount, RBAC, Deployment and Service)")
    .option(
      "--no-dashboard-role",
      "leave out the tandem-dashboard roles (read-only, unbound: for the people who run tandem dashboard)",
    )
    .option("--no-metrics", "leave out the Prometheus scrape annotations and the router Service's metrics port")
    .option("--controller-metrics-port <port>", "the controller's /metrics, /healthz and /readyz port (default: 8080)")
    .option("--router-metrics-port <port>", "the router's /metrics, /healthz and /readyz port (default: 9090)")
    .option("--out <file>", "write to FILE instead of stdout")
    .action((flags: ManifestsFlags) => {
      emit(runManifests(flags));
    });
}
