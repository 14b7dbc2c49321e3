/**
 * The KV cache format an engine pod produces and accepts (DESIGN §7 `engine-mock --kv-format`): a
 * decode refuses KV parameters from a prefill of another format, which is what makes an
 * incompatible prefill/decode pair visible. `demo --serve` starts each pod's engine-mock with it and
 * the simulator's traffic rejects a mismatched pair with it. Pure.
 */
import type { Pod } from "../api/kube.ts";

/** The format of a pod whose first container sets no `KV_FORMAT`. */
export const DEFAULT_KV_FORMAT = "v1";

/** The first container's env `KV_FORMAT`, default `v1`. */
export function kvFormatOf(pod: Pod): string {
  const env = (pod.spec.containers[0] as { env?: { name?: string; value?: string }[] } | undefined)?.env ?? [];
  return env.find((variable) => variable.name === "KV_FORMAT")?.value ?? DEFAULT_KV_FORMAT;
}
