import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { jsonCopy, jsonEqual, mergePatch, mergePatchIsNoop, sameJsonText, shareEqualParts } from "./json.ts";
import { isApiError } from "../engine/ports.ts";
import type { JsonObject, JsonValue } from "../engine/ports.ts";
import { deepFreeze } from "../core/frozen.ts";
import fc from "fast-check";

/** Fixed seed: property tests are deterministic; raise numRuns locally to search harder. */
const SEED = 7;

/** A copy of a JSON value with every object's keys in reverse order. */
function reversedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reversedKeys);
  if (typeof value !== "object" || value === null) return value;
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(value).reverse())
    Object.defineProperty(copy, key, {
      value: reversedKeys((value as Record<string, unknown>)[key]),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  return copy;
}

/** True when `value` and everything reachable from it is frozen. */
function isDeepFrozen(value: unknown): boolean {
  if (typeof value !== "object" || value === null) return true;
  return Object.isFrozen(value) && Object.values(value).every(isDeepFrozen);
}

/** The first thing JSON cannot carry in `value`, walking own entries depth first, as a refusal names it. */
function firstProblem(value: unknown, depth: number, path: string): string | undefined {
  if (depth > 64) return `${path}: nested deeper than 64`;
  if (value === null || value === undefined || typeof value === "string" || typeof value === "boolean")
    return undefined;
  if (typeof value === "number") return Number.isFinite(value) ? undefined : `${path}: ${value} is not a JSON number`;
  if (typeof value !== "object") return `${path}: a ${typeof value} is not JSON`;
  for (const [key, child] of Object.entries(value)) {
    const problem = firstProblem(child, depth + 1, `${path}.${key}`);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

/** RFC 7386 over copies, the plain way: what `mergePatch` must equal as JSON text. */
function referenceMergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== "object" || patch === null || Array.isArray(patch))
    return JSON.parse(JSON.stringify(patch)) as unknown;
  const result = (
    typeof target === "object" && target !== null && !Array.isArray(target) ? JSON.parse(JSON.stringify(target)) : {}
  ) as Record<string, unknown>;
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) Reflect.deleteProperty(result, key);
    else
      Object.defineProperty(result, key, {
        value: referenceMergePatch(Object.hasOwn(result, key) ? result[key] : undefined, value),
        enumerable: true,
        writable: true,
        configurable: true,
      });
  }
  return result;
}

describe("mergePatch (RFC 7386)", () => {
  it("merges objects key by key, null removes a key, and arrays and scalars replace", () => {
    const target = { a: "b", c: { d: "e", f: "g" }, list: [1, 2], keep: true };
    const patch = { a: "z", c: { f: null, h: 1 }, list: [3], added: { x: null, y: 2 } };
    assert.deepEqual(mergePatch(target, patch), {
      a: "z",
      c: { d: "e", h: 1 },
      list: [3],
      keep: true,
      added: { y: 2 },
    });
    assert.deepEqual(target, { a: "b", c: { d: "e", f: "g" }, list: [1, 2], keep: true }, "target unchanged");
  });

  it("follows the RFC's examples for non-object patches and targets", () => {
    assert.deepEqual(mergePatch({ a: "b" }, ["c"]), ["c"]);
    assert.equal(mergePatch({ a: "b" }, null), null);
    assert.deepEqual(mergePatch(["a"], { a: "b" }), { a: "b" });
    assert.deepEqual(mergePatch({ a: [{ b: "c" }] }, { a: [1] }), { a: [1] });
    assert.deepEqual(mergePatch({ e: null }, { a: 1 }), { e: null, a: 1 });
    assert.deepEqual(mergePatch({ a: "foo" }, { a: { bb: { ccc: null } } }), { a: { bb: {} } });
  });

  it("shares every part that keeps its JSON text with the target, and freezes the copies it makes", () => {
    const source: JsonObject = { a: { b: 1 }, list: [{ x: 1 }, { y: 2 }], reordered: { p: 1, q: 2 }, keep: "k" };
    const target = deepFreeze(source);
    assert.equal(
      mergePatch(target, { a: { b: 1 }, list: [{ x: 1 }, { y: 2 }], gone: null }),
      target,
      "nothing changes: the target itself",
    );
    const patched = mergePatch(target, { list: [{ x: 1 }, { y: 3 }], reordered: { q: 2, p: 1 } }) as JsonObject;
    assert.equal(
      JSON.stringify(patched),
      '{"a":{"b":1},"list":[{"x":1},{"y":3}],"reordered":{"p":1,"q":2},"keep":"k"}',
    );
    assert.equal(patched["a"], target["a"]);
    const [list, targetList] = [patched["list"] as JsonObject[], target["list"] as JsonObject[]];
    assert.equal(list[0], targetList[0], "an equal element is the target's");
    assert.ok(Object.isFrozen(list) && Object.isFrozen(list[1]), "copies are frozen");
    const replaced = mergePatch(target, { reordered: [{ q: 2, p: 1 }] }) as JsonObject;
    assert.deepEqual(replaced["reordered"], [{ q: 2, p: 1 }], "another key order is another text: copied");
  });

  it("equals the plain RFC 7386 merge as JSON text on random JSON, shares an unchanged target, and never mutates a frozen target", () => {
    const json = fc.jsonValue({ maxDepth: 3 });
    // Patches made from the target itself reach the sharing paths: equal parts, equal wholes, and
    // equal values with their keys in another order (another text, so never shared).
    const variants = (target: unknown) => [
      json,
      fc.constant(structuredClone(target)),
      fc.constant(reversedKeys(target)),
      fc.constant({ extra: target }),
    ];
    const targetAndPatch = json.chain((target) => fc.tuple(fc.constant(target), fc.oneof(...variants(target))));
    fc.assert(
      fc.property(targetAndPatch, ([plainTarget, patch]) => {
        const target = deepFreeze(structuredClone(plainTarget)) as JsonValue;
        const text = JSON.stringify(target);
        const merged = mergePatch(target, patch as JsonValue);
        assert.equal(JSON.stringify(merged), JSON.stringify(referenceMergePatch(plainTarget, patch)));
        assert.equal(JSON.stringify(target), text);
        assert.ok(isDeepFrozen(merged), "a merge into a frozen target is deeply frozen");
        if (JSON.stringify(merged) === text && typeof target === "object" && target !== null && !Array.isArray(target))
          assert.equal(merged, target, "an unchanged object target is returned itself");
      }),
      { seed: SEED, numRuns: 500 },
    );
  });

  it("treats __proto__ as an ordinary key", () => {
    const patched = mergePatch({}, JSON.parse('{"__proto__": {"polluted": true}}') as never) as Record<string, unknown>;
    assert.equal(({} as Record<string, unknown>)["polluted"], undefined);
    assert.equal(Object.getPrototypeOf(patched), Object.prototype);
    assert.deepEqual(Object.keys(patched), ["__proto__"]);
  });
});

describe("jsonCopy and jsonEqual", () => {
  it("copies deeply with JSON semantics and compares ignoring key order and undefined", () => {
    const original = { a: { b: [1, { c: 2 }] }, gone: undefined };
    const copy = jsonCopy(original);
    assert.deepEqual(copy, { a: { b: [1, { c: 2 }] } });
    assert.notEqual(copy.a, original.a);
    assert.equal(jsonEqual({ x: 1, y: [1, 2] }, { y: [1, 2], x: 1, z: undefined }), true);
    assert.equal(jsonEqual({ x: [1, 2] }, { x: [2, 1] }), false);
    assert.equal(jsonEqual({ x: {} }, { x: [] }), false);
  });

  it("refuses values JSON cannot carry", () => {
    assert.throws(
      () => jsonCopy({ n: Number.NaN }),
      (error) => isApiError(error, "Invalid"),
    );
    assert.throws(
      () => jsonCopy({ f: () => 1 }),
      (error) => isApiError(error, "Invalid"),
    );
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 100; i++) deep = { deep };
    assert.throws(
      () => jsonCopy(deep),
      (error) => isApiError(error, "Invalid"),
    );
  });
});

describe("jsonCopy's plain walk", () => {
  it("copies exactly as JSON.stringify and JSON.parse do", () => {
    const values: unknown[] = [
      { a: 1, gone: undefined, list: [1, undefined, 3], zero: -0, nested: { b: null } },
      JSON.parse('{"__proto__": {"x": 1}}'),
      { at: new Date(0), map: new Map([[1, 2]]) },
      Object.assign([1, 2], { extra: "ignored" }),
    ];
    for (const value of values)
      assert.equal(JSON.stringify(jsonCopy(value)), JSON.stringify(JSON.parse(JSON.stringify(value))));
    assert.equal(Object.getPrototypeOf(jsonCopy(values[1])), Object.prototype);
  });

  it("names the path of the first value JSON cannot carry", () => {
    assert.throws(
      () => jsonCopy({ a: [1, { b: Number.POSITIVE_INFINITY }] }),
      /object\.a\.1\.b: Infinity is not a JSON number/,
    );
  });

  it("copies as JSON.stringify and JSON.parse do, or refuses the first value JSON cannot carry, on random values", () => {
    const leaves = [
      fc.string(),
      fc.double(),
      fc.boolean(),
      fc.constant(null),
      fc.constant(undefined),
      fc.constant(() => 1),
      fc.bigInt(),
      fc.date(),
    ];
    const values = fc.anything({
      maxDepth: 3,
      values: leaves,
      withNullPrototype: true,
      withSparseArray: true,
      withMap: true,
      withBoxedValues: true,
    });
    fc.assert(
      fc.property(values, fc.boolean(), (value, freeze) => {
        const problem = firstProblem(value, 0, "object");
        const text = problem === undefined ? JSON.stringify(value) : undefined;
        if (problem !== undefined) {
          assert.throws(
            () => jsonCopy(value, freeze),
            (error) => isApiError(error, "Invalid") && error.message === `Invalid: ${problem}`,
          );
          // A merge patch refuses such a value as a copy does, unless it merges it key by key.
          const mergedWhole = typeof value !== "object" || value === null || Array.isArray(value);
          if (mergedWhole)
            assert.throws(
              () => mergePatch({}, { key: value } as never),
              (error) => isApiError(error, "Invalid") && error.message === `Invalid: ${problem}`,
            );
        } else if (text === undefined) {
          assert.throws(() => jsonCopy(value, freeze), SyntaxError);
        } else {
          const copy = jsonCopy(value, freeze);
          assert.equal(JSON.stringify(copy), text);
          assert.equal(isDeepFrozen(copy), freeze || typeof copy !== "object" || copy === null);
        }
      }),
      { seed: SEED, numRuns: 500 },
    );
  });
});

describe("sameJsonText, mergePatchIsNoop and shareEqualParts", () => {
  it("tells the same JSON text from equal values in another key order", () => {
    assert.equal(sameJsonText({ a: 1, b: [1, { c: 2 }] }, { a: 1, b: [1, { c: 2 }] }), true);
    assert.equal(sameJsonText({ a: 1, b: 2 }, { b: 2, a: 1 }), false);
    assert.equal(jsonEqual({ a: 1, b: 2 }, { b: 2, a: 1 }), true);
  });

  it("decides whether a merge patch changes anything as merging and comparing would", () => {
    const target: JsonObject = { a: { b: 1 }, list: [1, 2] };
    const patches: JsonObject[] = [
      { a: { b: 1 } },
      { a: { c: null } },
      { list: [1, 2] },
      { a: { b: 2 } },
      { list: [2, 1] },
      { d: null },
      { d: {} },
    ];
    for (const patch of patches) {
      assert.equal(
        mergePatchIsNoop(target, patch),
        jsonEqual(mergePatch(target, patch), target),
        JSON.stringify(patch),
      );
    }
  });

  it("puts the previous version's parts in place of equal ones, keeping the JSON text", () => {
    const previous = Object.freeze({
      same: Object.freeze({ x: [1] }),
      reordered: Object.freeze({ a: 1, b: 2 }),
      kept: Object.freeze({ y: 1 }),
    });
    const next = { same: { x: [1] }, reordered: { b: 2, a: 1 }, kept: { y: 2 }, added: { z: 1 } };
    const text = JSON.stringify(next);
    shareEqualParts(next, previous, "kept");
    assert.equal(next.same, previous.same);
    assert.notEqual(next.reordered, previous.reordered);
    assert.notEqual(next.kept, previous.kept);
    assert.equal(JSON.stringify(next), text);
  });
});
