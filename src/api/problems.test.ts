import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseModelServing } from "./parse.ts";
import { MAX_QUOTED_CHARACTERS, describeValue, formatPath, quote } from "./problems.ts";

const manifest = (replicas: unknown) => ({
  apiVersion: "tandem.dev/v1alpha1",
  kind: "ModelServing",
  metadata: { name: "a" },
  spec: {
    replicas,
    template: { roles: [{ name: "server", entryTemplate: { spec: { containers: [{ name: "c", image: "i" }] } } }] },
  },
});

describe("describeValue", () => {
  it("describes any JavaScript value without throwing", () => {
    const circular: Record<string, unknown> = {};
    circular["self"] = circular;
    const cases: readonly [unknown, string][] = [
      [null, "null"],
      [undefined, "undefined"],
      [[1], "a list"],
      [circular, "an object"],
      ["3", 'string "3"'],
      [3.5, "number 3.5"],
      [Number.NaN, "number NaN"],
      [Number.NEGATIVE_INFINITY, "number -Infinity"],
      [true, "boolean true"],
      [12n, "bigint 12"],
      [Symbol("s"), "a symbol"],
      [() => 1, "a function"],
    ];
    for (const [value, expected] of cases) assert.equal(describeValue(value), expected);
  });

  it("escapes control characters and cuts long strings and bigints, saying how long they were", () => {
    assert.equal(describeValue("a\n\u0000\u001b"), 'string "a\\n\\u0000\\u001b"');
    const long = "x".repeat(50 * 1024 * 1024);
    assert.equal(describeValue(long), `string "${"x".repeat(MAX_QUOTED_CHARACTERS)}"… (52428800 characters)`);
    assert.equal(describeValue(10n ** 100n), `bigint 1${"0".repeat(MAX_QUOTED_CHARACTERS - 1)}… (101 digits)`);
  });

  it("is what a validation message says of a bigint (a crash before)", () => {
    const result = parseModelServing(manifest(3n));
    assert.deepEqual(result.ok ? [] : result.problems, [
      { path: "spec.replicas", reason: "must be an integer, not bigint 3" },
    ]);
  });
});

describe("quote and formatPath", () => {
  it("quote keeps short text whole and cuts long text", () => {
    assert.equal(quote('a"b'), '"a\\"b"');
    assert.equal(
      quote("y".repeat(MAX_QUOTED_CHARACTERS + 1)),
      `"${"y".repeat(MAX_QUOTED_CHARACTERS)}"… (${MAX_QUOTED_CHARACTERS + 1} characters)`,
    );
  });

  it("a path names a huge or odd key by a cut, quoted excerpt", () => {
    assert.equal(
      formatPath(["spec", "k".repeat(1000)]),
      `spec["${"k".repeat(MAX_QUOTED_CHARACTERS)}"… (1000 characters)]`,
    );
    assert.equal(formatPath(["metadata", "a b", Symbol("s")]), 'metadata["a b"]["Symbol(s)"]');
  });
});
