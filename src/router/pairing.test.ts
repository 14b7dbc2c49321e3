import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { roleHash } from "../core/role-hash.ts";
import { roleEndpoints } from "./endpoints.ts";
import type { DiscoveredPod, Endpoint } from "./endpoints.ts";
import { choosePair } from "./pairing.ts";
import type { PairInput } from "./pairing.ts";
import type { PairingMode } from "./route.ts";
import type { EndpointLoad } from "./select.ts";
import { aPod, aRoute, firstDraw, pdRevision } from "./test-fixtures.ts";

const route = aRoute({ roles: { prefill: "prefill", decode: "decode" } });
const v1 = pdRevision("p:1", "d:1");
const v2 = pdRevision("p:1", "d:2"); // decode-only update
const v3 = pdRevision("p:2", "d:3"); // both roles change
const revisions = new Map([
  ["ms-v1", v1],
  ["ms-v2", v2],
  ["ms-v3", v3],
]);

function input(mode: PairingMode, pods: DiscoveredPod[], inFlight: Record<string, number> = {}): PairInput {
  return {
    mode,
    prefills: roleEndpoints(pods, route, "prefill"),
    decodes: roleEndpoints(pods, route, "decode"),
    revisions: (name) => revisions.get(name),
    loadOf: (endpoint: Endpoint): EndpointLoad => ({ inFlight: inFlight[endpoint.pod] ?? 0, engine: undefined }),
    rng: firstDraw(),
  };
}

function names(result: ReturnType<typeof choosePair>): [string, string] | string {
  return result.ok ? [result.prefill.pod, result.decode.pod] : result.reason;
}

describe("choosePair", () => {
  const prefill = (name: string, group: number, revision = "ms-v1") => aPod({ name, role: "prefill", group, revision });
  const decode = (name: string, group: number, revision = "ms-v1") => aPod({ name, role: "decode", group, revision });

  it("SameGroup: the least-loaded decode, then the least-loaded prefill of its group", () => {
    const pods = [prefill("p0a", 0), prefill("p0b", 0), prefill("p1", 1), decode("d0", 0), decode("d1", 1)];
    assert.deepEqual(names(choosePair(input("SameGroup", pods, { d1: 2, p0a: 1 }))), ["p0b", "d0"]);
    assert.deepEqual(names(choosePair(input("SameGroup", pods, { d0: 2 }))), ["p1", "d1"]);
  });

  it("SameGroup: a decode whose group has no eligible prefill does not compete", () => {
    const pods = [
      prefill("p1", 1),
      aPod({ name: "p0", role: "prefill", group: 0, draining: true }),
      decode("d0", 0),
      decode("d1", 1),
    ];
    assert.deepEqual(names(choosePair(input("SameGroup", pods, { d1: 9 }))), ["p1", "d1"]);
  });

  it("SameGroup: no pair is a reason naming both sides, never another pairing", () => {
    const pods = [prefill("p2", 2), decode("d0", 0), decode("d1", 1)];
    assert.equal(
      names(choosePair(input("SameGroup", pods))),
      "pairing SameGroup: no eligible prefill in the ServingGroup of any eligible decode (decode groups 0, 1; prefill groups 2)",
    );
  });

  it("a role without an eligible endpoint says so with the pod summary", () => {
    assert.equal(
      names(choosePair(input("Any", [prefill("p0", 0), aPod({ name: "d0", role: "decode", ready: false })]))),
      "no eligible decode endpoint (1 pod: 1 not Ready)",
    );
    assert.equal(names(choosePair(input("Any", [decode("d0", 0)]))), "no eligible prefill endpoint (0 pods)");
  });

  it("Any pairs across groups", () => {
    assert.deepEqual(names(choosePair(input("Any", [prefill("p2", 2), decode("d0", 0)]))), ["p2", "d0"]);
  });

  it("SameRevision: a decode-only update keeps pairing with the unchanged prefill", () => {
    // The unchanged prefill keeps its old revision label; its role hash is the one v2 builds.
    assert.equal(roleHash(v2, "prefill"), roleHash(v1, "prefill"));
    const pods = [prefill("p0", 0, "ms-v1"), decode("d0", 0, "ms-v2")];
    assert.deepEqual(names(choosePair(input("SameRevision", pods))), ["p0", "d0"]);
  });

  it("SameRevision: when both roles change, new pairs with new and old with old", () => {
    const pods = [
      prefill("p-old", 0, "ms-v1"),
      prefill("p-new", 0, "ms-v3"),
      decode("d-old", 0, "ms-v1"),
      decode("d-new", 0, "ms-v3"),
    ];
    assert.deepEqual(names(choosePair(input("SameRevision", pods, { "d-old": 1 }))), ["p-new", "d-new"]);
    assert.deepEqual(names(choosePair(input("SameRevision", pods, { "d-new": 1 }))), ["p-old", "d-old"]);
    // SameGroup alone would pair across revisions; the least-loaded prefill here is the old one.
    assert.deepEqual(names(choosePair(input("SameGroup", pods, { "d-old": 1, "p-new": 1 }))), ["p-old", "d-new"]);
  });

  it("SameRevision still requires the same group", () => {
    assert.equal(
      names(choosePair(input("SameRevision", [prefill("p1", 1), decode("d0", 0)])))
        .toString()
        .startsWith("pairing SameRevision:"),
      true,
    );
  });

  it("SameRevision: a new decode with only old prefills fails with the revisions, and unknown revisions are never guessed", () => {
    assert.equal(
      names(choosePair(input("SameRevision", [prefill("p0", 0, "ms-v1"), decode("d0", 0, "ms-v3")]))),
      "pairing SameRevision: no eligible prefill in the ServingGroup of an eligible decode runs the prefill spec of that decode's revision " +
        "(decode groups 0; prefill groups 0; decode revisions ms-v3; prefill revisions ms-v1)",
    );
    const unknown = names(choosePair(input("SameRevision", [prefill("p0", 0, "ms-v1"), decode("d0", 0, "ms-gone")])));
    assert.match(String(unknown), /unknown or unreadable: ms-gone\)$/);
  });
});
