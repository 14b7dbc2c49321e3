import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { OrdinalTable, ordinalsOf, positionOf, retiredPosition, settle } from "./ordinals.ts";
import type { SettleInputs } from "./ordinals.ts";
import { successorOf } from "./rollout.ts";

const NONE: ReadonlySet<number> = new Set();

/**
 * `settle` inputs for one role `r` with `count` instance positions (`desired` of them desired,
 * bound `bound`) in every group.
 */
function inputs(
  overrides: Partial<SettleInputs> & { count?: number; desired?: number; bound?: number } = {},
): SettleInputs {
  const { count = 1, desired = 1, bound = 2, ...rest } = overrides;
  return {
    groups: 1,
    desiredGroups: 1,
    groupBound: 2,
    instances: () => ({ count, desired, bound }),
    roles: ["r"],
    heldGroups: new Set([0]),
    heldInstances: () => NONE,
    ...rest,
  };
}

describe("positions and ordinals", () => {
  it("without entries every position is its own ordinal, and the table writes nothing", () => {
    const table = OrdinalTable.read(undefined);
    assert.deepEqual(positionOf(table, { group: 2, role: "r", instance: 3 }), { group: 2, role: "r", instance: 3 });
    assert.deepEqual(ordinalsOf(table, { group: 2, role: "r", instance: 3 }), { group: 2, role: "r", instance: 3 });
    assert.deepEqual(table.entries(), []);
  });

  it("a succession: the surge instance takes the outdated one's position, the outdated one is retired, and the surge position waits for its ordinal", () => {
    const table = OrdinalTable.read(undefined);
    table.instanceScope(0, "r").succeed(0, 1);
    // The pods of ordinal 1 (the surge instance) are now at position 0; those of ordinal 0 retired.
    assert.equal(table.instances(0, "r").position(1), 0);
    assert.equal(table.instances(0, "r").position(0), retiredPosition(0));
    assert.equal(table.instances(0, "r").ordinal(0), 1);
    // Position 1 gets ordinal 0 back, but not while the retired pods hold the name.
    assert.equal(table.instances(0, "r").ordinal(1), undefined);
    assert.deepEqual(table.entries(), [
      { group: 0, role: "r", instance: 0, ordinal: 1 },
      { group: 0, role: "r", instance: 1, ordinal: 0 },
      { group: 0, role: "r", ordinal: 0, retired: true },
    ]);
    // Durable: read back from status, the same map.
    assert.deepEqual(OrdinalTable.read(table.entries()).entries(), table.entries());
    // Once the retired pods are gone, settle releases the ordinal: position 1 may build on it.
    settle(table, inputs({ count: 2, heldInstances: () => new Set([1]) }));
    assert.equal(table.instances(0, "r").ordinal(1), 0);
    assert.deepEqual(table.entries(), [
      { group: 0, role: "r", instance: 0, ordinal: 1 },
      { group: 0, role: "r", instance: 1, ordinal: 0 },
    ]);
  });

  it("a retired ordinal stays held while a pod (terminating too) carries it", () => {
    const table = OrdinalTable.read([
      { group: 0, role: "r", ordinal: 0, retired: true },
      { group: 0, role: "r", instance: 0, ordinal: 1 },
      { group: 0, role: "r", instance: 1, ordinal: 0 },
    ]);
    settle(table, inputs({ count: 2, heldInstances: () => new Set([0, 1]) }));
    assert.equal(table.instances(0, "r").ordinal(1), undefined);
  });

  it("a scale-up that makes the surge position desired gives it back the retired unit still there, as it runs (fuzz-918128)", () => {
    const table = OrdinalTable.read(undefined);
    table.instanceScope(0, "r").succeed(0, 1);
    // replicas 1 → 2: position 1 is desired now; the retired unit (ordinal 0) still has its pods.
    settle(table, inputs({ count: 2, desired: 2, bound: 3, heldInstances: () => new Set([0, 1]) }));
    const scope = table.instances(0, "r");
    assert.equal(scope.position(0), 1, "the retired unit is the desired unit at position 1");
    assert.equal(scope.ordinal(1), 0);
    assert.deepEqual(table.entries(), [
      { group: 0, role: "r", instance: 0, ordinal: 1 },
      { group: 0, role: "r", instance: 1, ordinal: 0 },
    ]);
    // The surge position forgotten first (the rollout was done with its surge): the same.
    const forgotten = OrdinalTable.read(undefined);
    forgotten.instanceScope(0, "r").succeed(0, 1);
    settle(forgotten, inputs({ count: 1, heldInstances: () => new Set([0, 1]) }));
    assert.equal(forgotten.instances(0, "r").hasEntry(1), false);
    settle(forgotten, inputs({ count: 2, desired: 2, bound: 3, heldInstances: () => new Set([0, 1]) }));
    assert.equal(forgotten.instances(0, "r").position(0), 1);
    // Groups alike: a surge group position made desired by replicas takes back its retired group.
    const groups = OrdinalTable.read(undefined);
    groups.succeedGroup(0, 1);
    settle(groups, inputs({ groups: 2, desiredGroups: 2, groupBound: 3, heldGroups: new Set([0, 1]) }));
    assert.equal(groups.groups.position(0), 1);
  });

  it("a finished rollout forgets the surge position; a later surge there gets the lowest free ordinal below the bound", () => {
    const table = OrdinalTable.read([
      { group: 0, role: "r", instance: 0, ordinal: 1 },
      { group: 0, role: "r", instance: 1, ordinal: 0 },
    ]);
    settle(table, inputs({ count: 1, heldInstances: () => new Set([1]) }));
    assert.deepEqual(table.entries(), [{ group: 0, role: "r", instance: 0, ordinal: 1 }]);
    assert.equal(table.instances(0, "r").ordinal(1), undefined, "its number is position 0's ordinal");
    settle(table, inputs({ count: 2, heldInstances: () => new Set([1]) }));
    assert.equal(table.instances(0, "r").ordinal(1), 0);
  });

  it("a scale-down forgets the positions that no longer exist once their pods are gone; a group without pods forgets its instance map", () => {
    const table = OrdinalTable.read([
      { group: 1, ordinal: 2 },
      { group: 2, ordinal: 1 },
      { group: 0, role: "r", instance: 0, ordinal: 1 },
      { group: 0, role: "r", instance: 1, ordinal: 0 },
    ]);
    settle(table, { ...inputs({ count: 2 }), groups: 2, groupBound: 3, heldGroups: new Set([1, 2]) });
    // Group 0 has no pods: its instance map goes; position 2 (ordinal 1) still has pods and stays.
    assert.deepEqual(table.entries(), [
      { group: 1, ordinal: 2 },
      { group: 2, ordinal: 1 },
    ]);
    settle(table, { ...inputs(), groups: 2, groupBound: 3, heldGroups: new Set([2]) });
    assert.deepEqual(table.entries(), [{ group: 1, ordinal: 2 }]);
    // Position 0 is its own ordinal again; ordinal 1 is free for a scale-up's position 2... which has none.
    assert.equal(table.groups.ordinal(0), 0);
    assert.equal(table.groups.ordinal(2), undefined);
    settle(table, { ...inputs(), groups: 3, groupBound: 3, heldGroups: new Set([0, 2]) });
    assert.equal(table.groups.ordinal(2), 1);
  });

  it("a group succession carries the surge group's instance map to its new position and starts the surge position afresh", () => {
    const table = OrdinalTable.read([{ group: 2, role: "r", instance: 0, ordinal: 1 }]);
    table.succeedGroup(0, 2);
    assert.equal(table.groups.position(2), 0);
    assert.equal(table.groups.position(0), retiredPosition(0));
    assert.equal(table.instances(0, "r").position(1), 0);
    assert.equal(table.instances(2, "r").position(1), 1);
  });

  it("entries that contradict earlier ones are ignored: the map stays one to one", () => {
    const table = OrdinalTable.read([
      { group: 0, ordinal: 3 },
      { group: 1, ordinal: 3 },
      { group: 0, ordinal: 4 },
    ]);
    assert.deepEqual(table.entries(), [{ group: 0, ordinal: 3 }]);
  });

  it("the successor of an outdated unit is the highest serving surge unit not yet taken", () => {
    const units = [
      { position: 0, serving: true },
      { position: 2, serving: true },
      { position: 3, serving: true },
      { position: 4, serving: false },
    ];
    assert.equal(successorOf(units, 2, new Set())?.position, 3);
    assert.equal(successorOf(units, 2, new Set([3]))?.position, 2);
    assert.equal(successorOf(units, 2, new Set([2, 3])), undefined, "a desired unit is no successor");
  });
});
