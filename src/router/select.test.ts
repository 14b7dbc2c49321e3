import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { Prng } from "../sim/prng.ts";
import { ENGINE_METRICS_MAX_AGE_MS, loadScore, select } from "./select.ts";
import type { EndpointLoad } from "./select.ts";
import { firstDraw } from "./test-fixtures.ts";

describe("loadScore", () => {
  it("adds fresh engine figures to the router's own in-flight count", () => {
    assert.equal(loadScore({ inFlight: 2, engine: { running: 3, waiting: 4, ageMs: 0 } }), 9);
    assert.equal(loadScore({ inFlight: 2, engine: { running: 3, waiting: 4, ageMs: ENGINE_METRICS_MAX_AGE_MS } }), 9);
  });

  it("falls back to in-flight only when the reading is older than 5 s or absent", () => {
    assert.equal(
      loadScore({ inFlight: 2, engine: { running: 3, waiting: 4, ageMs: ENGINE_METRICS_MAX_AGE_MS + 1 } }),
      2,
    );
    assert.equal(loadScore({ inFlight: 2, engine: undefined }), 2);
  });
});

describe("select", () => {
  const loads: Record<string, EndpointLoad> = {
    a: { inFlight: 1, engine: { running: 5, waiting: 0, ageMs: 100 } },
    b: { inFlight: 3, engine: undefined },
    c: { inFlight: 0, engine: { running: 2, waiting: 2, ageMs: 100 } },
    stale: { inFlight: 0, engine: { running: 50, waiting: 50, ageMs: 6_000 } },
  };
  const loadOf = (key: string): EndpointLoad => loads[key] ?? { inFlight: 0, engine: undefined };

  it("picks the least load, using engine figures only when fresh", () => {
    assert.equal(select(["a", "b", "c"], loadOf, firstDraw()), "b");
    assert.equal(select(["a", "b", "c", "stale"], loadOf, firstDraw()), "stale");
  });

  it("draws exactly once among the tied, in the order given, and never from an empty list", () => {
    const rng = firstDraw();
    assert.equal(select(["x", "y", "b"], loadOf, rng), "x");
    assert.equal(select(["b"], loadOf, rng), "b");
    assert.equal(select([], loadOf, rng), undefined);
    assert.deepEqual(rng.spans, [2, 1]);
  });

  it("property: the choice has the minimum score, and the same seed gives the same choice", () => {
    fc.assert(
      fc.property(fc.array(fc.nat(5), { minLength: 1, maxLength: 8 }), fc.nat(1000), (inFlight, seed) => {
        const keys = inFlight.map((_, index) => index);
        const loadOfIndex = (index: number): EndpointLoad => ({ inFlight: inFlight[index] ?? 0, engine: undefined });
        const chosen = select(keys, loadOfIndex, new Prng(seed));
        assert.equal(inFlight[chosen ?? -1], Math.min(...inFlight));
        assert.equal(select(keys, loadOfIndex, new Prng(seed)), chosen);
      }),
    );
  });

  it("spreads ties over every tied candidate", () => {
    const rng = new Prng(7);
    const seen = new Set<string>();
    for (let draw = 0; draw < 64; draw++)
      seen.add(select(["p", "q", "r"], () => ({ inFlight: 0, engine: undefined }), rng) ?? "");
    assert.deepEqual([...seen].sort(), ["p", "q", "r"]);
  });
});
