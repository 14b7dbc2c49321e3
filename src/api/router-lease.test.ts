import { test } from "node:test";
import assert from "node:assert/strict";
import {
  drainConfirmationKeys,
  drainConfirmations,
  drainedAnnotation,
  parseRouterLease,
  parseRouterScope,
  routerLeaseObject,
  scopeCovers,
} from "./router-lease.ts";

test('a confirmation is drained.tandem.dev/<router-id>; only "true" values confirm, every key is removable', () => {
  assert.equal(drainedAnnotation("router-a"), "drained.tandem.dev/router-a");
  const annotations = {
    "drained.tandem.dev/b": "true",
    "drained.tandem.dev/a": "true",
    "drained.tandem.dev/c": "no",
    "tandem.dev/draining": "x",
  };
  assert.deepEqual(drainConfirmations(annotations), ["a", "b"]);
  assert.deepEqual(drainConfirmationKeys(annotations), [
    "drained.tandem.dev/a",
    "drained.tandem.dev/b",
    "drained.tandem.dev/c",
  ]);
  assert.deepEqual(drainConfirmations(undefined), []);
});

test("scope: * or a comma list; missing or empty means every namespace", () => {
  assert.deepEqual(parseRouterScope(undefined), { all: true });
  assert.deepEqual(parseRouterScope(" , "), { all: true });
  assert.deepEqual(parseRouterScope("b, a,a"), { all: false, namespaces: ["a", "b"] });
  assert.deepEqual(parseRouterScope("a,*"), { all: true });
  assert.equal(scopeCovers(parseRouterScope("a,b"), "b"), true);
  assert.equal(scopeCovers(parseRouterScope("a,b"), "c"), false);
});

test("a router Lease round-trips; a Lease without the label is not a router", () => {
  const lease = routerLeaseObject({
    id: "r-1",
    namespace: "tandem-system",
    scope: parseRouterScope("x,y"),
    leaseDurationSeconds: 9,
    nowMs: Date.UTC(2026, 0, 2, 3, 4, 5, 678),
  });
  assert.equal(lease.spec.renewTime, "2026-01-02T03:04:05.678000Z");
  assert.deepEqual(parseRouterLease(lease), {
    id: "r-1",
    scope: { all: false, namespaces: ["x", "y"] },
    leaseDurationSeconds: 9,
    renewTime: "2026-01-02T03:04:05.678000Z",
  });
  assert.equal(parseRouterLease({ metadata: { name: "leader" }, spec: {} }), undefined);
  const bare = parseRouterLease({
    metadata: { name: "r-2", labels: { "tandem.dev/router": "true" } },
    spec: { leaseDurationSeconds: -1 },
  });
  assert.deepEqual(bare, { id: "r-2", scope: { all: true }, leaseDurationSeconds: 15, renewTime: "" });
});
