import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseModelServing } from "../api/parse.ts";
import { buildPod, buildService } from "./pods.ts";
import { revisionData } from "./revision/projection.ts";
import { roleHash } from "./role-hash.ts";

function revision() {
  const parsed = parseModelServing({
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "llm", namespace: "ns" },
    spec: {
      schedulerName: "volcano",
      template: {
        roles: [
          {
            name: "prefill",
            entryTemplate: {
              metadata: { labels: { app: "p" } },
              spec: { containers: [{ name: "vllm", image: "vllm:v1", env: [{ name: "HF_HOME", value: "/m" }] }] },
            },
          },
          {
            name: "decode",
            workerReplicas: 2,
            entryTemplate: { spec: { containers: [{ name: "vllm", image: "vllm:v1" }] } },
            workerTemplate: {
              metadata: { annotations: { note: "w" } },
              spec: {
                initContainers: [{ name: "fetch", image: "busybox" }],
                containers: [{ name: "vllm", image: "vllm:v1-worker" }],
              },
            },
          },
        ],
      },
    },
  });
  assert.ok(parsed.ok);
  return { name: "llm-0123456789", data: revisionData(parsed.value) };
}

const owner = { name: "llm", namespace: "ns", uid: "u-1" };

describe("buildPod", () => {
  it("builds a worker pod with the contract's name, labels, env, gate and owner", () => {
    const rev = revision();
    const pod = buildPod(owner, rev, { group: 1, role: "decode", instance: 0, index: 2 });
    assert.ok(pod);
    assert.equal(pod.metadata.name, "llm-1-decode-0-2");
    assert.deepEqual(pod.metadata.labels, {
      "tandem.dev/modelserving": "llm",
      "tandem.dev/group": "1",
      "tandem.dev/role": "decode",
      "tandem.dev/instance": "decode-0",
      "tandem.dev/revision": "llm-0123456789",
      "tandem.dev/role-hash": roleHash(rev.data, "decode"),
    });
    assert.deepEqual(pod.metadata.annotations, { note: "w" });
    assert.deepEqual(pod.metadata.ownerReferences, [
      {
        apiVersion: "tandem.dev/v1alpha1",
        kind: "ModelServing",
        name: "llm",
        uid: "u-1",
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    const env = [
      { name: "GROUP_SIZE", value: "3" },
      { name: "ENTRY_ADDRESS", value: "llm-1-decode-0-0.ns" },
      { name: "WORKER_INDEX", value: "2" },
    ];
    assert.deepEqual(pod.spec.containers, [{ name: "vllm", image: "vllm:v1-worker", env }]);
    assert.deepEqual(pod.spec.initContainers, [{ name: "fetch", image: "busybox", env }]);
    assert.deepEqual(pod.spec.readinessGates, [{ conditionType: "tandem.dev/serving" }]);
    assert.equal(pod.spec.schedulerName, "volcano");
  });

  it("marks the entry pod, keeps template labels and env, and refuses what the revision lacks", () => {
    const rev = revision();
    const pod = buildPod(owner, rev, { group: 0, role: "prefill", instance: 3, index: 0 });
    assert.ok(pod);
    assert.equal(pod.metadata.labels?.["tandem.dev/entry"], "true");
    assert.equal(pod.metadata.labels.app, "p");
    assert.deepEqual(pod.spec.containers[0]?.env, [
      { name: "HF_HOME", value: "/m" },
      { name: "GROUP_SIZE", value: "1" },
      { name: "ENTRY_ADDRESS", value: "llm-0-prefill-3-0.ns" },
      { name: "WORKER_INDEX", value: "0" },
    ]);
    assert.equal(buildPod(owner, rev, { group: 0, role: "prefill", instance: 0, index: 1 }), undefined);
    assert.equal(buildPod(owner, rev, { group: 0, role: "encode", instance: 0, index: 0 }), undefined);
  });

  it("does not let the template's data be shared with the pod", () => {
    const rev = revision();
    const pod = buildPod(owner, rev, { group: 0, role: "prefill", instance: 0, index: 0 });
    assert.ok(pod);
    pod.spec.containers[0]!.image = "changed";
    assert.equal(rev.data.roles.find((r) => r.name === "prefill")?.entryTemplate.spec.containers[0]?.image, "vllm:v1");
  });
});

describe("buildService", () => {
  it("is headless, named after the entry pod and selects exactly it", () => {
    assert.deepEqual(buildService(owner, 1, "decode", 0), {
      apiVersion: "v1",
      kind: "Service",
      metadata: {
        name: "llm-1-decode-0-0",
        namespace: "ns",
        labels: {
          "tandem.dev/modelserving": "llm",
          "tandem.dev/group": "1",
          "tandem.dev/role": "decode",
          "tandem.dev/instance": "decode-0",
        },
        ownerReferences: [
          {
            apiVersion: "tandem.dev/v1alpha1",
            kind: "ModelServing",
            name: "llm",
            uid: "u-1",
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
      spec: {
        clusterIP: "None",
        publishNotReadyAddresses: true,
        selector: {
          "tandem.dev/modelserving": "llm",
          "tandem.dev/group": "1",
          "tandem.dev/role": "decode",
          "tandem.dev/instance": "decode-0",
          "tandem.dev/entry": "true",
        },
      },
    });
  });
});
