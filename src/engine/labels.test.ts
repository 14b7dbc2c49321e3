import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { labelProblems, matchesSelector, parseSelector } from "./labels.ts";
import { isApiError } from "./ports.ts";

const labels = { app: "m", "tandem.dev/role": "decode", tier: "gpu", empty: "" };

function matches(selector: string, target: Record<string, string> = labels): boolean {
  return matchesSelector(parseSelector(selector), target);
}

describe("label selectors", () => {
  it("parses every operator of the string form", () => {
    assert.deepEqual(parseSelector(" a = b , c==d,e!=f, g in (h, i), j notin (k), l, !m ").requirements, [
      { key: "a", operator: "=", values: ["b"] },
      { key: "c", operator: "=", values: ["d"] },
      { key: "e", operator: "!=", values: ["f"] },
      { key: "g", operator: "in", values: ["h", "i"] },
      { key: "j", operator: "notin", values: ["k"] },
      { key: "l", operator: "exists", values: [] },
      { key: "m", operator: "!exists", values: [] },
    ]);
    assert.deepEqual(parseSelector("").requirements, []);
    assert.deepEqual(parseSelector("a=").requirements, [{ key: "a", operator: "=", values: [""] }]);
  });

  it("matches equality, inequality, sets and existence as Kubernetes does", () => {
    assert.equal(matches(""), true);
    assert.equal(matches("tandem.dev/role=decode"), true);
    assert.equal(matches("tandem.dev/role==prefill"), false);
    assert.equal(matches("tier!=cpu"), true);
    assert.equal(matches("missing!=x"), true, "a missing key satisfies !=");
    assert.equal(matches("tier in (cpu,gpu)"), true);
    assert.equal(matches("tier in (cpu)"), false);
    assert.equal(matches("missing in (x)"), false);
    assert.equal(matches("tier notin (gpu)"), false);
    assert.equal(matches("missing notin (x)"), true, "a missing key satisfies notin");
    assert.equal(matches("app"), true);
    assert.equal(matches("!app"), false);
    assert.equal(matches("!missing"), true);
    assert.equal(matches("empty="), true);
    assert.equal(matches("app=m,tier=cpu"), false, "every requirement must hold");
    assert.equal(matchesSelector(parseSelector("app"), undefined), false, "no labels at all");
    assert.equal(matchesSelector(parseSelector("!app"), undefined), true);
  });

  it("rejects malformed selectors as Invalid", () => {
    for (const bad of [
      "a=b,",
      ",a",
      "a in b",
      "a in (b",
      "a in ()",
      "a > 1",
      "a=b c",
      "!",
      "a=(b)",
      "Bad Key=1",
      "a=b;c",
      `a=${"x".repeat(64)}`,
    ]) {
      assert.throws(
        () => parseSelector(bad),
        (error) => isApiError(error, "Invalid"),
        bad,
      );
    }
  });
});

describe("label validation", () => {
  it("accepts Kubernetes label keys and values and names what is wrong otherwise", () => {
    assert.deepEqual(labelProblems({ "tandem.dev/revision": "m-5d8f7c", a: "", "A_b.c-d": "X" }), []);
    assert.equal(labelProblems({ "-a": "x" }).length, 1);
    assert.equal(labelProblems({ "Bad.Prefix/a": "x" }).length, 1);
    assert.match(labelProblems({ a: "v".repeat(64) })[0] ?? "", /at most 63/);
    assert.equal(labelProblems({ a: "ends-with-dash-" }).length, 1);
  });
});
