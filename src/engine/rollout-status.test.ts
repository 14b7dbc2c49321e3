import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseModelServing } from "../api/parse.ts";
import { encodeControllerRevision } from "../core/revision/controller-revision.ts";
import { revisionData } from "../core/revision/projection.ts";
import { setupServer } from "../sim/test-fixtures.ts";
import type { Kind, KubeObject, ListOptions } from "./ports.ts";
import { rolloutHistory, rolloutStatus, setPaused } from "./rollout-commands.ts";

const target = { namespace: "default", name: "m" };

function manifest(image: string): KubeObject<"ModelServing"> {
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "m", namespace: "default" },
    spec: {
      replicas: 0,
      template: { roles: [{ name: "server", entryTemplate: { spec: { containers: [{ name: "c", image }] } } }] },
    },
  };
}

/** `m` with revisions 1 (v1) and 2 (v2); 2 is the update revision, 1 the current one. */
function cluster() {
  const { server } = setupServer();
  const stored = server.create(manifest("vllm:v2"));
  const owner = { name: "m", namespace: "default", uid: stored.metadata.uid ?? "" };
  const names = ["vllm:v1", "vllm:v2"].map((image, index) => {
    const parsed = parseModelServing(manifest(image));
    if (!parsed.ok) throw new Error("invalid");
    return server.create(
      encodeControllerRevision({
        owner,
        data: revisionData(parsed.value),
        revision: index + 1,
        collisionCount: 0,
      }) as unknown as KubeObject,
    ).metadata.name;
  });
  const generation = stored.metadata.generation ?? 1;
  server.patchStatus(
    { kind: "ModelServing", namespace: "default", name: "m" },
    {
      status: {
        observedGeneration: generation,
        updateRevision: names[1] ?? "",
        currentRevision: names[0] ?? "",
        roles: [{ name: "server", replicas: 0, ready: 0, updated: 0 }],
      },
    },
  );
  const reader = {
    get: <K extends Kind>(kind: K, namespace: string | undefined, name: string) =>
      server.stored(kind).find((object) => object.metadata.name === name && object.metadata.namespace === namespace) as
        KubeObject<K> | undefined,
    list: <K extends Kind>(kind: K, options?: ListOptions) => server.list(kind, options).items as KubeObject<K>[],
  };
  return { server, names, reader, writer: server.client("user") };
}

describe("rollout status, history, pause, resume (through the ports)", () => {
  it("status: complete when every unit runs the update revision (none here: replicas 0) and the status agrees", () => {
    const { server, reader, names } = cluster();
    const before = rolloutStatus(reader, target);
    assert.ok(before.ok);
    assert.equal(before.report.complete, false, "the pods are done, but the update revision is not current yet");
    assert.equal(
      before.lines[1],
      `update revision ${names[1] ?? ""} (revision 2), current revision ${names[0] ?? ""} (revision 1)`,
    );
    assert.equal(
      before.lines.at(-1),
      `  m: status.currentRevision ${names[0] ?? ""} is not the update revision ${names[1] ?? ""} yet`,
    );
    const progressing = {
      type: "Progressing",
      status: "False",
      reason: "Converged",
      message: "Nothing to do",
      observedGeneration: 1,
      lastTransitionTime: "2026-01-01T00:00:00Z",
    };
    server.patchStatus(
      { kind: "ModelServing", namespace: "default", name: "m" },
      { status: { currentRevision: names[1] ?? "", conditions: [progressing] } },
    );
    const after = rolloutStatus(reader, target);
    assert.ok(after.ok);
    assert.equal(after.report.complete, true);
    assert.equal(after.lines.at(-1), "rollout of m complete");
    assert.deepEqual(rolloutStatus(reader, { namespace: "default", name: "x" }), {
      ok: false,
      message: "ModelServing default/x not found",
    });
  });

  it("history: revisions oldest first with their images and marks", () => {
    const { reader, names } = cluster();
    const result = rolloutHistory(reader, target);
    assert.ok(result.ok);
    assert.deepEqual(result.entries, [
      { revision: 1, name: names[0], images: "server=vllm:v1", marks: "current", hash: names[0]?.slice("m-".length) },
      { revision: 2, name: names[1], images: "server=vllm:v2", marks: "update", hash: names[1]?.slice("m-".length) },
    ]);
  });

  it("pause and resume set spec.rolloutStrategy.paused and nothing else", async () => {
    const { server, writer } = cluster();
    assert.deepEqual(await setPaused(writer, target, true), { ok: true, message: "ModelServing default/m paused" });
    const paused = server.get({ kind: "ModelServing", namespace: "default", name: "m" });
    assert.deepEqual(paused.spec?.["rolloutStrategy"], { paused: true });
    assert.equal(paused.spec["replicas"], 0);
    assert.deepEqual(await setPaused(writer, target, false), { ok: true, message: "ModelServing default/m resumed" });
    assert.deepEqual(await setPaused(writer, { namespace: "default", name: "x" }, true), {
      ok: false,
      message: "ModelServing default/x not found",
    });
  });
});
