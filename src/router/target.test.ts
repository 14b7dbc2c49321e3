import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { Prng } from "../sim/prng.ts";
import { eligibility } from "./endpoints.ts";
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
    const sglang = chooseTarget(
      input({
        route: aRoute({ engine: "sglang", kvConnector: "sglang", roles: { prefill: "prefill", decode: "decode" } }),
        pods: pd,
        rng,
      }),
    );
    assert.equal(sglang.ok && sglang.target.protocol === "sglang" && sglang.target.bootstrapRoom, 0);
    assert.deepEqual(rng.spans, [1, 1, 2 ** 21, 2 ** 32]);
  });

  it("disaggregated with kvConnector none has no target", () => {
    const result = chooseTarget(
      input({ route: aRoute({ kvConnector: "none", roles: { prefill: "prefill", decode: "decode" } }), pods: pd }),
    );
    assert.deepEqual(result, {
      ok: false,
      reason: "route ns/r is disaggregated but kvConnector is none: set nixl or sglang",
    });
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

describe("chooseTarget properties", () => {
  const podArbitrary = fc.record({
    role: fc.constantFrom("prefill", "decode", "other"),
    group: fc.nat(2),
    ready: fc.boolean(),
    draining: fc.boolean(),
    deleting: fc.boolean(),
    phase: fc.constantFrom("Running" as const, "Pending" as const),
  });

  it("a pair is always two eligible endpoints of the right roles that the mode allows; none only when no such pair exists", () => {
    fc.assert(
      fc.property(
        fc.array(podArbitrary, { maxLength: 10 }),
        fc.constantFrom("SameGroup" as const, "Any" as const),
        fc.nat(1000),
        (specs, pairing, seed) => {
          const pods = specs.map((spec, index) => aPod({ name: `pod-${index}`, ...spec }));
          const route = aRoute({ roles: { prefill: "prefill", decode: "decode" }, pairing });
          const result = chooseTarget(input({ route, pods, rng: new Prng(seed) }));
          const eligible = (role: string) =>
            pods
              .map((pod) => eligibility(pod, route, role))
              .flatMap((verdict) => (verdict.ok ? [verdict.endpoint] : []));
          const [prefills, decodes] = [eligible("prefill"), eligible("decode")];
          const allowed = (p: { group: string }, d: { group: string }) => pairing === "Any" || p.group === d.group;
          if (result.ok) {
            assert.ok(result.target.protocol === "nixl");
            const { prefill, decode } = result.target;
            assert.ok(prefills.some((endpoint) => endpoint.key === prefill.key));
            assert.ok(decodes.some((endpoint) => endpoint.key === decode.key));
            assert.ok(allowed(prefill, decode));
          } else {
            assert.ok(!prefills.some((p) => decodes.some((d) => allowed(p, d))), result.reason);
          }
        },
      ),
    );
  });
});
