import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  RESTART_BASE_MS,
  RESTART_CAP_MS,
  STABLE_UPTIME_MS,
  allWorkersReady,
  parseWorkerCount,
  quickDeaths,
  restartDelayMs,
  workerReplicaId,
} from "./workers.ts";

describe("router workers: the pure rules", () => {
  it("--workers: a positive integer, or auto for the cores available (at least 1)", () => {
    assert.equal(parseWorkerCount("1", 8), 1);
    assert.equal(parseWorkerCount("3", 8), 3);
    assert.equal(parseWorkerCount("auto", 8), 8);
    assert.equal(parseWorkerCount("auto", 0), 1);
  });

  for (const bad of ["0", "-1", "1.5", "two", "", " 2", "2e3", "0x2", "99999999999999999999"])
    it(`--workers ${JSON.stringify(bad)} is refused naming the flag and the value`, () => {
      assert.throws(
        () => parseWorkerCount(bad, 8),
        new Error(`--workers: must be a positive integer or "auto", got "${bad}"`),
      );
    });

  it("each worker is replica <id>-w<index>", () => {
    assert.equal(workerReplicaId("router-7d9f", 0), "router-7d9f-w0");
    assert.equal(workerReplicaId("router-7d9f", 11), "router-7d9f-w11");
  });

  it("restarts wait 100 ms, doubling with each quick death in a row, capped at 10 s", () => {
    assert.deepEqual([1, 2, 3, 4, 5, 6, 7, 8, 50].map(restartDelayMs), [
      100,
      200,
      400,
      800,
      1600,
      3200,
      6400,
      RESTART_CAP_MS,
      RESTART_CAP_MS,
    ]);
    assert.equal(restartDelayMs(0), RESTART_BASE_MS, "a count below 1 is a first death");
  });

  it("a worker that ran 30 s before dying starts the count again; a quicker death adds to it", () => {
    assert.equal(quickDeaths(0, 10), 1);
    assert.equal(quickDeaths(3, STABLE_UPTIME_MS - 1), 4);
    assert.equal(quickDeaths(7, STABLE_UPTIME_MS), 1);
  });

  it("ready only when every expected worker answered ready", () => {
    assert.equal(allWorkersReady([true, true], 2), true);
    assert.equal(allWorkersReady([true, false], 2), false, "one worker not synced yet");
    assert.equal(allWorkersReady([true], 2), false, "one worker restarting or silent");
    assert.equal(allWorkersReady([], 0), true);
  });
});
