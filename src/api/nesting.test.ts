import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { MAX_NESTING_DEPTH, nestingProblem } from "./nesting.ts";
import { parseModelServing } from "./parse.ts";
import { deepFreeze } from "../core/frozen.ts";

/** `{x: {x: ... leaf}}` with `depth` objects. */
function nested(depth: number, leaf: unknown = 1): unknown {
  let value = leaf;
  for (let level = 0; level < depth; level++) value = { x: value };
  return value;
}

describe("nestingProblem", () => {
  it("accepts exactly the limit and names the container whose member goes one level deeper", () => {
    assert.equal(nestingProblem(nested(MAX_NESTING_DEPTH + 1)), undefined); // the root and 100 levels below it
    assert.deepEqual(nestingProblem(nested(MAX_NESTING_DEPTH + 2)), {
      path: Array(MAX_NESTING_DEPTH).fill("x").join("."),
      reason: "nests objects and lists more than 100 levels deep",
    });
    assert.deepEqual(nestingProblem({ a: nested(MAX_NESTING_DEPTH + 1) }, ["steps", 0]), {
      path: `steps[0].a${".x".repeat(MAX_NESTING_DEPTH - 1)}`,
      reason: "nests objects and lists more than 100 levels deep",
    });
    assert.equal(nestingProblem({ a: nested(MAX_NESTING_DEPTH, "deep enough") }), undefined);
  });

  it("measures any depth without running out of stack", () => {
    assert.match(
      nestingProblem(JSON.parse(`${"[".repeat(200_000)}${"]".repeat(200_000)}`))?.path ?? "",
      /^(\[0\]){100}$/,
    );
  });

  it("walks shared objects once per depth, so aliases cost no more than a tree, and stops on cycles", () => {
    let shared: unknown = 1;
    for (let level = 0; level < 60; level++) shared = [shared, shared]; // 2^60 paths, 61 objects
    assert.equal(nestingProblem(shared), undefined);
    const cycle: Record<string, unknown> = {};
    cycle["self"] = cycle;
    assert.equal(nestingProblem(cycle), undefined);
  });
});

describe("parseModelServing: nesting", () => {
  const manifest = (extra: unknown) => ({
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "a" },
    spec: {
      template: {
        roles: [{ name: "server", entryTemplate: { spec: { containers: [{ name: "c", image: "i" }], extra } } }],
      },
    },
  });

  it("refuses a pod template nested 3,000 deep before anything walks it, mutable or stored (frozen)", () => {
    for (const input of [manifest(nested(3000)), deepFreeze(manifest(nested(3000)))]) {
      const result = parseModelServing(input);
      if (result.ok) assert.fail("expected a problem");
      assert.deepEqual(
        result.problems.map((found) => found.reason),
        ["nests objects and lists more than 100 levels deep"],
      );
    }
  });

  it("counts from the ModelServing's root: `extra` is 7 levels deep, so 94 objects fit in it and 95 do not", () => {
    assert.ok(parseModelServing(manifest(nested(MAX_NESTING_DEPTH - 6))).ok);
    assert.equal(parseModelServing(manifest(nested(MAX_NESTING_DEPTH - 5))).ok, false);
  });
});
