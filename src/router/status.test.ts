import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { jsonEqual } from "../engine/json.ts";
import { routeStatus } from "./status.ts";
import type { RouteStatusInput } from "./status.ts";
import { aPod, aRoute } from "./test-fixtures.ts";

const T0 = "2026-01-01T00:00:00.000Z";
const T1 = "2026-01-01T00:01:00.000Z";

function input(overrides: Partial<RouteStatusInput> = {}): RouteStatusInput {
  return {
    route: { ok: true, value: aRoute() },
    generation: 3,
    previous: undefined,
    conflictWinner: undefined,
    modelServingRoles: ["serve"],
    pods: [aPod({ name: "a" }), aPod({ name: "b", revision: "ms-rev2" })],
    nowIso: T0,
    ...overrides,
  };
}

const conditionOf = (status: ReturnType<typeof routeStatus>, type: string) =>
  status.conditions?.find((condition) => condition.type === type);

describe("routeStatus", () => {
  it("an accepted aggregated route with eligible pods: mode, endpoints per revision, Accepted and Ready True", () => {
    const status = routeStatus(input());
    assert.equal(status.mode, "Aggregated");
    assert.equal(status.observedGeneration, 3);
    assert.deepEqual(status.endpoints, [
      {
        role: "serve",
        ready: 2,
        draining: 0,
        revisions: [
          { revision: "ms-rev1", ready: 1, draining: 0 },
          { revision: "ms-rev2", ready: 1, draining: 0 },
        ],
      },
    ]);
    assert.deepEqual(conditionOf(status, "Accepted"), {
      type: "Accepted",
      status: "True",
      reason: "Accepted",
      message: "serves model m from ModelServing ms",
      lastTransitionTime: T0,
      observedGeneration: 3,
    });
    assert.equal(conditionOf(status, "Ready")?.status, "True");
    assert.equal(conditionOf(status, "Ready")?.message, "2 ready serve");
  });

  it("draining pods are counted apart from ready ones, per role and revision; pods of other ModelServings and non-entry pods are not counted", () => {
    const roles = { prefill: "prefill", decode: "decode" };
    const pods = [
      aPod({ name: "p0", role: "prefill" }),
      aPod({ name: "d0", role: "decode", draining: true }),
      aPod({ name: "d1", role: "decode", revision: "ms-rev2" }),
      aPod({ name: "d2", role: "decode", ready: false }),
      aPod({ name: "x", role: "decode", modelServing: "other" }),
      aPod({ name: "w", role: "decode", entry: false }),
    ];
    const status = routeStatus(
      input({ route: { ok: true, value: aRoute({ roles }) }, pods, modelServingRoles: ["prefill", "decode"] }),
    );
    assert.equal(status.mode, "Disaggregated");
    assert.deepEqual(status.endpoints, [
      { role: "prefill", ready: 1, draining: 0, revisions: [{ revision: "ms-rev1", ready: 1, draining: 0 }] },
      {
        role: "decode",
        ready: 1,
        draining: 1,
        revisions: [
          { revision: "ms-rev1", ready: 0, draining: 1 },
          { revision: "ms-rev2", ready: 1, draining: 0 },
        ],
      },
    ]);
  });

  it("no eligible endpoint of a role: Ready False NoReadyEndpoints, saying why per role", () => {
    const status = routeStatus(
      input({ pods: [aPod({ name: "a", draining: true }), aPod({ name: "b", ready: false })] }),
    );
    assert.deepEqual(conditionOf(status, "Ready"), {
      type: "Ready",
      status: "False",
      reason: "NoReadyEndpoints",
      message: "no ready serve endpoint (2 pods: 1 draining, 1 not Ready)",
      lastTransitionTime: T0,
      observedGeneration: 3,
    });
  });

  it("a route that lost its model to an older one: Accepted False ModelConflict naming the winner; Ready False NotAccepted", () => {
    const status = routeStatus(input({ conflictWinner: "ns/older" }));
    assert.equal(conditionOf(status, "Accepted")?.reason, "ModelConflict");
    assert.equal(conditionOf(status, "Accepted")?.message, "model m is served by the older route ns/older");
    assert.deepEqual(
      [conditionOf(status, "Ready")?.status, conditionOf(status, "Ready")?.reason],
      ["False", "NotAccepted"],
    );
  });

  it("a missing ModelServing: Accepted False ModelServingNotFound", () => {
    const status = routeStatus(input({ modelServingRoles: undefined, pods: [] }));
    assert.deepEqual(
      [conditionOf(status, "Accepted")?.status, conditionOf(status, "Accepted")?.reason],
      ["False", "ModelServingNotFound"],
    );
    assert.equal(conditionOf(status, "Accepted")?.message, "ModelServing ns/ms does not exist");
  });

  it("a role the ModelServing does not have: Accepted False RoleNotFound, naming it and the roles there are", () => {
    const status = routeStatus(
      input({
        route: { ok: true, value: aRoute({ roles: { prefill: "prefill", decode: "decode" } }) },
        modelServingRoles: ["prefill", "server"],
      }),
    );
    assert.deepEqual(
      [conditionOf(status, "Accepted")?.reason, conditionOf(status, "Accepted")?.message],
      ["RoleNotFound", "ModelServing ns/ms has no role decode (its roles: prefill, server)"],
    );
  });

  it("a spec that does not parse: Accepted False InvalidSpec with the problem; no mode, no endpoints", () => {
    const status = routeStatus(input({ route: { ok: false, invalid: "spec.roles: must name serve" } }));
    assert.deepEqual(
      [conditionOf(status, "Accepted")?.reason, conditionOf(status, "Accepted")?.message],
      ["InvalidSpec", "spec.roles: must name serve"],
    );
    assert.equal(status.mode, undefined);
    assert.deepEqual(status.endpoints, []);
  });

  it("is idempotent: recomputed later over its own output it is equal (transition times kept), and a change of status moves only that condition's time", () => {
    const first = routeStatus(input());
    const again = routeStatus(input({ previous: first, nowIso: T1 }));
    assert.ok(jsonEqual(first, again));
    const lost = routeStatus(input({ previous: first, nowIso: T1, pods: [] }));
    assert.equal(conditionOf(lost, "Ready")?.lastTransitionTime, T1);
    assert.equal(conditionOf(lost, "Accepted")?.lastTransitionTime, T0);
  });
});
