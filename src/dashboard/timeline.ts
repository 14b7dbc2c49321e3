/**
 * The dashboard's timeline: serving capacity against the group budget's floor, requests per
 * second by outcome, and marks where something happened (a step began, a new update revision, a
 * condition changed reason). Pure: each sample extends the previous timeline; it is bounded, the
 * oldest points dropping first.
 */
import type { Snapshot } from "./snapshot.ts";

/** Points kept: an hour at one a second. */
export const MAX_POINTS = 3600;
/** Marks kept. */
export const MAX_MARKS = 500;

export interface TimelinePoint {
  /** Seconds since the timeline started. */
  readonly t: number;
  /** Groups serving at full capacity, over every ModelServing. */
  readonly serving: number;
  /** The groups the budgets keep serving (replicas − group maxUnavailable), over every ModelServing. */
  readonly floor: number;
  /** Requests finished since the previous point, per second, by outcome (undefined: no router seen). */
  readonly requests: { readonly ok: number; readonly failed: number; readonly cut: number } | undefined;
}

export interface TimelineMark {
  readonly t: number;
  readonly label: string;
}

/** Requests finished so far, by outcome (counts only grow). */
export interface RequestTotals {
  readonly ok: number;
  readonly failed: number;
  readonly cut: number;
}

export interface Timeline {
  readonly startMs: number;
  readonly points: readonly TimelinePoint[];
  readonly marks: readonly TimelineMark[];
  /** What the last sample saw, to tell changes and rates (not drawn). */
  readonly last:
    | {
        readonly atMs: number;
        readonly totals: RequestTotals | undefined;
        /** `namespace/name` → update revision and the reasons of its conditions. */
        readonly seen: Readonly<Record<string, string>>;
      }
    | undefined;
}

export function emptyTimeline(startMs: number): Timeline {
  return { startMs, points: [], marks: [], last: undefined };
}

/** The timeline with one more point at `snapshot.nowMs`, and marks for what changed (and `marks`). */
export function sampleTimeline(
  timeline: Timeline,
  snapshot: Snapshot,
  totals: RequestTotals | undefined,
  marks: readonly string[] = [],
): Timeline {
  const t = Math.max(0, (snapshot.nowMs - timeline.startMs) / 1000);
  const seen: Record<string, string> = {};
  const newMarks: TimelineMark[] = marks.map((label) => ({ t, label }));
  for (const view of snapshot.modelServings) {
    const key = `${view.namespace}/${view.name}`;
    const reasons = view.conditions.map((condition) => `${condition.type}=${condition.reason}`).join(" ");
    seen[key] = `${view.updateRevision ?? ""}|${reasons}`;
    const before = timeline.last?.seen[key];
    if (before === undefined) continue;
    const [oldRevision, oldReasons] = before.split("|");
    if (oldRevision !== (view.updateRevision ?? ""))
      newMarks.push({ t, label: `${view.name}: update revision ${view.updateRevisionNumber}` });
    else {
      const changed = changedReasons(oldReasons, reasons);
      if (changed !== "") newMarks.push({ t, label: `${view.name}: ${changed}` });
    }
  }
  const point: TimelinePoint = {
    t,
    serving: snapshot.modelServings.reduce((sum, view) => sum + view.servingGroups, 0),
    floor: snapshot.modelServings.reduce((sum, view) => sum + view.floorGroups, 0),
    requests: rates(timeline.last, totals, snapshot.nowMs),
  };
  return {
    startMs: timeline.startMs,
    points: [...timeline.points, point].slice(-MAX_POINTS),
    marks: [...timeline.marks, ...newMarks].slice(-MAX_MARKS),
    last: { atMs: snapshot.nowMs, totals, seen },
  };
}

/** The conditions whose reason is new, `Progressing=RolloutWaiting`. */
function changedReasons(before: string | undefined, after: string): string {
  const old = new Set((before ?? "").split(" "));
  return after
    .split(" ")
    .filter((reason) => reason !== "" && !old.has(reason))
    .join(", ");
}

function rates(last: Timeline["last"], totals: RequestTotals | undefined, nowMs: number): TimelinePoint["requests"] {
  if (totals === undefined) return undefined;
  const before = last?.totals;
  const seconds = last === undefined ? 0 : (nowMs - last.atMs) / 1000;
  if (before === undefined || seconds <= 0) return { ok: 0, failed: 0, cut: 0 };
  const per = (now: number, then: number): number => Math.max(0, now - then) / seconds;
  return {
    ok: per(totals.ok, before.ok),
    failed: per(totals.failed, before.failed),
    cut: per(totals.cut, before.cut),
  };
}
