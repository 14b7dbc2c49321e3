/**
 * The dashboard's timeline: serving capacity against the group budget's floor, requests per
 * second by outcome (requests.ts), and marks where something happened (a step began, a new update revision, a
 * condition changed reason). Pure: each sample extends the previous timeline; it is bounded, the
 * oldest points dropping first.
 */
import { meterRequests } from "./requests.ts";
import type { RequestMeter, RequestRates, RequestReading } from "./requests.ts";
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
  /** Requests finished per second by outcome, over the routers reporting (undefined: none reports — a gap). */
  readonly requests: RequestRates | undefined;
}

export interface TimelineMark {
  readonly t: number;
  readonly label: string;
}

/** Of the routers known at the last point, how many report their requests (undefined: none known). */
export interface RequestSources {
  readonly reporting: number;
  readonly known: number;
}

export interface Timeline {
  readonly startMs: number;
  readonly points: readonly TimelinePoint[];
  readonly marks: readonly TimelineMark[];
  readonly requestSources: RequestSources | undefined;
  /** What the last sample saw, to tell changes and rates (not drawn). */
  readonly last:
    | {
        readonly atMs: number;
        readonly meter: RequestMeter;
        /** `namespace/name` → update revision and the reasons of its conditions. */
        readonly seen: Readonly<Record<string, string>>;
      }
    | undefined;
}

export function emptyTimeline(startMs: number): Timeline {
  return { startMs, points: [], marks: [], requestSources: undefined, last: undefined };
}

/**
 * The timeline with one more point at `snapshot.nowMs`, and marks for what changed (and `marks`).
 * `readings`: the latest request counters of each router (or of the simulator), undefined when
 * there is no router at all.
 */
export function sampleTimeline(
  timeline: Timeline,
  snapshot: Snapshot,
  readings: Readonly<Record<string, RequestReading | undefined>> | undefined,
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
  const metered = meterRequests(timeline.last?.meter ?? {}, readings ?? {}, snapshot.nowMs);
  const point: TimelinePoint = {
    t,
    serving: snapshot.modelServings.reduce((sum, view) => sum + view.servingGroups, 0),
    floor: snapshot.modelServings.reduce((sum, view) => sum + view.floorGroups, 0),
    requests: metered.rates,
  };
  return {
    startMs: timeline.startMs,
    points: [...timeline.points, point].slice(-MAX_POINTS),
    marks: [...timeline.marks, ...newMarks].slice(-MAX_MARKS),
    requestSources: metered.known === 0 ? undefined : { reporting: metered.reporting, known: metered.known },
    last: { atMs: snapshot.nowMs, meter: metered.meter, seen },
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
