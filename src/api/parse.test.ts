import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { modelServingInput } from "../../test/arbitraries.ts";
import { parseModelServing } from "./parse.ts";

/** Fixed seed: property tests are deterministic; raise numRuns locally to search harder. */
const SEED = 20261130;

describe("parseModelServing", () => {
  it("accepts every generated manifest", () => {
    fc.assert(
      fc.property(modelServingInput, (input) => {
        const result = parseModelServing(input);
        assert.ok(result.ok, JSON.stringify(result.ok ? [] : result.problems));
      }),
      { seed: SEED, numRuns: 300 },
    );
  });

  it("defaulting is idempotent", () => {
    fc.assert(
      fc.property(modelServingInput, (input) => {
        const once = parseModelServing(input);
        assert.ok(once.ok);
        const twice = parseModelServing(once.value);
        assert.ok(twice.ok);
        assert.deepEqual(twice.value, once.value);
      }),
      { seed: SEED, numRuns: 300 },
    );
  });

  it("never modifies its input", () => {
    fc.assert(
      fc.property(modelServingInput, (input) => {
        const before = structuredClone(input);
        parseModelServing(input);
        assert.deepEqual(input, before);
      }),
      { seed: SEED, numRuns: 100 },
    );
  });
});
