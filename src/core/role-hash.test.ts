import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { RevisionData } from "./revision/format.ts";
import { roleHash, sameRoleSpec } from "./role-hash.ts";

const template = (image: string) => ({ spec: { containers: [{ name: "c", image }] } });

function data(prefillImage: string, decodeImage: string, extra: Partial<RevisionData> = {}): RevisionData {
  return {
    schedulerName: "default-scheduler",
    roles: [
      { name: "decode", entryTemplate: template(decodeImage), workerReplicas: 0 },
      { name: "prefill", entryTemplate: template(prefillImage), workerReplicas: 0 },
    ],
    ...extra,
  };
}

describe("role views", () => {
  it("a decode-only change leaves prefill's view and hash unchanged", () => {
    const v1 = data("p:1", "d:1");
    const v2 = data("p:1", "d:2");
    assert.ok(sameRoleSpec(v1, v2, "prefill"));
    assert.ok(!sameRoleSpec(v1, v2, "decode"));
    assert.equal(roleHash(v1, "prefill"), roleHash(v2, "prefill"));
    assert.notEqual(roleHash(v1, "decode"), roleHash(v2, "decode"));
    assert.match(roleHash(v1, "decode") ?? "", /^[0-9a-f]{10}$/);
  });

  it("schedulerName changes every role; a scoped plugin only its roles", () => {
    const v1 = data("p:1", "d:1");
    assert.ok(!sameRoleSpec(v1, data("p:1", "d:1", { schedulerName: "volcano" }), "prefill"));
    const scoped = data("p:1", "d:1", { plugins: [{ name: "lora", scope: { roles: ["decode"], target: "All" } }] });
    assert.ok(sameRoleSpec(v1, scoped, "prefill"));
    assert.ok(!sameRoleSpec(v1, scoped, "decode"));
  });

  it("compares normalized data, so un-normalized stored data still matches", () => {
    const stored = data("p:1", "d:1");
    const withNoise = {
      ...stored,
      roles: [...stored.roles]
        .reverse()
        .map((role) => ({ ...role, entryTemplate: { ...role.entryTemplate, metadata: { labels: {} } } })),
    };
    assert.ok(sameRoleSpec(stored, withNoise, "prefill"));
    assert.equal(roleHash(data("p:1", "d:1"), "encode"), undefined);
    assert.ok(sameRoleSpec(stored, stored, "encode"));
  });
});
