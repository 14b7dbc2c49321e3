/** Loading a kubeconfig the way kubectl does, for the `tandem` commands. */
import { KubeConfig } from "@kubernetes/client-node";

/**
 * `path` when given; otherwise $KUBECONFIG, ~/.kube/config, or the in-cluster ServiceAccount
 * (client-node's `loadFromDefault`). Throws when the file cannot be read or parsed.
 */
export function loadKubeConfig(path?: string): KubeConfig {
  const config = new KubeConfig();
  if (path === undefined) config.loadFromDefault();
  else config.loadFromFile(path);
  if (config.getCurrentCluster() === null) throw new Error(`no current cluster in ${path ?? "the default kubeconfig"}`);
  return config;
}

/** The current context's namespace, else "default" (kubectl's rule). */
export function contextNamespace(config: KubeConfig): string {
  const namespace = config.getContextObject(config.getCurrentContext())?.namespace;
  return namespace === undefined || namespace === "" ? "default" : namespace;
}
