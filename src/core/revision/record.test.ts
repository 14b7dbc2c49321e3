import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ModelServing } from "../../api/index.ts";
import { decodeControllerRevision, encodeControllerRevision } from "./controller-revision.ts";
import type { ControllerRevision, DecodeResult } from "./controller-revision.ts";
import type { RevisionData } from "./format.ts";
import { revisionHash, revisionName } from "./hash.ts";
import { revisionData } from "./projection.ts";
import { planRevisionRecord } from "./record.ts";
import type { RevisionRecordPlan } from "./record.ts";

const OWNER = { name: "llama", uid: "uid-1" };

function dataWithImage(image: string): RevisionData {
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

const A = dataWithImage("vllm:a");
const B = dataWithImage("vllm:b");
const C = dataWithImage("vllm:c");

function stored(data: RevisionData, revision: number, collisionCount = 0, owner = OWNER): ControllerRevision {
  return encodeControllerRevision({ owner, data, revision, collisionCount });
}

function decodeAll(revisions: readonly unknown[]): DecodeResult[] {
  return revisions.map((revision) => decodeControllerRevision(JSON.parse(JSON.stringify(revision))));
}

function plan(existing: readonly unknown[], data: RevisionData, collisionCount = 0): RevisionRecordPlan {
  return planRevisionRecord({ owner: OWNER, existing: decodeAll(existing), data, collisionCount });
}

const nameOf = (data: RevisionData, collisionCount = 0) => revisionName("llama", revisionHash(data, collisionCount));

describe("planRevisionRecord", () => {
  it("creates revision 1 when there is no history", () => {
    const result = plan([], A);
    assert.equal(result.kind, "create");
    assert.deepEqual(
      [result.name, result.revision, result.collisionCount, result.controllerRevision],
      [nameOf(A), 1, 0, stored(A, 1)],
    );
  });

  it("reuses the latest revision when it equals the data", () => {
    assert.deepEqual(plan([stored(A, 1), stored(B, 2)], B), {
      kind: "reuse",
      name: nameOf(B),
      revision: 2,
      collisionCount: 0,
    });
  });

  it("creates max+1 for new data", () => {
    const result = plan([stored(A, 1), stored(B, 2)], C);
    assert.deepEqual(result.kind === "create" ? [result.name, result.revision] : result, [nameOf(C), 3]);
  });

  it("rolls back A1 -> B2 -> C3 -> A by advancing A to 4, never rewriting its data", () => {
    assert.deepEqual(plan([stored(A, 1), stored(B, 2), stored(C, 3)], A), {
      kind: "advance",
      name: nameOf(A),
      from: 1,
      revision: 4,
      collisionCount: 0,
    });
  });

  it("counts unreadable revisions when numbering", () => {
    const broken = { ...stored(C, 7), data: "garbage" };
    const result = plan([stored(A, 1), broken], B);
    assert.deepEqual(result.kind === "create" ? result.revision : result, 8);
    assert.deepEqual(plan([stored(A, 1), broken], A), {
      kind: "advance",
      name: nameOf(A),
      from: 1,
      revision: 8,
      collisionCount: 0,
    });
  });

  it("on a collision (its name taken by different data) bumps the collision count and recomputes the name", () => {
    // Decoding ties name, hash and data together, so different data under A's name is either a true
    // sha256 collision (not constructible) or unreadable, like this impostor; both are handled alike.
    const impostor = stored(B, 1);
    const collided = { ...impostor, metadata: { ...impostor.metadata, name: nameOf(A) } };
    const result = plan([collided], A);
    assert.equal(result.kind, "create");
    assert.deepEqual([result.name, result.revision, result.collisionCount], [nameOf(A, 1), 2, 1]);
    assert.equal(result.controllerRevision.metadata.annotations["tandem.dev/collision-count"], "1");
    assert.ok(decodeAll([result.controllerRevision])[0]?.ok, "the created revision must decode");
  });

  it("bumps again while names stay taken (bounded), starting from status.collisionCount", () => {
    const taken = [0, 1, 2].map((count) => ({
      ...stored(B, count + 1),
      metadata: { ...stored(B, 1).metadata, name: nameOf(A, count) },
    }));
    const result = plan(taken, A);
    assert.deepEqual(result.kind === "create" ? [result.name, result.collisionCount, result.revision] : result, [
      nameOf(A, 3),
      3,
      4,
    ]);
    const fromStatus = plan([stored(B, 1)], A, 5);
    assert.deepEqual(fromStatus.kind === "create" ? [fromStatus.name, fromStatus.collisionCount] : fromStatus, [
      nameOf(A, 5),
      5,
    ]);
  });

  it("finds an equal revision created at another collision count (a restart before status was written)", () => {
    assert.deepEqual(plan([stored(B, 1), stored(A, 2, 1)], A), {
      kind: "reuse",
      name: nameOf(A, 1),
      revision: 2,
      collisionCount: 0,
    });
  });

  it("treats an unreadable revision holding the name as a collision, never reusing it", () => {
    const unreadable = { ...stored(A, 1), data: { roles: [] } };
    const result = plan([unreadable], A);
    assert.deepEqual(result.kind === "create" ? [result.name, result.collisionCount, result.revision] : result, [
      nameOf(A, 1),
      1,
      2,
    ]);
  });

  it("does not reuse a revision owned by another ModelServing UID", () => {
    const foreign = stored(A, 1, 0, { name: "llama", uid: "old-uid" });
    const result = plan([foreign], A);
    assert.deepEqual(result.kind === "create" ? [result.name, result.collisionCount] : result, [nameOf(A, 1), 1]);
  });

  it("reuses a revision written by an older controller when its data is semantically equal", () => {
    // Older data: same declaration with an empty field and the injected env a newer projection strips.
    const older = structuredClone(A) as RevisionData & {
      roles: { entryTemplate: { spec: { containers: Record<string, unknown>[] } } }[];
    };
    const container = older.roles[0]?.entryTemplate.spec.containers[0];
    if (container !== undefined) container.env = [{ name: "GROUP_SIZE", value: "1" }];
    const olderRevision = stored(older, 3);
    assert.deepEqual(plan([olderRevision], A), {
      kind: "reuse",
      name: olderRevision.metadata.name,
      revision: 3,
      collisionCount: 0,
    });
  });
});
