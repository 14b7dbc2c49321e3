import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Pod } from "../api/kube.ts";
import type { Action } from "./actions.ts";
import { plan } from "./plan.ts";
import { formatProgress, inPlaceDifferences, readProgress } from "./inplace.ts";
import { revisionData } from "./revision/projection.ts";
import { parseModelServing } from "../api/parse.ts";
import { apply, idealCluster, observe } from "../../test/ideal-cluster.ts";
import type { IdealCluster } from "../../test/ideal-cluster.ts";

const NOW = Date.parse("2026-11-30T01:00:00Z");
const DRAIN_SECONDS = 300;

const template = (image: string, extra: Record<string, unknown> = {}) => ({
  spec: {
    containers: [
      { name: "vllm", image, ...extra },
      { name: "sidecar", image: "proxy:v1" },
    ],
  },
});

/** Three groups of prefill ×1 and decode ×1 with one worker, in place, one group at a time. */
function manifest(spec: Record<string, unknown> = {}) {
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "llm" },
    spec: {
      replicas: 3,
      drain: { timeoutSeconds: DRAIN_SECONDS },
      rolloutStrategy: { type: "InPlaceUpdate" },
      template: {
        roles: [
          { name: "prefill", replicas: 1, entryTemplate: template("vllm:v1") },
          {
            name: "decode",
            replicas: 1,
            workerReplicas: 1,
            entryTemplate: template("vllm:v1"),
            workerTemplate: template("vllm:v1"),
          },
        ],
      },
      ...spec,
    },
  };
}

function setDecode(cluster: IdealCluster, image: string, extra: Record<string, unknown> = {}): void {
  const decode = cluster.modelServing.spec.template.roles[1];
  decode.entryTemplate = template(image, extra);
  decode.workerTemplate = template(image, extra);
  cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
}

/** Plans and applies `rounds` times (or until a plan is empty), one second apart; returns every action. */
function run(
  cluster: IdealCluster,
  options: {
    rounds?: number;
    startMs?: number;
    each?: (actions: readonly Action[], round: number) => void;
    router?: boolean;
  } = {},
): Action[] {
  const all: Action[] = [];
  for (let round = 0; round < (options.rounds ?? 80); round++) {
    if (options.router !== false) ackDrains(cluster);
    const { actions } = plan(observe(cluster), (options.startMs ?? NOW) + round * 1000);
    if (actions.length === 0) return all;
    options.each?.(actions, round);
    apply(cluster, actions);
    all.push(...actions);
  }
  if (options.rounds === undefined) throw new Error("no convergence");
  return all;
}

/** The router: acks every draining entry pod (it has no request left). */
function ackDrains(cluster: IdealCluster): void {
  for (const pod of cluster.pods.values()) {
    const annotations = pod.metadata.annotations ?? {};
    if (
      annotations["tandem.dev/draining"] !== undefined &&
      annotations["drained.tandem.dev/router-a"] === undefined &&
      pod.metadata.labels?.["tandem.dev/entry"] === "true"
    ) {
      pod.metadata.annotations = { ...annotations, "drained.tandem.dev/router-a": "true" };
    }
  }
}

const uids = (cluster: IdealCluster) =>
  new Map([...cluster.pods.values()].map((pod) => [pod.metadata.name, pod.metadata.uid]));
const serving = (pod: Pod) =>
  pod.status?.conditions?.some((c) => c.type === "tandem.dev/serving" && c.status === "True") === true;
const image = (pod: Pod, container = "vllm") => pod.spec.containers.find((c) => c.name === container)?.image;
const restarts = (pod: Pod, container = "vllm") =>
  pod.status?.containerStatuses?.find((c) => c.name === container)?.restartCount;
const groupOf = (name: string) => Number(name.split("-")[1]);

/** A group is in flight when any of its pods is out of traffic or carries in-place progress. */
function groupsInFlight(cluster: IdealCluster): number[] {
  const groups = new Set<number>();
  for (const pod of cluster.pods.values()) {
    if (
      !serving(pod) ||
      pod.metadata.annotations?.["tandem.dev/inplace"] !== undefined ||
      pod.metadata.annotations?.["tandem.dev/draining"] !== undefined
    )
      groups.add(groupOf(pod.metadata.name));
  }
  return [...groups].sort();
}

/** Converged, with router-a live throughout (scope `*`): drains wait for its confirmation. */
function converged(): IdealCluster {
  const cluster = idealCluster(manifest());
  cluster.routers = [{ id: "router-a", scope: { all: true }, liveUntilMs: Infinity }];
  run(cluster);
  return cluster;
}

describe("InPlaceUpdate: eligibility", () => {
  it("names what differs beyond images: role, template, container, field", () => {
    const from = parseModelServing(manifest());
    const changed = manifest();
    changed.spec.template.roles[1]!.entryTemplate = template("vllm:v2", { args: ["--tp", "8"] });
    const to = parseModelServing(changed);
    assert.ok(from.ok && to.ok);
    assert.deepEqual(inPlaceDifferences(revisionData(from.value), revisionData(to.value)), [
      "role decode entryTemplate: container vllm field args",
    ]);
    changed.spec.template.roles[1]!.entryTemplate = template("vllm:v2");
    const imagesOnly = parseModelServing(changed);
    assert.ok(imagesOnly.ok);
    assert.deepEqual(inPlaceDifferences(revisionData(from.value), revisionData(imagesOnly.value)), []);
  });

  it("refuses a change beyond images with RolloutBlocked/InPlaceIneligible and touches nothing", () => {
    const cluster = converged();
    const before = uids(cluster);
    setDecode(cluster, "vllm:v2", { args: ["--tp", "8"] });
    const actions = run(cluster, { rounds: 10 });
    assert.deepEqual(
      actions
        .filter((a) => a.type !== "WriteStatus" && a.type !== "CreateRevision" && a.type !== "RecordEvent")
        .map((a) => a.type),
      [],
      "no pod is drained, patched or deleted",
    );
    assert.deepEqual(
      actions.flatMap((a) => (a.type === "RecordEvent" ? [a.reason] : [])),
      ["RolloutStarted"],
      "the rollout starts, and goes no further",
    );
    assert.deepEqual(uids(cluster), before);
    assert.ok([...cluster.pods.values()].every(serving));
    const status = cluster.modelServing.status;
    assert.equal(status.units, undefined, "no group was given a permit");
    const blocked = status.conditions.find((c: any) => c.type === "RolloutBlocked");
    assert.equal(blocked.status, "True");
    assert.equal(blocked.reason, "InPlaceIneligible");
    assert.match(
      blocked.message,
      /group\(s\) 0, 1, 2: revision llm-\w+ → llm-\w+ changes role decode entryTemplate: container vllm field args, role decode workerTemplate: container vllm field args/,
    );
    assert.match(
      blocked.message,
      /switch spec\.rolloutStrategy\.type to ServingGroupRollingUpdate or RoleRollingUpdate/,
    );
    const progressing = status.conditions.find((c: any) => c.type === "Progressing");
    assert.deepEqual(
      [progressing.status, progressing.reason],
      ["False", "RolloutBlocked"],
      "not Converged: the pods do not match the spec",
    );
    assert.match(
      progressing.message,
      /InPlaceUpdate cannot make this change \(condition RolloutBlocked, reason InPlaceIneligible/,
    );
  });
});

describe("InPlaceUpdate: the sequence", () => {
  it("gate False → drained → patched → verified → gate True, relabelled, with every pod UID kept", () => {
    const cluster = converged();
    const before = uids(cluster);
    const first = cluster.modelServing.status.currentRevision;
    setDecode(cluster, "vllm:v2");
    const entry = "llm-2-decode-0-0";
    const steps: string[] = [];
    run(cluster, {
      each: (actions) => {
        const pod = cluster.pods.get(entry)!;
        for (const action of actions) {
          const gate =
            action.type === "SetPodCondition"
              ? action.condition
              : action.type === "AnnotatePod"
                ? action.gate?.condition
                : undefined;
          if (gate !== undefined && "name" in action && action.name === entry) steps.push(`gate ${gate.status}`);
          if (action.type === "PatchPodImages" && action.name === entry) {
            assert.equal(
              pod.metadata.annotations?.["drained.tandem.dev/router-a"],
              "true",
              "patched only once the router confirmed the drain",
            );
            assert.ok(!serving(pod));
            steps.push(`patch ${action.images["vllm"]}`);
          }
          if (action.type === "AnnotatePod" && action.name === entry && action.labels !== undefined) {
            const status = pod.status?.containerStatuses?.find((c) => c.name === "vllm");
            assert.equal(status?.image, "vllm:v2");
            assert.notEqual(
              status.containerID,
              `ctr://${pod.metadata.uid}/vllm/0`,
              "a new container runs the new image",
            );
            steps.push("finish");
          }
        }
      },
    });
    assert.deepEqual(steps, ["gate False", "patch vllm:v2", "gate True", "finish"]);
    assert.deepEqual(uids(cluster), before, "no pod was recreated");
    const status = cluster.modelServing.status;
    for (const pod of cluster.pods.values()) {
      const decode = pod.metadata.labels?.["tandem.dev/role"] === "decode";
      assert.equal(image(pod), decode ? "vllm:v2" : "vllm:v1");
      assert.equal(restarts(pod), decode ? 1 : 0, `${pod.metadata.name} restarted its changed container once`);
      assert.equal(restarts(pod, "sidecar"), 0, "an unchanged container is not restarted");
      // Prefill's spec did not change: its pods keep the label they had (see the next describe).
      assert.equal(pod.metadata.labels?.["tandem.dev/revision"], decode ? status.updateRevision : first);
      assert.deepEqual(Object.keys(pod.metadata.annotations ?? {}), []);
      assert.ok(serving(pod));
    }
    assert.equal(status.currentRevision, status.updateRevision);
    assert.equal(status.units, undefined);
  });

  it("records the group's target before any pod is touched", () => {
    const cluster = converged();
    setDecode(cluster, "vllm:v2");
    run(cluster, {
      each: (actions) => {
        const podWrites = actions.filter(
          (a) => a.type === "SetPodCondition" || a.type === "AnnotatePod" || a.type === "PatchPodImages",
        );
        const barrier = actions.find((a) => a.type === "WriteStatus" && a.barrier);
        const status = barrier?.type === "WriteStatus" ? barrier.status : cluster.modelServing.status;
        // The record is the permit: durable (stored, or written as a barrier first) before a pod write.
        for (const action of podWrites) {
          assert.ok(barrier === undefined || actions.indexOf(barrier) < actions.indexOf(action));
          assert.ok(
            (status.units ?? []).some(
              (r: any) => r.group === groupOf(action.name) && r.revision === status.updateRevision,
            ),
            `group ${groupOf(action.name)} touched without a record`,
          );
        }
      },
    });
    assert.ok(
      [...cluster.pods.values()].filter((p) => p.metadata.name.includes("decode")).every((p) => image(p) === "vllm:v2"),
    );
  });

  it("maxUnavailable 1: one group in flight at a time, checked after every plan", () => {
    const cluster = converged();
    setDecode(cluster, "vllm:v2");
    const inFlight: number[] = [];
    for (let round = 0; round < 80; round++) {
      ackDrains(cluster);
      const { actions } = plan(observe(cluster), NOW + round * 1000);
      if (actions.length === 0) break;
      apply(cluster, actions);
      inFlight.push(groupsInFlight(cluster).length);
    }
    assert.equal(Math.max(...inFlight), 1);
    assert.ok(
      [...cluster.pods.values()].filter((p) => p.metadata.name.includes("decode")).every((p) => image(p) === "vllm:v2"),
    );
  });

  it("waits for the router's ack, or the drain timeout with a DrainTimeout event", () => {
    const cluster = converged();
    setDecode(cluster, "vllm:v2");
    run(cluster, { rounds: 5, router: false });
    assert.ok(![...cluster.pods.values()].some((p) => image(p) === "vllm:v2"), "nothing patched without the ack");
    const late = plan(observe(cluster), NOW + (DRAIN_SECONDS + 10) * 1000);
    assert.ok(late.actions.some((a) => a.type === "RecordEvent" && a.reason === "DrainTimeout"));
    assert.ok(late.actions.some((a) => a.type === "PatchPodImages" && a.name === "llm-2-decode-0-0"));
  });
});

describe("InPlaceUpdate: a role the update leaves unchanged", () => {
  const prefillPods = (cluster: IdealCluster) =>
    [...cluster.pods.values()].filter((pod) => pod.metadata.labels?.["tandem.dev/role"] === "prefill");
  const namesOf = (actions: readonly Action[]) => actions.flatMap((action) => ("name" in action ? [action.name] : []));
  /** Every decode pod of `group` is at the update revision and serves. */
  const decodeDone = (cluster: IdealCluster, group: number) =>
    [...cluster.pods.values()].every(
      (pod) =>
        groupOf(pod.metadata.name) !== group ||
        pod.metadata.labels?.["tandem.dev/role"] !== "decode" ||
        (pod.metadata.labels["tandem.dev/revision"] === cluster.modelServing.status.updateRevision && serving(pod)),
    );
  /** `converged`, with revisionHistoryLimit 0: a revision is kept only while something names it. */
  const convergedWithoutHistory = () => {
    const cluster = idealCluster(manifest({ revisionHistoryLimit: 0 }));
    cluster.routers = [{ id: "router-a", scope: { all: true }, liveUntilMs: Infinity }];
    run(cluster);
    return cluster;
  };

  it("a decode-only update writes nothing to a prefill pod (no drain, gate or relabel) and completes; status and history judge prefill by its role spec", () => {
    const cluster = convergedWithoutHistory();
    const first = cluster.modelServing.status.currentRevision;
    const before = structuredClone(prefillPods(cluster));
    setDecode(cluster, "vllm:v2");
    const actions = run(cluster, {
      each: () => {
        // Written from the pods the plan saw, so never ahead of them: a group counts once its decode is done.
        const updated = cluster.modelServing.status.updatedReplicas ?? 0;
        assert.ok(
          updated <= [0, 1, 2].filter((group) => decodeDone(cluster, group)).length,
          `updatedReplicas ${updated} ahead of the pods`,
        );
      },
    });
    const prefill = new Set(before.map((pod) => pod.metadata.name));
    assert.deepEqual(
      namesOf(actions).filter((name) => prefill.has(name)),
      [],
      "no write names a prefill pod",
    );
    assert.deepEqual(prefillPods(cluster), before, "every prefill pod is as it was, labels included");
    const status = cluster.modelServing.status;
    assert.notEqual(status.updateRevision, first);
    assert.equal(status.currentRevision, status.updateRevision, "promoted: the rollout completed");
    assert.equal(status.units, undefined);
    assert.equal(status.updatedReplicas, 3);
    assert.deepEqual(
      status.roles.map((role: any) => [role.name, role.updated]),
      [
        ["prefill", 3],
        ["decode", 3],
      ],
    );
    const progressing = status.conditions.find((c: any) => c.type === "Progressing");
    assert.equal(progressing.reason, "Converged");
    assert.ok(cluster.revisions.has(first), "the prefill pods' revision is kept while they name it (history limit 0)");
  });

  it("a later prefill-only update moves prefill and leaves decode alone; the first revision goes once no pod names it", () => {
    const cluster = convergedWithoutHistory();
    const first = cluster.modelServing.status.currentRevision;
    setDecode(cluster, "vllm:v2");
    run(cluster);
    const second = cluster.modelServing.status.currentRevision;
    const decode = [...cluster.pods.values()].filter((pod) => pod.metadata.labels?.["tandem.dev/role"] === "decode");
    const decodeBefore = structuredClone(decode);
    cluster.modelServing.spec.template.roles[0].entryTemplate = template("vllm:v2");
    cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
    const actions = run(cluster);
    const decodeNames = new Set(decode.map((pod) => pod.metadata.name));
    assert.deepEqual(
      namesOf(actions).filter((name) => decodeNames.has(name)),
      [],
      "no write names a decode pod",
    );
    assert.deepEqual(
      [...cluster.pods.values()].filter((pod) => decodeNames.has(pod.metadata.name)),
      decodeBefore,
    );
    const status = cluster.modelServing.status;
    assert.equal(status.currentRevision, status.updateRevision);
    for (const pod of prefillPods(cluster)) {
      assert.equal(image(pod), "vllm:v2");
      assert.equal(pod.metadata.labels?.["tandem.dev/revision"], status.updateRevision);
    }
    assert.ok(!cluster.revisions.has(first), "no pod names the first revision any more: collected");
    assert.ok(cluster.revisions.has(second), "the decode pods still name the second");
  });

  it("pods a RoleRollingUpdate left at a revision that differs beyond images in another role do not block the in-place move of the role that changes", () => {
    const cluster = idealCluster(manifest({ rolloutStrategy: { type: "RoleRollingUpdate" } }));
    cluster.routers = [{ id: "router-a", scope: { all: true }, liveUntilMs: Infinity }];
    run(cluster);
    const first = cluster.modelServing.status.currentRevision;
    // decode gets args by replacement: prefill keeps the first revision's label.
    setDecode(cluster, "vllm:v1", { args: ["--tp", "8"] });
    run(cluster);
    cluster.modelServing.spec.rolloutStrategy = { type: "InPlaceUpdate" };
    setDecode(cluster, "vllm:v2", { args: ["--tp", "8"] });
    const before = uids(cluster);
    const prefill = structuredClone(prefillPods(cluster));
    run(cluster);
    const status = cluster.modelServing.status;
    assert.notEqual(
      status.conditions.find((c: any) => c.type === "RolloutBlocked")?.status,
      "True",
      "not refused for the prefill pods' revision, which differs in decode's args",
    );
    assert.equal(status.currentRevision, status.updateRevision);
    assert.deepEqual(uids(cluster), before, "decode patched in place, nothing recreated");
    assert.deepEqual(prefillPods(cluster), prefill);
    assert.ok(prefill.every((pod) => pod.metadata.labels?.["tandem.dev/revision"] === first));
  });

  it("switched to ServingGroupRollingUpdate mid-update, a group in place had finished is moved whole within the budget, not at once with the one in flight (fuzz-10979)", () => {
    const cluster = converged();
    setDecode(cluster, "vllm:v2");
    let round = 0;
    for (; round < 80 && !(decodeDone(cluster, 2) && groupsInFlight(cluster).includes(1)); round++)
      run(cluster, { rounds: 1, startMs: NOW + round * 1000 });
    assert.deepEqual(groupsInFlight(cluster), [1], "group 2 done in place, group 1 on its way");
    cluster.modelServing.spec.rolloutStrategy = { type: "ServingGroupRollingUpdate" };
    cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
    /** Groups with every pod present and serving. */
    const groupsServing = () =>
      [0, 1, 2].filter(
        (group) =>
          [...cluster.pods.values()].filter(
            (pod) =>
              groupOf(pod.metadata.name) === group && pod.metadata.deletionTimestamp === undefined && serving(pod),
          ).length === 3,
      ).length;
    run(cluster, {
      startMs: NOW + round * 1000,
      each: () => assert.ok(groupsServing() >= 2, `${groupsServing()} group(s) serving, the budget keeps 2`),
    });
    const status = cluster.modelServing.status;
    assert.equal(status.currentRevision, status.updateRevision);
    for (const pod of cluster.pods.values()) {
      assert.equal(pod.metadata.labels?.["tandem.dev/revision"], status.updateRevision);
      assert.ok(serving(pod));
    }
  });
});

describe("InPlaceUpdate: a partition raised mid-update", () => {
  function raisePartition(cluster: IdealCluster): void {
    cluster.modelServing.spec.rolloutStrategy = { type: "InPlaceUpdate", rollingUpdateConfiguration: { partition: 3 } };
    cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
  }
  const decodeImages = (cluster: IdealCluster) =>
    [0, 1, 2].map((group) => image(cluster.pods.get(`llm-${group}-decode-0-0`)!));

  it("while a group drains, the status names its pods as held out of service, not merely not Ready (fuzz-faults-crash-97 stalled so with the status saying only 'not Ready')", () => {
    const cluster = converged();
    setDecode(cluster, "vllm:v2");
    run(cluster, { rounds: 2, router: false });
    assert.deepEqual(groupsInFlight(cluster), [2]);
    const condition = (type: string) => cluster.modelServing.status.conditions.find((c: any) => c.type === type);
    assert.match(
      condition("Available").message,
      /decode-0 of group 2: llm-2-decode-0-\d Running, draining \(out of service\)/,
    );
    // Progressing says what the drain waits for (DrainWaiting).
    assert.equal(condition("Progressing").reason, "DrainWaiting");
    assert.match(
      condition("Progressing").message,
      /^A drain waits before the pods are disrupted: decode-0 of group 2: pod\(s\) llm-2-decode-0-0, awaiting router\(s\) router-a; timeout at [\dTZ:-]+\.$/,
    );
  });

  it("over a group still draining: nothing is patched, the drain and progress marks go and the gate opens (regression: it was patched)", () => {
    const cluster = converged();
    const v1 = cluster.modelServing.status.currentRevision;
    setDecode(cluster, "vllm:v2");
    // No router ack: group 2 stays in its drain.
    run(cluster, { rounds: 2, router: false });
    assert.deepEqual(groupsInFlight(cluster), [2]);
    raisePartition(cluster);
    run(cluster, {
      startMs: NOW + 2000,
      router: false,
      each: (actions) =>
        assert.ok(
          !actions.some((action) => action.type === "PatchPodImages"),
          "nothing is patched below the partition",
        ),
    });
    assert.deepEqual(groupsInFlight(cluster), []);
    assert.deepEqual(decodeImages(cluster), ["vllm:v1", "vllm:v1", "vllm:v1"]);
    assert.ok([...cluster.pods.values()].every((pod) => pod.metadata.labels?.["tandem.dev/revision"] === v1));
    assert.equal(cluster.modelServing.status.units, undefined);
  });

  it("over a group already patched: it finishes at the update revision (patching back would be a second restart)", () => {
    const cluster = converged();
    setDecode(cluster, "vllm:v2");
    // Mark, then patch once the router has confirmed and the 2 s settle is over.
    run(cluster, { rounds: 3 });
    assert.ok([...cluster.pods.values()].some((pod) => readProgress(pod)?.phase === "Patched"));
    raisePartition(cluster);
    run(cluster, { startMs: NOW + 3000 });
    const v2 = cluster.modelServing.status.updateRevision;
    assert.deepEqual(groupsInFlight(cluster), []);
    assert.deepEqual(decodeImages(cluster), ["vllm:v1", "vllm:v1", "vllm:v2"]);
    assert.equal(cluster.pods.get("llm-2-decode-0-0")?.metadata.labels?.["tandem.dev/revision"], v2);
  });

  it("a switch to RoleRollingUpdate raising the role partition over an instance already patched: it finishes at the update revision, never rebuilt at the label it still has (fuzz-10979: rebuilt at v2, restarted twice)", () => {
    const cluster = converged();
    const v1 = cluster.modelServing.status.currentRevision;
    setDecode(cluster, "vllm:v2");
    // Group 2 finishes v2 (its label then names v2, not the current v1); v3 comes before the rest.
    const finished = (pod: Pod | undefined) =>
      pod !== undefined &&
      image(pod) === "vllm:v2" &&
      pod.metadata.labels?.["tandem.dev/revision"] !== v1 &&
      readProgress(pod) === undefined;
    for (let round = 0; !finished(cluster.pods.get("llm-2-decode-0-0")); round++) {
      assert.ok(round < 20, "group 2 never finished v2");
      ackDrains(cluster);
      apply(cluster, plan(observe(cluster), NOW + round * 1000).actions);
    }
    const v2 = cluster.pods.get("llm-2-decode-0-0")?.metadata.labels?.["tandem.dev/revision"];
    cluster.badImages.add("vllm:v3"); // holds group 2 patched, not verified
    setDecode(cluster, "vllm:v3");
    run(cluster, { rounds: 6, startMs: NOW + 30_000 });
    assert.ok(
      readProgress(cluster.pods.get("llm-2-decode-0-0")!)?.phase !== undefined &&
        image(cluster.pods.get("llm-2-decode-0-0")!) === "vllm:v3",
      "group 2 is patched to v3",
    );
    cluster.modelServing.spec.rolloutStrategy = { type: "RoleRollingUpdate" };
    cluster.modelServing.spec.template.roles[1].partition = 1;
    cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
    run(cluster, {
      rounds: 20,
      startMs: NOW + 60_000,
      each: (actions) => {
        const created = actions.flatMap((action) =>
          action.type === "CreatePod" && action.pod.metadata.name.startsWith("llm-2-decode-") ? [action.pod] : [],
        );
        assert.ok(
          created.every((pod) => pod.metadata.labels?.["tandem.dev/revision"] !== v2),
          "the patched instance is rebuilt at the label it still had",
        );
      },
    });
  });
});

describe("InPlaceUpdate: a restarted controller", () => {
  it("continues from the observed pods alone, even when a plan was cut off halfway", () => {
    const cluster = converged();
    const before = uids(cluster);
    setDecode(cluster, "vllm:v2");
    // Each round, the "controller" applies only the first half of its plan and dies; a new one
    // plans from what it observes. Plans are deterministic: planning twice gives the same plan.
    for (let round = 0; round < 200; round++) {
      ackDrains(cluster);
      const first = plan(observe(cluster), NOW + round * 1000);
      assert.deepEqual(plan(observe(cluster), NOW + round * 1000), first);
      if (first.actions.length === 0) break;
      apply(cluster, first.actions.slice(0, Math.max(1, Math.ceil(first.actions.length / 2))));
    }
    assert.deepEqual(uids(cluster), before);
    for (const pod of cluster.pods.values()) {
      const decode = pod.metadata.labels?.["tandem.dev/role"] === "decode";
      assert.equal(restarts(pod), decode ? 1 : 0, `${pod.metadata.name}: patched exactly once`);
      assert.ok(serving(pod));
    }
    assert.equal(cluster.modelServing.status.currentRevision, cluster.modelServing.status.updateRevision);
  });

  it("mid-sequence, re-plans neither a drain nor a patch it already made", () => {
    const cluster = converged();
    setDecode(cluster, "vllm:v2");
    cluster.badImages.add("vllm:v2"); // holds the group in Patched so it can be looked at
    run(cluster, { rounds: 12 });
    const entry = cluster.pods.get("llm-2-decode-0-0")!;
    assert.equal(readProgress(entry)?.phase, "Stalled");
    assert.deepEqual(readProgress(entry)?.containerIDs, { vllm: `ctr://${entry.metadata.uid}/vllm/0` });
    const { actions } = plan(observe(cluster), NOW + 60_000);
    assert.deepEqual(
      actions.filter((a) => a.type !== "WriteStatus"),
      [],
    );
  });
});

describe("InPlaceUpdate: a bad image", () => {
  it("stays Updating, holds the budget, warns once, is never recreated; a fixed image resumes in place", () => {
    const cluster = converged();
    const before = uids(cluster);
    cluster.badImages.add("vllm:bad");
    setDecode(cluster, "vllm:bad");
    const actions = run(cluster, { rounds: 40 });
    assert.ok(!actions.some((a) => a.type === "DeletePod" || a.type === "CreatePod"), "nothing is recreated");
    const warnings = actions.filter((a) => a.type === "RecordEvent" && a.reason === "InPlaceVerifyFailed");
    assert.equal(warnings.length, 2, "one warning per stalled pod (entry and worker), once");
    assert.match(
      (warnings[0] as { message: string }).message,
      /container vllm on vllm:bad: CrashLoopBackOff.*fix or revert the image/,
    );
    assert.deepEqual(groupsInFlight(cluster), [2], "the bad group holds the only unit of budget");
    const progressing = (
      cluster.modelServing.status as { conditions?: { type: string; message?: string }[] } | undefined
    )?.conditions?.find((condition) => condition.type === "Progressing");
    assert.match(
      progressing?.message ?? "",
      /llm-2-decode-0-0 CrashLoopBackOff, 1 restart\(s\).*A pod keeps crashing \(CrashLoopBackOff\): fix its image or configuration, or roll back if an update brought it/,
    );
    assert.ok(
      [...cluster.pods.values()].filter((p) => groupOf(p.metadata.name) < 2).every((p) => image(p) === "vllm:v1"),
    );
    assert.deepEqual(uids(cluster), before);
    // The user fixes the image: the stuck group is patched again in place, then the others.
    setDecode(cluster, "vllm:v3");
    run(cluster, { startMs: NOW + 100_000 });
    assert.deepEqual(uids(cluster), before);
    assert.ok(
      [...cluster.pods.values()]
        .filter((p) => p.metadata.name.includes("decode"))
        .every((p) => image(p) === "vllm:v3" && serving(p)),
    );
    assert.equal(restarts(cluster.pods.get("llm-2-decode-0-0")!), 2, "bad, then fixed");
    assert.equal(restarts(cluster.pods.get("llm-0-decode-0-0")!), 1);
    assert.equal(cluster.modelServing.status.currentRevision, cluster.modelServing.status.updateRevision);
  });

  it("reverting the image patches the stuck group back in place", () => {
    const cluster = converged();
    const before = uids(cluster);
    const first = cluster.modelServing.status.currentRevision;
    cluster.badImages.add("vllm:bad");
    setDecode(cluster, "vllm:bad");
    run(cluster, { rounds: 12 });
    setDecode(cluster, "vllm:v1");
    run(cluster, { startMs: NOW + 100_000 });
    assert.deepEqual(uids(cluster), before);
    assert.ok(
      [...cluster.pods.values()].every(
        (p) => image(p) === "vllm:v1" && serving(p) && p.metadata.labels?.["tandem.dev/revision"] === first,
      ),
    );
    assert.equal(restarts(cluster.pods.get("llm-2-decode-0-0")!), 2, "bad, then back");
    assert.equal(restarts(cluster.pods.get("llm-1-decode-0-0")!), 0, "the other groups were never touched");
    assert.equal(cluster.modelServing.status.units, undefined);
  });

  it("switching to a rolling strategy is the user's explicit ask to replace the stuck pods", () => {
    const cluster = converged();
    cluster.badImages.add("vllm:bad");
    setDecode(cluster, "vllm:bad");
    run(cluster, { rounds: 12 });
    const stuck = cluster.pods.get("llm-2-decode-0-0")!.metadata.uid;
    cluster.modelServing.spec.rolloutStrategy = { type: "ServingGroupRollingUpdate" };
    setDecode(cluster, "vllm:v2");
    const actions = run(cluster, { startMs: NOW + 100_000 });
    assert.ok(actions.some((a) => a.type === "DeletePod" && a.name === "llm-2-decode-0-0" && a.reason === "Update"));
    assert.notEqual(cluster.pods.get("llm-2-decode-0-0")!.metadata.uid, stuck);
    assert.ok(
      [...cluster.pods.values()]
        .filter((p) => p.metadata.name.includes("decode"))
        .every((p) => image(p) === "vllm:v2" && readProgress(p) === undefined),
    );
  });

  it("records left by a rolling strategy are not carried out in place when the change is more than images", () => {
    const cluster = converged();
    setDecode(cluster, "vllm:v2", { args: ["--tp", "8"] });
    cluster.modelServing.spec.rolloutStrategy = { type: "ServingGroupRollingUpdate" };
    const first = plan(observe(cluster), NOW);
    apply(
      cluster,
      first.actions.filter((a) => a.type === "CreateRevision" || a.type === "WriteStatus"),
    );
    assert.ok((cluster.modelServing.status.units ?? []).length > 0, "the rolling strategy recorded a permit");
    cluster.modelServing.spec.rolloutStrategy = { type: "InPlaceUpdate" };
    const before = uids(cluster);
    const actions = run(cluster, { rounds: 5, startMs: NOW + 1000 });
    assert.ok(!actions.some((a) => a.type === "DeletePod" || a.type === "PatchPodImages"));
    assert.deepEqual(uids(cluster), before);
    const blocked = cluster.modelServing.status.conditions.find((c: any) => c.type === "RolloutBlocked");
    assert.equal(blocked?.reason, "InPlaceIneligible");
  });

  it("a drain a rolling strategy began is undone when InPlaceUpdate refuses the change: the pods serve again (fuzz-faults-crash-97: they stayed out of service for good)", () => {
    const cluster = converged();
    setDecode(cluster, "vllm:v2", { args: ["--tp", "8"] });
    cluster.modelServing.spec.rolloutStrategy = { type: "ServingGroupRollingUpdate" };
    // No router ack: the replacement's drain stays open.
    run(cluster, { rounds: 3, router: false });
    const draining = [...cluster.pods.values()].filter(
      (pod) => pod.metadata.annotations?.["tandem.dev/draining"] !== undefined,
    );
    assert.ok(draining.length > 0, "the rolling strategy began a drain");
    cluster.modelServing.spec.rolloutStrategy = { type: "InPlaceUpdate" };
    const before = uids(cluster);
    const actions = run(cluster, { rounds: 5, startMs: NOW + 3000, router: false });
    assert.ok(!actions.some((a) => a.type === "DeletePod" || a.type === "PatchPodImages"));
    assert.deepEqual(uids(cluster), before);
    assert.ok(
      [...cluster.pods.values()].every(
        (pod) => serving(pod) && pod.metadata.annotations?.["tandem.dev/draining"] === undefined,
      ),
      "every pod serves, no drain mark left",
    );
    const blocked = cluster.modelServing.status.conditions.find((c: any) => c.type === "RolloutBlocked");
    assert.equal(blocked?.reason, "InPlaceIneligible");
  });

  it("a pod of an in-place group that fails otherwise is recovered at its recorded revision", () => {
    const cluster = converged();
    cluster.badImages.add("vllm:bad");
    setDecode(cluster, "vllm:bad");
    run(cluster, { rounds: 12 });
    const prefill = cluster.pods.get("llm-2-prefill-0-0")!;
    prefill.status = { ...prefill.status, phase: "Failed" };
    const recovery = run(cluster, { rounds: 6 });
    assert.ok(
      recovery.some((a) => a.type === "DeletePod" && a.name === "llm-2-prefill-0-0" && a.reason === "Recovery"),
    );
    const rebuilt = cluster.pods.get("llm-2-prefill-0-0")!;
    assert.notEqual(rebuilt.metadata.uid, prefill.metadata.uid);
    assert.equal(
      rebuilt.metadata.labels?.["tandem.dev/revision"],
      cluster.modelServing.status.updateRevision,
      "rebuilt at the group's recorded revision",
    );
    assert.ok(
      cluster.pods.get("llm-2-decode-0-0") !== undefined &&
        readProgress(cluster.pods.get("llm-2-decode-0-0")!)?.phase === "Stalled",
      "the bad-image pods are left as they are",
    );
  });
});

describe("in-place progress annotation", () => {
  it("round-trips, and an unreadable one counts as absent", () => {
    const progress = { from: "m-a", to: "m-b", phase: "Patched" as const, containerIDs: { vllm: "ctr://1" } };
    const pod = {
      metadata: { name: "p", annotations: { "tandem.dev/inplace": formatProgress(progress) } },
    } as unknown as Pod;
    assert.deepEqual(readProgress(pod), progress);
    assert.equal(
      formatProgress(progress),
      '{"from":"m-a","to":"m-b","phase":"Patched","containerIDs":{"vllm":"ctr://1"}}',
    );
    assert.equal(
      readProgress({ metadata: { name: "p", annotations: { "tandem.dev/inplace": "{" } } } as unknown as Pod),
      undefined,
    );
  });

  it("is stripped from templates by the revision projection (reserved prefix)", () => {
    const m = manifest();
    const parsed = parseModelServing(m);
    assert.ok(parsed.ok);
    const spec = structuredClone(parsed.value);
    (spec.spec.template.roles[0]!.entryTemplate as any).metadata = { annotations: { "tandem.dev/inplace": "{}" } };
    assert.deepEqual(revisionData(spec), revisionData(parsed.value));
  });
});
