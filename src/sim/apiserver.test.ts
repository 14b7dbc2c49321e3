import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { WatchEvent } from "../engine/ports.ts";
import { aModelServing, aPod, rejectsWith, setupServer } from "./test-fixtures.ts";

const setup = setupServer;
const pod = aPod;
const modelServing = aModelServing;

const msRef = { kind: "ModelServing", namespace: "default", name: "m" } as const;

describe("ApiServer: create, get, list", () => {
  it("assigns uid, resourceVersion and creationTimestamp, and lists by namespace and selector in name order", async () => {
    const { server, client, clock } = setup();
    clock.advance(5_000);
    const created = await client.create(pod("b", { role: "decode" }));
    await client.create(pod("a", { role: "prefill" }));
    await client.create(pod("c", { role: "decode", entry: "true" }));
    assert.match(created.metadata.uid ?? "", /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(created.metadata.creationTimestamp, "2026-01-01T00:00:05Z");
    assert.deepEqual(created.status, { phase: "Pending" });
    const names = (selector: string) =>
      server.list("Pod", { labelSelector: selector }).items.map((item) => item.metadata.name);
    assert.deepEqual(names(""), ["a", "b", "c"]);
    assert.deepEqual(names("role=decode"), ["b", "c"]);
    assert.deepEqual(names("role=decode,!entry"), ["b"]);
    assert.deepEqual(names("role in (prefill),entry"), []);
    assert.deepEqual(server.list("Pod", { namespace: "kube-system" }).items, []);
    assert.throws(() => server.list("Pod", { labelSelector: "role in" }), rejectsWith("Invalid"));
  });

  it("keeps one global, increasing resourceVersion across kinds", async () => {
    const { client, server } = setup();
    const versions = [
      (await client.create(pod("p"))).metadata.resourceVersion,
      (await client.create(modelServing("m"))).metadata.resourceVersion,
      (await client.patch({ kind: "Pod", namespace: "default", name: "p" }, { metadata: { labels: { x: "1" } } }))
        .metadata.resourceVersion,
    ].map(Number);
    assert.ok(versions[0]! < versions[1]! && versions[1]! < versions[2]!);
    assert.equal(server.resourceVersion(), String(versions[2]));
  });

  it("copies objects on the way in and out, and answers writes with the stored object, frozen", async () => {
    const { client, server } = setup();
    const sent = pod("p", { a: "1" });
    const returned = await client.create(sent);
    sent.metadata.labels = { a: "changed" };
    assert.throws(() => {
      returned.metadata.labels = { a: "changed too" };
    }, TypeError);
    assert.equal(returned, server.peek({ kind: "Pod", namespace: "default", name: "p" }));
    const read = server.get({ kind: "Pod", namespace: "default", name: "p" });
    assert.deepEqual(read.metadata.labels, { a: "1" });
    read.metadata.labels = { a: "and again" };
    assert.deepEqual(server.list("Pod").items[0]?.metadata.labels, { a: "1" });
  });

  it("answers AlreadyExists, NotFound, and Invalid for malformed objects", async () => {
    const { client, server } = setup();
    await client.create(pod("p"));
    await assert.rejects(client.create(pod("p")), rejectsWith("AlreadyExists"));
    assert.throws(() => server.get({ kind: "Pod", namespace: "default", name: "nope" }), rejectsWith("NotFound"));
    await assert.rejects(
      client.patch({ kind: "Pod", namespace: "default", name: "nope" }, {}),
      rejectsWith("NotFound"),
    );
    await assert.rejects(client.delete({ kind: "Pod", namespace: "default", name: "nope" }), rejectsWith("NotFound"));
    await assert.rejects(
      client.create({ ...pod("q"), metadata: { name: "q", namespace: "absent" } }),
      rejectsWith("NotFound"),
    );
    await assert.rejects(
      client.create({ ...pod("q"), metadata: { name: "Q_upper", namespace: "default" } }),
      rejectsWith("Invalid"),
    );
    await assert.rejects(client.create(pod("q", { "tandem.dev/revision": "r".repeat(64) })), rejectsWith("Invalid"));
    await assert.rejects(client.create({ ...pod("q"), apiVersion: "apps/v1" }), rejectsWith("Invalid"));
    await assert.rejects(client.create({ apiVersion: "v1", kind: "Pod" } as never), rejectsWith("Invalid"));
    const twoControllers = pod("q");
    const owner = { apiVersion: "v1", kind: "Pod", name: "p", uid: "u", controller: true };
    twoControllers.metadata.ownerReferences = [owner, { ...owner, name: "other" }];
    await assert.rejects(client.create(twoControllers), rejectsWith("Invalid"));
  });

  it("creates cluster-scoped objects without a namespace", async () => {
    const { client, server } = setup();
    await client.create({
      apiVersion: "v1",
      kind: "Node",
      metadata: { name: "gpu-0", namespace: "ignored" },
      status: { capacity: { "nvidia.com/gpu": "8" } },
    });
    const node = server.get({ kind: "Node", name: "gpu-0" });
    assert.equal(node.metadata.namespace, undefined);
    assert.deepEqual(node.status, { capacity: { "nvidia.com/gpu": "8" } });
    assert.deepEqual(
      server.list("Namespace").items.map((item) => item.metadata.name),
      ["default", "kube-system"],
    );
  });

  it("lists every kind in (namespace, name) order, objects of one name in the order they were created", async () => {
    const { client, server } = setup();
    await client.create(pod("m"));
    await client.create(modelServing("m"));
    await client.create(pod("a"));
    await client.patch({ kind: "Pod", namespace: "default", name: "m" }, { metadata: { labels: { x: "1" } } });
    const listed = () =>
      server
        .stored()
        .filter((object) => object.metadata.namespace === "default")
        .map((object) => `${object.kind}/${object.metadata.name}`);
    assert.deepEqual(listed(), ["Pod/a", "Pod/m", "ModelServing/m"]);
    assert.equal(
      server.stored().find((object) => object.kind === "Pod" && object.metadata.name === "m")?.metadata.labels?.["x"],
      "1",
      "the current version",
    );
    await client.delete({ kind: "Pod", namespace: "default", name: "m" }, { gracePeriodSeconds: 0 });
    await client.create(pod("m"));
    assert.deepEqual(listed(), ["Pod/a", "ModelServing/m", "Pod/m"]);
  });
});

describe("ApiServer: updates", () => {
  it("refuses an update with a stale or missing resourceVersion (409 Conflict / Invalid)", async () => {
    const { client } = setup();
    const first = await client.create(modelServing("m"));
    const second = await client.update({ ...first, spec: { replicas: 2 } });
    await assert.rejects(client.update({ ...first, spec: { replicas: 3 } }), rejectsWith("Conflict"));
    await assert.rejects(
      client.update({ ...second, metadata: { name: "m", namespace: "default" } }),
      rejectsWith("Invalid"),
    );
    await assert.rejects(
      client.update({ ...second, metadata: { ...second.metadata, uid: "someone-else" } }),
      rejectsWith("Conflict"),
    );
    const third = await client.update({ ...second, spec: { replicas: 3 } });
    assert.deepEqual(third.spec, { replicas: 3 });
  });

  it("bumps generation on spec changes only", async () => {
    const { client } = setup();
    const created = await client.create(modelServing("m"));
    assert.equal(created.metadata.generation, 1);
    const relabelled = await client.patch(msRef, { metadata: { labels: { team: "a" }, annotations: { note: "x" } } });
    assert.equal(relabelled.metadata.generation, 1);
    const withStatus = await client.patchStatus(msRef, { status: { observedGeneration: 1 } });
    assert.equal(withStatus.metadata.generation, 1);
    const scaled = await client.patch(msRef, { spec: { replicas: 4 } });
    assert.equal(scaled.metadata.generation, 2);
    const updated = await client.update({ ...scaled, spec: { replicas: 5 } });
    assert.equal(updated.metadata.generation, 3);
    const pods = await client.create(pod("p"));
    assert.equal(pods.metadata.generation, undefined, "pods do not track generation");
  });

  it("commits nothing for a write that changes nothing", async () => {
    const { client, server } = setup();
    const created = await client.create(modelServing("m"));
    const events: WatchEvent[] = [];
    server.watch("ModelServing", {}, { onEvent: (event) => events.push(event), onClose: () => undefined });
    const same = await client.update(created);
    const patched = await client.patch(msRef, { spec: { replicas: 1 } });
    assert.equal(same.metadata.resourceVersion, created.metadata.resourceVersion);
    assert.equal(patched.metadata.resourceVersion, created.metadata.resourceVersion);
    server.clock.advance(1);
    assert.deepEqual(events, []);
    assert.equal(server.apiWrites({ client: "controller", kind: "ModelServing" }), 3, "still counted as requests");
  });

  it("separates the status subresource from the rest of the object", async () => {
    const { client, server } = setup();
    const created = await client.create({ ...modelServing("m"), status: { replicas: 99 } });
    assert.equal(created.status, undefined, "status sent on create is dropped");
    const viaUpdate = await client.update({ ...created, spec: { replicas: 2 }, status: { replicas: 5 } });
    assert.deepEqual(viaUpdate.spec, { replicas: 2 });
    assert.equal(viaUpdate.status, undefined, "update ignores status");
    const viaStatus = await client.patchStatus(msRef, {
      spec: { replicas: 7 },
      metadata: { labels: { x: "y" } },
      status: { replicas: 2 },
    });
    assert.deepEqual(viaStatus.spec, { replicas: 2 }, "status writes ignore spec");
    assert.equal(viaStatus.metadata.labels, undefined, "a custom resource's status writes ignore metadata");
    assert.deepEqual(viaStatus.status, { replicas: 2 });
    const viaPatch = await client.patch(msRef, { status: { replicas: 0 } });
    assert.deepEqual(viaPatch.status, { replicas: 2 }, "patch ignores status");
    assert.equal(viaPatch.metadata.resourceVersion, viaStatus.metadata.resourceVersion);
    assert.deepEqual(server.get(msRef).status, { replicas: 2 });
    await client.create({
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: "l", namespace: "default" },
      spec: {},
    });
    await assert.rejects(
      client.patchStatus({ kind: "Lease", namespace: "default", name: "l" }, { status: {} }),
      rejectsWith("NotFound"),
    );
  });

  it("lets a pod's status write change its labels, annotations and finalizers in the same commit, as pods/status does", async () => {
    const { client, server } = setup();
    const ref = { kind: "Pod", namespace: "default", name: "p" } as const;
    const base = pod("p", { role: "decode" });
    const created = await client.create({
      ...base,
      metadata: { ...base.metadata, annotations: { keep: "1", drop: "1" }, finalizers: ["a/f", "b/f"] },
    });
    const before = Number(server.resourceVersion());
    const written = await client.patchStatus(ref, {
      metadata: {
        resourceVersion: created.metadata.resourceVersion ?? "",
        labels: { role: "prefill" },
        annotations: { drop: null, added: "2" },
        finalizers: ["b/f"],
        ownerReferences: [{ apiVersion: "v1", kind: "X", name: "x", uid: "u" }],
      },
      spec: { containers: [] },
      status: { phase: "Running" },
    });
    assert.equal(Number(server.resourceVersion()), before + 1, "one commit");
    assert.equal(written.metadata.labels?.["role"], "prefill");
    assert.deepEqual(written.metadata.annotations, { keep: "1", added: "2" });
    assert.deepEqual(written.metadata.finalizers, ["b/f"]);
    assert.equal(written.metadata.ownerReferences, undefined, "owner references are the main resource's");
    assert.deepEqual(written.spec, created.spec, "status writes ignore spec");
    assert.equal(written.status?.["phase"], "Running");
    await assert.rejects(
      client.patchStatus(ref, { metadata: { resourceVersion: created.metadata.resourceVersion ?? "", labels: {} } }),
      rejectsWith("Conflict"),
      "preconditions hold as in patch",
    );
  });
  it("applies merge patches, where null deletes a key and metadata.resourceVersion is a precondition", async () => {
    const { client } = setup();
    const created = await client.create({
      ...modelServing("m"),
      metadata: { name: "m", namespace: "default", labels: { a: "1", b: "2" } },
    });
    const patched = await client.patch(msRef, { metadata: { labels: { a: null, c: "3" } }, spec: { paused: true } });
    assert.deepEqual(patched.metadata.labels, { b: "2", c: "3" });
    assert.deepEqual(patched.spec, { replicas: 1, paused: true });
    const stale = { metadata: { resourceVersion: created.metadata.resourceVersion ?? "" }, spec: { replicas: 9 } };
    await assert.rejects(client.patch(msRef, stale), rejectsWith("Conflict"));
    await assert.rejects(client.patch(msRef, { metadata: { name: "renamed" } }), rejectsWith("Invalid"));
    const fresh = { metadata: { resourceVersion: patched.metadata.resourceVersion ?? "" }, spec: { replicas: 9 } };
    assert.deepEqual((await client.patch(msRef, fresh)).spec, { replicas: 9, paused: true });
  });

  it("keeps server fields and immutable fields out of the client's reach", async () => {
    const { client } = setup();
    const created = await client.create(pod("p", {}, { nodeName: "gpu-0" }));
    const ref = { kind: "Pod", namespace: "default", name: "p" } as const;
    const forged = await client.patch(ref, { metadata: { creationTimestamp: "2030-01-01T00:00:00Z", generation: 9 } });
    assert.equal(forged.metadata.creationTimestamp, created.metadata.creationTimestamp);
    assert.equal(forged.metadata.generation, undefined);
    const newImage = await client.patch(ref, { spec: { containers: [{ name: "main", image: "vllm:v2" }] } });
    assert.deepEqual(newImage.spec?.["containers"], [{ name: "main", image: "vllm:v2" }]);
    await assert.rejects(
      client.patch(ref, { spec: { containers: [{ name: "main", image: "vllm:v2", env: [] }] } }),
      rejectsWith("Invalid"),
    );
    await assert.rejects(client.patch(ref, { spec: { nodeName: "gpu-1" } }), rejectsWith("Invalid"));
    const unbound = { kind: "Pod", namespace: "default", name: "unbound" } as const;
    await client.create(pod("unbound"));
    await assert.rejects(client.patch(unbound, { spec: { nodeName: "gpu-1" } }), /set only at creation or by binding/);
    const revision = {
      apiVersion: "apps/v1",
      kind: "ControllerRevision",
      metadata: { name: "m-1", namespace: "default" },
      data: { a: 1 },
      revision: 1,
    } as const;
    await client.create(revision);
    const revisionRef = { kind: "ControllerRevision", namespace: "default", name: "m-1" } as const;
    await assert.rejects(client.patch(revisionRef, { data: { a: 2 } }), rejectsWith("Invalid"));
    assert.equal(
      (await client.patch(revisionRef, { revision: 3 }))["revision"],
      3,
      "revision may change, data may not",
    );
  });
});

describe("ApiServer: pod binding", () => {
  const ref = { kind: "Pod", namespace: "default", name: "p" } as const;

  it("sets nodeName and PodScheduled=True in one commit, in place, keeping the other conditions", async () => {
    const { server, client, clock } = setup();
    const created = await client.create(pod("p"));
    const pending = {
      type: "PodScheduled",
      status: "False",
      reason: "Unschedulable",
      message: "no room",
      lastTransitionTime: "2026-01-01T00:00:00Z",
    };
    const other = { type: "Initialized", status: "True", lastTransitionTime: "2026-01-01T00:00:00Z" };
    await client.patchStatus(ref, { status: { conditions: [pending, other] } });
    clock.advance(3_000);
    const before = Number(server.resourceVersion());
    const bound = await server.client("scheduler").bind(ref, "gpu-0", created.metadata.uid ?? "");
    assert.equal(Number(server.resourceVersion()), before + 1, "one commit");
    assert.equal(bound.spec?.["nodeName"], "gpu-0");
    assert.deepEqual(bound.status?.["conditions"], [
      { type: "PodScheduled", status: "True", lastTransitionTime: "2026-01-01T00:00:03Z" },
      other,
    ]);
    assert.equal(server.apiWrites({ client: "scheduler", verb: "bind" }), 1);
  });

  it("refuses a pod already bound, being deleted, or re-created (uid), and kinds without the subresource", async () => {
    const { client } = setup();
    const created = await client.create(pod("p"));
    const uid = created.metadata.uid ?? "";
    await assert.rejects(client.bind(ref, "gpu-0", "another-uid"), rejectsWith("Conflict"));
    await client.bind(ref, "gpu-0", uid);
    await assert.rejects(client.bind(ref, "gpu-1", uid), /already assigned to node "gpu-0"/);
    const second = await client.create(pod("q"));
    await client.patch({ kind: "Pod", namespace: "default", name: "q" }, { metadata: { finalizers: ["test/hold"] } });
    await client.delete({ kind: "Pod", namespace: "default", name: "q" });
    await assert.rejects(
      client.bind({ kind: "Pod", namespace: "default", name: "q" }, "gpu-0", second.metadata.uid ?? ""),
      /is being deleted/,
    );
    await assert.rejects(
      client.bind({ kind: "Pod", namespace: "default", name: "absent" }, "gpu-0", uid),
      rejectsWith("NotFound"),
    );
    await client.create(pod("r"));
    await assert.rejects(
      client.bind({ kind: "Pod", namespace: "default", name: "r" }, "", undefined),
      rejectsWith("Invalid"),
    );
    assert.equal(
      (await client.bind({ kind: "Pod", namespace: "default", name: "r" }, "gpu-1")).spec?.["nodeName"],
      "gpu-1",
      "no uid, no precondition",
    );
    await client.create({
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "svc", namespace: "default" },
      spec: {},
    });
    await assert.rejects(
      client.bind({ kind: "Service", namespace: "default", name: "svc" }, "gpu-0"),
      /Service has no binding subresource/,
    );
  });
});
