import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { KubeObject, WatchEvent } from "../engine/ports.ts";
import { SimInformer } from "./informer.ts";
import { aModelServing, aPod, setupServer } from "./test-fixtures.ts";

const msRef = { kind: "ModelServing", namespace: "default", name: "m" } as const;

function startInformer(
  setup: ReturnType<typeof setupServer>,
  options: { lagMs?: number; relistDelayMs?: number } = {},
) {
  const informer = new SimInformer(setup.server.client("controller"), setup.clock, {
    kinds: ["ModelServing", "Pod"],
    namespace: "default",
    ...options,
  });
  const events: WatchEvent[] = [];
  informer.subscribe((event) => events.push(event));
  informer.start();
  return { informer, events };
}

function summary(events: readonly WatchEvent[]): string[] {
  return events.map((event) => `${event.type} ${event.object.kind}/${event.object.metadata.name}`);
}

describe("watch streams", () => {
  it("deliver changes lagMs after commit, so a cache shows the old state until then", async () => {
    const setup = setupServer({ watchLagMs: 100 });
    const { informer } = startInformer(setup);
    assert.equal(informer.hasSynced(), true);
    await setup.client.create(aModelServing("m"));
    assert.equal(informer.get("ModelServing", "default", "m"), undefined);
    setup.clock.advance(99);
    assert.equal(informer.get("ModelServing", "default", "m"), undefined);
    setup.clock.advance(1);
    assert.deepEqual(informer.get("ModelServing", "default", "m")?.spec, { replicas: 1 });

    await setup.client.patch(msRef, { spec: { replicas: 3 } });
    setup.clock.advance(50);
    assert.deepEqual(informer.get("ModelServing", "default", "m")?.spec, { replicas: 1 }, "stale for lagMs");
    setup.clock.advance(50);
    assert.deepEqual(informer.get("ModelServing", "default", "m")?.spec, { replicas: 3 });
  });

  it("deliver every change in resourceVersion order", async () => {
    const setup = setupServer({ watchLagMs: 30 });
    const { events } = startInformer(setup);
    for (let round = 0; round < 5; round++) {
      await setup.client.create(aPod(`p${round}`));
      await setup.client.create(aModelServing(`m${round}`));
      setup.clock.advance(7);
      await setup.client.patch(
        { kind: "Pod", namespace: "default", name: `p${round}` },
        { metadata: { labels: { round: String(round) } } },
      );
    }
    setup.clock.advance(1_000);
    const versions = events.map((event) => Number(event.object.metadata.resourceVersion));
    assert.equal(versions.length, 15);
    assert.deepEqual(
      versions,
      [...versions].sort((a, b) => a - b),
    );
  });

  it("deliver the changes of one instant together, in one timer, and those of later instants apart", async () => {
    const { server, client, clock } = setupServer({ watchLagMs: 100 });
    const deliveries: string[][] = [];
    server.watch(
      "Pod",
      {},
      { onEvent: (event) => deliveries.at(-1)?.push(event.object.metadata.name), onClose: () => undefined },
    );
    await client.create(aPod("a"));
    await client.create(aPod("b"));
    clock.advance(1);
    await client.create(aPod("c"));
    assert.equal(clock.pendingCount(), 2, "one timer per instant, not per change");
    for (let timer = 0; timer < 2; timer++) {
      deliveries.push([]);
      clock.fireNext(1_000);
    }
    assert.deepEqual(deliveries, [["a", "b"], ["c"]]);
  });

  it("discard the rest of a burst when the consumer stops the stream while handling it", async () => {
    const { server, client, clock } = setupServer();
    const names: string[] = [];
    const stream = server.watch(
      "Pod",
      {},
      {
        onEvent: (event) => {
          names.push(event.object.metadata.name);
          stream.stop();
        },
        onClose: () => undefined,
      },
    );
    for (const name of ["a", "b", "c"]) await client.create(aPod(name));
    clock.advance(0);
    assert.deepEqual(names, ["a"]);
  });

  it("end a burst when the server drops the stream from inside a handler: onClose once, nothing more", async () => {
    const { server, client, clock } = setupServer();
    const seen: string[] = [];
    server.watch(
      "Pod",
      {},
      {
        onEvent: (event) => {
          seen.push(event.object.metadata.name);
          server.dropWatches("Pod");
        },
        onClose: (reason) => seen.push(`closed: ${reason}`),
      },
    );
    for (const name of ["a", "b", "c"]) await client.create(aPod(name));
    clock.advance(0);
    assert.deepEqual(seen, ["a", "closed: watch dropped"]);
  });

  it("at lag 0, deliver a change a handler commits during a burst in a later timer of the same instant, in order", async () => {
    const { server, client, clock } = setupServer();
    const deliveries: string[][] = [];
    server.watch(
      "Pod",
      {},
      {
        onEvent: (event) => {
          deliveries.at(-1)?.push(event.object.metadata.name);
          if (event.object.metadata.name === "a") void client.create(aPod("from-handler"));
        },
        onClose: () => undefined,
      },
    );
    await client.create(aPod("a"));
    await client.create(aPod("b"));
    while (clock.nextDueMs() === 0) {
      deliveries.push([]);
      clock.fireNext(0);
    }
    assert.deepEqual(deliveries, [["a", "b"], ["from-handler"]]);
  });

  it("close a stream whose handler throws mid-burst, so its consumer relists instead of missing the rest", async () => {
    const { server, client, clock } = setupServer();
    const seen: string[] = [];
    server.watch(
      "Pod",
      {},
      {
        onEvent: (event) => {
          seen.push(event.object.metadata.name);
          if (event.object.metadata.name === "a") throw new Error("consumer bug");
        },
        onClose: (reason) => seen.push(`closed: ${reason}`),
      },
    );
    for (const name of ["a", "b"]) await client.create(aPod(name));
    assert.throws(() => clock.advance(0), /consumer bug/);
    clock.advance(0);
    assert.deepEqual(seen, ["a", "closed: a handler failed with events left undelivered"]);
  });

  it("filter by label selector: leaving the selection is DELETED, entering it ADDED", async () => {
    const { server, client, clock } = setupServer();
    const events: WatchEvent[] = [];
    server.watch(
      "Pod",
      { labelSelector: "role=decode" },
      { onEvent: (event) => events.push(event), onClose: () => undefined },
    );
    const ref = { kind: "Pod", namespace: "default", name: "p" } as const;
    await client.create(aPod("p", { role: "prefill" }));
    await client.patch(ref, { metadata: { labels: { role: "decode" } } });
    await client.patch(ref, { metadata: { labels: { extra: "1" } } });
    await client.patch(ref, { metadata: { labels: { role: "prefill" } } });
    await client.delete(ref);
    clock.advance(0);
    assert.deepEqual(summary(events), ["ADDED Pod/p", "MODIFIED Pod/p", "DELETED Pod/p"]);
  });

  it("hand out shared frozen objects: a consumer cannot change the cache or the server through them", async () => {
    const setup = setupServer();
    const { informer, events } = startInformer(setup);
    await setup.client.create(aModelServing("m"));
    setup.clock.advance(0);
    const event = events[0];
    assert.ok(event !== undefined);
    const cached = informer.get("ModelServing", "default", "m");
    assert.equal(event.object, cached, "one object, no copy per reader");
    assert.throws(() => {
      event.object.spec = { replicas: 42 };
    }, TypeError);
    const listed = informer.list("ModelServing")[0];
    assert.ok(listed !== undefined);
    assert.throws(() => {
      listed.metadata.name = "x";
    }, TypeError);
    assert.deepEqual(informer.get("ModelServing", "default", "m")?.spec, { replicas: 1 });
    assert.deepEqual(setup.server.get(msRef).spec, { replicas: 1 });
  });
});

describe("informer list", () => {
  it("answers an owner's pods in one namespace from its bucket, as filtering the server's pods does", async () => {
    const setup = setupServer();
    const informer = new SimInformer(setup.server.client("controller"), setup.clock, { kinds: ["Pod"] });
    informer.start();
    const owned = (name: string, owner: string, namespace = "default", labels: Record<string, string> = {}) => {
      const pod = aPod(name, { "tandem.dev/modelserving": owner, ...labels });
      return { ...pod, metadata: { ...pod.metadata, namespace } };
    };
    await setup.client.create(owned("b", "m", "default", { role: "decode" }));
    await setup.client.create(owned("a", "m"));
    await setup.client.create(owned("a", "m", "kube-system"));
    await setup.client.create(owned("c", "other"));
    const selections = [
      { namespace: "default", labelSelector: "tandem.dev/modelserving=m" },
      { namespace: "kube-system", labelSelector: "tandem.dev/modelserving=m" },
      { namespace: "", labelSelector: "tandem.dev/modelserving=m" },
      { labelSelector: "tandem.dev/modelserving=m" },
      { namespace: "default", labelSelector: "tandem.dev/modelserving=m,role=decode" },
      { namespace: "default", labelSelector: "tandem.dev/modelserving=gone" },
    ];
    const agrees = (when: string) => {
      for (const options of selections) {
        const names = (objects: readonly { metadata: { namespace?: string; name: string } }[]) =>
          objects.map((object) => `${object.metadata.namespace ?? ""}/${object.metadata.name}`);
        assert.deepEqual(
          names(informer.list("Pod", options)),
          names(setup.server.list("Pod", options).items),
          `${when}: ${JSON.stringify(options)}`,
        );
      }
    };
    setup.clock.advance(0);
    agrees("created");
    await setup.client.patch(
      { kind: "Pod", namespace: "default", name: "a" },
      { metadata: { labels: { "tandem.dev/modelserving": "other" } } },
    );
    await setup.client.delete({ kind: "Pod", namespace: "kube-system", name: "a" }, { gracePeriodSeconds: 0 });
    setup.clock.advance(0);
    agrees("relabelled and deleted");
    const listed = informer.list("Pod", selections[0]);
    listed.push(listed[0] as KubeObject<"Pod">);
    agrees("after a caller changed a listed array");
  });
});

describe("informer relist", () => {
  it("relists after a dropped watch, losing in-flight events but converging to the server's state", async () => {
    const setup = setupServer({ watchLagMs: 50 });
    const { informer, events } = startInformer(setup, { relistDelayMs: 1_000 });
    await setup.client.create(aModelServing("a"));
    await setup.client.create(aModelServing("b"));
    setup.clock.advance(50);
    await setup.client.create(aModelServing("in-flight"));
    assert.equal(setup.server.dropWatches(), 2);
    await setup.client.create(aModelServing("c"));
    await setup.client.delete({ kind: "ModelServing", namespace: "default", name: "a" });
    await setup.client.patch({ kind: "ModelServing", namespace: "default", name: "b" }, { spec: { replicas: 2 } });
    setup.clock.advance(999);
    assert.deepEqual(
      informer.list("ModelServing").map((item) => item.metadata.name),
      ["a", "b"],
      "stale until the relist",
    );
    assert.deepEqual(summary(events), ["ADDED ModelServing/a", "ADDED ModelServing/b"]);
    setup.clock.advance(1);
    assert.equal(informer.relistCount(), 2, "one relist per kind");
    assert.deepEqual(informer.list("ModelServing"), setup.server.list("ModelServing").items);
    assert.deepEqual(summary(events.slice(2)), [
      "DELETED ModelServing/a",
      "MODIFIED ModelServing/b",
      "ADDED ModelServing/c",
      "ADDED ModelServing/in-flight",
    ]);
    await setup.client.create(aModelServing("d"));
    setup.clock.advance(50);
    assert.ok(informer.get("ModelServing", "default", "d") !== undefined, "watching again after the relist");
  });

  it("relists when the server closes a stream that fell too far behind", async () => {
    const setup = setupServer({ watchLagMs: 1_000, maxWatchBacklog: 3 });
    const { informer } = startInformer(setup, { relistDelayMs: 10 });
    for (let i = 0; i < 5; i++) await setup.client.create(aPod(`p${i}`));
    setup.clock.advance(10);
    assert.equal(informer.list("Pod").length, 5);
    assert.equal(informer.relistCount(), 1);
  });

  it("retries a failed list after relistDelayMs, and is not synced until then", () => {
    const setup = setupServer();
    setup.server.faults.failNth({ verb: "list", kind: "Pod" }, 1, { error: "ServerError" });
    const { informer } = startInformer(setup, { relistDelayMs: 200 });
    assert.equal(informer.hasSynced(), false);
    assert.throws(() => informer.list("Lease"), /does not watch Lease/);
    setup.clock.advance(200);
    assert.equal(informer.hasSynced(), true);
  });

  it("stops: no more events after stop()", async () => {
    const setup = setupServer();
    const { informer, events } = startInformer(setup);
    informer.stop();
    await setup.client.create(aPod("p"));
    setup.clock.advance(1_000);
    assert.deepEqual(events, []);
    assert.equal(informer.get("Pod", "default", "p"), undefined);
  });
});
