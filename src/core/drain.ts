/**
 * Planned deletion with the drain handshake (DESIGN §3). A unit (instance or group) is deleted on
 * purpose in three steps, each observable so a restarted controller continues where it stopped:
 *
 * 1. mark: every live pod of the unit gets `tandem.dev/draining: <now>` (RFC 3339 with
 *    milliseconds) and its serving gate set False (routers stop sending new requests to it); the
 *    mark's write also releases the recovery finalizer (docs/design/pod-tracking.md rule 1);
 * 2. wait (`entryWait`): for each entry pod of the unit that was serving (workers take no
 *    requests, so they follow their entry), until every live router whose scope covers the
 *    namespace has confirmed it (`drained.tandem.dev/<router-id>: "true"`), and no sooner than
 *    `DRAIN_SETTLE_MS` after the mark — with no live router in scope the settle is the whole wait
 *    — or until `drain.timeoutSeconds` have passed since the mark (event DrainTimeout naming the
 *    routers that did not confirm). A router stops being waited for at its `liveUntilMs` (its
 *    Lease not renewed), and a recheck is planned then. A timeout of 0 skips the wait entirely
 *    (no settle either), and so does a unit that never served;
 * 3. delete every pod of the unit.
 *
 * Events go with the writes of each step, so each is planned once (docs/design/events.md):
 * DrainStarted with the first mark of a unit that has a wait ahead, DrainConfirmed or DrainTimeout
 * with the step the wait let through, InstanceDeleted with the deletions.
 *
 * A drain that is no longer needed is cancelled: the mark and every confirmation removed, the
 * gate restored.
 */
import { drainConfirmationKeys, drainConfirmations } from "../api/router-lease.ts";
import { ANNOTATION_DRAINING, SERVING_GATE } from "../api/wellknown.ts";
import type { Action, DeleteReason } from "./actions.ts";
import { recordEvent } from "./events.ts";
import { drainMarkKeys, podCondition } from "./health.ts";
import type { PodView } from "./model.ts";
import { deletePod, releaseOf } from "./tracking.ts";

/**
 * The least wait between a mark and the disruption it announces (DESIGN §3.5): long enough for a
 * router registered before the mark to see it, and for its confirmation to be seen.
 */
export const DRAIN_SETTLE_MS = 2_000;

/** The Progressing reason while a drain waits for routers or the settle, and nothing else is written. */
export const DRAIN_WAITING_REASON = "DrainWaiting";

/** How one ModelServing's drains wait. */
export interface DrainPolicy {
  /** `spec.drain.timeoutSeconds`: 0 skips every wait. */
  readonly timeoutSeconds: number;
  /** The routers whose scope covers its namespace, live or not, by id. */
  readonly routers: readonly { readonly id: string; readonly liveUntilMs: number }[];
}

/** A unit whose drain still waits, for status (Progressing `DrainWaiting`). */
export interface DrainWait {
  readonly unitLabel: string;
  /** The entry pods not yet let through. */
  readonly pods: readonly string[];
  /** The live routers in scope that have not confirmed them, sorted; empty while only the settle waits. */
  readonly routers: readonly string[];
  /** When the timeout falls, for the first of those pods. */
  readonly timeoutAtMs: number;
}

/** The serving gate's reason while the controller drains the pod. */
export const DRAINING_REASON = "Draining";

/** RFC 3339 with second precision, as Kubernetes stores condition and event times. */
export function rfc3339(nowMs: number): string {
  return new Date(Math.floor(nowMs / 1000) * 1000).toISOString().replace(".000Z", "Z");
}

/** RFC 3339 with millisecond precision, as the drain mark stores it (the settle is measured from it). */
export function rfc3339Millis(nowMs: number): string {
  return new Date(nowMs).toISOString();
}

/** Sets the pod's serving gate, conditional on the resourceVersion the plan saw. */
export function setServing(
  view: PodView,
  status: "True" | "False",
  reason: string,
  nowMs: number,
): Extract<Action, { type: "SetPodCondition" }> {
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
  /** When to look again (the settle's end, a router's expiry, the timeout), if the unit still waits. */
  readonly recheckAtMs: number | undefined;
  /** What the unit still waits for, if it does. */
  readonly wait: DrainWait | undefined;
}

/** The outcome of one step of a drain: its actions, and whether the unit may now be disrupted. */
export interface DrainProgress extends DrainStep {
  readonly drained: boolean;
}

/**
 * Plans the next step of deleting `pods` (the pods of one unit) on purpose. Pods already being
 * deleted are left alone; `unitLabel` names the unit and why it goes, in events.
 */
export function planDrainedDeletion(
  pods: readonly PodView[],
  policy: DrainPolicy,
  reason: DeleteReason,
  unitLabel: string,
  nowMs: number,
): DrainStep {
  const live = pods.filter((view) => !view.facts.terminating);
  if (live.length === 0) return { actions: [], recheckAtMs: undefined, wait: undefined };
  const step = planDrain(live, policy, { unitLabel, next: "deleting", release: true }, nowMs);
  if (!step.drained) return step;
  const deletions = live.map((view) => deletePod(view, reason));
  const event = recordEvent("InstanceDeleted", `Deleting ${unitLabel}: ${podList(live)}.`);
  return { actions: [...step.actions, event, ...deletions], recheckAtMs: undefined, wait: undefined };
}

/** At most a few pod names, for an event message. */
export function podList(views: readonly PodView[]): string {
  return nameList(
    views.map((view) => view.pod.metadata.name),
    "pod(s)",
  );
}

/** At most a few names after `noun`, for a message. */
function nameList(names: readonly string[], noun: string): string {
  return `${noun} ${names.slice(0, MAX_NAMED).join(", ")}${names.length > MAX_NAMED ? ` and ${names.length - MAX_NAMED} more` : ""}`;
}

const MAX_NAMED = 5;

/** Where the wait of one entry pod stands at `nowMs`. */
interface EntryWait {
  readonly view: PodView;
  /** The routers that confirmed it, sorted. */
  readonly confirmed: readonly string[];
  /** The live routers in scope that have not, sorted. */
  readonly awaited: readonly string[];
  readonly timeoutAtMs: number;
  /** When the wait may end next (settle, a router's expiry, the timeout); undefined once it is over. */
  readonly recheckAtMs: number | undefined;
}

/**
 * The wait of one entry that served (DESIGN §3.5), marked at its mark (or now, when the mark is
 * being written): over once the settle has passed and no live router in scope is left to
 * confirm, or once the timeout has passed. Only a positive timeout gets here.
 */
function entryWait(view: PodView, policy: DrainPolicy, nowMs: number): EntryWait {
  const markMs = view.facts.drainingSinceMs ?? nowMs;
  const timeoutAtMs = markMs + policy.timeoutSeconds * 1000;
  // A timeout shorter than the settle ends the wait first: it is the most the user lets it last.
  const settledAtMs = Math.min(markMs + DRAIN_SETTLE_MS, timeoutAtMs);
  // Confirmations on a pod not marked yet answer an earlier drain (the mark's write removes them).
  const confirmed = view.facts.drainingSinceMs === undefined ? [] : drainConfirmations(view.pod.metadata.annotations);
  const live = policy.routers.filter((router) => nowMs < router.liveUntilMs);
  const pending = live.filter((router) => !confirmed.includes(router.id));
  const awaited = pending.map((router) => router.id);
  if (nowMs >= timeoutAtMs || (nowMs >= settledAtMs && pending.length === 0))
    return { view, confirmed, awaited, timeoutAtMs, recheckAtMs: undefined };
  // A router that stops renewing stops being waited for at its expiry: look again then. Every
  // recheck is in the future (a live router's expiry, a settle or timeout not reached): one in
  // the past would plan again at once, forever.
  const next = nowMs < settledAtMs ? [settledAtMs] : pending.map((router) => router.liveUntilMs);
  return { view, confirmed, awaited, timeoutAtMs, recheckAtMs: Math.min(timeoutAtMs, ...next) };
}

/**
 * Steps 1 and 2 of a drain of `live` (the live pods of one unit): marks the unmarked ones (with
 * `extraAnnotations` of each pod in the same write; with `unit.release`, a drain before a
 * deletion, the mark also releases a pod that holds the recovery finalizer: `markPod`), and says
 * whether the wait is over. Its events
 * name the unit (`unitLabel`) and what follows the wait (`next`): DrainStarted when it marks a unit
 * none of whose pods was marked and a wait lies ahead; once the wait is over, DrainConfirmed naming
 * the routers that confirmed, or DrainTimeout naming those that did not and the pods.
 */
export function planDrain(
  live: readonly PodView[],
  policy: DrainPolicy,
  unit: { readonly unitLabel: string; readonly next: "deleting" | "updating images"; readonly release?: boolean },
  nowMs: number,
  extraAnnotations: (view: PodView) => Readonly<Record<string, string>> = () => ({}),
): DrainProgress {
  const actions: Action[] = [];
  const timeoutSeconds = policy.timeoutSeconds;
  const started =
    timeoutSeconds > 0 &&
    live.every((view) => view.facts.drainingSinceMs === undefined) &&
    live.some((view) => view.id.index === 0 && view.facts.serving);
  if (started)
    actions.push(
      recordEvent(
        "DrainStarted",
        `Draining ${unit.unitLabel}: ${podList(live)} out of traffic; ${startedWait(policy, nowMs)} before ${unit.next}.`,
      ),
    );
  for (const view of live) {
    if (view.facts.drainingSinceMs === undefined)
      actions.push(...markPod(view, { ...extraAnnotations(view) }, unit.release === true, nowMs));
  }
  // Only entries that took traffic need the routers' confirmations: a pod whose gate never opened
  // has no request on it. The gate reason "Draining" (set above) remembers that it was serving.
  const entries = live.filter(
    (view) =>
      view.id.index === 0 && (view.facts.serving || podCondition(view.pod, SERVING_GATE)?.reason === DRAINING_REASON),
  );
  if (timeoutSeconds === 0 || entries.length === 0)
    return { actions, recheckAtMs: undefined, wait: undefined, drained: true };
  const waits = entries.map((view) => entryWait(view, policy, nowMs));
  const waiting = waits.filter((wait) => wait.recheckAtMs !== undefined);
  if (waiting.length > 0)
    return {
      actions,
      recheckAtMs: Math.min(...waiting.map((wait) => wait.recheckAtMs ?? Infinity)),
      wait: drainWait(unit.unitLabel, waiting),
      drained: false,
    };
  const timedOut = waits.filter((wait) => wait.awaited.length > 0);
  if (timedOut.length === 0) {
    const confirmed = [...new Set(waits.flatMap((wait) => wait.confirmed))].sort();
    const who =
      confirmed.length === 0
        ? "no live router routes its namespace, and the settle after the mark is over"
        : `${nameList(confirmed, "router(s)")} confirmed ${podList(entries)}`;
    actions.push(recordEvent("DrainConfirmed", `Drained ${unit.unitLabel}: ${who}; ${unit.next}.`));
  } else {
    const missing = [...new Set(timedOut.flatMap((wait) => wait.awaited))].sort();
    actions.push(
      recordEvent(
        "DrainTimeout",
        `Drain of ${unit.unitLabel} timed out after ${timeoutSeconds}s: ${nameList(missing, "router(s)")} did not confirm ${podList(timedOut.map((wait) => wait.view))}; ${unit.next} anyway, requests still running on them are cut.`,
      ),
    );
  }
  return { actions, recheckAtMs: undefined, wait: undefined, drained: true };
}

/**
 * The mark of one pod (DESIGN §3.2): its gate closed when it serves, `tandem.dev/draining` set
 * with `extra` and stale confirmations removed, in one write (`AnnotatePod` with `gate`). With
 * `release` and the recovery finalizer held, the same write releases the pod too: its deletion
 * after the wait needs no release of its own. Tracking the pod through the drain would buy
 * nothing: a pod lost from a unit being deleted needs no recovery (docs/design/pod-tracking.md
 * rule 3), and a drain cancelled leaves a live pod that rule 5 tracks again.
 */
function markPod(
  view: PodView,
  extra: Readonly<Record<string, string>>,
  release: boolean,
  nowMs: number,
): readonly Action[] {
  return [
    withGate(
      {
        type: "AnnotatePod",
        name: view.pod.metadata.name,
        uid: view.uid,
        annotations: { ...staleConfirmations(view), ...extra, [ANNOTATION_DRAINING]: rfc3339Millis(nowMs) },
        ...(release && view.facts.tracked ? { release: releaseOf(view.pod) } : {}),
      },
      view.facts.serving ? setServing(view, "False", DRAINING_REASON, nowMs) : undefined,
    ),
  ];
}

/** `annotate` writing `gate`'s condition too, when there is one (see `AnnotatePod`). */
export function withGate(
  annotate: Extract<Action, { type: "AnnotatePod" }>,
  gate: Extract<Action, { type: "SetPodCondition" }> | undefined,
): Extract<Action, { type: "AnnotatePod" }> {
  return gate === undefined
    ? annotate
    : { ...annotate, gate: { resourceVersion: gate.resourceVersion, condition: gate.condition } };
}

/** What DrainStarted says the unit waits for. */
function startedWait(policy: DrainPolicy, nowMs: number): string {
  const live = policy.routers.filter((router) => nowMs < router.liveUntilMs).map((router) => router.id);
  if (live.length === 0)
    return `no live router routes its namespace: waiting ${Math.min(DRAIN_SETTLE_MS / 1000, policy.timeoutSeconds)}s`;
  return `waiting up to ${policy.timeoutSeconds}s for ${nameList(live, "router(s)")} to confirm`;
}

/** The entries still waiting, for status. */
function drainWait(unitLabel: string, waiting: readonly EntryWait[]): DrainWait {
  return {
    unitLabel,
    pods: waiting.map((wait) => wait.view.pod.metadata.name),
    routers: [...new Set(waiting.flatMap((wait) => wait.awaited))].sort(),
    timeoutAtMs: Math.min(...waiting.map((wait) => wait.timeoutAtMs)),
  };
}

/**
 * Confirmations left on a pod from an earlier drain (a router that confirmed just as that drain
 * was cancelled), removed with the new mark: they answer a drain that is over, not this one.
 */
function staleConfirmations(view: PodView): Record<string, null> {
  if (!view.facts.marked) return {};
  return Object.fromEntries(drainConfirmationKeys(view.pod.metadata.annotations).map((key) => [key, null]));
}

/**
 * Undoes a drain that is no longer needed: the mark, every router's confirmation and an in-place
 * update's progress mark removed, gate restored when ready.
 */
export function cancelDrain(view: PodView, nowMs: number): readonly Action[] {
  // A pod without a mark (the common case) has nothing to undo.
  if (!view.facts.marked || view.facts.terminating) return NO_ACTIONS;
  const present = drainMarkKeys(view.pod);
  const gate =
    view.facts.containersReady && !view.facts.serving ? setServing(view, "True", "DrainCancelled", nowMs) : undefined;
  return [
    withGate(
      {
        type: "AnnotatePod",
        name: view.pod.metadata.name,
        uid: view.uid,
        annotations: Object.fromEntries(present.map((key) => [key, null])),
      },
      gate,
    ),
  ];
}

/** Opens the gate of a pod whose containers are ready and that is not draining. */
export function openGate(view: PodView, nowMs: number): readonly Action[] {
  const { facts } = view;
  if (facts.terminating || facts.drainingSinceMs !== undefined || facts.serving || !facts.containersReady)
    return NO_ACTIONS;
  return [setServing(view, "True", "ContainersReady", nowMs)];
}
