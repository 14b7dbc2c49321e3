import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { WatchEvent } from "../engine/ports.ts";
import { aModelServing, aPod, ownedBy, rejectsWith, setupServer } from "./test-fixtures.ts";

const podRef = { kind: "Pod", namespace: "default", name: "p" } as const;
const msRef = { kind: "ModelServing", namespace: "default", name: "m" } as const;

function exists(server: ReturnType<typeof setupServer>["server"], ref: typeof podRef | typeof msRef): boolean {
  return server.list(ref.kind).items.some((item) => item.metadata.name === ref.name);
}

describe("deletion: grace periods", () => {
  it("deletes an unscheduled pod at once, whatever grace period is asked", async () => {
    const { server, client } = setupServer();
    await client.create(aPod("p"));
    await client.delete(podRef, { gracePeriodSeconds: 30 });
    assert.equal(exists(server, podRef), false);
  });

  it("keeps a running pod until its grace period ends, with deletionTimestamp at that end", async () => {
    const { server, client, clock } = setupServer();
    await client.create(aPod("p", {}, { nodeName: "gpu-0", terminationGracePeriodSeconds: 10 }));
    clock.advance(2_000);
    await client.delete(podRef);
    const deleting = server.get(podRef);
    assert.equal(deleting.metadata.deletionTimestamp, "2026-01-01T00:00:12Z");
    assert.equal(deleting.metadata.deletionGracePeriodSeconds, 10);
    await client.delete(podRef); // deleting again succeeds and changes nothing
    assert.equal(server.get(podRef).metadata.resourceVersion, deleting.metadata.resourceVersion);
    clock.advance(9_999);
    assert.equal(exists(server, podRef), true);
    clock.advance(1);
    assert.equal(exists(server, podRef), false);
  });

  it("defaults to 30 seconds and lets a second delete shorten, never lengthen, the grace period", async () => {
    const { server, client, clock } = setupServer();
    await client.create(aPod("p", {}, { nodeName: "gpu-0" }));
    await client.delete(podRef);
    assert.equal(server.get(podRef).metadata.deletionGracePeriodSeconds, 30);
    await client.delete(podRef, { gracePeriodSeconds: 60 });
    assert.equal(server.get(podRef).metadata.deletionGracePeriodSeconds, 30);
    await client.delete(podRef, { gracePeriodSeconds: 5 });
    assert.equal(server.get(podRef).metadata.deletionTimestamp, "2026-01-01T00:00:05Z");
    clock.advance(5_000);
    assert.equal(exists(server, podRef), false);
    await assert.rejects(client.delete(podRef), rejectsWith("NotFound"));
  });

  it("leaves pod termination to an external kubelet when asked: it finishes with gracePeriodSeconds 0", async () => {
    const { server, client, clock } = setupServer({ podTermination: "external" });
    const created = await client.create(aPod("p", {}, { nodeName: "gpu-0", terminationGracePeriodSeconds: 1 }));
    await client.delete(podRef);
    clock.advance(60_000);
    assert.equal(exists(server, podRef), true, "nobody finished the termination");
    const kubelet = server.client("kubelet");
    await kubelet.delete(podRef, { uid: created.metadata.uid ?? "", gracePeriodSeconds: 0 });
    assert.equal(exists(server, podRef), false);
  });

  it("deletes other kinds at once, ignoring the grace period", async () => {
    const { server, client } = setupServer();
    await client.create(aModelServing("m"));
    await client.delete(msRef, { gracePeriodSeconds: 100 });
    assert.equal(exists(server, msRef), false);
  });
});

describe("deletion: finalizers and preconditions", () => {
  it("holds an object with finalizers until the last one is removed, then deletes it in one event", async () => {
    const { server, client, clock } = setupServer();
    await client.create({
      ...aModelServing("m"),
      metadata: { name: "m", namespace: "default", finalizers: ["tandem.dev/a", "tandem.dev/b"] },
    });
    const events: WatchEvent[] = [];
    server.watch("ModelServing", {}, { onEvent: (event) => events.push(event), onClose: () => undefined });
    await client.delete(msRef);
    const deleting = server.get(msRef);
    assert.equal(deleting.metadata.deletionTimestamp, "2026-01-01T00:00:00Z");
    assert.equal(deleting.metadata.deletionGracePeriodSeconds, 0);
    assert.equal(deleting.metadata.generation, 2, "starting deletion bumps generation");
    clock.advance(3_600_000);
    assert.equal(exists(server, msRef), true);
    await assert.rejects(
      client.patch(msRef, { metadata: { finalizers: ["tandem.dev/a", "tandem.dev/b", "tandem.dev/c"] } }),
      rejectsWith("Invalid"),
    );
    await client.patch(msRef, { metadata: { finalizers: ["tandem.dev/b"] } });
    assert.equal(exists(server, msRef), true);
    const last = server.get(msRef);
    await client.update({ ...last, metadata: { ...last.metadata, finalizers: [] } });
    assert.equal(exists(server, msRef), false);
    clock.advance(1);
    assert.deepEqual(
      events.map((event) => event.type),
      ["MODIFIED", "MODIFIED", "DELETED"],
    );
    assert.deepEqual(events[2]?.object.metadata.finalizers, [], "DELETED carries the final state");
  });

  it("keeps a running pod with a finalizer after its grace period, until the finalizer goes", async () => {
    const { server, client, clock } = setupServer();
    await client.create({
      ...aPod("p", {}, { nodeName: "gpu-0", terminationGracePeriodSeconds: 1 }),
      metadata: { name: "p", namespace: "default", finalizers: ["x.dev/keep"] },
    });
    await client.delete(podRef);
    clock.advance(1_000);
    assert.equal(server.get(podRef).metadata.deletionGracePeriodSeconds, 0);
    await client.patch(podRef, { metadata: { finalizers: null } });
    assert.equal(exists(server, podRef), false);
  });

  it("checks UID and resourceVersion preconditions on delete", async () => {
    const { server, client } = setupServer();
    const first = await client.create(aModelServing("m"));
    await client.delete(msRef);
    const second = await client.create(aModelServing("m"));
    assert.notEqual(first.metadata.uid, second.metadata.uid, "a re-created object has a new uid");
    await assert.rejects(client.delete(msRef, { uid: first.metadata.uid ?? "" }), rejectsWith("Conflict"));
    await assert.rejects(
      client.delete(msRef, { resourceVersion: first.metadata.resourceVersion ?? "" }),
      rejectsWith("Conflict"),
    );
    assert.equal(exists(server, msRef), true);
    await client.delete(msRef, {
      uid: second.metadata.uid ?? "",
      resourceVersion: second.metadata.resourceVersion ?? "",
    });
    assert.equal(exists(server, msRef), false);
  });

  it("refuses malformed grace periods and namespace deletion", async () => {
    const { client } = setupServer();
    await client.create(aPod("p", {}, { nodeName: "gpu-0" }));
    await assert.rejects(client.delete(podRef, { gracePeriodSeconds: -1 }), rejectsWith("Invalid"));
    await assert.rejects(client.delete(podRef, { gracePeriodSeconds: 0.5 }), rejectsWith("Invalid"));
    await assert.rejects(client.delete({ kind: "Namespace", name: "default" }), rejectsWith("Invalid"));
  });
});

describe("deletion: ownerReference garbage collection", () => {
  it("deletes dependents gcDelayMs after their owner is gone, running pods gracefully", async () => {
    const { server, client, clock } = setupServer({ gcDelayMs: 500 });
    const owner = await client.create(aModelServing("m"));
    const ownedPod = aPod("p", {}, { nodeName: "gpu-0", terminationGracePeriodSeconds: 2 });
    ownedPod.metadata.ownerReferences = [ownedBy(owner)];
    await client.create(ownedPod);
    await client.create({
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "svc", namespace: "default", ownerReferences: [ownedBy(owner)] },
      spec: { clusterIP: "None" },
    });
    const unrelated = await client.create(aPod("other", {}, { nodeName: "gpu-0" }));

    await client.delete(msRef);
    clock.advance(499);
    assert.equal(server.list("Service").items.length, 1);
    assert.equal(server.get(podRef).metadata.deletionTimestamp, undefined);
    clock.advance(1);
    assert.deepEqual(server.list("Service").items, []);
    assert.equal(server.get(podRef).metadata.deletionGracePeriodSeconds, 2, "pods get their grace period");
    clock.advance(2_000);
    assert.deepEqual(
      server.list("Pod").items.map((item) => item.metadata.uid),
      [unrelated.metadata.uid],
    );
  });

  it("collects an object created for an owner that is already gone, and drops only dangling references", async () => {
    const { server, client, clock } = setupServer({ gcDelayMs: 100 });
    const first = await client.create(aModelServing("m"));
    const second = await client.create(aModelServing("n"));
    await client.delete(msRef);
    const orphan = aPod("p");
    orphan.metadata.ownerReferences = [ownedBy(first)];
    await client.create(orphan);
    const shared = aPod("shared");
    shared.metadata.ownerReferences = [ownedBy(first), { ...ownedBy(second), controller: false }];
    await client.create(shared);
    clock.advance(100);
    assert.deepEqual(
      server.list("Pod").items.map((item) => item.metadata.name),
      ["shared"],
    );
    assert.deepEqual(
      server.list("Pod").items[0]?.metadata.ownerReferences?.map((reference) => reference.name),
      ["n"],
    );
  });

  it("does not collect dependents while the owner is only being deleted (held by a finalizer)", async () => {
    const { server, client, clock } = setupServer({ gcDelayMs: 100 });
    const owner = await client.create({
      ...aModelServing("m"),
      metadata: { name: "m", namespace: "default", finalizers: ["tandem.dev/cleanup"] },
    });
    const dependent = aPod("p");
    dependent.metadata.ownerReferences = [ownedBy(owner)];
    await client.create(dependent);
    await client.delete(msRef);
    clock.advance(10_000);
    assert.equal(exists(server, podRef), true);
    await client.patch(msRef, { metadata: { finalizers: null } });
    clock.advance(100);
    assert.equal(exists(server, podRef), false);
  });
});
