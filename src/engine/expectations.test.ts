import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { VirtualClock } from "../sim/clock.ts";
import { Expectations, expectCreated, expectDeleted, expectExists, expectPatched } from "./expectations.ts";
import { MemoryLogger } from "./logger.ts";
import type { ClusterReader, Kind, KubeObject } from "./ports.ts";

/** A cache holding exactly the pods given to `set`. */
function fakeReader() {
  const pods = new Map<string, KubeObject>();
  const reader: ClusterReader = {
    get: <K extends Kind>(kind: K, _namespace: string | undefined, name: string) =>
      (kind === "Pod" ? pods.get(name) : undefined) as KubeObject<K> | undefined,
    list: () => [],
    subscribe: () => () => undefined,
    hasSynced: () => true,
  };
  return {
    reader,
    set: (pod: KubeObject) => pods.set(pod.metadata.name, pod),
    remove: (name: string) => pods.delete(name),
  };
}

function aPod(name: string, uid: string, extra: Partial<KubeObject["metadata"]> = {}): KubeObject<"Pod"> {
  return { apiVersion: "v1", kind: "Pod", metadata: { name, namespace: "default", uid, ...extra } };
}

const ref = (name: string) => ({ kind: "Pod", namespace: "default", name }) as const;

function setup(timeoutMs = 30_000) {
  const clock = new VirtualClock();
  const logger = new MemoryLogger();
  const expectations = new Expectations(clock, { timeoutMs, logger });
  return { clock, logger, expectations, ...fakeReader() };
}

describe("expectations", () => {
  it("hold a key until the cache shows the created object with its uid", () => {
    const { expectations, reader, set } = setup();
    assert.deepEqual(expectations.pending("k", reader), { satisfied: true });
    expectations.expect("k", expectCreated(ref("p0"), "u1"));
    assert.equal(expectations.pending("k", reader).satisfied, false);
    set(aPod("p0", "u0"));
    assert.equal(
      expectations.pending("k", reader).satisfied,
      false,
      "an older pod under the same name is not the one created",
    );
    set(aPod("p0", "u1"));
    assert.deepEqual(expectations.pending("k", reader), { satisfied: true });
    assert.equal(expectations.count("k"), 0);
  });

  it("are met by a watch event even when the cache has moved on", () => {
    const { expectations, reader } = setup();
    expectations.expect("k", expectCreated(ref("p0"), "u1"));
    expectations.expect("k", expectCreated(ref("p1"), "u2"));
    expectations.observe("other", { type: "ADDED", object: aPod("p0", "u1") });
    assert.equal(expectations.count("k"), 2, "events are matched within their key");
    expectations.observe("k", { type: "DELETED", object: aPod("p0", "u1") });
    assert.equal(expectations.count("k"), 1, "a DELETED event shows the object was created");
    expectations.observe("k", { type: "ADDED", object: aPod("p1", "u2") });
    assert.deepEqual(expectations.pending("k", reader), { satisfied: true });
  });

  it("count a deletion as seen once the object is gone, replaced or terminating", () => {
    const { expectations, reader, set, remove } = setup();
    for (const [name, uid] of [
      ["gone", "u1"],
      ["replaced", "u2"],
      ["terminating", "u3"],
    ] as const) {
      set(aPod(name, uid));
      expectations.expect("k", expectDeleted(ref(name), uid));
    }
    assert.equal(expectations.pending("k", reader).satisfied, false);
    remove("gone");
    set(aPod("replaced", "u9"));
    set(aPod("terminating", "u3", { deletionTimestamp: "2026-01-01T00:00:30Z" }));
    assert.deepEqual(expectations.pending("k", reader), { satisfied: true });
  });

  it("count a patch as seen when the cache shows the patched fields or the object is gone", () => {
    const { expectations, reader, set, remove } = setup();
    const annotated = (object: KubeObject) => object.metadata.annotations?.["a"] === "1";
    set(aPod("p0", "u1"));
    expectations.expect("k", expectPatched(ref("p0"), "u1", "annotation a", annotated));
    expectations.expect("k", expectExists(ref("p1")));
    assert.equal(expectations.count("k"), 2);
    set(aPod("p0", "u1", { annotations: { a: "1" } }));
    set(aPod("p1", "any"));
    assert.deepEqual(expectations.pending("k", reader), { satisfied: true });
    expectations.expect(
      "k",
      expectPatched(ref("p0"), "u1", "annotation a", () => false),
    );
    remove("p0");
    assert.deepEqual(expectations.pending("k", reader), { satisfied: true });
  });

  it("time out with a warning, reporting how long until the next one does", () => {
    const { expectations, reader, clock, logger } = setup(30_000);
    expectations.expect("k", expectCreated(ref("p0"), "u1"));
    clock.advance(10_000);
    expectations.expect("k", expectCreated(ref("p1"), "u2"));
    assert.deepEqual(expectations.pending("k", reader), { satisfied: false, recheckAfterMs: 20_000 });
    clock.advance(20_000);
    assert.deepEqual(expectations.pending("k", reader), { satisfied: false, recheckAfterMs: 10_000 });
    assert.equal(logger.lines("warn").length, 1);
    assert.deepEqual(logger.lines("warn")[0]?.fields, {
      key: "k",
      kind: "Pod",
      name: "p0",
      expected: "created with uid u1",
    });
    clock.advance(10_000);
    assert.deepEqual(expectations.pending("k", reader), { satisfied: true });
  });

  it("forget a key's expectations", () => {
    const { expectations, reader } = setup();
    expectations.expect("k", expectCreated(ref("p0"), "u1"));
    expectations.forget("k");
    assert.deepEqual(expectations.pending("k", reader), { satisfied: true });
  });
});
