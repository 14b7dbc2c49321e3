/**
 * Recording the update revision, StatefulSet style (DESIGN §2.6, §2.8): reuse, advance, or create,
 * with collisions resolved by `collisionCount`. Pure: the caller executes the returned action and
 * persists `status.collisionCount` when the plan's differs from the one it passed in.
 */
import type { Owner } from "../identity.ts";
import type { ControllerRevision, DecodeResult, StoredRevision } from "./controller-revision.ts";
import { encodeControllerRevision } from "./controller-revision.ts";
import type { RevisionData } from "./format.ts";
import { revisionHash, revisionName, sameRevision } from "./hash.ts";
import { compareStrings } from "../maps.ts";

export interface RevisionRecordInput {
  readonly owner: Owner;
  /** Every ControllerRevision labelled with this ModelServing, decoded (unreadable ones included). */
  readonly existing: readonly DecodeResult[];
  /** The current projection, `revisionData(ms)`. */
  readonly data: RevisionData;
  /** `status.collisionCount` (0 when unset). */
  readonly collisionCount: number;
}

/**
 * What to do so that a revision equal to `data` exists with the highest number. Every variant names
 * the resulting update revision, its number and the collision count to persist in status.
 */
export type RevisionRecordPlan =
  /** The latest revision already equals the data: nothing to write. */
  | { readonly kind: "reuse"; readonly name: string; readonly revision: number; readonly collisionCount: number }
  /** An older revision equals the data (a rollback): set its `revision` to `revision`; data unchanged. */
  | {
      readonly kind: "advance";
      readonly name: string;
      readonly from: number;
      readonly revision: number;
      readonly collisionCount: number;
    }
  /** No revision equals the data: create `controllerRevision`. */
  | {
      readonly kind: "create";
      readonly name: string;
      readonly revision: number;
      readonly collisionCount: number;
      readonly controllerRevision: ControllerRevision;
    }
  /** Every candidate name was taken: only possible with a hash collision between collision counts. */
  | { readonly kind: "blocked"; readonly reason: string };

/**
 * Plans the revision record for `data`. The equal revision is found semantically (`sameRevision`)
 * among readable revisions owned by `owner.uid`, so a revision written by an older controller is
 * reused rather than duplicated. The next number is one more than the highest of all existing
 * revisions, readable or not. A new revision's name `<ms>-<hash>` that is already taken by a
 * different (or unreadable, or foreign) revision is a collision: the count is bumped and the name
 * recomputed, at most `existing.length + 1` times; n names are taken, so n+1 distinct candidates
 * always leave one free.
 */
export function planRevisionRecord(input: RevisionRecordInput): RevisionRecordPlan {
  const { owner, existing, data, collisionCount } = input;
  const readable = existing.flatMap((result) =>
    result.ok && result.revision.ownerUid === owner.uid ? [result.revision] : [],
  );
  const maxRevision = Math.max(0, ...existing.map(revisionNumberOf));
  const equal = latestEqual(readable, data, collisionCount);
  if (equal !== undefined && equal.revision === maxRevision) {
    return { kind: "reuse", name: equal.name, revision: equal.revision, collisionCount };
  }
  if (equal !== undefined) {
    return { kind: "advance", name: equal.name, from: equal.revision, revision: maxRevision + 1, collisionCount };
  }
  const taken = new Set(
    existing.flatMap((result) => (result.ok ? [result.revision.name] : result.name === undefined ? [] : [result.name])),
  );
  for (let count = collisionCount; count <= collisionCount + existing.length; count++) {
    const name = revisionName(owner.name, revisionHash(data, count));
    if (taken.has(name)) continue; // a different revision holds this name: a collision
    const controllerRevision = encodeControllerRevision({
      owner,
      data,
      revision: maxRevision + 1,
      collisionCount: count,
    });
    return { kind: "create", name, revision: maxRevision + 1, collisionCount: count, controllerRevision };
  }
  return {
    kind: "blocked",
    reason: `every revision name for collision counts ${collisionCount}..${collisionCount + existing.length} is taken`,
  };
}

/** The highest-numbered readable revision equal to `data` (ties broken by name, for determinism). */
function latestEqual(
  readable: readonly StoredRevision[],
  data: RevisionData,
  collisionCount: number,
): StoredRevision | undefined {
  const current = { hash: revisionHash(data, collisionCount), data };
  const equal = readable.filter((stored) => sameRevision(stored, current));
  return equal.sort((a, b) => b.revision - a.revision || compareStrings(a.name, b.name))[0];
}

function revisionNumberOf(result: DecodeResult): number {
  return result.ok ? result.revision.revision : (result.revision ?? 0);
}
