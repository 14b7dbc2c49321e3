/**
 * Reading a ModelServing's state from the API server for e2e assertions, judged with the core's own
 * predicates (`availablePending`, `rolloutPending` from src/core/invariants.ts), so "Available" and
 * "RolloutComplete" mean here exactly what they mean in the simulator's scenario runner.
 */
import { parseModelServing } from "../../src/api/parse.ts";
import type { Pod } from "../../src/api/kube.ts";
import type { ModelServing } from "../../src/api/schema.ts";
import { availablePending, placedPods, rolloutPending } from "../../src/core/invariants.ts";
import type { RevisionsByName } from "../../src/core/invariants.ts";
import { decodeControllerRevision } from "../../src/core/revision/controller-revision.ts";
import type { KubeClient, Resource } from "./client.ts";
import { KubeError, MODEL_SERVINGS } from "./client.ts";
import { StopWaiting, waitFor } from "./wait.ts";

export const PODS: Resource = { group: "", version: "v1", plural: "pods", namespaced: true };
export const SERVICES: Resource = { group: "", version: "v1", plural: "services", namespaced: true };
export const REVISIONS: Resource = { group: "apps", version: "v1", plural: "controllerrevisions", namespaced: true };

export interface State {
  readonly ms: ModelServing;
  readonly pods: Pod[];
  readonly revisions: RevisionsByName;
  readonly revisionObjects: any[];
}

/** The ModelServing, its pods (by label) and its readable revisions, as the API server has them now. */
export async function readState(admin: KubeClient, namespace: string, name: string): Promise<State> {
  const stored = await admin.get(MODEL_SERVINGS, name, namespace);
  const parsed = parseModelServing(stored);
  if (!parsed.ok) throw new Error(`${namespace}/${name} does not parse: ${JSON.stringify(parsed.problems)}`);
  const selector = { labelSelector: `tandem.dev/modelserving=${name}` };
  const pods = (await admin.list(PODS, namespace, selector)).items as Pod[];
  const revisionObjects = (await admin.list(REVISIONS, namespace, selector)).items as any[];
  const revisions = new Map<string, { name: string; data: any }>();
  for (const object of revisionObjects) {
    const decoded = decodeControllerRevision({ ...object, kind: "ControllerRevision" });
    if (decoded.ok && decoded.revision.ownerUid === stored.metadata.uid)
      revisions.set(decoded.revision.name, { name: decoded.revision.name, data: decoded.revision.data });
  }
  return { ms: parsed.value, pods, revisions, revisionObjects };
}

export type Target = "Available" | "RolloutComplete";

/** Reasons `target` does not hold now; empty when it does. */
export function pending(state: State, target: Target): string[] {
  const placed = placedPods(state.ms, state.pods);
  return target === "Available"
    ? availablePending(state.ms, placed, state.revisions)
    : rolloutPending(state.ms, placed, state.revisions);
}

/** Waits until `target` holds (and `extra`, if given, returns true), resolving with the state. */
export async function waitUntil(
  admin: KubeClient,
  namespace: string,
  name: string,
  target: Target,
  timeoutMs: number,
  extra?: (state: State) => boolean,
): Promise<State> {
  let last: string[] = [];
  let lastState: State | undefined;
  return waitFor(
    async () => {
      const state = await readState(admin, namespace, name);
      lastState = state;
      last = pending(state, target);
      return last.length === 0 && (extra === undefined || extra(state)) ? state : undefined;
    },
    { timeoutMs, intervalMs: 250, what: `${namespace}/${name} ${target}` },
  ).catch((error: unknown) => {
    const pods = (lastState?.pods ?? []).map(
      (pod) =>
        `${pod.metadata.name} ${JSON.stringify(pod.metadata.annotations ?? {})} ${(pod.status?.conditions ?? []).map((c) => `${c.type}=${c.status}`).join(",")}${pod.metadata.deletionTimestamp === undefined ? "" : " terminating"}`,
    );
    const conditions = (lastState?.ms.status?.conditions ?? []).map(
      (c) => `${c.type}=${c.status} ${c.reason}: ${c.message}`,
    );
    throw new Error(
      `${error instanceof Error ? error.message : String(error)}; pending: ${last.join("; ") || "(extra condition)"}\nconditions:\n${conditions.join("\n")}\npods:\n${pods.join("\n")}`,
    );
  });
}

/** Pods of `role` (not terminating), by name. */
export function podsOf(state: State, role: string): Pod[] {
  return state.pods
    .filter((pod) => pod.metadata.labels?.["tandem.dev/role"] === role && pod.metadata.deletionTimestamp === undefined)
    .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
}

export function imagesOf(pod: Pod): string[] {
  return pod.spec.containers.map((container) => container.image);
}

/**
 * Replaces the image of every container of `role` (entry and workers): read, modify, update with
 * the resourceVersion read, again on a Conflict (the controller writes status concurrently).
 */
export async function setRoleImage(
  admin: KubeClient,
  namespace: string,
  name: string,
  role: string,
  image: string,
): Promise<void> {
  await waitFor(
    async () => {
      const object = await admin.get(MODEL_SERVINGS, name, namespace);
      const spec = object.spec.template.roles.find((candidate: any) => candidate.name === role);
      for (const template of [spec.entryTemplate, spec.workerTemplate])
        for (const container of template?.spec.containers ?? []) container.image = image;
      try {
        return await admin.replace(MODEL_SERVINGS, object);
      } catch (error) {
        if (error instanceof KubeError && error.status === 409) return undefined;
        throw new StopWaiting(String(error));
      }
    },
    { timeoutMs: 10_000, intervalMs: 50, what: `update of ${namespace}/${name} role ${role} to ${image}` },
  );
}
