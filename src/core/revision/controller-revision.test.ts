import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ModelServing } from "../../api/index.ts";
import { decodeControllerRevision, encodeControllerRevision } from "./controller-revision.ts";
import type { DecodeResult } from "./controller-revision.ts";
import { revisionData } from "./projection.ts";

const OWNER = { name: "llama", uid: "uid-1", namespace: "inference" };

function dataWithImage(image: string) {
  return revisionData(
    ModelServing.parse({
      apiVersion: "tandem.dev/v1alpha1",
      kind: "ModelServing",
      metadata: { name: "llama" },
      spec: {
        template: { roles: [{ name: "decode", entryTemplate: { spec: { containers: [{ name: "engine", image }] } } }] },
      },
    }),
  );
}

/** The encoded revision as plain JSON, the way it comes back from the API server. */
function stored(collisionCount = 0): Record<string, any> {
  return JSON.parse(
    JSON.stringify(
      encodeControllerRevision({ owner: OWNER, data: dataWithImage("vllm:v1"), revision: 2, collisionCount }),
    ),
  ) as Record<string, any>;
}

function reasonOf(result: DecodeResult): string {
  assert.equal(result.ok, false, "expected the revision to be unreadable");
  return result.reason;
}

describe("encodeControllerRevision", () => {
  it("writes an apps/v1 ControllerRevision named after the hash, owned by the ModelServing", () => {
    const revision = encodeControllerRevision({
      owner: OWNER,
      data: dataWithImage("vllm:v1"),
      revision: 4,
      collisionCount: 0,
    });
    const hash = revision.metadata.labels["tandem.dev/revision-hash"] ?? "";
    assert.match(hash, /^[0-9a-f]{10}$/);
    assert.deepEqual(revision.metadata, {
      name: `llama-${hash}`,
      namespace: "inference",
      labels: { "tandem.dev/modelserving": "llama", "tandem.dev/revision-hash": hash },
      annotations: { "tandem.dev/revision-format": "1" },
      ownerReferences: [
        {
          apiVersion: "tandem.dev/v1alpha1",
          kind: "ModelServing",
          name: "llama",
          uid: "uid-1",
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    });
    assert.equal(revision.apiVersion, "apps/v1");
    assert.equal(revision.kind, "ControllerRevision");
    assert.equal(revision.revision, 4);
    assert.deepEqual(revision.data, dataWithImage("vllm:v1"));
  });

  it("records a collision count above 0 and changes the name with it", () => {
    const plain = encodeControllerRevision({
      owner: OWNER,
      data: dataWithImage("vllm:v1"),
      revision: 1,
      collisionCount: 0,
    });
    const bumped = encodeControllerRevision({
      owner: OWNER,
      data: dataWithImage("vllm:v1"),
      revision: 1,
      collisionCount: 2,
    });
    assert.equal(bumped.metadata.annotations["tandem.dev/collision-count"], "2");
    assert.notEqual(bumped.metadata.name, plain.metadata.name);
  });
});

describe("decodeControllerRevision", () => {
  it("round trips name, hash, number, collision count, owner and data", () => {
    for (const collisionCount of [0, 1, 7]) {
      const object = stored(collisionCount);
      const result = decodeControllerRevision(object);
      assert.ok(result.ok, result.ok ? "" : result.reason);
      assert.deepEqual(result.revision, {
        name: object.metadata.name,
        hash: object.metadata.labels["tandem.dev/revision-hash"],
        revision: 2,
        collisionCount,
        ownerUid: "uid-1",
        data: dataWithImage("vllm:v1"),
      });
    }
  });

  it("reports tampered data: the bytes no longer reproduce the hash", () => {
    const object = stored();
    object.data.roles[0].entryTemplate.spec.containers[0].image = "vllm:evil";
    const reason = reasonOf(decodeControllerRevision(object));
    assert.match(reason, /does not reproduce the recorded hash [0-9a-f]{10} \(it hashes to [0-9a-f]{10}\)/);
    assert.match(reason, /restore the original data/);
  });

  it("reports a wrong collision count as tampering", () => {
    const object = stored(1);
    object.metadata.annotations["tandem.dev/collision-count"] = "2";
    assert.match(reasonOf(decodeControllerRevision(object)), /does not reproduce the recorded hash/);
  });

  it("reports data that is not a projection, with the path", () => {
    const object = stored();
    object.data.roles[0].workerReplicas = -1;
    object.data.extra = true;
    const reason = reasonOf(decodeControllerRevision(object));
    assert.match(reason, /^data is not a revision format 1 projection: /);
    assert.match(reason, /roles\[0\]\.workerReplicas: must be 0 or more/);
    assert.match(reason, /extra: is not a known field/);
  });

  it("reports corrupted data: missing, a string, or not JSON", () => {
    for (const data of [undefined, '{"roles":', { roles: [Number.NaN] }]) {
      const object = stored();
      object.data = data;
      assert.match(
        reasonOf(decodeControllerRevision(object)),
        /^data (is missing or not JSON|is not a revision format 1 projection)/,
      );
    }
  });

  it("reports data nested 20,000 deep (an edited revision) instead of overflowing the stack", () => {
    const object = stored();
    object.data.roles[0].entryTemplate.spec.extra = JSON.parse(`${"[".repeat(20_000)}${"]".repeat(20_000)}`);
    assert.match(
      reasonOf(decodeControllerRevision(object)),
      /^data roles\[0\]\.entryTemplate\.spec\.extra(\[0\]){95}: nests objects and lists more than 100 levels deep$/,
    );
  });

  it("reports duplicate role names", () => {
    const object = stored();
    object.data.roles.push(object.data.roles[0]);
    assert.match(reasonOf(decodeControllerRevision(object)), /role names must be unique/);
  });

  it("refuses an unknown or missing format instead of guessing", () => {
    const future = stored();
    future.metadata.annotations["tandem.dev/revision-format"] = "2";
    assert.match(
      reasonOf(decodeControllerRevision(future)),
      /revision format "2" is not one this controller reads \(it reads format 1\): upgrade the controller/,
    );
    const unmarked = stored();
    delete unmarked.metadata.annotations["tandem.dev/revision-format"];
    assert.match(reasonOf(decodeControllerRevision(unmarked)), /annotation tandem.dev\/revision-format is missing/);
  });

  it("reports a missing hash label, a malformed collision count, and a name that does not match the hash", () => {
    const noHash = stored();
    delete noHash.metadata.labels["tandem.dev/revision-hash"];
    assert.match(reasonOf(decodeControllerRevision(noHash)), /label tandem.dev\/revision-hash is missing/);
    const badCount = stored();
    badCount.metadata.annotations["tandem.dev/collision-count"] = "-1";
    assert.match(reasonOf(decodeControllerRevision(badCount)), /must be a non-negative decimal integer, not "-1"/);
    const renamed = stored();
    renamed.metadata.name = "llama-0000000000";
    assert.match(reasonOf(decodeControllerRevision(renamed)), /name does not end with its hash/);
  });

  it("keeps name and number of an unreadable revision, so it can still be counted and collected", () => {
    const object = stored();
    object.data = null;
    const result = decodeControllerRevision(object);
    assert.equal(result.ok, false);
    assert.deepEqual([result.name, result.revision], [object.metadata.name, 2]);
  });

  it("never throws, whatever it is given", () => {
    for (const junk of [
      null,
      42,
      "x",
      [],
      {},
      { metadata: { name: "" }, revision: 1 },
      { metadata: { name: "a" }, revision: 1.5 },
    ]) {
      const result = decodeControllerRevision(junk);
      assert.equal(result.ok, false);
      assert.match(result.reason, /^not a ControllerRevision: /);
    }
  });
});
