import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { setupServer } from "../sim/test-fixtures.ts";
import type { EventRecord } from "./ports.ts";
import { COMBINED_PREFIX, EventRecorder } from "./recorder.ts";
import type { EventRecorderOptions } from "./recorder.ts";

const regarding = { kind: "ModelServing", namespace: "default", name: "m", uid: "u-1" } as const;
const drainTimeout = (message = "pod m-0-decode-0-0 not drained after 300s"): EventRecord => ({
  regarding,
  type: "Warning",
  reason: "DrainTimeout",
  message,
});

function setup(options: Partial<EventRecorderOptions> = {}) {
  const { server, client, clock } = setupServer();
  const recorder = new EventRecorder({
    writer: client,
    clock: clock.onEpoch(),
    component: "tandem-controller",
    instance: "pod-a",
    ...options,
  });
  const events = () => server.list("Event").items;
  return { server, clock, recorder, events };
}

describe("EventRecorder: repeats folded as client-go's EventCorrelator does (virtual clock)", () => {
  it("writes a core/v1 Event with the involved object, source, type, reason, message, timestamps and count 1", async () => {
    const { recorder, events, clock } = setup();
    clock.advance(5_000);
    recorder.record(drainTimeout());
    await recorder.flushed();
    const [event] = events();
    assert.ok(event !== undefined);
    assert.deepEqual(
      {
        involvedObject: event["involvedObject"],
        type: event["type"],
        reason: event["reason"],
        message: event["message"],
        source: event["source"],
        count: event["count"],
        first: event["firstTimestamp"],
        last: event["lastTimestamp"],
      },
      {
        involvedObject: { apiVersion: "tandem.dev/v1alpha1", ...regarding },
        type: "Warning",
        reason: "DrainTimeout",
        message: "pod m-0-decode-0-0 not drained after 300s",
        source: { component: "tandem-controller", host: "pod-a" },
        count: 1,
        first: clock.rfc3339(5_000),
        last: clock.rfc3339(5_000),
      },
    );
  });

  it("the same event within the window increments count and moves lastTimestamp on the one Event", async () => {
    const { recorder, events, clock, server } = setup();
    recorder.record(drainTimeout());
    clock.advance(60_000);
    recorder.record(drainTimeout());
    clock.advance(60_000);
    recorder.record(drainTimeout());
    await recorder.flushed();
    const all = events();
    assert.equal(all.length, 1);
    assert.deepEqual(
      [all[0]?.["count"], all[0]?.["firstTimestamp"], all[0]?.["lastTimestamp"]],
      [3, clock.rfc3339(0), clock.rfc3339(120_000)],
    );
    assert.equal(server.apiWrites({ kind: "Event", verb: "patch" }), 2, "repeats are patches, not creates");
  });

  it("a repeat after the window (since its last occurrence) is a new Event", async () => {
    const { recorder, events, clock } = setup({ windowMs: 600_000 });
    recorder.record(drainTimeout());
    clock.advance(500_000);
    recorder.record(drainTimeout());
    clock.advance(500_000);
    recorder.record(drainTimeout());
    clock.advance(600_001);
    recorder.record(drainTimeout());
    await recorder.flushed();
    assert.deepEqual(
      events().map((event) => event["count"]),
      [3, 1],
    );
  });

  it("differs in any of object, type, reason, message or source: another Event", async () => {
    const { server, clock } = setupServer();
    const writer = server.client("events");
    const a = new EventRecorder({ writer, clock: clock.onEpoch(), component: "tandem-controller", instance: "pod-a" });
    const b = new EventRecorder({ writer, clock: clock.onEpoch(), component: "tandem-controller", instance: "pod-b" });
    a.record(drainTimeout());
    a.record({ ...drainTimeout(), regarding: { ...regarding, name: "other" } });
    a.record({ ...drainTimeout(), type: "Normal" });
    a.record({ ...drainTimeout(), reason: "DrainStarted" });
    a.record(drainTimeout("another message"));
    await a.flushed();
    // Another process: Event names are unique per recorder and millisecond.
    clock.advance(1);
    b.record(drainTimeout());
    await b.flushed();
    assert.equal(server.list("Event").items.length, 6);
  });

  it("past maxSimilar - 1 different messages of one (object, type, reason), the rest share one combined Event", async () => {
    const { recorder, events } = setup({ maxSimilar: 3 });
    for (const pod of ["p0", "p1", "p2", "p3", "p4"]) recorder.record(drainTimeout(`pod ${pod} not drained`));
    recorder.record(drainTimeout("pod p1 not drained"));
    await recorder.flushed();
    assert.deepEqual(
      events()
        .map((event) => [event["message"], event["count"]])
        .sort(),
      [
        [`${COMBINED_PREFIX}pod p4 not drained`, 3],
        ["pod p0 not drained", 1],
        ["pod p1 not drained", 2],
      ],
    );
  });

  it("bounds its memory: beyond maxKeys the least recently used is forgotten (a repeat of it creates anew)", async () => {
    const { recorder, events } = setup({ maxKeys: 2 });
    recorder.record(drainTimeout("a"));
    recorder.record(drainTimeout("b"));
    recorder.record(drainTimeout("a")); // a is now the most recent
    recorder.record(drainTimeout("c")); // forgets b
    recorder.record(drainTimeout("a")); // still known
    recorder.record(drainTimeout("b")); // a new Event
    await recorder.flushed();
    assert.deepEqual(
      events()
        .map((event) => [event["message"], event["count"]])
        .sort(),
      [
        ["a", 3],
        ["b", 1],
        ["b", 1],
        ["c", 1],
      ],
    );
  });

  it("drops a record whose write fails, and the next repeat creates a fresh Event", async () => {
    const { recorder, events, server } = setup();
    server.faults.failNth({ kind: "Event" }, 1, { error: "ServerError" });
    recorder.record(drainTimeout());
    recorder.record(drainTimeout());
    await recorder.flushed();
    assert.equal(recorder.droppedCount(), 2, "the create failed, so its repeat's patch found nothing");
    recorder.record(drainTimeout());
    await recorder.flushed();
    assert.deepEqual(
      events().map((event) => event["count"]),
      [1],
    );
  });

  it("drops records beyond maxQueued waiting writes", async () => {
    const { recorder, events } = setup({ maxQueued: 2 });
    for (const message of ["a", "b", "c"]) recorder.record(drainTimeout(message));
    await recorder.flushed();
    assert.equal(events().length, 2);
    assert.equal(recorder.droppedCount(), 1);
  });
});
