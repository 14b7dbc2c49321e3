import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { canonicalJson, isJsonValue, pruneEmpty, sameCanonicalJson } from "./canonical.ts";
import type { JsonValue } from "./canonical.ts";

describe("pruneEmpty", () => {
  const cases: readonly [string, unknown, unknown][] = [
    [
      "drops null, undefined, empty string, [] and {} members",
      { a: null, b: undefined, c: "", d: [], e: {}, f: 1 },
      { f: 1 },
    ],
    ["drops objects that become empty", { a: { b: { c: [] } }, d: "x" }, { d: "x" }],
    ["keeps 0 and false", { replicas: 0, automount: false }, { replicas: 0, automount: false }],
    ["drops non-finite numbers", { a: Number.NaN, b: Number.POSITIVE_INFINITY, c: 2 }, { c: 2 }],
    [
      "keeps array elements in place, even empty ones",
      { args: ["--x", "", null, {}, [], { a: "" }] },
      { args: ["--x", "", null, {}, [], {}] },
    ],
    [
      "keeps empty-string entries of string maps",
      { labels: { canary: "", app: "a" }, nodeSelector: { pool: "" } },
      { labels: { canary: "", app: "a" }, nodeSelector: { pool: "" } },
    ],
    ["drops an empty string map", { metadata: { labels: {}, annotations: {} } }, undefined],
    [
      "drops empty members of plain objects under any other key",
      { env: [{ name: "A", value: "" }] },
      { env: [{ name: "A" }] },
    ],
  ];
  for (const [name, input, expected] of cases) {
    it(name, () => assert.deepEqual(pruneEmpty(input), expected));
  }

  it("returns undefined for an empty top-level value", () => {
    for (const empty of [null, undefined, "", [], {}, { a: {} }]) assert.equal(pruneEmpty(empty), undefined);
  });

  it("does not modify its input", () => {
    const input = { a: { b: "" }, c: [1] };
    pruneEmpty(input);
    assert.deepEqual(input, { a: { b: "" }, c: [1] });
  });
});

describe("canonicalJson", () => {
  it("sorts keys at every level, keeps array order, writes no whitespace", () => {
    assert.equal(
      canonicalJson({ b: [3, { z: 1, a: true }], a: "x\n", c: null }),
      '{"a":"x\\n","b":[3,{"a":true,"z":1}],"c":null}',
    );
  });

  it("orders keys by code unit, not by locale", () => {
    assert.equal(canonicalJson({ b: 1, B: 2, a: 3, _: 4 }), '{"B":2,"_":4,"a":3,"b":1}');
  });
});

describe("isJsonValue", () => {
  it("accepts JSON and rejects what JSON cannot carry", () => {
    assert.ok(isJsonValue({ a: [1, "x", null, true, { b: {} }] }));
    for (const bad of [undefined, Number.NaN, { a: undefined }, [() => 1], new Date(0), new Map(), 1n])
      assert.equal(isJsonValue(bad), false);
  });
});

describe("sameCanonicalJson", () => {
  it("agrees with comparing canonicalJson bytes", () => {
    const leaf = fc.oneof(
      fc.constant(null),
      fc.constant(undefined),
      fc.boolean(),
      fc.constantFrom(0, -0, 1, Number.NaN, Number.POSITIVE_INFINITY),
      fc.constantFrom("", "a", "b"),
    );
    const value = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: "small" },
        leaf,
        fc.array(tie("node"), { maxLength: 3 }),
        fc.sparseArray(tie("node"), { maxLength: 3 }),
        fc.dictionary(fc.constantFrom("a", "b", "c"), tie("node"), { maxKeys: 3 }),
      ),
    })).node;
    fc.assert(
      fc.property(value, value, (a, b) => {
        const x = a as JsonValue;
        const y = b as JsonValue;
        assert.equal(sameCanonicalJson(x, y), canonicalJson(x) === canonicalJson(y));
        // Equal values reordered or copied are still the same.
        assert.equal(sameCanonicalJson(x, structuredClone(x)), true);
      }),
      { seed: 20261130, numRuns: 2000 },
    );
  });
});
