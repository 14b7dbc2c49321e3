import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DEFAULT_BOOTSTRAP_PORT, eligibility, roleEndpoints } from "./endpoints.ts";
import { aPod, aRoute } from "./test-fixtures.ts";

describe("eligibility (DESIGN §7)", () => {
  const route = aRoute();

  it("takes a Running, Ready, serving entry pod of the role and reads its labels", () => {
    const verdict = eligibility(
      aPod({ name: "ms-1-serve-0-0", group: 1, revision: "ms-abc", roleHash: "feedbeef00", host: "10.0.0.7" }),
      route,
      "serve",
    );
    assert.deepEqual(verdict, {
      ok: true,
      endpoint: {
        key: "ns/ms-1-serve-0-0",
        pod: "ms-1-serve-0-0",
        namespace: "ns",
        role: "serve",
        group: "1",
        revision: "ms-abc",
        roleHash: "feedbeef00",
        address: { host: "10.0.0.7", port: 8000 },
        bootstrapPort: DEFAULT_BOOTSTRAP_PORT,
      },
    });
  });

  const refused: [string, Parameters<typeof aPod>[0], string][] = [
    ["another namespace", { name: "p", namespace: "other" }, "not in namespace ns"],
    ["another ModelServing", { name: "p", modelServing: "other" }, "not a pod of ModelServing ms"],
    ["another role", { name: "p", role: "decode" }, "not of role serve"],
    ["a worker pod", { name: "p", entry: false }, "not an entry pod"],
    ["a pod being deleted", { name: "p", deleting: true }, "being deleted"],
    ["a draining pod", { name: "p", draining: true }, "draining"],
    ["a Pending pod", { name: "p", phase: "Pending" }, "phase Pending"],
    ["a pod not Ready", { name: "p", ready: false }, "not Ready"],
    ["a pod whose serving gate is False", { name: "p", serving: false }, "tandem.dev/serving not True"],
    ["a pod without an address", { name: "p", port: null }, "no pod IP"],
    [
      "a bad bootstrap port annotation",
      { name: "p", annotations: { "sglang.ai/bootstrap-port": "70000" } },
      'annotation sglang.ai/bootstrap-port "70000" is not a port 1..65535',
    ],
  ];
  for (const [what, options, reason] of refused) {
    it(`refuses ${what}`, () => {
      assert.deepEqual(eligibility(aPod(options), route, "serve"), { ok: false, reason });
    });
  }

  it("a draining pod stays out even while it is still Ready and serving (the mark is what counts)", () => {
    assert.equal(
      eligibility(aPod({ name: "p", draining: true, ready: true, serving: true }), route, "serve").ok,
      false,
    );
  });

  it("reads the bootstrap port annotation", () => {
    const verdict = eligibility(
      aPod({ name: "p", annotations: { "sglang.ai/bootstrap-port": "9100" } }),
      route,
      "serve",
    );
    assert.equal(verdict.ok && verdict.endpoint.bootstrapPort, 9100);
  });
});

describe("roleEndpoints", () => {
  it("sorts the eligible by key and summarises the rest of the role's pods only", () => {
    const pods = [
      aPod({ name: "b" }),
      aPod({ name: "a" }),
      aPod({ name: "c", draining: true }),
      aPod({ name: "d", ready: false }),
      aPod({ name: "e", ready: false }),
      aPod({ name: "f", role: "other" }),
    ];
    const result = roleEndpoints(pods, aRoute(), "serve");
    assert.deepEqual(
      result.endpoints.map((endpoint) => endpoint.pod),
      ["a", "b"],
    );
    assert.equal(result.summary, "5 pods: 1 draining, 2 not Ready");
    assert.equal(roleEndpoints([], aRoute(), "serve").summary, "0 pods");
  });
});
