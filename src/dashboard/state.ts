/**
 * The state the dashboard's stream carries: where it comes from, the snapshot, and the timeline.
 * `DashboardModel` keeps the timeline between snapshots; it is a pure function of the inputs it
 * is given (time is the snapshot's `nowMs`), so the simulator's feed is deterministic.
 */
import { buildSnapshot } from "./snapshot.ts";
import type { Snapshot, SnapshotInput } from "./snapshot.ts";
import { emptyTimeline, sampleTimeline } from "./timeline.ts";
import type { RequestReading } from "./requests.ts";
import type { RequestSources, Timeline, TimelineMark, TimelinePoint } from "./timeline.ts";

/** One timeline point per this much time at most (marks add points between). */
export const SAMPLE_MS = 1_000;

export interface DashboardSource {
  /** `simulated`: the embedded cluster (virtual time); `cluster`: a real API server. */
  readonly kind: "simulated" | "cluster";
  readonly title: string;
}

export interface DashboardState {
  readonly source: DashboardSource;
  /** What is happening now, e.g. the scenario's step ("Updating ModelServing m"). */
  readonly step: string;
  /** Seconds since the dashboard started (virtual seconds for the simulator). */
  readonly seconds: number;
  /** The scenario ended (the simulator): nothing will change any more. */
  readonly ended: boolean;
  readonly snapshot: Snapshot;
  readonly timeline: {
    readonly points: readonly TimelinePoint[];
    readonly marks: readonly TimelineMark[];
    /** How many of the routers known report their requests; undefined: none known. */
    readonly requestSources: RequestSources | undefined;
  };
}

export class DashboardModel {
  readonly #source: DashboardSource;
  #timeline: Timeline;
  #step = "Starting";
  #ended = false;
  #pendingMarks: string[] = [];

  constructor(source: DashboardSource, startMs: number) {
    this.#source = source;
    this.#timeline = emptyTimeline(startMs);
  }

  /** The step now; it becomes a mark on the timeline at the next state. */
  setStep(step: string): void {
    this.#step = step;
    this.#pendingMarks.push(step);
  }

  end(): void {
    this.#ended = true;
  }

  /**
   * The state for `input`, sampling the timeline when SAMPLE_MS has passed or a mark waits;
   * `requests`: the latest request counters by source (timeline.ts), undefined without a router.
   */
  state(
    input: SnapshotInput,
    requests: Readonly<Record<string, RequestReading | undefined>> | undefined,
  ): DashboardState {
    const snapshot = buildSnapshot(input);
    const last = this.#timeline.last;
    if (last === undefined || this.#pendingMarks.length > 0 || input.nowMs - last.atMs >= SAMPLE_MS) {
      this.#timeline = sampleTimeline(this.#timeline, snapshot, requests, this.#pendingMarks);
      this.#pendingMarks = [];
    }
    return {
      source: this.#source,
      step: this.#step,
      seconds: Math.max(0, (input.nowMs - this.#timeline.startMs) / 1000),
      ended: this.#ended,
      snapshot,
      timeline: {
        points: this.#timeline.points,
        marks: this.#timeline.marks,
        requestSources: this.#timeline.requestSources,
      },
    };
  }
}
