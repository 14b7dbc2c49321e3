/** Loading a kubeconfig the way kubectl does, for the `tandem` commands. */
import { KubeConfig } from "@kubernetes/client-node";

/**
 * `path` when given; otherwise $KUBECONFIG, ~/.kube/config, or the in-cluster ServiceAccount
 * (client-node's `loadFromDefault`). Throws when the file cannot be read or parsed, or names no
 * cluster, with a one-line message that names the file (what the parser says of it may quote the
 * file over several lines: its first line is enough).
 */
export function loadKubeConfig(path?: string): KubeConfig {
  const source = path ?? "the default kubeconfig";
  const config = new KubeConfig();
  try {
    if (path === undefined) config.loadFromDefault();
    else config.loadFromFile(path);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new Error(`cannot load ${source}: ${message.split("\n")[0] ?? message}`, { cause: error });
  }
  if (config.getCurrentCluster() === null) throw new Error(`no current cluster in ${source}`);
  return config;
}

/** The current context's namespace, else "default" (kubectl's rule). */
export function contextNamespace(config: KubeConfig): string {
  const namespace = config.getContextObject(config.getCurrentContext())?.namespace;
  return namespace === undefined || namespace === "" ? "default" : namespace;
}
