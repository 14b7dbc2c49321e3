/**
 * Pod tracking with the recovery finalizer (docs/design/pod-tracking.md): a pod deleted by
 * someone else is lost, told apart from one never created; the controller releases a pod before
 * deleting it itself, and a lost one once its recovery cannot be undone.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { FINALIZER_RECOVERY } from "../api/wellknown.ts";
import type { Action } from "./actions.ts";
import { plan } from "./plan.ts";
import { apply, converge, deleteByOthers, idealCluster, observe, readyPod } from "../../test/ideal-cluster.ts";
import type { IdealCluster } from "../../test/ideal-cluster.ts";

const NOW = Date.parse("2026-11-30T01:00:00Z");
const pod = { spec: { containers: [{ name: "vllm", image: "vllm:v1" }] } };

/** Two groups of two single-pod prefill instances and one decode, converged. */
function converged(recoveryPolicy: string, prefill = 2): IdealCluster {
  const cluster = idealCluster({
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "llm" },
    spec: {
      replicas: 2,
      recoveryPolicy,
      drain: { timeoutSeconds: 0 },
      template: {
        roles: [
          { name: "prefill", replicas: prefill, entryTemplate: pod },
          { name: "decode", replicas: 1, entryTemplate: pod },
        ],
      },
    },
  });
  converge(cluster, NOW);
  return cluster;
}

const deleted = (actions: readonly Action[]) => actions.flatMap((a) => (a.type === "DeletePod" ? [a.name] : [])).sort();
const released = (actions: readonly Action[]) =>
  actions
    .flatMap((a) => (a.type === "SetPodFinalizers" && !a.finalizers.includes(FINALIZER_RECOVERY) ? [a.name] : []))
    .sort();
const created = (actions: readonly Action[]) =>
  actions.flatMap((a) => (a.type === "CreatePod" ? [a.pod.metadata.name] : [])).sort();
const group1 = ["llm-1-decode-0-0", "llm-1-prefill-0-0", "llm-1-prefill-1-0"];

describe("pod tracking", () => {
  it("every pod is created with the recovery finalizer, and a converged system plans nothing", () => {
    const cluster = converged("ServingGroupRecreate");
    assert.ok([...cluster.pods.values()].every((p) => p.metadata.finalizers?.includes(FINALIZER_RECOVERY)));
    assert.deepEqual(plan(observe(cluster), NOW).actions, []);
  });

  it("a live pod without the finalizer (created before tracking, or released for a deletion a restart left undone) gets it back, once", () => {
    const cluster = converged("ServingGroupRecreate");
    for (const name of ["llm-0-prefill-0-0", "llm-1-decode-0-0"])
      cluster.pods.get(name)!.metadata.finalizers = ["example.com/other"];
    const { actions } = plan(observe(cluster), NOW);
    assert.deepEqual(
      actions.map((a) => (a.type === "SetPodFinalizers" ? [a.name, a.finalizers] : [a.type])),
      [
        ["llm-0-prefill-0-0", ["example.com/other", FINALIZER_RECOVERY]],
        ["llm-1-decode-0-0", ["example.com/other", FINALIZER_RECOVERY]],
      ],
    );
    apply(cluster, actions);
    assert.deepEqual(plan(observe(cluster), NOW).actions, []);
  });

  it("ServingGroupRecreate: a lost single-pod instance rebuilds its group; the lost pod is released once nothing of the group lives", () => {
    const cluster = converged("ServingGroupRecreate");
    deleteByOthers(cluster, "llm-1-prefill-0-0");
    const recovery = plan(observe(cluster), NOW).actions;
    assert.deepEqual(
      deleted(recovery),
      ["llm-1-decode-0-0", "llm-1-prefill-1-0"],
      "the group's other pods, nothing of group 0",
    );
    assert.deepEqual(released(recovery), [], "the loss stays observable while the group has live pods");
    for (const action of recovery)
      if (action.type === "DeletePod")
        assert.deepEqual(action.release?.finalizers, [], "released before its own deletion");
    assert.deepEqual(created(recovery), []);
    apply(cluster, recovery);
    const accounted = plan(observe(cluster), NOW).actions;
    assert.deepEqual(released(accounted), ["llm-1-prefill-0-0"]);
    assert.deepEqual(deleted(accounted), []);
    apply(cluster, accounted);
    assert.deepEqual(created(plan(observe(cluster), NOW).actions), group1, "then the group is built anew");
  });

  it("a missing instance that was never created (a role scale-up) is only created", () => {
    const cluster = converged("ServingGroupRecreate");
    cluster.modelServing.spec.template.roles[0].replicas = 3;
    const { actions } = plan(observe(cluster), NOW);
    assert.deepEqual(created(actions), ["llm-0-prefill-2-0", "llm-1-prefill-2-0"]);
    assert.deepEqual(deleted(actions), []);
  });

  for (const policy of ["RoleRecreate", "None"]) {
    it(`${policy}: a lost single-pod instance is released at once and refilled alone`, () => {
      const cluster = converged(policy);
      deleteByOthers(cluster, "llm-1-prefill-0-0");
      const { actions } = plan(observe(cluster), NOW);
      assert.deepEqual(deleted(actions), []);
      assert.deepEqual(released(actions), ["llm-1-prefill-0-0"]);
      apply(cluster, actions);
      assert.deepEqual(created(plan(observe(cluster), NOW).actions), ["llm-1-prefill-0-0"]);
    });
  }

  it("RoleRecreate: a lost pod of a multi-pod instance is released once the instance's other pods are deleted", () => {
    const cluster = idealCluster({
      apiVersion: "tandem.dev/v1alpha1",
      kind: "ModelServing",
      metadata: { name: "llm" },
      spec: {
        replicas: 1,
        drain: { timeoutSeconds: 0 },
        template: {
          roles: [{ name: "decode", replicas: 1, workerReplicas: 1, entryTemplate: pod, workerTemplate: pod }],
        },
      },
    });
    converge(cluster, NOW);
    deleteByOthers(cluster, "llm-0-decode-0-1");
    const recovery = plan(observe(cluster), NOW).actions;
    assert.deepEqual([deleted(recovery), released(recovery)], [["llm-0-decode-0-0"], []]);
    apply(cluster, recovery);
    assert.deepEqual(released(plan(observe(cluster), NOW).actions), ["llm-0-decode-0-1"]);
  });

  describe("a recovery deletion released its pod, and the deletion failed with a Conflict (the pod changed meanwhile): the next plan judges the untracked pod afresh", () => {
    /** llm-1-prefill-0-0 crashed (restarted, containers not ready for long): the first write of its deletion, the release, applied. */
    function releasedThenConflict() {
      const cluster = converged("RoleRecreate");
      const crashed = cluster.pods.get("llm-1-prefill-0-0")!;
      const uid = crashed.metadata.uid;
      const ready = crashed.status!.conditions!.filter((c) => c.type !== "ContainersReady" && c.type !== "Ready");
      crashed.status = {
        ...crashed.status,
        conditions: [
          ...ready,
          { type: "ContainersReady", status: "False", lastTransitionTime: "2026-11-30T00:00:00Z" },
          { type: "Ready", status: "False", lastTransitionTime: "2026-11-30T00:00:00Z" },
        ],
        containerStatuses: crashed.status!.containerStatuses!.map((c) => ({ ...c, ready: false, restartCount: 1 })),
      };
      const deletion = plan(observe(cluster), NOW).actions.find((a) => a.type === "DeletePod");
      assert.ok(
        deletion?.type === "DeletePod" && deletion.release !== undefined && deletion.resourceVersion !== undefined,
      );
      // The release went through; the guarded deletion then met a newer pod (Conflict): not applied.
      crashed.metadata.finalizers = [...deletion.release.finalizers];
      crashed.metadata.resourceVersion = String(Number(crashed.metadata.resourceVersion) + 1);
      return { cluster, crashed, uid };
    }

    it("recovered meanwhile (Ready again): it is tracked again and kept, not deleted", () => {
      const { cluster, crashed, uid } = releasedThenConflict();
      crashed.status = readyPod(crashed, true).status;
      crashed.metadata.resourceVersion = String(Number(crashed.metadata.resourceVersion) + 1);
      const { actions } = plan(observe(cluster), NOW);
      assert.deepEqual(deleted(actions), []);
      assert.deepEqual(
        actions.flatMap((a) => (a.type === "SetPodFinalizers" ? [[a.name, a.finalizers]] : [])),
        [["llm-1-prefill-0-0", [FINALIZER_RECOVERY]]],
      );
      apply(cluster, actions);
      assert.deepEqual(plan(observe(cluster), NOW).actions, [], "tracked and serving: nothing more to do");
      assert.equal(cluster.pods.get("llm-1-prefill-0-0")?.metadata.uid, uid);
    });

    it("still failed: it is deleted without a second release, guarded by the version now seen, and rebuilt", () => {
      const { cluster, crashed, uid } = releasedThenConflict();
      const { actions } = plan(observe(cluster), NOW);
      const deletion = actions.find((a) => a.type === "DeletePod");
      assert.ok(deletion?.type === "DeletePod");
      assert.deepEqual(
        [deletion.name, deletion.release, deletion.resourceVersion],
        ["llm-1-prefill-0-0", undefined, crashed.metadata.resourceVersion],
      );
      assert.deepEqual(released(actions), []);
      apply(cluster, actions);
      converge(cluster, NOW);
      assert.notEqual(cluster.pods.get("llm-1-prefill-0-0")?.metadata.uid, uid, "rebuilt");
    });
  });

  it("a lost pod of a group scaled away is released, not recovered", () => {
    const cluster = converged("ServingGroupRecreate");
    deleteByOthers(cluster, "llm-1-prefill-0-0");
    cluster.modelServing.spec.replicas = 1;
    const { actions } = plan(observe(cluster), NOW);
    assert.deepEqual(released(actions), ["llm-1-prefill-0-0"]);
    assert.deepEqual(deleted(actions), ["llm-1-decode-0-0", "llm-1-prefill-1-0"], "the scale-down deletes the rest");
  });

  it("a ModelServing being deleted only releases its terminating pods: nothing is created or recovered", () => {
    const cluster = converged("ServingGroupRecreate");
    for (const name of ["llm-0-prefill-0-0", "llm-1-decode-0-0"]) deleteByOthers(cluster, name);
    cluster.modelServing.metadata.deletionTimestamp = "2026-11-30T00:59:00Z";
    assert.deepEqual(
      plan(observe(cluster), NOW).actions.map((a) => [a.type, "name" in a ? a.name : ""]),
      [
        ["SetPodFinalizers", "llm-0-prefill-0-0"],
        ["SetPodFinalizers", "llm-1-decode-0-0"],
      ],
    );
  });

  it("a terminating tracked pod of an earlier ModelServing of the same name is released", () => {
    const cluster = converged("ServingGroupRecreate");
    const stray = cluster.pods.get("llm-0-prefill-0-0")!;
    stray.metadata.ownerReferences = [{ ...stray.metadata.ownerReferences![0]!, uid: "earlier-uid" }];
    stray.metadata.deletionTimestamp = "2026-11-30T00:59:00Z";
    const { actions } = plan(observe(cluster), NOW);
    assert.deepEqual(released(actions), ["llm-0-prefill-0-0"]);
    assert.ok(!actions.some((a) => a.type === "DeletePod"), "not this ModelServing's: nothing recovered for it");
  });
});
