/**
 * The rollout table's arithmetic (`bench/rollout-bound.ts`) and its measurement on a shape small
 * enough to run every strategy quickly (`bench/rollout-run.ts`): the counts each strategy implies,
 * and the bound as a true lower bound of the simulated makespan. Virtual time only.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { TARGETS, boundSeconds, boundSteps, judge, ratio } from "../bench/rollout-bound.ts";
import type { Measures, StepTiming } from "../bench/rollout-bound.ts";
import { STRATEGIES, boundInput } from "../bench/rollout-cases.ts";
import type { Shape, StrategyName } from "../bench/rollout-cases.ts";
import { runCase } from "../bench/rollout-run.ts";
import { tableLines } from "../bench/rollout.ts";
import type { CaseResult } from "../bench/rollout-run.ts";

const timing: StepTiming = { unitStartSeconds: 81, containerStartSeconds: 80, terminationSeconds: 5 };

describe("rollout bound", () => {
  it("takes the slowest lane's ⌈changed ÷ at once⌉, at least the stages", () => {
    assert.equal(boundSteps([{ changedUnits: 16, unitsAtOnce: 4 }], 1), 4);
    assert.equal(boundSteps([{ changedUnits: 17, unitsAtOnce: 4 }], 1), 5);
    assert.equal(
      boundSteps(
        [
          { changedUnits: 8, unitsAtOnce: 8 },
          { changedUnits: 6, unitsAtOnce: 2 },
        ],
        1,
      ),
      3,
    );
    assert.equal(boundSteps([{ changedUnits: 8, unitsAtOnce: 8 }], 3), 3);
    assert.equal(boundSteps([{ changedUnits: 0, unitsAtOnce: 0 }], 1), 1);
    assert.throws(() => boundSteps([{ changedUnits: 2, unitsAtOnce: 0 }], 1), /unitsAtOnce must be a positive integer/);
  });

  it("prices a step by how the unit is replaced", () => {
    const lanes = [{ changedUnits: 8, unitsAtOnce: 2 }];
    assert.equal(boundSeconds({ lanes, stages: 1, move: "delete-first", timing }), 4 * (5 + 81));
    assert.equal(boundSeconds({ lanes, stages: 1, move: "surge", timing }), 4 * 81 + 5);
    assert.equal(boundSeconds({ lanes, stages: 1, move: "in-place", timing }), 4 * 80);
  });

  it("resolves the budgets of each strategy into lanes", () => {
    const shape: Shape = {
      name: "2P1D × 16",
      groups: 16,
      roles: [
        { name: "prefill", replicas: 2, workerReplicas: 0, changes: false },
        { name: "decode", replicas: 1, workerReplicas: 0, changes: true },
      ],
    };
    // 25% of 16 groups at once, one decode each; with surge alone no group is disrupted: all 16.
    assert.deepEqual(boundInput(shape, "role").lanes, [{ changedUnits: 16, unitsAtOnce: 4 }]);
    assert.equal(boundInput(shape, "role").move, "delete-first");
    assert.deepEqual(boundInput(shape, "role-surge").lanes, [{ changedUnits: 16, unitsAtOnce: 16 }]);
    assert.equal(boundInput(shape, "role-surge").move, "surge");
    assert.deepEqual(boundInput(shape, "group-recreate").lanes, [{ changedUnits: 16, unitsAtOnce: 1 }]);
    assert.deepEqual(boundInput(shape, "statefulset").lanes, [{ changedUnits: 16, unitsAtOnce: 1 }]);
  });

  it("judges each column against its target", () => {
    const onTarget: Measures = {
      makespanSeconds: 105,
      boundSeconds: 100,
      podsCreated: 16,
      minimumPods: 16,
      unchangedRestarts: 0,
      writes: 120,
      necessaryWrites: 100,
      lowestGroups: 12,
      desiredGroups: 16,
      floorGroups: 12,
    };
    const judged = judge(onTarget);
    assert.deepEqual(
      Object.values(judged).map((column) => column.missed),
      [false, false, false, false, false],
    );
    assert.equal(judged.capacity.value, 0.75);
    const missed = judge({
      ...onTarget,
      makespanSeconds: 106,
      podsCreated: 32,
      unchangedRestarts: 1,
      writes: 121,
      lowestGroups: 11,
    });
    assert.deepEqual(
      Object.values(missed).map((column) => column.missed),
      [true, true, true, true, true],
    );
    assert.equal(missed.pods.value, 2);
    assert.equal(TARGETS.makespanRatio, 1.05);
  });

  it("counts 0 of 0 as on target and anything of 0 as infinite", () => {
    assert.equal(ratio(0, 0), 1);
    assert.equal(ratio(3, 0), Number.POSITIVE_INFINITY);
    assert.equal(ratio(3, 6), 0.5);
  });
});

describe("rollout table on a small shape", () => {
  // Four groups (the smallest count whose 25% budget is a whole group) of one prefill and one
  // decode; only decode's image changes.
  const shape: Shape = {
    name: "1P1D × 4",
    groups: 4,
    roles: [
      { name: "prefill", replicas: 1, workerReplicas: 0, changes: false },
      { name: "decode", replicas: 1, workerReplicas: 0, changes: true },
    ],
  };
  const results = new Map<StrategyName, CaseResult>();
  const result = async (name: StrategyName): Promise<CaseResult> => {
    let found = results.get(name);
    if (found === undefined) {
      const strategy = STRATEGIES.find((candidate) => candidate.name === name);
      assert.ok(strategy);
      found = await runCase(shape, strategy);
      results.set(name, found);
    }
    return found;
  };

  for (const strategy of STRATEGIES)
    it(`${strategy.label}: finishes, within its budget, no faster than the bound`, async () => {
      const { measures, completed, failure } = await result(strategy.name);
      assert.equal(completed, true, failure);
      assert.ok(measures.lowestGroups >= measures.floorGroups, `capacity ${measures.lowestGroups} below the floor`);
      assert.ok(
        measures.makespanSeconds >= measures.boundSeconds,
        `makespan ${measures.makespanSeconds} s under the bound ${measures.boundSeconds} s`,
      );
    });

  it("StatefulSet style creates exactly the changed pods and leaves prefill alone", async () => {
    const { measures, extraWrites } = await result("statefulset");
    assert.equal(measures.minimumPods, 4);
    assert.equal(measures.podsCreated, 4);
    assert.equal(measures.unchangedRestarts, 0);
    // One pod at a time: one group down at most.
    assert.equal(measures.lowestGroups, 3);
    // Each of the four deletions first releases Tandem's recovery finalizer of the pod it started from.
    assert.deepEqual(extraWrites, { "Pod.patch": 4 });
  });

  it("group recreate creates every pod of each group, so prefill restarts too", async () => {
    const { measures } = await result("group-recreate");
    assert.equal(measures.podsCreated, 8);
    assert.equal(measures.unchangedRestarts, 4);
  });

  it("RoleRollingUpdate creates only decode pods; InPlaceUpdate creates none", async () => {
    const role = await result("role");
    assert.equal(role.measures.podsCreated, 4);
    assert.equal(role.measures.unchangedRestarts, 0);
    const inPlace = await result("in-place");
    assert.equal(inPlace.measures.podsCreated, 0);
    assert.equal(inPlace.measures.minimumPods, 0);
    assert.equal(inPlace.measures.unchangedRestarts, 0);
  });

  it("RoleRollingUpdate with surge keeps every group serving and prefill untouched", async () => {
    const { measures } = await result("role-surge");
    assert.equal(measures.lowestGroups, 4);
    assert.equal(measures.unchangedRestarts, 0);
    assert.ok(measures.podsCreated >= measures.minimumPods);
  });

  it("prints a row per run and marks the cells that miss", async () => {
    const rows = await Promise.all(STRATEGIES.map((strategy) => result(strategy.name)));
    const lines = tableLines(rows);
    const recreate = lines.find((line) => line.startsWith("1P1D × 4") && line.includes("group recreate"));
    assert.ok(recreate);
    // Pods 8 of 4 and 4 unchanged-role restarts miss; the makespan meets its target.
    assert.match(recreate, /2\.00 ✗ \(8 \/ 4\)/);
    assert.match(recreate, /\s4 ✗\s/);
    assert.doesNotMatch(recreate, /1\.0\d ✗/);
    assert.equal(lines.filter((line) => line.startsWith("1P1D × 4")).length, STRATEGIES.length);
  });
});
