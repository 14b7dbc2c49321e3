import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { entryAddress, instanceId, parsePodIdentity, podName, serviceName } from "./identity.ts";

const labels = (group: string, role: string, instance: string, entry: boolean) => ({
  "tandem.dev/modelserving": "llm",
  "tandem.dev/group": group,
  "tandem.dev/role": role,
  "tandem.dev/instance": instance,
  ...(entry ? { "tandem.dev/entry": "true" } : {}),
});

describe("identity", () => {
  it("names pods, instances, services and entry addresses as DESIGN §1 says", () => {
    const id = { group: 1, role: "decode", instance: 2, index: 3 };
    assert.equal(podName("llm", id), "llm-1-decode-2-3");
    assert.equal(instanceId("decode", 2), "decode-2");
    assert.equal(serviceName("llm", 1, "decode", 2), "llm-1-decode-2-0");
    assert.equal(entryAddress("llm", "ns", 1, "decode", 2), "llm-1-decode-2-0.ns");
  });

  it("parses identity from labels and name, and refuses anything inconsistent", () => {
    assert.deepEqual(parsePodIdentity("llm", "llm-1-decode-2-0", labels("1", "decode", "decode-2", true)), {
      group: 1,
      role: "decode",
      instance: 2,
      index: 0,
    });
    assert.deepEqual(parsePodIdentity("llm", "llm-1-decode-2-3", labels("1", "decode", "decode-2", false)), {
      group: 1,
      role: "decode",
      instance: 2,
      index: 3,
    });
    assert.equal(
      parsePodIdentity("llm", "llm-1-decode-2-3", labels("1", "decode", "decode-2", true)),
      undefined,
      "entry label on a worker",
    );
    assert.equal(
      parsePodIdentity("llm", "llm-1-decode-2-0", labels("1", "decode", "decode-2", false)),
      undefined,
      "entry without its label",
    );
    assert.equal(
      parsePodIdentity("other", "llm-1-decode-2-0", labels("1", "decode", "decode-2", true)),
      undefined,
      "another ModelServing",
    );
    assert.equal(
      parsePodIdentity("llm", "llm-1-decode-2-0", labels("01", "decode", "decode-2", true)),
      undefined,
      "non-canonical ordinal",
    );
    assert.equal(
      parsePodIdentity("llm", "llm-1-decode-2-0", labels("1", "decode", "prefill-2", true)),
      undefined,
      "instance of another role",
    );
    assert.equal(
      parsePodIdentity("llm", "llm-2-decode-2-0", labels("1", "decode", "decode-2", true)),
      undefined,
      "name disagrees with labels",
    );
    assert.equal(parsePodIdentity("llm", "llm-1-decode-2-x", labels("1", "decode", "decode-2", false)), undefined);
    assert.equal(parsePodIdentity("llm", "llm-1-decode-2-0", undefined), undefined);
  });
});
