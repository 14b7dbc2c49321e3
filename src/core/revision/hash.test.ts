import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ModelServing } from "../../api/index.ts";
import type { RevisionData } from "./format.ts";
import { revisionHash, revisionName, sameRevision } from "./hash.ts";
import { MAX_LABEL_VALUE_LENGTH, MAX_MODEL_SERVING_NAME_LENGTH, REVISION_HASH_LENGTH } from "../../api/wellknown.ts";
import { revisionData } from "./projection.ts";

function dataWithImage(image: string): RevisionData {
  return revisionData(
    ModelServing.parse({
      apiVersion: "tandem.dev/v1alpha1",
      kind: "ModelServing",
      metadata: { name: "m" },
      spec: {
        template: { roles: [{ name: "decode", entryTemplate: { spec: { containers: [{ name: "engine", image }] } } }] },
      },
    }),
  );
}

const hashed = (data: RevisionData, collisionCount = 0) => ({ hash: revisionHash(data, collisionCount), data });

describe("revision names", () => {
  it("fit a label value for the longest allowed ModelServing name", () => {
    assert.equal(REVISION_HASH_LENGTH, 10);
    assert.equal(MAX_MODEL_SERVING_NAME_LENGTH, 52);
    const name = revisionName("a".repeat(MAX_MODEL_SERVING_NAME_LENGTH), revisionHash(dataWithImage("x"), 0));
    assert.equal(name.length, MAX_LABEL_VALUE_LENGTH);
    assert.match(name, /^a{52}-[0-9a-f]{10}$/);
  });
});

describe("sameRevision", () => {
  it("is true for equal data (the hash fast path)", () => {
    assert.ok(sameRevision(hashed(dataWithImage("v1")), hashed(dataWithImage("v1"))));
  });

  it("is true for equal data hashed with another collision count", () => {
    assert.ok(sameRevision(hashed(dataWithImage("v1"), 3), hashed(dataWithImage("v1"))));
  });

  it("is false for different data, even under an equal hash (a collision)", () => {
    assert.equal(sameRevision(hashed(dataWithImage("v1")), hashed(dataWithImage("v2"))), false);
    assert.equal(
      sameRevision(
        { hash: "0123456789", data: dataWithImage("v1") },
        { hash: "0123456789", data: dataWithImage("v2") },
      ),
      false,
    );
  });

  it("is true for data stored by an older controller that kept injected env, the serving gate and empty fields", () => {
    const current = dataWithImage("v1");
    const older = structuredClone(current) as unknown as { roles: { entryTemplate: Record<string, any> }[] };
    const entry = older.roles[0]!.entryTemplate;
    entry.metadata = { annotations: {} };
    entry.spec.readinessGates = [{ conditionType: "tandem.dev/serving" }];
    entry.spec.containers[0].env = [{ name: "WORKER_INDEX", value: "0" }];
    entry.spec.containers[0].newlyAddedField = {};
    const olderData = older as unknown as RevisionData;
    assert.notEqual(revisionHash(olderData, 0), revisionHash(current, 0));
    assert.ok(sameRevision(hashed(olderData), hashed(current)));
  });
});
