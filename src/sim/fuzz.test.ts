import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { fuzzScenario } from "./fuzz.ts";
import { parseScenario } from "./scenario.ts";

describe("fuzzScenario", () => {
  it("gives a valid scenario for every generator seed: a parse failure would be the generator's bug", () => {
    for (let seed = 0; seed < 300; seed++) {
      const parsed = parseScenario(fuzzScenario(seed));
      assert.ok(parsed.ok, `seed ${seed}: ${JSON.stringify(parsed.ok ? [] : parsed.problems)}`);
      assert.deepEqual(parsed.scenario.steps.slice(-2).map((step) => JSON.stringify(step).includes("RolloutComplete")), [true, false], `seed ${seed}: ends waiting for RolloutComplete, then Available`);
    }
  });

  it("deletes a pod only right after waiting for Available, when group 0 surely has one that is not being deleted (fuzz-25)", () => {
    for (let seed = 0; seed < 300; seed++) {
      const steps = fuzzScenario(seed)["steps"] as readonly Record<string, unknown>[];
      steps.forEach((step, index) => {
        if (!("deletePods" in step)) return;
        assert.deepEqual(steps[index - 1], { wait: { for: "Available", timeoutSeconds: 1800 } }, `seed ${seed}: step ${index} deletes a pod without waiting for Available first`);
      });
    }
  });

  it("is a function of the seed: the same seed gives the same scenario, others differ", () => {
    assert.deepEqual(fuzzScenario(42), fuzzScenario(42));
    const texts = new Set(Array.from({ length: 50 }, (_, seed) => JSON.stringify({ ...fuzzScenario(seed), name: "" })));
    assert.ok(texts.size >= 45, `only ${texts.size} distinct scenarios of 50`);
  });
});
