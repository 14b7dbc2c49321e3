/**
 * The controller's brain: `plan(observed, nowMs)` → actions as data (DESIGN §5). Pure: it never
 * reads a clock, randomness or I/O; `nowMs` is an argument and everything else is in `observed`.
 *
 * Order of the returned actions (docs/design/controller-model.md): revision records (barriers),
 * the rollout's events (events.ts), pod and Service writes, the status write, then revision GC.
 */
import type { Condition, ModelServingStatus, RecreateRecord } from "../api/schema.ts";
import { LABEL_REVISION } from "../api/wellknown.ts";
import type { Pod } from "../api/kube.ts";
import type { Action, Plan } from "./actions.ts";
import { releaseUnplaced } from "./tracking.ts";
import { baseLayout, instanceStates, resolver } from "./instances.ts";
import { planRecreate } from "./recreate.ts";
import type { Layout } from "./instances.ts";
import { pauseBroken } from "./invariants.ts";
import { planRollout } from "./rollout.ts";
import type { RolloutDecision } from "./rollout.ts";
import { planLifecycle, newWork } from "./lifecycle.ts";
import type { Work } from "./lifecycle.ts";
import { parsePodIdentity } from "./identity.ts";
import { buildModel } from "./model.ts";
import { positionOf, settleFor } from "./ordinals.ts";
import type { OrdinalTable } from "./ordinals.ts";
import type { Model } from "./model.ts";
import type { Observed } from "./observed.ts";
import { liveRevisionNames, planHistoryGc } from "./revision/history.ts";
import { sameCanonicalJson } from "./revision/canonical.ts";
import { planRevisions } from "./revisions.ts";
import type { Revisions } from "./revisions.ts";
import { computeStatus, ordinalsField, settleConditions } from "./status.ts";
import { rolloutEvents } from "./events.ts";

/** Plans one reconcile of one ModelServing at time `nowMs` (integer milliseconds). */
export function plan(observed: Observed, nowMs: number): Plan {
  // Being deleted, a ModelServing gets no new pods (garbage collection removes them again) and
  // its pods' deletion must not wait for a recovery: they are only released.
  if (isDeleting(observed.modelServing))
    return { actions: releaseUnplaced(observed.pods, () => false), requeueAfterMs: undefined };
  const built = buildModel(observed);
  if (!built.ok) {
    const message = built.problems
      .slice(0, 5)
      .map((problem) => `${problem.path}: ${problem.reason}`)
      .join("; ");
    return blockedPlan(
      observed,
      built.raw.generation,
      { reason: "InvalidSpec", message: `The spec is invalid; nothing is changed until it is fixed: ${message}.` },
      nowMs,
    );
  }
  const stored = built.model;
  const revisions = planRevisions(stored);
  if (!revisions.ok)
    return blockedPlan(observed, stored.generation, { reason: "RevisionCollision", message: revisions.reason }, nowMs);
  const work = newWork();
  work.actions.push(...revisions.revisions.actions);
  const storedStates = instanceStates(stored, revisions.revisions);
  const rollout = planRollout(storedStates, baseLayout(stored, revisions.revisions), work.unreadable);
  const layout = rollout.layout;
  // The runtime assert of pauseHolds: a plan that would move a unit while paused is a bug, refused.
  const moved = pauseBroken(stored.ms.spec.rolloutStrategy.paused, stored.ms.status ?? {}, {
    units: layout.units,
    update: revisions.revisions.update.name,
  });
  if (moved.length > 0)
    return blockedPlan(
      observed,
      stored.generation,
      {
        reason: "InvariantViolated",
        message: `Refusing to act on a plan that breaks pauseHolds, a controller bug (please report it): ${moved.slice(0, 3).join("; ")}`,
      },
      nowMs,
    );
  // A succession moves units between positions: written first, acted on once it is observed.
  if (rollout.succeeded) return successionPlan(stored, revisions.revisions, rollout, work);
  // Ordinals settled for this layout touch no placed pod, so the states computed stay true.
  const model: Model = { ...stored, ordinals: settleFor(stored, layout, stored.ordinals.copy()) };
  const states = { ...storedStates, model };
  const recreate = planRecreate(states, layout, resolver(revisions.revisions, work.unreadable));
  // New unit records, and a recreate request taken up, are durable before any pod that depends
  // on them is created or deleted.
  let written: ModelServingStatus = model.ms.status ?? {};
  if (rollout.recordsChanged || recreate.taken || !sameOrdinals(model, stored)) {
    written = withRecreate(recordsStatus(written, revisions.revisions, layout, model.ordinals), recreate.record);
    work.actions.push({ type: "WriteStatus", status: written, barrier: true });
  }
  // The rollout's events go here, once the revision and records writes they follow are made.
  const eventsAt = work.actions.length;
  work.actions.push(...recreate.events);
  const desired = planLifecycle(states, layout, nowMs, work, recreate.lifecycle);
  work.actions.push(...releaseUnplaced(observed.pods, (pod) => isPlaced(model, pod)));
  const waiting = { ...rollout, waiting: [...work.retiredWaits, ...rollout.waiting, ...recreate.waiting] };
  const computed = computeStatus(model, revisions.revisions, layout, desired, waiting, work, nowMs);
  const status = withRecreate(computed, recreate.record);
  if (!sameStatus(status, written)) work.actions.push({ type: "WriteStatus", status, barrier: false });
  work.actions.splice(
    eventsAt,
    0,
    ...rolloutEvents(model.ms.status ?? {}, status, {
      paused: model.ms.spec.rolloutStrategy.paused,
      rolledBack: advancedRevision(revisions.revisions),
    }),
  );
  work.actions.push(...collectRevisions(model, revisions.revisions, layout, work));
  return {
    actions: work.actions,
    requeueAfterMs: work.recheckAtMs === undefined ? undefined : Math.max(0, work.recheckAtMs - nowMs),
  };
}

/** The revision this plan advances to the newest number (a rollback to an equal older spec), if any. */
function advancedRevision(revisions: Revisions): { name: string; revision: number } | undefined {
  const advance = revisions.actions.find((action) => action.type === "AdvanceRevision");
  return advance === undefined ? undefined : { name: advance.name, revision: advance.revision };
}

/** Both models map positions to the same ordinals. */
function sameOrdinals(a: Model, b: Model): boolean {
  return sameCanonicalJson(a.ordinals.entries(), b.ordinals.entries());
}

/** The ModelServing as stored has a deletionTimestamp. */
function isDeleting(modelServing: unknown): boolean {
  const metadata = (modelServing as { metadata?: { deletionTimestamp?: unknown } } | null)?.metadata;
  return metadata?.deletionTimestamp !== undefined && metadata.deletionTimestamp !== null;
}

/** `pod` is the one the model's tree holds under its identity. */
function isPlaced(model: Model, pod: Pod): boolean {
  const id = parsePodIdentity(model.owner.name, pod.metadata.name, pod.metadata.labels);
  if (id === undefined) return false;
  const at = positionOf(model.ordinals, id);
  return model.tree.get(at.group)?.get(at.role)?.get(at.instance)?.get(id.index)?.pod === pod;
}

/** The stored status with the rollout's records, revisions and ordinals, nothing else changed. */
function recordsStatus(
  stored: ModelServingStatus,
  revisions: Revisions,
  layout: Layout,
  ordinals: OrdinalTable,
): ModelServingStatus {
  const { units: _previous, ordinals: _ordinals, ...rest } = stored; // eslint-disable-line @typescript-eslint/no-unused-vars -- dropped on purpose
  return {
    ...rest,
    currentRevision: layout.currentName,
    updateRevision: revisions.update.name,
    collisionCount: revisions.collisionCount,
    ...(layout.units.length > 0 ? { units: [...layout.units] } : {}),
    ...ordinalsField(ordinals),
  };
}

/**
 * A plan with a succession (docs/design/succession.md): the records and ordinals it decided,
 * written as a barrier, and nothing else. Pods are placed by the stored ordinals, and acting on
 * them under the new ones before the write is observed could delete the successor; the next plan
 * (right away) reads the new ones, where the outdated unit is surplus and drained as such. A
 * restart in between finds either map, each consistent with the pods.
 */
function successionPlan(model: Model, revisions: Revisions, rollout: RolloutDecision, work: Work): Plan {
  const status = recordsStatus(model.ms.status ?? {}, revisions, rollout.layout, rollout.ordinals);
  work.actions.push({ type: "WriteStatus", status, barrier: true });
  // What this write changes (a new update revision, a rollback's advance) is not seen as a change
  // by the next plan, so its events go now.
  work.actions.push(
    ...rolloutEvents(model.ms.status ?? {}, status, {
      paused: model.ms.spec.rolloutStrategy.paused,
      rolledBack: advancedRevision(revisions),
    }),
  );
  return { actions: work.actions, requeueAfterMs: 0 };
}

/** `status` with `record` as its `recreate` (none when undefined). */
function withRecreate(status: ModelServingStatus, record: RecreateRecord | undefined): ModelServingStatus {
  const { recreate: _stored, ...rest } = status; // eslint-disable-line @typescript-eslint/no-unused-vars -- replaced on purpose
  return record === undefined ? rest : { ...rest, recreate: record };
}

/** Deletes the revisions GC may collect: not live after this plan, beyond the history limit. */
function collectRevisions(model: Model, revisions: Revisions, layout: Layout, work: Work): Action[] {
  const podRevisionNames = new Set(model.podRevisionNames);
  for (const action of work.actions)
    if (action.type === "CreatePod") podRevisionNames.add(action.pod.metadata.labels?.[LABEL_REVISION] ?? "");
  const live = liveRevisionNames({
    currentRevision: layout.currentName,
    updateRevision: revisions.update.name,
    podRevisionNames,
    unitRecordRevisionNames: [...(model.ms.status?.units ?? []), ...layout.units].map((record) => record.revision),
  });
  const summaries = model.decoded.flatMap((result) =>
    result.ok
      ? [{ name: result.revision.name, revision: result.revision.revision }]
      : result.name !== undefined && result.revision !== undefined
        ? [{ name: result.name, revision: result.revision }]
        : [],
  );
  return planHistoryGc(summaries, live, model.ms.spec.revisionHistoryLimit).map((name): Action => ({
    type: "DeleteRevision",
    name,
  }));
}

/** A plan that only reports why nothing can be done (the stored status is otherwise kept). */
function blockedPlan(
  observed: Observed,
  generation: number,
  blocked: { reason: string; message: string },
  nowMs: number,
): Plan {
  const stored = storedStatus(observed.modelServing);
  const conditions: Condition[] = settleConditions(
    stored.conditions ?? [],
    [{ type: "RolloutBlocked", status: "True", ...blocked }],
    generation,
    nowMs,
  );
  const status: ModelServingStatus = { ...stored, observedGeneration: generation, conditions };
  return {
    actions: sameStatus(status, stored) ? [] : [{ type: "WriteStatus", status, barrier: false }],
    requeueAfterMs: undefined,
  };
}

function storedStatus(modelServing: unknown): ModelServingStatus {
  const status = (modelServing as { status?: unknown } | null)?.status;
  return typeof status === "object" && status !== null ? status : {};
}

/** Equal as canonical JSON: writing `a` over `b` would change nothing. */
function sameStatus(a: ModelServingStatus, b: ModelServingStatus): boolean {
  return sameCanonicalJson(a, b);
}
