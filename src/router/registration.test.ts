import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { setImmediate as nextTurn } from "node:timers/promises";
import fc from "fast-check";
import { microTime } from "../api/router-lease.ts";
import { MemoryLogger } from "../engine/logger.ts";
import { ApiError } from "../engine/ports.ts";
import { VirtualClock } from "../sim/clock.ts";
import { RouterRegistration } from "./registration.ts";
import type { LeaseState } from "./registration.ts";
import { RecordingWriter } from "./test-fixtures.ts";

/** Fires every timer up to `targetMs`, letting the writes' promise callbacks run between them. */
async function runTo(clock: VirtualClock, targetMs: number): Promise<void> {
  await nextTurn();
  while (clock.fireNext(targetMs)) await nextTurn();
  clock.runUntil(targetMs);
  await nextTurn();
}

function setup(options: { leaseDurationSeconds?: number } = {}) {
  const clock = new VirtualClock();
  const epoch = clock.onEpoch();
  const writer = new RecordingWriter(() => clock.nowMs());
  const logger = new MemoryLogger();
  const states: LeaseState[] = [];
  const registration = new RouterRegistration({
    id: "router-a",
    namespace: "tandem-system",
    scope: { all: false, namespaces: ["serve"] },
    writer,
    clock: epoch,
    logger,
    onState: (state) => states.push(state),
    ...options,
  });
  return { clock, epoch, writer, logger, states, registration };
}

describe("RouterRegistration", () => {
  it("does not route until its Lease is created; the Lease is named and held by the id, labelled, scoped", async () => {
    const { clock, epoch, writer, registration, logger } = setup();
    assert.match(registration.refusal() ?? "", /has not registered its Lease tandem-system\/router-a yet/);
    registration.start();
    assert.notEqual(registration.refusal(), undefined, "not before the create has answered");
    await runTo(clock, 0);
    assert.equal(registration.refusal(), undefined);
    assert.equal(registration.state(), "registered");
    assert.deepEqual(
      writer.calls.map((call) => [call.verb, call.name]),
      [["create", "router-a"]],
    );
    assert.deepEqual(writer.calls[0]?.body, {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: {
        name: "router-a",
        namespace: "tandem-system",
        labels: { "tandem.dev/router": "true" },
        annotations: { "tandem.dev/scope": "serve" },
      },
      spec: {
        holderIdentity: "router-a",
        leaseDurationSeconds: 15,
        acquireTime: microTime(epoch.nowMs()),
        renewTime: microTime(epoch.nowMs()),
      },
    });
    assert.ok(logger.lines().some((line) => line.message === "router lease registered; routing"));
  });

  it("renews every third of its duration, writing renewTime from its clock", async () => {
    const { clock, epoch, writer, registration } = setup({ leaseDurationSeconds: 9 });
    registration.start();
    await runTo(clock, 9_500);
    assert.deepEqual(
      writer.calls.map((call) => [call.verb, call.atMs]),
      [
        ["create", 0],
        ["patch", 3_000],
        ["patch", 6_000],
        ["patch", 9_000],
      ],
    );
    assert.deepEqual(writer.calls[3]?.body, { spec: { renewTime: microTime(epoch.nowMs() - 500) } });
  });

  it("fences itself when it has not renewed for two thirds of the duration, retrying with backoff, and routes again once a renewal succeeds", async () => {
    const { clock, writer, registration, states, logger } = setup();
    registration.start();
    await runTo(clock, 0);
    writer.answer = () => new ApiError("ServerError", "etcd is slow");
    await runTo(clock, 9_999);
    assert.equal(registration.refusal(), undefined, "still within 2/3 of 15 s since the last renewal began");
    await runTo(clock, 10_000);
    assert.equal(registration.state(), "fenced");
    assert.match(registration.refusal() ?? "", /could not renew its Lease for 10s and stopped routing/);
    // Renewal at 5 s failed; retries after 250, 500, 1000, 2000 ms, then every 2 s (the cap).
    assert.deepEqual(
      writer.calls.slice(1).map((call) => call.atMs),
      [5_000, 5_250, 5_750, 6_750, 8_750],
    );
    writer.answer = () => undefined;
    await runTo(clock, 10_750);
    assert.equal(registration.state(), "registered");
    assert.deepEqual(states, ["registered", "fenced", "registered"]);
    assert.deepEqual(
      logger
        .lines()
        .map((line) => line.message)
        .filter((message) => !message.startsWith("router lease renewal failed")),
      [
        "router lease registered; routing",
        "router lease not renewed for two thirds of its duration; stopped routing until it is",
        "router lease renewed again; routing resumed",
      ],
    );
    // Back to the cadence: the next renewal a third of the duration after the one that succeeded.
    await runTo(clock, 15_750);
    assert.deepEqual(
      writer.calls.slice(-2).map((call) => call.atMs),
      [10_750, 15_750],
    );
  });

  it("a write that does not answer within the renewal interval counts as failed; its late answer is ignored", async () => {
    const { clock, writer, registration, logger } = setup();
    registration.start();
    await runTo(clock, 0);
    writer.answer = (call) => (call.atMs === 5_000 ? "hang" : undefined);
    await runTo(clock, 10_000);
    // The renewal at 5 s hangs; at 10 s it counts as failed and the retry (250 ms later) succeeds.
    assert.equal(registration.state(), "fenced");
    await runTo(clock, 10_250);
    assert.equal(registration.state(), "registered");
    assert.deepEqual(
      writer.calls.map((call) => call.atMs),
      [0, 5_000, 10_250],
    );
    assert.ok(
      logger
        .lines()
        .some(
          (line) =>
            line.message === "router lease renewal failed" &&
            line.fields["error"] === "Error: no answer within 5000 ms",
        ),
    );
    writer.answer = (call) => (call.verb === "patch" ? "hang" : undefined);
    await runTo(clock, 15_250);
    const stopped = registration.stop();
    await runTo(clock, 20_250); // a hung renewal holds the stop up until its time is out, no longer
    await stopped;
    assert.equal(writer.calls.at(-1)?.verb, "delete");
  });

  it("a restarted replica takes its existing Lease over; a renewal that finds no Lease creates it again", async () => {
    const { clock, writer, registration } = setup();
    writer.answer = (call) => (call.verb === "create" ? new ApiError("AlreadyExists", "leases router-a") : undefined);
    registration.start();
    await runTo(clock, 0);
    assert.equal(registration.state(), "registered");
    const takeover = writer.calls[1]!;
    assert.equal(takeover.verb, "patch");
    const body = takeover.body as { spec: object; metadata: object };
    assert.deepEqual(Object.keys(body.spec).sort(), [
      "acquireTime",
      "holderIdentity",
      "leaseDurationSeconds",
      "renewTime",
    ]);
    assert.deepEqual(body.metadata, {
      labels: { "tandem.dev/router": "true" },
      annotations: { "tandem.dev/scope": "serve" },
    });
    writer.answer = (call) => (call.verb === "patch" ? new ApiError("NotFound", "leases router-a") : undefined);
    await runTo(clock, 5_000);
    assert.deepEqual(
      writer.calls.slice(2).map((call) => call.verb),
      ["patch", "create"],
    );
    assert.equal(registration.state(), "registered");
  });

  it("on stop: no more renewals, and the Lease is deleted", async () => {
    const { clock, writer, registration, states } = setup();
    registration.start();
    await runTo(clock, 6_000);
    await registration.stop();
    assert.equal(writer.calls.at(-1)?.verb, "delete");
    const count = writer.calls.length;
    await runTo(clock, 60_000);
    assert.equal(writer.calls.length, count);
    assert.match(registration.refusal() ?? "", /shutting down/);
    assert.deepEqual(states, ["registered", "stopped"]);
  });

  it("property: whatever writes fail, it routes only while a successful write began less than 2/3 of the duration ago, and routes again after the first success", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.boolean(), { minLength: 1, maxLength: 40 }),
        fc.integer({ min: 3, max: 30 }),
        async (outcomes, leaseDurationSeconds) => {
          const { clock, writer, registration } = setup({ leaseDurationSeconds });
          const fenceMs = (leaseDurationSeconds * 2000) / 3;
          const succeededAt: number[] = [];
          writer.answer = (call) => {
            const ok = outcomes[Math.min(writer.calls.length - 1, outcomes.length - 1)] ?? true;
            if (ok) succeededAt.push(call.atMs);
            return ok ? undefined : new ApiError("Timeout", "slow");
          };
          registration.start();
          for (let step = 0; step < 3 * outcomes.length; step++) {
            await nextTurn();
            const lastMs = succeededAt.at(-1);
            if (registration.refusal() === undefined)
              assert.ok(
                lastMs !== undefined && clock.nowMs() - lastMs < fenceMs,
                `routing at ${clock.nowMs()} ms, last success began at ${String(lastMs)}`,
              );
            else if (lastMs !== undefined && clock.nowMs() - lastMs < fenceMs)
              assert.fail(`not routing at ${clock.nowMs()} ms though a write succeeded at ${lastMs}`);
            if (!clock.next()) break;
          }
          await registration.stop();
        },
      ),
      { seed: 42, numRuns: 100 },
    );
  });
});
