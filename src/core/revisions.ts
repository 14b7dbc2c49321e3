/**
 * The revisions one plan works with: the update revision (the spec's, recorded first if new), the
 * current revision (what units without a record default to, docs/design/controller-model.md), and
 * lookup of any other revision a unit is at. Unreadable revisions are reported, never guessed.
 */
import type { Action } from "./actions.ts";
import type { Model } from "./model.ts";
import type { Revision } from "./pods.ts";
import { planRevisionRecord } from "./revision/record.ts";

export type RevisionLookup =
  { readonly ok: true; readonly revision: Revision } | { readonly ok: false; readonly reason: string };

export interface Revisions {
  readonly update: Revision;
  /** The number of the update revision. */
  readonly updateNumber: number;
  readonly currentName: string;
  readonly collisionCount: number;
  /** Writes that record the update revision; they precede every pod write. */
  readonly actions: readonly Action[];
  lookup(name: string): RevisionLookup;
}

export type RevisionsResult =
  { readonly ok: true; readonly revisions: Revisions } | { readonly ok: false; readonly reason: string };

/** Plans the update revision's record and resolves the current revision's name. */
export function planRevisions(model: Model): RevisionsResult {
  const { data } = model;
  const record = planRevisionRecord({
    owner: model.owner,
    existing: model.decoded,
    data,
    collisionCount: model.ms.status?.collisionCount ?? 0,
  });
  if (record.kind === "blocked") return { ok: false, reason: record.reason };
  const actions: Action[] =
    record.kind === "create"
      ? [{ type: "CreateRevision", revision: record.controllerRevision, barrier: true }]
      : record.kind === "advance"
        ? [{ type: "AdvanceRevision", name: record.name, revision: record.revision, barrier: true }]
        : [];
  const update: Revision = { name: record.name, data };
  // Looked up for every instance, several times per plan: each name is resolved once.
  const found = new Map<string, RevisionLookup>();
  const lookup = (name: string): RevisionLookup => {
    let result = found.get(name);
    if (result === undefined) {
      result = resolveName(model, update, name);
      found.set(name, result);
    }
    return result;
  };
  return {
    ok: true,
    revisions: {
      update,
      updateNumber: record.revision,
      currentName: model.ms.status?.currentRevision ?? update.name,
      collisionCount: record.collisionCount,
      actions,
      lookup,
    },
  };
}

function resolveName(model: Model, update: Revision, name: string): RevisionLookup {
  if (name === update.name) return { ok: true, revision: update };
  const stored = model.revisions.get(name);
  if (stored !== undefined) return { ok: true, revision: { name, data: stored.data } };
  const reason = model.unreadable.get(name) ?? "the ControllerRevision does not exist";
  return { ok: false, reason: `revision ${name} is unreadable: ${reason}` };
}
