import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Pod } from "../api/kube.ts";
import type { Observed } from "../core/observed.ts";
import { plan } from "../core/plan.ts";
import type { KubeObject } from "../engine/ports.ts";
import { apply, idealCluster, observe } from "../../test/ideal-cluster.ts";
import type { IdealCluster } from "../../test/ideal-cluster.ts";
import { dropControllerUnread, dropManagedFields } from "./unread.ts";

const NOW = Date.parse("2026-12-02T13:00:00Z");
const MANAGED_FIELDS = [{ manager: "kube-scheduler", operation: "Update", fieldsType: "FieldsV1", fieldsV1: {} }];

/**
 * `pod` as kube-apiserver, the scheduler and a kubelet (KWOK) store it: the fields their
 * admission, defaulting and status writes add around what Tandem built and the ideal kubelet set.
 */
function asStored(pod: Pod): KubeObject {
  const stored = structuredClone(pod) as unknown as KubeObject & { spec: Record<string, unknown> };
  stored.metadata = { ...stored.metadata, managedFields: MANAGED_FIELDS } as KubeObject["metadata"];
  const containers = (stored.spec["containers"] as Record<string, unknown>[]).map((container) => ({
    ...container,
    imagePullPolicy: "IfNotPresent",
    terminationMessagePath: "/dev/termination-log",
    volumeMounts: [{ name: "kube-api-access-x", readOnly: true, mountPath: "/var/run/secrets" }],
  }));
  Object.assign(stored.spec, {
    containers,
    volumes: [{ name: "kube-api-access-x", projected: { sources: [{ serviceAccountToken: { path: "token" } }] } }],
    tolerations: [{ key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute" }],
    nodeName: "node-1",
    schedulerName: "default-scheduler",
    terminationGracePeriodSeconds: 30,
    dnsPolicy: "ClusterFirst",
    restartPolicy: "Always",
    serviceAccountName: "default",
    securityContext: {},
    enableServiceLinks: true,
    preemptionPolicy: "PreemptLowerPriority",
    priority: 0,
  });
  const status = stored.status;
  if (status !== undefined) {
    const statuses = (status["containerStatuses"] ?? []) as Record<string, unknown>[];
    Object.assign(status, {
      podIP: "10.0.0.1",
      hostIP: "192.168.0.1",
      podIPs: [{ ip: "10.0.0.1" }],
      hostIPs: [{ ip: "192.168.0.1" }],
      qosClass: "Guaranteed",
      startTime: "2026-12-02T12:00:00Z",
      containerStatuses: statuses.map((entry) => ({
        ...entry,
        started: true,
        lastState: {},
        volumeMounts: [{ name: "kube-api-access-x", mountPath: "/var/run/secrets", readOnly: true }],
        user: { linux: { uid: 0, gid: 0 } },
      })),
    });
  }
  return stored;
}

function dropped(object: KubeObject): KubeObject {
  const copy = structuredClone(object);
  dropControllerUnread(copy);
  return copy;
}

/** What the engine's observe would hand `plan` from a cache of `pods`. */
function withPods(observed: Observed, pods: readonly KubeObject[]): Observed {
  return { ...observed, pods: pods as unknown as Pod[] };
}

function manifest(strategy: string) {
  const template = (image: string) => ({
    spec: { containers: [{ name: "engine", image, resources: { limits: { "nvidia.com/gpu": "8" } } }] },
  });
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "llm" },
    spec: {
      replicas: 2,
      drain: { timeoutSeconds: 0 },
      rolloutStrategy: { type: strategy },
      template: {
        roles: [
          { name: "prefill", replicas: 1, entryTemplate: template("sglang:v1") },
          {
            name: "decode",
            replicas: 1,
            workerReplicas: 1,
            entryTemplate: template("sglang:v1"),
            workerTemplate: template("sglang:v1"),
          },
        ],
      },
    },
  };
}

/**
 * Plans from the pods as stored and from the same pods through the transform, asserting the two
 * plans are equal, then applies the plan; until a plan is empty. Returns the rounds planned.
 */
function convergeBothWays(cluster: IdealCluster, nowMs: number): number {
  for (let round = 0; round < 40; round++) {
    const observed = observe(cluster);
    const stored = observed.pods.map(asStored);
    const whole = plan(withPods(observed, stored), nowMs);
    const transformed = plan(withPods(observed, stored.map(dropped)), nowMs);
    assert.deepEqual(transformed, whole, `round ${round}: the plan differs with the transform`);
    if (whole.actions.length === 0) return round;
    apply(cluster, whole.actions);
  }
  throw new Error("no convergence in 40 rounds");
}

describe("dropManagedFields", () => {
  it("removes metadata.managedFields and nothing else", () => {
    const object: KubeObject = {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "a", labels: { x: "y" }, managedFields: MANAGED_FIELDS } as KubeObject["metadata"],
      spec: { clusterIP: "None" },
    };
    dropManagedFields(object);
    assert.deepEqual(object, {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "a", labels: { x: "y" } },
      spec: { clusterIP: "None" },
    });
  });
});

describe("dropControllerUnread", () => {
  const pod = asStored({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "p", namespace: "ns", finalizers: ["tandem.dev/drain"] },
    spec: { containers: [{ name: "engine", image: "sglang:v1" }], nodeName: "node-1" },
    status: {
      phase: "Running",
      podIP: "10.0.0.1",
      conditions: [{ type: "Ready", status: "True", lastTransitionTime: "2026-12-02T12:00:00Z" }],
      containerStatuses: [
        { name: "engine", image: "sglang:v1", imageID: "sha", containerID: "c://1", ready: true, restartCount: 0 },
      ],
    },
  });

  it("keeps whole what a merge patch sends back (containers, conditions, finalizers) and drops the rest of a Pod", () => {
    const after = dropped(pod);
    assert.deepEqual(after.spec?.["containers"], pod.spec?.["containers"]);
    assert.deepEqual(after.status?.["conditions"], pod.status?.["conditions"]);
    assert.deepEqual(after.metadata, { name: "p", namespace: "ns", finalizers: ["tandem.dev/drain"] });
    assert.deepEqual(Object.keys(after.spec ?? {}), ["containers"]);
    assert.deepEqual(Object.keys(after.status ?? {}), ["phase", "conditions", "containerStatuses"]);
    assert.deepEqual(after.status?.["containerStatuses"], [
      { name: "engine", image: "sglang:v1", containerID: "c://1", ready: true, restartCount: 0 },
    ]);
  });

  it("leaves other kinds but their managedFields as they are", () => {
    const revision: KubeObject = {
      apiVersion: "apps/v1",
      kind: "ControllerRevision",
      metadata: { name: "r", managedFields: MANAGED_FIELDS } as KubeObject["metadata"],
      data: { roles: [] },
      revision: 1,
    };
    dropControllerUnread(revision);
    assert.deepEqual(revision, {
      apiVersion: "apps/v1",
      kind: "ControllerRevision",
      metadata: { name: "r" },
      data: { roles: [] },
      revision: 1,
    });
  });

  for (const strategy of ["ServingGroupRollingUpdate", "InPlaceUpdate"]) {
    it(`plans the same from transformed pods through creation and a ${strategy} image update`, () => {
      const cluster = idealCluster(manifest(strategy));
      assert.ok(convergeBothWays(cluster, NOW) > 0);
      for (const role of cluster.modelServing.spec.template.roles)
        for (const key of ["entryTemplate", "workerTemplate"])
          if (role[key] !== undefined) role[key].spec.containers[0].image = "sglang:v2";
      cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
      assert.ok(convergeBothWays(cluster, NOW + 1_000) > 0);
      const images = [...cluster.pods.values()].map((p) => p.spec.containers[0]?.image);
      assert.deepEqual(new Set(images), new Set(["sglang:v2"]), "the rollout completed");
    });
  }
});
