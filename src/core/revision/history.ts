/**
 * Revision history (DESIGN §2.7, seed §3): which revisions are live, and which history GC may
 * delete. A revision is live while anything may still build pods from it, including a unit whose
 * pods are all gone but whose durable record (DESIGN §4) still names it.
 */
import { compareStrings } from "../maps.ts";

export interface LiveRevisionSources {
  readonly currentRevision: string | undefined;
  readonly updateRevision: string | undefined;
  /** `tandem.dev/revision` label of every existing pod of the ModelServing. */
  readonly podRevisionNames: Iterable<string>;
  /** Revisions named by durable unit records (`status.units[].revision`). */
  readonly unitRecordRevisionNames: Iterable<string>;
}

/** The names of every live revision: referenced by status, by a pod, or by a unit record. */
export function liveRevisionNames(sources: LiveRevisionSources): ReadonlySet<string> {
  const live = new Set<string>([...sources.podRevisionNames, ...sources.unitRecordRevisionNames]);
  if (sources.currentRevision !== undefined) live.add(sources.currentRevision);
  if (sources.updateRevision !== undefined) live.add(sources.updateRevision);
  return live;
}

/** A ControllerRevision's name and number, readable or not. */
export interface RevisionSummary {
  readonly name: string;
  readonly revision: number;
}

/**
 * Names of the revisions to delete: the non-live ones beyond `revisionHistoryLimit` (the limit
 * counts only non-live revisions), oldest (lowest number, then name) first. Live revisions are never
 * returned, however many there are.
 */
export function planHistoryGc(
  revisions: readonly RevisionSummary[],
  live: ReadonlySet<string>,
  revisionHistoryLimit: number,
): string[] {
  const candidates = revisions
    .filter((summary) => !live.has(summary.name))
    .sort((a, b) => a.revision - b.revision || compareStrings(a.name, b.name));
  const excess = Math.max(0, candidates.length - Math.max(0, revisionHistoryLimit));
  return candidates.slice(0, excess).map((summary) => summary.name);
}
