import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { jsonCopy, jsonEqual, mergePatch } from "./json.ts";
import { isApiError } from "../engine/ports.ts";

describe("mergePatch (RFC 7386)", () => {
  it("merges objects key by key, null removes a key, and arrays and scalars replace", () => {
    const target = { a: "b", c: { d: "e", f: "g" }, list: [1, 2], keep: true };
    const patch = { a: "z", c: { f: null, h: 1 }, list: [3], added: { x: null, y: 2 } };
    assert.deepEqual(mergePatch(target, patch), { a: "z", c: { d: "e", h: 1 }, list: [3], keep: true, added: { y: 2 } });
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
    assert.throws(() => jsonCopy({ n: Number.NaN }), (error) => isApiError(error, "Invalid"));
    assert.throws(() => jsonCopy({ f: () => 1 }), (error) => isApiError(error, "Invalid"));
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 100; i++) deep = { deep };
    assert.throws(() => jsonCopy(deep), (error) => isApiError(error, "Invalid"));
  });
});
