import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseModelServing } from "../api/parse.ts";
import { encodeControllerRevision } from "../core/revision/controller-revision.ts";
import { revisionData } from "../core/revision/projection.ts";
import { setupServer } from "../sim/test-fixtures.ts";
import type { JsonObject, KubeObject } from "./ports.ts";
import { requestRecreate, restart, rollback } from "./rollout-commands.ts";

const ref = { kind: "ModelServing", namespace: "default", name: "m" } as const;

function manifest(image: string, replicas: number): KubeObject<"ModelServing"> {
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "m", namespace: "default" },
    spec: {
      replicas,
      template: { roles: [{ name: "server", entryTemplate: { spec: { containers: [{ name: "c", image }] } } }] },
    },
  };
}

/** A server holding `m` at vllm:v3 scaled to 6, with revisions 1 (v1), 2 (v2), 3 (v3) recorded; 3 is the update revision. */
function cluster() {
  const { server, clock } = setupServer();
  const stored = server.create(manifest("vllm:v3", 6));
  const owner = { name: "m", namespace: "default", uid: stored.metadata.uid ?? "" };
  const names: string[] = [];
  ["vllm:v1", "vllm:v2", "vllm:v3"].forEach((image, index) => {
    const parsed = parseModelServing(manifest(image, 1));
    if (!parsed.ok) throw new Error("invalid");
    const revision = encodeControllerRevision({
      owner,
      data: revisionData(parsed.value),
      revision: index + 1,
      collisionCount: 0,
    });
    names.push(server.create(revision as unknown as KubeObject).metadata.name);
  });
  server.patchStatus(ref, { status: { updateRevision: names[2] ?? "", currentRevision: names[2] ?? "" } });
  const reader = {
    get: <K extends KubeObject["kind"]>(kind: K, namespace: string | undefined, name: string) =>
      server.stored(kind).find((object) => object.metadata.name === name && object.metadata.namespace === namespace) as
        KubeObject<K> | undefined,
    list: <K extends KubeObject["kind"]>(kind: K, options?: { namespace?: string; labelSelector?: string }) =>
      server.list(kind, options).items as KubeObject<K>[],
  };
  return { server, clock, names, reader, writer: server.client("user") };
}

const image = (object: KubeObject): unknown =>
  (
    object.spec as JsonObject & {
      template: { roles: { entryTemplate: { spec: { containers: { image: string }[] } } }[] };
    }
  ).template.roles[0]?.entryTemplate.spec.containers[0]?.image;

describe("rollback", () => {
  it("goes back to the previous revision and keeps runtime parameters", async () => {
    const { server, names, reader, writer } = cluster();
    const result = await rollback({ reader, writer }, { namespace: "default", name: "m" });
    assert.deepEqual(result, {
      ok: true,
      from: names[2],
      to: { name: names[1], revision: 2 },
      message: `rolled default/m back from ${names[2] ?? ""} to revision 2 (${names[1] ?? ""})`,
    });
    const after = server.get(ref);
    assert.equal(image(after), "vllm:v2");
    assert.equal(after.spec?.["replicas"], 6);
    assert.equal(after.metadata.generation, 2);
  });

  it("goes to a named revision, and says which exist when it does not", async () => {
    const { server, reader, writer } = cluster();
    assert.equal((await rollback({ reader, writer }, { namespace: "default", name: "m", toRevision: 1 })).ok, true);
    assert.equal(image(server.get(ref)), "vllm:v1");
    assert.deepEqual(await rollback({ reader, writer }, { namespace: "default", name: "m", toRevision: 9 }), {
      ok: false,
      message: "ModelServing default/m: no revision 9; revisions are 1, 2, 3",
    });
    assert.deepEqual(await rollback({ reader, writer }, { namespace: "default", name: "x" }), {
      ok: false,
      message: "ModelServing default/x not found",
    });
  });

  it("retries on Conflict with a fresh read, and gives up after maxAttempts", async () => {
    const { server, reader, writer } = cluster();
    server.faults.failNth({ verb: "update", client: "user" }, 1, { error: "Conflict" });
    assert.equal((await rollback({ reader, writer }, { namespace: "default", name: "m" })).ok, true);
    for (const n of [1, 2]) server.faults.failNth({ verb: "update", client: "user" }, n, { error: "Conflict" });
    const result = await rollback({ reader, writer }, { namespace: "default", name: "m", maxAttempts: 2 });
    assert.equal(result.ok, false);
    assert.match(result.message, /kept changing \(2 conflicts/);
  });
});

const entryAnnotations = (object: KubeObject): Record<string, string> | undefined =>
  (
    object.spec as JsonObject & {
      template: { roles: { entryTemplate: { metadata?: { annotations?: Record<string, string> } } }[] };
    }
  ).template.roles[0]?.entryTemplate.metadata?.annotations;

describe("restart", () => {
  it("stamps tandem.dev/restartedAt into every pod template: a new spec generation and a new revision", async () => {
    const { server, reader, writer } = cluster();
    const before = parseModelServing(server.get(ref));
    const result = await restart(
      { reader, writer },
      { namespace: "default", name: "m", restartedAt: "2026-12-02T01:00:00Z" },
    );
    assert.deepEqual(result, {
      ok: true,
      message:
        "ModelServing default/m restarted: every pod template carries tandem.dev/restartedAt=2026-12-02T01:00:00Z, a new revision that ServingGroupRollingUpdate rolls out within its budgets (follow it: tandem rollout status m --watch)",
    });
    const after = server.get(ref);
    assert.deepEqual(entryAnnotations(after), { "tandem.dev/restartedAt": "2026-12-02T01:00:00Z" });
    assert.equal(after.metadata.generation, 2);
    assert.equal(after.spec?.["replicas"], 6, "runtime parameters kept");
    const parsed = parseModelServing(after);
    assert.ok(before.ok && parsed.ok);
    assert.notDeepEqual(revisionData(parsed.value), revisionData(before.value), "the annotation is versioned");
  });

  it("is refused while paused and under InPlaceUpdate, saying what to do instead", async () => {
    const { server, reader, writer } = cluster();
    const request = { namespace: "default", name: "m", restartedAt: "2026-12-02T01:00:00Z" };
    server.patch(ref, { spec: { rolloutStrategy: { paused: true } } });
    assert.match((await restart({ reader, writer }, request)).message, /is paused: .*tandem rollout resume m/);
    server.patch(ref, { spec: { rolloutStrategy: { paused: false, type: "InPlaceUpdate" } } });
    assert.match((await restart({ reader, writer }, request)).message, /changes images only: .*--recreate --group G/);
    assert.equal(entryAnnotations(server.get(ref)), undefined, "nothing written");
  });
});

describe("requestRecreate", () => {
  const request = { namespace: "default", name: "m", id: "r1", group: 5 };

  it("writes the request annotation without a new spec generation", async () => {
    const { server, reader, writer } = cluster();
    const result = await requestRecreate({ reader, writer }, request);
    assert.equal(result.ok, true, result.message);
    assert.match(result.message, /recreate of group 5 requested \(id r1\); the controller replaces its pods once/);
    const after = server.get(ref);
    assert.equal(after.metadata.annotations?.["tandem.dev/recreate"], '{"id":"r1","group":5}');
    assert.equal(after.metadata.generation, 1);
  });

  it("names the field that does not fit: a group out of range, an unknown role", async () => {
    const { reader, writer } = cluster();
    assert.deepEqual(await requestRecreate({ reader, writer }, { ...request, group: 6 }), {
      ok: false,
      field: "group",
      message: "ModelServing default/m: there is no ServingGroup 6: its ServingGroups are 0..5",
    });
    assert.deepEqual(await requestRecreate({ reader, writer }, { ...request, role: "decode" }), {
      ok: false,
      field: "role",
      message: 'ModelServing default/m: there is no role "decode": its roles are server',
    });
  });

  it("never writes over a request the controller has not taken up; one it took up may be followed", async () => {
    const { server, reader, writer } = cluster();
    assert.equal((await requestRecreate({ reader, writer }, request)).ok, true);
    const second = await requestRecreate({ reader, writer }, { ...request, id: "r2" });
    assert.match(second.message, /the recreate request r1 is not taken up by the controller yet/);
    server.patchStatus(ref, { status: { recreate: { id: "r1", group: 5, phase: "Replacing", pods: [] } } });
    assert.equal((await requestRecreate({ reader, writer }, { ...request, id: "r2" })).ok, true);
    assert.equal(server.get(ref).metadata.annotations?.["tandem.dev/recreate"], '{"id":"r2","group":5}');
  });
});
