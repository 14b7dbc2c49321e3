import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { STALE_MS } from "./requests.ts";
import { emptyTimeline, sampleTimeline } from "./timeline.ts";
import type { Timeline } from "./timeline.ts";

const at = (nowMs: number) => ({ nowMs, modelServings: [] });
const router = (atMs: number, ok: number) => ({ totals: { ok, failed: 0, cut: 0 }, atMs });

describe("sampleTimeline: requests per second", () => {
  it("no router: no rates and no sources; routers: their summed rate, a gap when none reports", () => {
    let timeline: Timeline = sampleTimeline(emptyTimeline(0), at(0), undefined);
    assert.deepEqual([timeline.points[0]?.requests, timeline.requestSources], [undefined, undefined]);
    timeline = sampleTimeline(timeline, at(1_000), { a: router(1_000, 0), b: undefined });
    assert.equal(timeline.points[1]?.requests, undefined, "a first reading gives no rate: a gap");
    assert.deepEqual(timeline.requestSources, { reporting: 0, known: 2 });
    timeline = sampleTimeline(timeline, at(2_000), { a: router(2_000, 4), b: undefined });
    assert.deepEqual(timeline.points[2]?.requests, { ok: 4, failed: 0, cut: 0 });
    assert.deepEqual(timeline.requestSources, { reporting: 1, known: 2 });
    // Router a stops answering: its last reading ages, then the line has a gap (not a zero).
    const late = 2_000 + STALE_MS + 1;
    timeline = sampleTimeline(timeline, at(late), { a: router(2_000, 4), b: undefined });
    assert.equal(timeline.points[3]?.requests, undefined);
    assert.deepEqual(
      timeline.points.map((point) => point.t),
      [0, 1, 2, late / 1000],
    );
  });
});
