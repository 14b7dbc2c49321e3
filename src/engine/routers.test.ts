import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { microTime, routerLeaseObject } from "../api/router-lease.ts";
import type { RouterScope } from "../api/router-lease.ts";
import type { KubeObject } from "./ports.ts";
import { RouterRegistry } from "./routers.ts";

const ALL: RouterScope = { all: true };

/** Router `id`'s Lease as renewed at `renewMs` on the router's own clock (any skew: it is never compared). */
function lease(id: string, renewMs: number, scope: RouterScope = ALL, leaseDurationSeconds = 15): KubeObject {
  const object = routerLeaseObject({ id, namespace: "routers", scope, leaseDurationSeconds, nowMs: 0 });
  return {
    ...object,
    spec: { ...object.spec, renewTime: microTime(renewMs) },
    metadata: { ...object.metadata, resourceVersion: String(renewMs) },
  };
}

describe("RouterRegistry: liveness from observed renewTime changes on the controller's clock", () => {
  it("a renewal keeps a router live; no change for a whole duration and it is not", () => {
    const registry = new RouterRegistry();
    assert.deepEqual(registry.apply("ADDED", lease("a", 1_000_000), 10_000), [ALL], "a new router is news");
    assert.deepEqual(registry.routers(), [{ id: "a", scope: ALL, liveUntilMs: 25_000, liveSinceMs: 10_000 }]);
    assert.deepEqual(
      registry.apply("MODIFIED", lease("a", 1_005_000), 15_000),
      [],
      "a plain renewal of a live router is no news",
    );
    assert.equal(registry.routers()[0]?.liveUntilMs, 30_000);
    // An update that changes nothing the registry reads (same renewTime) does not extend it.
    assert.deepEqual(registry.apply("MODIFIED", lease("a", 1_005_000), 29_000), []);
    assert.equal(registry.routers()[0]?.liveUntilMs, 30_000, "not live from 30 000 on: no change seen for 15 s");
  });

  it("an expired router renewed again is news, and live since then", () => {
    const registry = new RouterRegistry();
    registry.apply("ADDED", lease("a", 5), 0);
    assert.deepEqual(
      registry.apply("MODIFIED", lease("a", 6), 15_000),
      [ALL],
      "renewed at its expiry instant: it had expired",
    );
    assert.deepEqual(registry.routers()[0], { id: "a", scope: ALL, liveUntilMs: 30_000, liveSinceMs: 15_000 });
  });

  it("after a restart (a new registry) every Lease counts as live from when it is first seen, however old its renewTime", () => {
    const registry = new RouterRegistry();
    registry.apply("ADDED", lease("a", 0), 3_600_000);
    assert.equal(registry.routers()[0]?.liveUntilMs, 3_615_000);
  });

  it("scope, holder or duration changes and deletions are news; a deleted expired router and other Leases are not", () => {
    const registry = new RouterRegistry();
    registry.apply("ADDED", lease("a", 1), 0);
    const narrow: RouterScope = { all: false, namespaces: ["ns"] };
    assert.deepEqual(registry.apply("MODIFIED", lease("a", 1, narrow), 1_000), [ALL, narrow]);
    assert.deepEqual(registry.apply("MODIFIED", lease("a", 1, narrow, 30), 2_000), [narrow, narrow]);
    assert.deepEqual(registry.apply("DELETED", lease("a", 1, narrow, 30), 3_000), [narrow]);
    assert.deepEqual(registry.routers(), []);
    registry.apply("ADDED", lease("b", 1), 0);
    assert.deepEqual(registry.apply("DELETED", lease("b", 1), 20_000), [], "it had expired: the live set is unchanged");
    const unlabelled = { ...lease("c", 1), metadata: { name: "c", namespace: "routers" } } as KubeObject;
    assert.deepEqual(registry.apply("ADDED", unlabelled, 0), [], "not a router Lease (the controller's own, say)");
    registry.apply("ADDED", lease("d", 1), 0);
    const relabelled = { ...lease("d", 1), metadata: { name: "d", namespace: "routers" } } as KubeObject;
    assert.deepEqual(registry.apply("MODIFIED", relabelled, 1_000), [ALL], "a Lease that loses the label is gone");
  });
});
