/** Loading a kubeconfig the way kubectl does, for the `tandem` commands. */
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";

/** Where a pod's ServiceAccount token is mounted (client-node's in-cluster loading reads it). */
const IN_CLUSTER_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/**
 * Whether the default loading finds a cluster: a file named by $KUBECONFIG, ~/.kube/config, or
 * the in-cluster ServiceAccount. Without any, client-node would fall back to
 * http://localhost:8080 and a command would retry a server that is not there forever.
 */
export function defaultClusterConfigured(
  env: NodeJS.ProcessEnv = process.env,
  home: string = homedir(),
  exists: (path: string) => boolean = existsSync,
): boolean {
  const files = (env["KUBECONFIG"] ?? "").split(delimiter).filter((file) => file !== "");
  if (files.some(exists)) return true;
  if (files.length === 0 && exists(join(home, ".kube", "config"))) return true;
  return env["KUBERNETES_SERVICE_HOST"] !== undefined && exists(IN_CLUSTER_TOKEN);
}

/**
 * `path` when given; otherwise $KUBECONFIG, ~/.kube/config, or the in-cluster ServiceAccount
 * (client-node's `loadFromDefault`). `context`, when given, replaces the file's current context
 * (kubectl's `--context`). Throws when none of them exists ("no cluster is configured"), when the
 * file cannot be read or parsed, names no cluster or has no such context, with a one-line message
 * that names the file (what the parser says of it may quote the file over several lines: its
 * first line is enough).
 */
export function loadKubeConfig(path?: string, context?: string): KubeConfig {
  const source = path ?? "the default kubeconfig";
  const config = new KubeConfig();
  if (path === undefined && !defaultClusterConfigured()) {
    throw new Error(
      "no cluster is configured: pass --kubeconfig FILE, set $KUBECONFIG, write ~/.kube/config, or run in a cluster",
    );
  }
  try {
    if (path === undefined) config.loadFromDefault();
    else config.loadFromFile(path);
  } catch (error) {
    if (path !== undefined && (error as { code?: unknown }).code === "ENOENT") {
      throw new Error(
        `--kubeconfig ${path}: no such file; name an existing kubeconfig, or leave --kubeconfig out to use $KUBECONFIG or ~/.kube/config`,
        { cause: error },
      );
    }
    const message = error instanceof Error ? error.message : String(error);
    throw new Error(`cannot load ${source}: ${message.split("\n")[0] ?? message}`, { cause: error });
  }
  if (context !== undefined) {
    const names = config.getContexts().map((known) => known.name);
    if (!names.includes(context))
      throw new Error(
        `--context: no context "${context}" in ${source} (it has ${names.length === 0 ? "none" : names.join(", ")})`,
      );
    config.setCurrentContext(context);
  }
  if (config.getCurrentCluster() === null) throw new Error(`no current cluster in ${source}`);
  return config;
}

/** The current context's namespace, else "default" (kubectl's rule). */
export function contextNamespace(config: KubeConfig): string {
  const namespace = config.getContextObject(config.getCurrentContext())?.namespace;
  return namespace === undefined || namespace === "" ? "default" : namespace;
}
