/**
 * `tandem manifests [--only crd|rbac|deployment] [--namespace NS] [--image IMAGE] [--out FILE]`:
 * prints the install manifests (CRD, Namespace, ServiceAccount, RBAC, Deployment) as one
 * multi-document YAML for `kubectl apply -f -`, or one part of them; `npm run manifests` writes
 * deploy/rbac.yaml and deploy/deployment.yaml this way.
 */
import type { Command } from "commander";
import { renderCrdYaml } from "../api/crd.ts";
import { renderDeploymentYaml, renderRbacYaml } from "../kube/install.ts";
import type { InstallOptions } from "../kube/install.ts";
import type { CommandOutput, WriteTextFile } from "./io.ts";
import { emit, fail, printOrWrite } from "./io.ts";

export type ManifestPart = "crd" | "rbac" | "deployment";
const PARTS: readonly ManifestPart[] = ["crd", "rbac", "deployment"];

export interface ManifestsOptions extends InstallOptions {
  readonly only?: string;
  readonly out?: string;
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

export function runManifests(options: ManifestsOptions, write?: WriteTextFile): CommandOutput {
  if (options.only !== undefined && !(PARTS as readonly string[]).includes(options.only))
    return fail(`tandem manifests: --only must be one of ${PARTS.join(", ")}\n`);
  return printOrWrite(
    "tandem manifests",
    renderManifests(options.only as ManifestPart | undefined, options),
    options.out,
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
    .option("--image <image>", "image of the controller and the router")
    .option("--out <file>", "write to FILE instead of stdout")
    .action((options: ManifestsOptions) => {
      emit(runManifests(options));
    });
}
