/** Fixtures shared by the simulator's tests: a fresh server on a fresh clock, and small objects. */
import { isApiError } from "../engine/ports.ts";
import type { ApiErrorReason, JsonObject, KubeObject } from "../engine/ports.ts";
import { ApiServer } from "./apiserver.ts";
import type { ApiServerOptions } from "./apiserver.ts";
import { VirtualClock } from "./clock.ts";
import { Prng } from "./prng.ts";

/** A server seeded with `seed`, its clock at 0, and a client named "controller". */
export function setupServer(options: ApiServerOptions = {}, seed = 1) {
  const clock = new VirtualClock();
  const server = new ApiServer(clock, new Prng(seed).fork("apiserver"), options);
  return { clock, server, client: server.client("controller") };
}

export function aPod(name: string, labels: Record<string, string> = {}, spec: JsonObject = {}): KubeObject<"Pod"> {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default", labels },
    spec: { containers: [{ name: "main", image: "vllm:v1" }], ...spec },
  };
}

export function aModelServing(name: string, replicas = 1): KubeObject<"ModelServing"> {
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name, namespace: "default" },
    spec: { replicas },
  };
}

/** An ownerReference to `owner` as a controller sets it. */
export function ownedBy(owner: KubeObject): {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller: boolean;
} {
  return {
    apiVersion: owner.apiVersion,
    kind: owner.kind,
    name: owner.metadata.name,
    uid: owner.metadata.uid ?? "",
    controller: true,
  };
}

/** An `assert.rejects`/`assert.throws` predicate for an ApiError with `reason`. */
export function rejectsWith(reason: ApiErrorReason): (error: unknown) => boolean {
  return (error) => isApiError(error, reason);
}

/**
 * Lets promise chains started by simulated components run to completion. Bounded: chains in the
 * simulator are a few steps long, and a longer one is a bug to find, not to wait out.
 */
export async function settle(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await Promise.resolve();
}
