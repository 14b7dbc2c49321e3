import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { routesByModel } from "./route.ts";
import { chooseTarget } from "./target.ts";
import type { TargetInput } from "./target.ts";
import { aPod, aRoute, firstDraw } from "./test-fixtures.ts";

function input(overrides: Partial<TargetInput>): TargetInput {
  return {
    route: aRoute(),
    pods: [],
    revisions: () => undefined,
    loadOf: () => ({ inFlight: 0, engine: undefined }),
    rng: firstDraw(),
    excluded: new Set(),
    ...overrides,
  };
}

describe("chooseTarget", () => {
  it("aggregated: one endpoint; excluded endpoints are skipped and counted in the reason", () => {
    const pods = [aPod({ name: "a" }), aPod({ name: "b" })];
    const first = chooseTarget(input({ pods }));
    assert.equal(first.ok && first.target.protocol === "aggregated" && first.target.endpoint.pod, "a");
    const retry = chooseTarget(input({ pods, excluded: new Set(["ns/a"]) }));
    assert.equal(retry.ok && retry.target.protocol === "aggregated" && retry.target.endpoint.pod, "b");
    assert.deepEqual(chooseTarget(input({ pods, excluded: new Set(["ns/a", "ns/b"]) })), {
      ok: false,
      reason: "no eligible serve endpoint (2 pods; 2 failed earlier in this request)",
    });
  });

  const pd = [aPod({ name: "p", role: "prefill" }), aPod({ name: "d", role: "decode" })];

  it("disaggregated: the protocol follows kvConnector; SGLang draws a room after the pair", () => {
    const nixl = chooseTarget(input({ route: aRoute({ roles: { prefill: "prefill", decode: "decode" } }), pods: pd }));
    assert.equal(nixl.ok && nixl.target.protocol, "nixl");
    const rng = firstDraw();
    const sglang = chooseTarget(input({ route: aRoute({ engine: "sglang", kvConnector: "sglang", roles: { prefill: "prefill", decode: "decode" } }), pods: pd, rng }));
    assert.equal(sglang.ok && sglang.target.protocol === "sglang" && sglang.target.bootstrapRoom, 0);
    assert.deepEqual(rng.spans, [1, 1, 2 ** 21, 2 ** 32]);
  });

  it("disaggregated with kvConnector none has no target", () => {
    const result = chooseTarget(input({ route: aRoute({ kvConnector: "none", roles: { prefill: "prefill", decode: "decode" } }), pods: pd }));
    assert.deepEqual(result, { ok: false, reason: "route ns/r is disaggregated but kvConnector is none: set nixl or sglang" });
  });
});

describe("routesByModel", () => {
  it("the oldest route wins a model; ties by namespace/name; the rest conflict", () => {
    const old = aRoute({ name: "old", creationTimestamp: "2026-01-01T00:00:00Z" });
    const young = aRoute({ name: "young", creationTimestamp: "2026-02-01T00:00:00Z" });
    const twin = aRoute({ name: "a-twin", namespace: "zz", creationTimestamp: "2026-01-01T00:00:00Z" });
    const other = aRoute({ name: "other", model: "n" });
    const { winners, conflicted } = routesByModel([young, twin, other, old]);
    assert.equal(winners.get("m")?.name, "old");
    assert.equal(winners.get("n")?.name, "other");
    assert.deepEqual(
      conflicted.map((route) => route.name),
      ["a-twin", "young"],
    );
  });
});
