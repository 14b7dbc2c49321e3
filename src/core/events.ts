/**
 * The controller's Kubernetes Events (docs/design/events.md): one fixed set of reasons a person can
 * filter on (`kubectl get events --field-selector reason=DrainTimeout`), each with its one type.
 *
 * Events are actions like any other (`RecordEvent`), planned where the decision is made and only on
 * a transition: with the write that makes the change (a pod created, deleted, marked, patched), or
 * from a difference between the stored status and the one this plan writes. A converged system
 * plans no write and so no event, and a restarted controller raises none for what it finds done.
 * Repeats of one event (a write that failed and is planned again) are folded into a count by the
 * engine's recorder, not here: folding needs a clock. Pure.
 */
import type { ModelServingStatus } from "../api/schema.ts";
import type { Action } from "./actions.ts";

/** Every reason the controller records, and the type each is always recorded with. */
export const EVENT_TYPES = {
  /** An instance's pods are created: scale-up, rollout replacement, surge, recovery. */
  InstanceCreated: "Normal",
  /** A unit's pods are deleted on purpose, after its drain: scale-down, replacement, surge removed. */
  InstanceDeleted: "Normal",
  /** Pods that serve are taken out of traffic; the controller waits for the router's confirmation. */
  DrainStarted: "Normal",
  /** The router confirmed every serving entry of a draining unit before the timeout. */
  DrainConfirmed: "Normal",
  /** `spec.drain.timeoutSeconds` passed without every confirmation; the controller proceeds anyway. */
  DrainTimeout: "Warning",
  /** The update revision changed to one the units do not all run. */
  RolloutStarted: "Normal",
  /** The rollout waits for `spec.rolloutStrategy.paused` (the Progressing condition turned RolloutPaused). */
  RolloutPaused: "Normal",
  /** A paused rollout goes on (the Progressing condition is no longer RolloutPaused). */
  RolloutResumed: "Normal",
  /** The current revision became the update revision: every unit runs it. */
  RolloutCompleted: "Normal",
  /** The spec went back to an older revision (`tandem rollout undo`): its number advances. */
  RolledBack: "Normal",
  /** Container images patched in place (InPlaceUpdate), after the drain. */
  InPlacePatched: "Normal",
  /** Pods already patched in place toward one revision are patched again toward another. */
  InPlaceTakeover: "Normal",
  /** Patched pods verified on their new images and put back into traffic. */
  InPlaceUpdated: "Normal",
  /** A patched container does not run its new image (crash loop, pull error): the update stalls. */
  InPlaceVerifyFailed: "Warning",
  /** A failed unit is deleted to be rebuilt, as `spec.recoveryPolicy` says. */
  Recovering: "Warning",
  /** An explicit recreate request (`tandem rollout restart --recreate`) is taken up: its unit's pods are replaced. */
  RecreateStarted: "Normal",
  /** Every pod an explicit recreate request replaces is gone; the unit is rebuilt. */
  RecreateCompleted: "Normal",
  /** An explicit recreate request does not fit the spec (or cannot be read) and is refused. */
  RecreateRejected: "Warning",
} as const satisfies Record<string, "Normal" | "Warning">;

export type EventReason = keyof typeof EVENT_TYPES;

/** The RecordEvent action of `reason` (its type from `EVENT_TYPES`), regarding `pod` or else the ModelServing. */
export function recordEvent(reason: EventReason, message: string, pod?: string): Action {
  return {
    type: "RecordEvent",
    eventType: EVENT_TYPES[reason],
    reason,
    message,
    ...(pod === undefined ? {} : { pod }),
  };
}

/** The Progressing condition's reason while a rollout waits for `spec.rolloutStrategy.paused`. */
export const PAUSED_REASON = "RolloutPaused";

/**
 * The rollout's transitions between the status the plan observed (`before`) and the one it writes
 * (`after`) under a spec whose rollout is `paused` or not. `rolledBack` names the revision whose number this plan advances (a rollback), if any:
 * that is reported as RolledBack rather than as a new rollout. A status never written before (a
 * new ModelServing) starts no rollout.
 */
export function rolloutEvents(
  before: ModelServingStatus,
  after: ModelServingStatus,
  spec: {
    readonly paused: boolean;
    readonly rolledBack: { readonly name: string; readonly revision: number } | undefined;
  },
): Action[] {
  const { rolledBack } = spec;
  const events: Action[] = [];
  const { currentRevision: current, updateRevision: update } = after;
  if (rolledBack !== undefined) {
    events.push(
      recordEvent(
        "RolledBack",
        `Rolling back to the spec of revision ${rolledBack.name} (now number ${rolledBack.revision}) from ${before.updateRevision ?? "none"}; the rollout moves the units under the usual budgets.`,
      ),
    );
  } else if (before.updateRevision !== undefined && update !== before.updateRevision && update !== current) {
    const replaced =
      before.updateRevision === before.currentRevision
        ? ""
        : ` It replaces the rollout to ${before.updateRevision}, which had not completed.`;
    events.push(
      recordEvent(
        "RolloutStarted",
        `Rolling out revision ${update ?? "?"} (current revision ${current ?? "?"}).${replaced}`,
      ),
    );
  }
  const wasPaused = progressingReason(before) === PAUSED_REASON;
  const isPaused = progressingReason(after) === PAUSED_REASON;
  if (!wasPaused && spec.paused && pauseBegins(before, after))
    events.push(
      recordEvent(
        "RolloutPaused",
        `The rollout to ${update ?? "?"} is paused (spec.rolloutStrategy.paused); no further unit moves until it is resumed (tandem rollout resume).`,
      ),
    );
  if (wasPaused && !isPaused && !spec.paused)
    events.push(recordEvent("RolloutResumed", `The rollout to ${update ?? "?"} goes on.`));
  if (before.currentRevision !== undefined && current !== before.currentRevision && current === update) {
    events.push(
      recordEvent(
        "RolloutCompleted",
        `Every unit runs revision ${current ?? "?"}; it is now the current revision (was ${before.currentRevision}).`,
      ),
    );
  }
  return events;
}

/**
 * Whether `after` (under a paused spec, `before` not showing RolloutPaused) is where the pause
 * begins: the first status that shows it (RolloutPaused), or the first of a newly observed paused
 * spec while other work (a recovery) holds the reason and a rollout waits. Under the same spec as
 * `before` (its generation and update revision) the pause began earlier and was announced then:
 * work done while paused gives the reason back without a second announcement.
 */
function pauseBegins(before: ModelServingStatus, after: ModelServingStatus): boolean {
  const sameSpec =
    before.observedGeneration !== undefined &&
    before.observedGeneration === after.observedGeneration &&
    before.updateRevision === after.updateRevision;
  if (sameSpec) return false;
  const reason = progressingReason(after);
  if (reason === PAUSED_REASON) return true;
  return after.updateRevision !== after.currentRevision && reason !== "Converged";
}

function progressingReason(status: ModelServingStatus): string | undefined {
  return status.conditions?.find((condition) => condition.type === "Progressing")?.reason;
}
