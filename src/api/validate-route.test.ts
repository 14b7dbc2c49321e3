import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { parseModelRoute } from "./parse.ts";
import type { Problem } from "./problems.ts";
import { routeMode } from "./route.ts";

type Json = Record<string, any>;

/** A valid disaggregated route; tests mutate a copy. */
function route(): Json {
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelRoute",
    metadata: { name: "llama", namespace: "inference" },
    spec: {
      model: "meta-llama/Llama-3.1-8B-Instruct",
      modelServing: "llama-pd",
      engine: "vllm",
      roles: { prefill: "prefill", decode: "decode" },
    },
  };
}

function problems(mutate: (r: Json) => void): Problem[] {
  const r = route();
  mutate(r);
  const result = parseModelRoute(r);
  return result.ok ? [] : [...result.problems];
}

/** Asserts that the mutation yields exactly these problems. */
function rejects(mutate: (r: Json) => void, ...expected: [path: string, reason: string][]): void {
  assert.deepEqual(
    problems(mutate),
    expected.map(([path, reason]) => ({ path, reason })),
  );
}

const aggregated = (r: Json): void => {
  r.spec.roles = { serve: "server" };
};

describe("ModelRoute defaults", () => {
  it("applies DESIGN §7's defaults, kvConnector from the engine on a disaggregated route", () => {
    const result = parseModelRoute(route());
    assert.ok(result.ok);
    assert.deepEqual(result.value.spec, {
      model: "meta-llama/Llama-3.1-8B-Instruct",
      modelServing: "llama-pd",
      engine: "vllm",
      port: 8000,
      roles: { prefill: "prefill", decode: "decode" },
      pairing: "SameGroup",
      retries: { attempts: 2 },
      timeouts: { firstByteSeconds: 60, idleSeconds: 300 },
      kvConnector: "nixl",
    });
    const sglang = route();
    sglang.spec.engine = "sglang";
    const parsed = parseModelRoute(sglang);
    assert.ok(parsed.ok);
    assert.equal(parsed.value.spec.kvConnector, "sglang");
  });

  it("leaves kvConnector unset on an aggregated route and keeps an explicit one", () => {
    const agg = route();
    aggregated(agg);
    const parsed = parseModelRoute(agg);
    assert.ok(parsed.ok);
    assert.equal(parsed.value.spec.kvConnector, undefined);
    assert.equal(routeMode(parsed.value.spec.roles), "Aggregated");
    const none = route();
    none.spec.kvConnector = "none";
    const explicit = parseModelRoute(none);
    assert.ok(explicit.ok);
    assert.equal(explicit.value.spec.kvConnector, "none");
    assert.equal(routeMode(explicit.value.spec.roles), "Disaggregated");
  });

  it("is idempotent and never modifies its input", () => {
    const input = route();
    const before = structuredClone(input);
    const once = parseModelRoute(input);
    assert.ok(once.ok);
    assert.deepEqual(input, before);
    const twice = parseModelRoute(once.value);
    assert.ok(twice.ok);
    assert.deepEqual(twice.value, once.value);
  });

  it("accepts a status as the router writes it", () => {
    const r = route();
    r.status = {
      observedGeneration: 3,
      mode: "Disaggregated",
      endpoints: [
        {
          role: "prefill",
          ready: 3,
          draining: 1,
          revisions: [{ revision: "llama-pd-5d8f9c7b6a", ready: 3, draining: 1 }],
        },
      ],
      conditions: [
        { type: "Accepted", status: "True", reason: "Accepted" },
        { type: "Ready", status: "False", reason: "NoReadyEndpoints", message: "role decode has no ready entry pod" },
      ],
    };
    assert.deepEqual(
      problems(() => undefined),
      [],
    );
    assert.ok(parseModelRoute(r).ok);
    rejects(
      (x) => (x.status = { conditions: [{ type: "Available", status: "True" }] }),
      ["status.conditions[0].type", 'must be one of "Accepted", "Ready"'],
    );
  });
});

describe("ModelRoute validation", () => {
  it("requires exactly {serve} or {prefill, decode}", () => {
    rejects(
      (r) => (r.spec.roles = {}),
      ["spec.roles", "must name serve (aggregated) or prefill and decode (disaggregated)"],
    );
    rejects(
      (r) => (r.spec.roles = { serve: "server", decode: "decode" }),
      [
        "spec.roles.decode",
        "cannot be set with serve: a route is aggregated {serve} or disaggregated {prefill, decode}",
      ],
    );
    rejects(
      (r) => (r.spec.roles = { prefill: "prefill" }),
      ["spec.roles.decode", "is required with prefill: a disaggregated route names both roles"],
    );
    rejects(
      (r) => (r.spec.roles = { decode: "decode" }),
      ["spec.roles.prefill", "is required with decode: a disaggregated route names both roles"],
    );
    rejects(
      (r) => (r.spec.roles = { prefill: "pd", decode: "pd" }),
      ["spec.roles.decode", 'names the same role as prefill ("pd"): prefill and decode must be different roles'],
    );
    rejects((r) => (r.spec.roles = { serve: "server", router: "x" }), ["spec.roles.router", "is not a known field"]);
    rejects(
      (r) => (r.spec.roles = { serve: "Server" }),
      [
        "spec.roles.serve",
        "must be a DNS-1035 label: lowercase letters, digits and '-', starting with a letter and ending with a letter or digit",
      ],
    );
  });

  it("allows kvConnector only on a disaggregated route, and only with its engine", () => {
    rejects(
      (r) => {
        aggregated(r);
        r.spec.kvConnector = "nixl";
      },
      ["spec.kvConnector", "applies only to a disaggregated route (roles prefill and decode); remove it"],
    );
    rejects(
      (r) => (r.spec.kvConnector = "sglang"),
      ["spec.kvConnector", "sglang is the sglang protocol, but engine is vllm: use nixl or none"],
    );
    rejects(
      (r) => {
        r.spec.engine = "sglang";
        r.spec.kvConnector = "nixl";
      },
      ["spec.kvConnector", "nixl is the vllm protocol, but engine is sglang: use sglang or none"],
    );
    rejects((r) => (r.spec.kvConnector = "mooncake"), ["spec.kvConnector", 'must be one of "nixl", "sglang", "none"']);
  });

  it("names the field and the reason for every structural problem", () => {
    rejects((r) => delete r.spec.engine, ["spec.engine", 'is required: must be one of "vllm", "sglang"']);
    rejects((r) => delete r.spec.modelServing, ["spec.modelServing", "is required"]);
    rejects((r) => (r.spec.engine = "trtllm"), ["spec.engine", 'must be one of "vllm", "sglang"']);
    rejects((r) => (r.spec.port = 0), ["spec.port", "must be 1 or more"]);
    rejects((r) => (r.spec.port = 70_000), ["spec.port", "must be at most 65535"]);
    rejects((r) => (r.spec.port = "8000"), ["spec.port", 'must be an integer, not string "8000"']);
    rejects(
      (r) => (r.spec.modelServing = "llama.pd"),
      [
        "spec.modelServing",
        "must be a DNS-1035 label: lowercase letters, digits and '-', starting with a letter and ending with a letter or digit",
      ],
    );
    rejects((r) => (r.spec.modelServing = "m".repeat(53)), ["spec.modelServing", "must be at most 52 characters"]);
    rejects((r) => (r.spec.model = ""), ["spec.model", "must not be empty"]);
    rejects((r) => (r.spec.model = "llama 3"), ["spec.model", "must not contain whitespace"]);
    rejects(
      (r) => (r.spec.pairing = "SameNode"),
      ["spec.pairing", 'must be one of "SameGroup", "SameRevision", "Any"'],
    );
    rejects((r) => (r.spec.retries = { attempts: 11 }), ["spec.retries.attempts", "must be at most 10"]);
    rejects(
      (r) => (r.spec.timeouts = { firstByteSeconds: 0 }),
      ["spec.timeouts.firstByteSeconds", "must be 1 or more"],
    );
    rejects((r) => (r.spec.timeout = {}), ["spec.timeout", "is not a known field"]);
    rejects((r) => (r.kind = "ModelServing"), ["kind", 'must be "ModelRoute"']);
  });

  it("requires a DNS-1123 subdomain as metadata.name", () => {
    assert.deepEqual(
      problems((r) => (r.metadata.name = "llama.v2")),
      [],
    );
    rejects(
      (r) => (r.metadata.name = "Llama"),
      [
        "metadata.name",
        "must be a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit",
      ],
    );
    rejects(
      (r) => (r.metadata.name = "a".repeat(254)),
      ["metadata.name", "must be at most 253 characters (it has 254)"],
    );
  });
});

/** Valid routes as users write them: every optional field present or not. */
const routeInput = fc
  .record({
    engine: fc.constantFrom("vllm", "sglang"),
    disaggregated: fc.boolean(),
    port: fc.option(fc.integer({ min: 1, max: 65_535 }), { nil: undefined }),
    pairing: fc.option(fc.constantFrom("SameGroup", "SameRevision", "Any"), { nil: undefined }),
    none: fc.boolean(),
    attempts: fc.option(fc.integer({ min: 0, max: 10 }), { nil: undefined }),
    idleSeconds: fc.option(fc.integer({ min: 1, max: 3600 }), { nil: undefined }),
  })
  .map(({ engine, disaggregated, port, pairing, none, attempts, idleSeconds }) => {
    const spec: Json = {
      model: "m",
      modelServing: "ms",
      engine,
      roles: disaggregated ? { prefill: "p", decode: "d" } : { serve: "s" },
    };
    if (port !== undefined) spec.port = port;
    if (pairing !== undefined) spec.pairing = pairing;
    if (disaggregated && none) spec.kvConnector = "none";
    if (attempts !== undefined) spec.retries = { attempts };
    if (idleSeconds !== undefined) spec.timeouts = { idleSeconds };
    return { apiVersion: "tandem.dev/v1alpha1", kind: "ModelRoute", metadata: { name: "r" }, spec };
  });

describe("parseModelRoute properties", () => {
  it("accepts every generated route, defaulting idempotently, with a connector exactly when disaggregated", () => {
    fc.assert(
      fc.property(routeInput, (input) => {
        const once = parseModelRoute(input);
        assert.ok(once.ok, JSON.stringify(once.ok ? [] : once.problems));
        const twice = parseModelRoute(once.value);
        assert.ok(twice.ok);
        assert.deepEqual(twice.value, once.value);
        assert.equal(once.value.spec.kvConnector !== undefined, routeMode(once.value.spec.roles) === "Disaggregated");
      }),
      { seed: 20261201, numRuns: 200 },
    );
  });
});
