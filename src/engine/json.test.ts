import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mergePatch } from "../sim/json.ts";
import { jsonEqual, mergePatchBetween, toJsonObject } from "./json.ts";
import type { JsonObject } from "./ports.ts";

describe("mergePatchBetween", () => {
  const from: JsonObject = { replicas: 2, units: [{ group: 1, revision: "m-1" }], nested: { a: 1, b: { c: 2 } }, gone: "x" };
  const to: JsonObject = { replicas: 3, units: [{ group: 1, revision: "m-1" }], nested: { a: 1, b: { d: 3 } }, added: [1] };

  it("sends changes only: removed keys as null, objects key by key, other values whole", () => {
    assert.deepEqual(mergePatchBetween(from, to), { gone: null, replicas: 3, nested: { b: { c: null, d: 3 } }, added: [1] });
    assert.deepEqual(mergePatchBetween(to, to), {});
  });

  it("gives a patch that turns `from` into `to` exactly (RFC 7386)", () => {
    for (const [a, b] of [[from, to], [to, from], [{}, to], [from, {}]] as const) {
      assert.ok(jsonEqual(mergePatch(a, mergePatchBetween(a, b)), b));
    }
  });

  it("keeps a key named __proto__ as data", () => {
    const patch = mergePatchBetween(toJsonObject(JSON.parse('{"__proto__": 1}') as object), {});
    assert.deepEqual(Object.keys(patch), ["__proto__"]);
    assert.equal(Object.getPrototypeOf(patch), Object.prototype);
  });
});
