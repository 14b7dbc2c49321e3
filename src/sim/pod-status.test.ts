import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { JsonObject } from "../engine/ports.ts";
import { mergeConditions } from "./pod-status.ts";

describe("mergeConditions", () => {
  const before = "2026-01-01T00:00:00Z";
  const now = "2026-01-01T00:01:00Z";

  it("keeps a condition already as desired as the same object, and makes the others anew", () => {
    const ready: JsonObject = {
      type: "Ready",
      status: "False",
      lastTransitionTime: before,
      reason: "ContainersNotReady",
      message: "m",
    };
    const scheduled: JsonObject = { type: "PodScheduled", status: "True", lastTransitionTime: before };
    const gate: JsonObject = { type: "tandem.dev/serving", status: "True", lastTransitionTime: before };
    const merged = mergeConditions(
      [scheduled, ready, gate],
      [
        { type: "PodScheduled", status: "True" },
        { type: "Ready", status: "False", reason: "ContainersNotReady", message: "other" },
        { type: "Initialized", status: "True" },
      ],
      now,
    );
    assert.equal(merged[0], scheduled);
    assert.notEqual(merged[1], ready);
    assert.equal(merged[2], gate);
    assert.deepEqual(merged, [
      scheduled,
      { type: "Ready", status: "False", lastTransitionTime: before, reason: "ContainersNotReady", message: "other" },
      gate,
      { type: "Initialized", status: "True", lastTransitionTime: now },
    ]);
  });

  it("makes a condition anew when only its key order differs, so the result has the kubelet's order", () => {
    const reordered: JsonObject = { status: "True", type: "Ready", lastTransitionTime: before };
    const merged = mergeConditions([reordered], [{ type: "Ready", status: "True" }], now);
    assert.notEqual(merged[0], reordered);
    assert.equal(
      JSON.stringify(merged),
      JSON.stringify([{ type: "Ready", status: "True", lastTransitionTime: before }]),
    );
  });

  it("moves lastTransitionTime when the status changes", () => {
    const merged = mergeConditions(
      [{ type: "Ready", status: "True", lastTransitionTime: before }],
      [{ type: "Ready", status: "False", reason: "r" }],
      now,
    );
    assert.deepEqual(merged, [{ type: "Ready", status: "False", lastTransitionTime: now, reason: "r" }]);
  });
});
