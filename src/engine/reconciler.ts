/**
 * One reconcile of one ModelServing key: observe (from the cache) → wait for expectations → `plan`
 * → execute. It decides nothing about retries; the controller turns the outcome into queue
 * operations and log lines.
 */
import type { Pod, Service } from "../api/kube.ts";
import { LABEL_MODEL_SERVING } from "../api/wellknown.ts";
import type { Plan } from "../core/actions.ts";
import type { Observed, ObservedRouter } from "../core/observed.ts";
import { releaseUnplaced } from "../core/tracking.ts";
import type { Executor, ExecutionResult } from "./executor.ts";
import type { Expectations } from "./expectations.ts";
import { isJsonObject } from "./json.ts";
import type { Clock, ClusterReader, KubeObject, WatchEvent } from "./ports.ts";

/** The core's planning function (`core/plan.ts`), or a stand-in injected by tests. */
export type PlanFunction = (observed: Observed, nowMs: number) => Plan;

export type ReconcileOutcome =
  /**
   * The ModelServing is not in the cache and none of its pods waits for the controller: nothing
   * to do (its children go by garbage collection).
   */
  | { readonly kind: "gone" }
  /** Writes of an earlier pass are not in the cache yet; nothing planned. */
  | { readonly kind: "waiting"; readonly recheckAfterMs: number }
  | { readonly kind: "executed"; readonly result: ExecutionResult; readonly requeueAfterMs: number | undefined };

/** Children kinds found by the `tandem.dev/modelserving` label. */
const CHILD_KINDS: ReadonlySet<string> = new Set(["Pod", "Service", "ControllerRevision"]);

/** The work-queue key of a ModelServing: `namespace/name`. */
export function keyOf(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** The inverse of `keyOf`; namespaces hold no "/", names may. */
export function parseKey(key: string): { namespace: string; name: string } {
  const slash = key.indexOf("/");
  if (slash === -1) throw new Error(`work-queue key "${key}" is not namespace/name`);
  return { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}

/**
 * The key a watch event concerns: a ModelServing's own, or its owner's for a pod, Service or
 * ControllerRevision labelled `tandem.dev/modelserving`; undefined for anything else.
 */
export function keyOfEvent(event: WatchEvent): string | undefined {
  const { kind, metadata } = event.object;
  if (metadata.namespace === undefined) return undefined;
  if (kind === "ModelServing") return keyOf(metadata.namespace, metadata.name);
  const owner = metadata.labels?.[LABEL_MODEL_SERVING];
  return CHILD_KINDS.has(kind) && owner !== undefined ? keyOf(metadata.namespace, owner) : undefined;
}

/** What `plan` sees of `modelServing`: it and its labelled children, from the cache, and the routers. */
export function observe(
  reader: ClusterReader,
  modelServing: KubeObject<"ModelServing">,
  routers: readonly ObservedRouter[],
): Observed {
  const options = childOptions(modelServing.metadata.namespace, modelServing.metadata.name);
  return {
    modelServing,
    // The cache holds what the API server stored; the core checks shapes and ownership itself.
    pods: reader.list("Pod", options) as unknown as Pod[],
    services: reader.list("Service", options) as unknown as Service[],
    revisions: reader.list("ControllerRevision", options),
    routers,
  };
}

/** The list options of a ModelServing's children: its namespace, its `tandem.dev/modelserving` label. */
function childOptions(namespace: string | undefined, name: string): { namespace?: string; labelSelector: string } {
  return { ...(namespace === undefined ? {} : { namespace }), labelSelector: `${LABEL_MODEL_SERVING}=${name}` };
}

export interface ReconcilerParts {
  readonly reader: ClusterReader;
  readonly clock: Clock;
  readonly executor: Executor;
  readonly expectations: Expectations;
  readonly plan: PlanFunction;
  /** The router registry's routers now (`RouterRegistry.routers`). */
  readonly routers: () => readonly ObservedRouter[];
}

export class Reconciler {
  readonly #parts: ReconcilerParts;

  constructor(parts: ReconcilerParts) {
    this.#parts = parts;
  }

  /**
   * Reconciles `key` once. Rejects only when `plan` throws (a bug in the core) or the cache
   * refuses a read; API errors of the writes are in the result.
   */
  async reconcile(key: string, signal?: AbortSignal): Promise<ReconcileOutcome> {
    const { reader, clock, executor, expectations } = this.#parts;
    const { namespace, name } = parseKey(key);
    const modelServing = reader.get("ModelServing", namespace, name);
    // Its pods that terminate hold the recovery finalizer until released: garbage collection of
    // the pods of a deleted ModelServing must not hang on it.
    const orphans =
      modelServing === undefined
        ? releaseUnplaced(reader.list("Pod", childOptions(namespace, name)) as unknown as Pod[], () => false)
        : [];
    if (modelServing === undefined && orphans.length === 0) return { kind: "gone" };
    const check = expectations.pending(key, reader);
    if (!check.satisfied) return { kind: "waiting", recheckAfterMs: check.recheckAfterMs };
    if (modelServing === undefined) {
      const result = await executor.execute(
        { key, namespace, name, uid: undefined, resourceVersion: undefined, status: undefined },
        orphans,
        signal,
      );
      return { kind: "executed", result, requeueAfterMs: undefined };
    }
    const plan = this.#parts.plan(observe(reader, modelServing, this.#parts.routers()), clock.nowMs());
    const { uid, resourceVersion } = modelServing.metadata;
    const status = isJsonObject(modelServing.status) ? modelServing.status : undefined;
    const target = { key, namespace, name, uid, resourceVersion, status };
    const result = await executor.execute(target, plan.actions, signal);
    return { kind: "executed", result, requeueAfterMs: plan.requeueAfterMs };
  }
}
