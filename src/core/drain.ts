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
 * Events go with the writes of each step, so each is planned once (docs/design/events.md):
 * DrainStarted with the first mark of a unit that has a wait ahead, DrainConfirmed or DrainTimeout
 * with the step the wait let through, InstanceDeleted with the deletions.
 *
 * A drain that is no longer needed is cancelled: annotations removed, gate restored.
 */
import { ANNOTATION_DRAINING, SERVING_GATE } from "../api/wellknown.ts";
import type { Action, DeleteReason } from "./actions.ts";
import { recordEvent } from "./events.ts";
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
 * deleted are left alone; `unitLabel` names the unit and why it goes, in events.
 */
export function planDrainedDeletion(pods: readonly PodView[], drainTimeoutSeconds: number, reason: DeleteReason, unitLabel: string, nowMs: number): DrainStep {
  const live = pods.filter((view) => !view.facts.terminating);
  if (live.length === 0) return { actions: [], recheckAtMs: undefined };
  const step = planDrain(live, drainTimeoutSeconds, { unitLabel, next: "deleting" }, nowMs);
  if (!step.drained) return step;
  const deletions = live.map((view) => deletePod(view, reason));
  const event = recordEvent("InstanceDeleted", `Deleting ${unitLabel}: ${podList(live)}.`);
  return { actions: [...step.actions, event, ...deletions], recheckAtMs: undefined };
}

/** At most a few pod names, for an event message. */
export function podList(views: readonly PodView[]): string {
  const names = views.slice(0, MAX_NAMED).map((view) => view.pod.metadata.name);
  return `pod(s) ${names.join(", ")}${views.length > MAX_NAMED ? ` and ${views.length - MAX_NAMED} more` : ""}`;
}

const MAX_NAMED = 5;

/** Prefix of a per-router drain confirmation, `drained.tandem.dev/<router-id>: "true"` (DESIGN §3.4). */
const ROUTER_ACK_PREFIX = "drained.tandem.dev/";

/** The routers that confirmed the pod's drain by name, sorted. */
function routerAcks(view: PodView): string[] {
  const annotations = view.pod.metadata.annotations ?? {};
  return Object.keys(annotations).filter((key) => key.startsWith(ROUTER_ACK_PREFIX) && annotations[key] === "true").map((key) => key.slice(ROUTER_ACK_PREFIX.length)).sort();
}

/**
 * Steps 1 and 2 of a drain of `live` (the live pods of one unit): marks the unmarked ones (with
 * `extraAnnotations` of each pod in the same write), and says whether the wait is over. Its events
 * name the unit (`unitLabel`) and what follows the wait (`next`): DrainStarted when it marks a unit
 * none of whose pods was marked and a wait lies ahead; once the wait is over, DrainConfirmed, or
 * DrainTimeout naming the entries not confirmed.
 */
export function planDrain(
  live: readonly PodView[],
  drainTimeoutSeconds: number,
  unit: { readonly unitLabel: string; readonly next: "deleting" | "updating images" },
  nowMs: number,
  extraAnnotations: (view: PodView) => Readonly<Record<string, string>> = () => ({}),
): DrainProgress {
  const actions: Action[] = [];
  const started = drainTimeoutSeconds > 0 && live.every((view) => view.facts.drainingSinceMs === undefined) && live.some((view) => view.id.index === 0 && view.facts.serving);
  if (started) actions.push(recordEvent("DrainStarted", `Draining ${unit.unitLabel}: ${podList(live)} out of traffic; waiting up to ${drainTimeoutSeconds}s for the router to confirm before ${unit.next}.`));
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
  if (drainTimeoutSeconds === 0 || entries.length === 0) return { actions, recheckAtMs: undefined, drained: true };
  const timedOut = entries.filter((view) => !isDrained(view.pod));
  if (timedOut.length === 0) {
    actions.push(recordEvent("DrainConfirmed", `Drained ${unit.unitLabel}: the router confirmed ${podList(entries)}; ${unit.next}.`));
  } else {
    // Only the routers that confirmed can be named: the controller does not see which routers
    // are live (their Leases), so it names the pods no confirmation came for.
    const confirmed = [...new Set(timedOut.flatMap(routerAcks))];
    const known = confirmed.length === 0 ? "no router confirmed them" : `confirmed only by router(s) ${confirmed.join(", ")}`;
    actions.push(recordEvent("DrainTimeout", `Drain of ${unit.unitLabel} timed out after ${drainTimeoutSeconds}s: ${podList(timedOut)} not confirmed drained (${known}); ${unit.next} anyway, requests still running on them are cut.`));
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
