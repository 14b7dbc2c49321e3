import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mergePatch } from "../sim/json.ts";
import { jsonEqual, mergePatchBetween, toJsonObject } from "./json.ts";
import type { JsonObject } from "./ports.ts";

describe("mergePatchBetween", () => {
  const from: JsonObject = {
    replicas: 2,
    units: [{ group: 1, revision: "m-1" }],
    nested: { a: 1, b: { c: 2 } },
    gone: "x",
  };
  const to: JsonObject = {
    replicas: 3,
    units: [{ group: 1, revision: "m-1" }],
    nested: { a: 1, b: { d: 3 } },
    added: [1],
  };

  it("sends changes only: removed keys as null, objects key by key, other values whole", () => {
    assert.deepEqual(mergePatchBetween(from, to), {
      gone: null,
      replicas: 3,
      nested: { b: { c: null, d: 3 } },
      added: [1],
    });
    assert.deepEqual(mergePatchBetween(to, to), {});
  });

  it("gives a patch that turns `from` into `to` exactly (RFC 7386)", () => {
    for (const [a, b] of [
      [from, to],
      [to, from],
      [{}, to],
      [from, {}],
    ] as const) {
      assert.ok(jsonEqual(mergePatch(a, mergePatchBetween(a, b)), b));
    }
  });

  it("keeps a key named __proto__ as data", () => {
    const patch = mergePatchBetween(toJsonObject(JSON.parse('{"__proto__": 1}') as object), {});
    assert.deepEqual(Object.keys(patch), ["__proto__"]);
    assert.equal(Object.getPrototypeOf(patch), Object.prototype);
  });
});

describe("toJsonObject", () => {
  it("copies exactly as JSON.stringify and JSON.parse do", () => {
    const values: object[] = [
      { a: 1, gone: undefined, list: [1, undefined, 3], zero: -0, nested: { b: null }, f: () => 1 },
      JSON.parse('{"__proto__": {"x": 1}, "2": 1, "1": [{}]}') as object,
      { at: new Date(0), notANumber: Number.NaN, list: [Number.POSITIVE_INFINITY, Symbol("s")] },
      Object.create(null, { shown: { value: 1, enumerable: true }, hidden: { value: 2 } }) as object,
    ];
    for (const value of values) {
      const copy = toJsonObject(value);
      assert.equal(JSON.stringify(copy), JSON.stringify(value));
      assert.equal(Object.getPrototypeOf(copy), Object.prototype);
      assert.deepEqual(Object.keys(copy), Object.keys(JSON.parse(JSON.stringify(value)) as object));
    }
    const original = { a: { b: [1] } };
    assert.notEqual(toJsonObject(original)["a"], original.a, "a deep copy");
  });

  it("fails as JSON.stringify does on a cycle, and on what is not an object", () => {
    const cycle: Record<string, unknown> = {};
    cycle["self"] = cycle;
    assert.throws(() => toJsonObject(cycle), TypeError);
    assert.throws(() => toJsonObject([1]), /expected a JSON object/);
  });
});
