import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { liveRevisionNames, planHistoryGc } from "./history.ts";

const revisions = (count: number) =>
  Array.from({ length: count }, (_, index) => ({ name: `m-r${index + 1}`, revision: index + 1 }));

describe("liveRevisionNames", () => {
  it("collects status, pod and unit-record references", () => {
    const live = liveRevisionNames({
      currentRevision: "m-a",
      updateRevision: "m-b",
      podRevisionNames: ["m-b", "m-c"],
      unitRecordRevisionNames: new Set(["m-d"]),
    });
    assert.deepEqual([...live].sort(), ["m-a", "m-b", "m-c", "m-d"]);
  });

  it("handles a ModelServing with no status yet", () => {
    assert.deepEqual(
      [
        ...liveRevisionNames({
          currentRevision: undefined,
          updateRevision: undefined,
          podRevisionNames: [],
          unitRecordRevisionNames: [],
        }),
      ],
      [],
    );
  });
});

describe("planHistoryGc", () => {
  it("deletes nothing within the limit", () => {
    assert.deepEqual(planHistoryGc(revisions(3), new Set(), 3), []);
  });

  it("deletes the oldest non-live revisions beyond the limit, oldest first", () => {
    const shuffled = [...revisions(6)].reverse();
    assert.deepEqual(planHistoryGc(shuffled, new Set(["m-r6"]), 2), ["m-r1", "m-r2", "m-r3"]);
  });

  it("never deletes a live revision, even beyond the limit, and the limit counts only non-live ones", () => {
    // r1 is held by a partition-protected unit record whose pods are all gone; r2 and r3 run.
    const live = new Set(["m-r1", "m-r2", "m-r3"]);
    assert.deepEqual(planHistoryGc(revisions(6), live, 1), ["m-r4", "m-r5"]);
    assert.deepEqual(planHistoryGc(revisions(6), live, 0), ["m-r4", "m-r5", "m-r6"]);
    assert.deepEqual(planHistoryGc(revisions(3), live, 0), []);
  });

  it("orders equal numbers by name, so the plan is deterministic", () => {
    assert.deepEqual(
      planHistoryGc(
        [
          { name: "m-b", revision: 1 },
          { name: "m-a", revision: 1 },
          { name: "m-c", revision: 2 },
        ],
        new Set(),
        1,
      ),
      ["m-a", "m-b"],
    );
  });
});
