/**
 * The router's half of the drain handshake (DESIGN §3.3–3.4): whether this replica may confirm that
 * a marked pod has drained. Pure: the pod as cached, this replica's in-flight count and the engine's
 * queue are arguments. The Kubernetes router, `demo --serve` and the simulator's router replicas
 * all decide through `confirmDrain`.
 */
import type { Pod } from "../api/kube.ts";
import { drainedAnnotation } from "../api/router-lease.ts";
import { ANNOTATION_DRAINING, LABEL_ENTRY } from "../api/wellknown.ts";
import { podCondition } from "../core/health.ts";
import type { EngineQueue } from "./engine-metrics.ts";

export interface ConfirmInput {
  /** The pod as this replica's cache shows it. */
  readonly pod: Pod;
  readonly routerId: string;
  /** This replica's legs in flight on the pod. */
  readonly inFlight: number;
  /**
   * The engine's queue from a scrape that began after this replica saw the mark (an older one
   * may predate requests that arrived since); undefined while there is none.
   */
  readonly engine: EngineQueue | undefined;
}

export type ConfirmDecision = { readonly confirm: true } | { readonly confirm: false; readonly reason: string };

/**
 * Confirm once the pod is a marked entry pod not yet confirmed by `routerId`, not being deleted,
 * this replica has nothing in flight on it, and the engine reports zero running and waiting
 * requests. An engine whose containers are not ready holds no request (they died with it), so
 * no scrape is needed then; an engine that is up but unreadable is never read as idle.
 */
export function confirmDrain(input: ConfirmInput): ConfirmDecision {
  const { pod } = input;
  const annotations = pod.metadata.annotations ?? {};
  if (pod.metadata.labels?.[LABEL_ENTRY] !== "true")
    return { confirm: false, reason: "not an entry pod (workers take no requests)" };
  if (annotations[ANNOTATION_DRAINING] === undefined) return { confirm: false, reason: "not marked draining" };
  if (pod.metadata.deletionTimestamp !== undefined) return { confirm: false, reason: "being deleted" };
  if (annotations[drainedAnnotation(input.routerId)] === "true") return { confirm: false, reason: "already confirmed" };
  if (input.inFlight > 0)
    return { confirm: false, reason: `${input.inFlight} request leg(s) of this router in flight` };
  if (podCondition(pod, "ContainersReady")?.status === "False") return { confirm: true };
  const engine = input.engine;
  if (engine === undefined) return { confirm: false, reason: "no engine metrics read since the mark was seen" };
  if (!engine.ok) return { confirm: false, reason: `engine metrics unreadable: ${engine.reason}` };
  const queued = engine.running + engine.waiting;
  if (queued > 0)
    return {
      confirm: false,
      reason: `the engine reports ${engine.running} running and ${engine.waiting} waiting request(s)`,
    };
  return { confirm: true };
}

/** The merge patch of `routerId`'s confirmation, with the pod's uid as precondition. */
export function confirmationPatch(
  pod: Pod,
  routerId: string,
): { metadata: { uid: string; annotations: Record<string, string> } } {
  return { metadata: { uid: pod.metadata.uid ?? "", annotations: { [drainedAnnotation(routerId)]: "true" } } };
}
