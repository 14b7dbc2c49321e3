/**
 * Planned deletion with the drain handshake (DESIGN §3). A unit (instance or group) is deleted on
 * purpose in three steps, each observable so a restarted controller continues where it stopped:
 *
 * 1. mark: every live pod of the unit gets `tandem.dev/draining: <now>` and its serving gate set
 *    False (the router stops sending new requests to it);
 * 2. wait: until every entry pod of the unit that was serving is `tandem.dev/drained: "true"`
 *    (the router's ack; workers take no requests, so they follow their entry) or
 *    `drain.timeoutSeconds` have passed since the mark (event DrainTimeout); a timeout of 0 skips
 *    the wait, and so does a unit that never served;
 * 3. delete every pod of the unit.
 *
 * A drain that is no longer needed is cancelled: annotations removed, gate restored.
 */
import { ANNOTATION_DRAINING, SERVING_GATE } from "../api/wellknown.ts";
import type { Action, DeleteReason } from "./actions.ts";
import { DRAIN_MARKS, isDrained, podCondition } from "./health.ts";
import type { PodView } from "./model.ts";
import { deletePod } from "./tracking.ts";

/** The serving gate's reason while the controller drains the pod. */
export const DRAINING_REASON = "Draining";

/** RFC 3339 with second precision, as the drain annotation stores it. */
export function rfc3339(nowMs: number): string {
  return new Date(Math.floor(nowMs / 1000) * 1000).toISOString().replace(".000Z", "Z");
}

/** Sets the pod's serving gate, conditional on the resourceVersion the plan saw. */
export function setServing(view: PodView, status: "True" | "False", reason: string, nowMs: number): Action {
  return {
    type: "SetPodCondition",
    name: view.pod.metadata.name,
    uid: view.uid,
    resourceVersion: view.pod.metadata.resourceVersion ?? "",
    condition: { type: SERVING_GATE, status, reason, lastTransitionTime: rfc3339(nowMs) },
  };
}

/** No action, shared: cancelDrain and openGate are asked for every live pod on most plans. */
const NO_ACTIONS: readonly Action[] = Object.freeze([]);

/** The outcome of one step of a planned deletion. */
export interface DrainStep {
  readonly actions: readonly Action[];
  /** When the wait ends by timeout, if the unit is still waiting. */
  readonly recheckAtMs: number | undefined;
}

/** The outcome of one step of a drain: its actions, and whether the unit may now be disrupted. */
export interface DrainProgress extends DrainStep {
  readonly drained: boolean;
}

/**
 * Plans the next step of deleting `pods` (the pods of one unit) on purpose. Pods already being
 * deleted are left alone; `unitLabel` names the unit in events.
 */
export function planDrainedDeletion(pods: readonly PodView[], drainTimeoutSeconds: number, reason: DeleteReason, unitLabel: string, nowMs: number): DrainStep {
  const live = pods.filter((view) => !view.facts.terminating);
  if (live.length === 0) return { actions: [], recheckAtMs: undefined };
  const step = planDrain(live, drainTimeoutSeconds, { unitLabel, consequence: "deleting anyway" }, nowMs);
  if (!step.drained) return step;
  const deletions = live.map((view) => deletePod(view, reason));
  return { actions: [...step.actions, ...deletions], recheckAtMs: undefined };
}

/**
 * Steps 1 and 2 of a drain of `live` (the live pods of one unit): marks the unmarked ones (with
 * `extraAnnotations` of each pod in the same write), and says whether the wait is over. On a
 * timeout it records DrainTimeout naming the unit and saying what happens next (`consequence`).
 */
export function planDrain(
  live: readonly PodView[],
  drainTimeoutSeconds: number,
  timeout: { readonly unitLabel: string; readonly consequence: string },
  nowMs: number,
  extraAnnotations: (view: PodView) => Readonly<Record<string, string>> = () => ({}),
): DrainProgress {
  const actions: Action[] = [];
  for (const view of live) {
    if (view.facts.drainingSinceMs !== undefined) continue;
    // The gate first: its write carries the resourceVersion the plan saw, which the annotation
    // write would change.
    if (view.facts.serving) actions.push(setServing(view, "False", DRAINING_REASON, nowMs));
    actions.push({ type: "AnnotatePod", name: view.pod.metadata.name, uid: view.uid, annotations: { ...extraAnnotations(view), [ANNOTATION_DRAINING]: rfc3339(nowMs) } });
  }
  // Only entries that took traffic need the router's ack: a pod whose gate never opened has no
  // request on it. The gate reason "Draining" (set above) remembers that it was serving.
  const entries = live.filter((view) => view.id.index === 0 && (view.facts.serving || podCondition(view.pod, SERVING_GATE)?.reason === DRAINING_REASON));
  const deadlineMs = (view: PodView): number => (view.facts.drainingSinceMs ?? nowMs) + drainTimeoutSeconds * 1000;
  const waiting = entries.filter((view) => drainTimeoutSeconds > 0 && !isDrained(view.pod) && nowMs < deadlineMs(view));
  // The next deadline of an entry still waiting: one already past (an entry marked earlier, or
  // acked) is no reason to look again, and a recheck in the past would plan again at once, forever.
  if (waiting.length > 0) return { actions, recheckAtMs: Math.min(...waiting.map(deadlineMs)), drained: false };
  const timedOut = entries.filter((view) => drainTimeoutSeconds > 0 && !isDrained(view.pod));
  if (timedOut.length > 0) {
    actions.push({
      type: "RecordEvent",
      eventType: "Warning",
      reason: "DrainTimeout",
      message: `${timeout.unitLabel}: ${timedOut.map((view) => view.pod.metadata.name).join(", ")} not drained after ${drainTimeoutSeconds}s; ${timeout.consequence}, requests still running on it are cut`,
    });
  }
  return { actions, recheckAtMs: undefined, drained: true };
}

/**
 * Undoes a drain that is no longer needed: annotations removed (an in-place update's progress mark
 * too), gate restored when ready.
 */
export function cancelDrain(view: PodView, nowMs: number): readonly Action[] {
  // A pod without a mark (the common case) has nothing to undo.
  if (!view.facts.marked || view.facts.terminating) return NO_ACTIONS;
  const annotations = view.pod.metadata.annotations ?? {};
  const present = DRAIN_MARKS.filter((key) => annotations[key] !== undefined);
  const gate = view.facts.containersReady && !view.facts.serving ? [setServing(view, "True", "DrainCancelled", nowMs)] : [];
  return [...gate, { type: "AnnotatePod", name: view.pod.metadata.name, uid: view.uid, annotations: Object.fromEntries(present.map((key) => [key, null])) }];
}

/** Opens the gate of a pod whose containers are ready and that is not draining. */
export function openGate(view: PodView, nowMs: number): readonly Action[] {
  const { facts } = view;
  if (facts.terminating || facts.drainingSinceMs !== undefined || facts.serving || !facts.containersReady) return NO_ACTIONS;
  return [setServing(view, "True", "ContainersReady", nowMs)];
}
