import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Listeners } from "./listeners.ts";

describe("Listeners", () => {
  it("notifies in the order added, removes, clears, and refuses beyond its limit", () => {
    const seen: string[] = [];
    const listeners = new Listeners<number>(2, "test listeners");
    const removeA = listeners.add((value) => seen.push(`a${value}`));
    listeners.add((value) => seen.push(`b${value}`));
    assert.throws(() => listeners.add(() => undefined), /^Error: more than 2 test listeners$/);
    listeners.notify(1);
    removeA();
    listeners.notify(2);
    listeners.clear();
    listeners.notify(3);
    assert.deepEqual(seen, ["a1", "b1", "b2"]);
  });

  it("a listener added while notifying hears from the next notification on", () => {
    const seen: number[] = [];
    const listeners = new Listeners<number>(4, "listeners");
    listeners.add(() => listeners.add((value) => seen.push(value)));
    listeners.notify(1);
    assert.deepEqual(seen, []);
    listeners.notify(2);
    assert.deepEqual(seen, [2]);
  });
});
