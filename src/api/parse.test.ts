import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { modelServingInput } from "../../test/arbitraries.ts";
import { deepFreeze } from "../core/frozen.ts";
import { parseModelServing } from "./parse.ts";
import type { ParseResult } from "./parse.ts";

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

  it("parses a frozen spec it has seen before exactly as a fresh parse (values, key order, problems)", () => {
    fc.assert(
      fc.property(modelServingInput, (input) => {
        const stored = deepFreeze(structuredClone(input));
        const units = deepFreeze([
          { group: 0, revision: "r1" },
          { group: 0, role: "decode", instance: 1, revision: "r1" },
        ]);
        const statusWritten = deepFreeze({
          ...stored,
          status: { observedGeneration: 1, conditions: [{ type: "Available", status: "True" }], units },
        });
        // The next status shares the stored records, as the API server's copy on write does.
        const nextStatus = deepFreeze({
          ...stored,
          status: { units: [units[1], { group: 1, revision: "r2" }, units[0]] },
        });
        for (const frozen of [stored, stored, statusWritten, statusWritten, nextStatus]) assertSameParse(frozen);
      }),
      { seed: SEED, numRuns: 100 },
    );
  });

  it("reports the problems of a fresh parse whichever part of a remembered spec's object fails", () => {
    fc.assert(
      fc.property(modelServingInput, (input) => {
        const stored = deepFreeze(structuredClone(input));
        assertSameParse(stored);
        const variants: unknown[] = [
          { ...stored, status: { replicas: "x" } },
          {
            ...stored,
            status: {
              units: [
                { group: 0, revision: "r1" },
                { group: -1, revision: 2, extra: true },
              ],
            },
          },
          { ...stored, status: { units: { group: 0 }, replicas: 1 } },
          { ...stored, metadata: { ...stored.metadata, name: "Not_A_Name" } },
          { ...stored, metadata: { ...stored.metadata, name: "x".repeat(70) } },
          { ...stored, kind: "Other", extra: 1 },
          stored,
          { ...stored, spec: { ...stored.spec, replicas: -1, unknown: true } },
        ];
        for (const variant of variants) assertSameParse(deepFreeze(variant));
      }),
      { seed: SEED, numRuns: 50 },
    );
  });
});

/** Parsing `frozen` (memo on) equals parsing an unfrozen copy (no memo), to the key order. */
function assertSameParse(frozen: unknown): void {
  const fresh = parseModelServing(structuredClone(frozen));
  const remembered: ParseResult = parseModelServing(frozen);
  assert.deepEqual(remembered, fresh);
  assert.equal(JSON.stringify(remembered), JSON.stringify(fresh));
}

describe("parseModelServing reports the rules' problems with the schema's", () => {
  const roles = (second: Record<string, unknown>) => [
    { name: "server", entryTemplate: { spec: { containers: [{ name: "c", image: "vllm:v1" }] } } },
    { name: "server", entryTemplate: { spec: { containers: [{ name: "c", image: "vllm:v1" }] } }, ...second },
  ];
  const manifest = (spec: Record<string, unknown>) => ({
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "m" },
    spec,
  });
  const paths = (result: ParseResult) => (result.ok ? [] : result.problems.map((found) => found.path));
  const DUPLICATE = "spec.template.roles[1].name";

  it("an unknown field and a bad optional value are taken out, then the rules run on the rest", () => {
    const input = manifest({ colour: "blue", template: { roles: roles({ replicas: "lots" }) } });
    assert.deepEqual(paths(parseModelServing(input)), ["spec.template.roles[1].replicas", "spec.colour", DUPLICATE]);
    assert.deepEqual(input.spec["colour"], "blue", "the input is not modified");
  });

  it("what the rules say of a removed value, or of the object holding it, is left out (it would be about a default)", () => {
    assert.deepEqual(paths(parseModelServing(manifest({ template: { roles: roles({ name: 7 }) } }))), [
      "spec.template.roles[1].name",
    ]);
  });

  it("no rules when a required field is missing or an array item is refused (positions would shift)", () => {
    assert.deepEqual(paths(parseModelServing(manifest({ colour: "blue" }))), ["spec.template", "spec.colour"]);
    assert.deepEqual(paths(parseModelServing(manifest({ template: { roles: [...roles({}), 3] } }))), [
      "spec.template.roles[2]",
    ]);
  });
});
