/**
 * The controller on a real kube-apiserver (issue "Run on real Kubernetes"): the adapter in
 * src/kube drives the real engine and core, authenticated as the ServiceAccount and bound only by
 * the generated RBAC, on 16 KWOK nodes of 8 GPUs with the real kube-scheduler and
 * kube-controller-manager (test/e2e/cluster.ts `nodes`). Besides the controller's own behaviour,
 * what only a real control plane shows: the scheduler's Pending reason for too few GPUs quoted in the
 * status; the garbage collector removing a deleted ModelServing's pods, Services and
 * ControllerRevisions; a node going NotReady, its pod evicted and the group rebuilt elsewhere
 * (ServingGroupRecreate); an in-place update verified from the containerStatuses KWOK reports, and
 * one to a crashing image stalling on CrashLoopBackOff.
 *
 * Needs the binaries from `bash hack/kube-testenv/build.sh`. Run: node --test test/e2e/controller.e2e.ts
 */
import { after, afterEach, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { type Cluster, freePorts, NODE_DOWN_LABEL, startCluster } from "./cluster.ts";
import { type KubeClient, MODEL_SERVINGS, resourcePath } from "./client.ts";
import { waitFor } from "./wait.ts";
import {
  ensureNamespace,
  forbiddenLines,
  installCrd,
  installRbac,
  startTandem,
  startTestController,
  type TestController,
} from "./env.ts";
import { imagesOf, PODS, podsOf, readState, REVISIONS, SERVICES, setRoleImage, waitUntil } from "./observe.ts";
import { undoCommand, historyCommand, restartCommand, type RolloutClient } from "../../src/cli/rollout.ts";
import { loadKubeConfig } from "../../src/kube/config.ts";
import { ROLLOUT_PERMISSIONS } from "../../src/kube/resources.ts";
import { SnapshotReader } from "../../src/kube/snapshot.ts";
import { clientNodeSend, KubeTransport } from "../../src/kube/transport.ts";
import { KubeWriter } from "../../src/kube/writer.ts";
import { WallClock } from "../../src/kube/clock.ts";
import { EventRecorder } from "../../src/engine/recorder.ts";
import { drainedAnnotation, routerLeaseObject } from "../../src/api/router-lease.ts";

const REPO_ROOT = join(import.meta.dirname, "..", "..");
const LEASES = { group: "coordination.k8s.io", version: "v1", plural: "leases", namespaced: true } as const;
const EVENTS = { group: "", version: "v1", plural: "events", namespaced: true } as const;
const CLUSTER_START_TIMEOUT_MS = 180_000;
const TEST_TIMEOUT_MS = 120_000;
const CONVERGE_MS = 60_000;
/** Enough GPUs for every test's ModelServings at once (each test keeps its namespace). */
const NODES = { count: 16, gpusPerNode: 8 } as const;
const NODE_RESOURCE = { group: "", version: "v1", plural: "nodes", namespaced: false } as const;

/** The `tandem rollout` client as a user (admin kubeconfig) would run it. */
function rolloutClient(cluster: Cluster, namespace: string, name: string): RolloutClient {
  const transport = new KubeTransport(clientNodeSend(loadKubeConfig(cluster.kubeconfigs.admin)), {
    permissions: ROLLOUT_PERMISSIONS,
  });
  return { reader: new SnapshotReader(transport, namespace, name), writer: new KubeWriter(transport) };
}

const uidsOf = (pods: readonly { metadata: { uid?: string } }[]): string[] =>
  pods.map((pod) => pod.metadata.uid ?? "").sort();

function example(file: string, namespace: string): any {
  const object = parse(readFileSync(join(REPO_ROOT, "deploy", "examples", file), "utf8"));
  object.metadata.namespace = namespace;
  return object;
}

/** One role `server` of `gpus` GPUs per pod, `groups` ServingGroups; `extra` merges into the spec. */
function modelServing(
  name: string,
  namespace: string,
  groups: number,
  gpus: number,
  extra: Record<string, unknown> = {},
): any {
  const container = { name: "vllm", image: "vllm:v1", resources: { limits: { "nvidia.com/gpu": String(gpus) } } };
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name, namespace },
    spec: {
      replicas: groups,
      template: { roles: [{ name: "server", replicas: 1, entryTemplate: { spec: { containers: [container] } } }] },
      ...extra,
    },
  };
}

const livePods = (pods: readonly any[]): any[] => pods.filter((pod) => pod.metadata.deletionTimestamp === undefined);

describe("controller on kube-apiserver", { timeout: CLUSTER_START_TIMEOUT_MS + 19 * TEST_TIMEOUT_MS }, () => {
  let cluster: Cluster;
  let controller: TestController | undefined;
  const admin = (): KubeClient => cluster.admin;

  /** A namespace for one test; KWOK's nodes run its pods. */
  async function namespace(name: string): Promise<string> {
    await ensureNamespace(admin(), name);
    return name;
  }

  before(
    async () => {
      cluster = await startCluster({ startTimeoutMs: CLUSTER_START_TIMEOUT_MS, nodes: NODES });
      await installCrd(cluster.admin);
      await installRbac(cluster.admin);
      controller = await startTestController(cluster);
    },
    { timeout: CLUSTER_START_TIMEOUT_MS + TEST_TIMEOUT_MS },
  );

  after(async () => {
    await controller?.running.stop();
    await cluster.stop();
  });

  afterEach((t) => {
    for (const line of controller?.logger.lines().slice(-8) ?? [])
      t.diagnostic(`controller ${line.level}: ${line.message} ${JSON.stringify(line.fields)}`);
    // RBAC sufficiency: any request the shipped RBAC refused fails the test that caused it.
    if (controller !== undefined)
      assert.deepEqual(forbiddenLines(controller.logger), [], "the controller was refused by RBAC");
  });

  test(
    "creates a 2P1D ModelServing: DESIGN §1 names, labels, env and readiness gates",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const ns = await namespace("e2e-create");
      const object = example("prefill-decode-2p1d.yaml", ns);
      await admin().create(MODEL_SERVINGS, object);
      const state = await waitUntil(admin(), ns, "llama-pd", "Available", CONVERGE_MS);
      // Exactly these: no surge instance at creation (a core regression this test caught, b8e8b30).
      const names = state.pods.map((pod) => pod.metadata.name).sort();
      assert.deepEqual(names, [
        "llama-pd-0-decode-0-0",
        "llama-pd-0-prefill-0-0",
        "llama-pd-0-prefill-1-0",
        "llama-pd-1-decode-0-0",
        "llama-pd-1-prefill-0-0",
        "llama-pd-1-prefill-1-0",
      ]);
      const pod = state.pods.find((candidate) => candidate.metadata.name === "llama-pd-1-prefill-1-0")!;
      const labels = pod.metadata.labels ?? {};
      assert.equal(labels["tandem.dev/modelserving"], "llama-pd");
      assert.equal(labels["tandem.dev/group"], "1");
      assert.equal(labels["tandem.dev/role"], "prefill");
      assert.equal(labels["tandem.dev/instance"], "prefill-1");
      assert.equal(labels["tandem.dev/entry"], "true");
      assert.equal(labels["tandem.dev/revision"], state.ms.status?.updateRevision);
      assert.ok(labels["tandem.dev/role-hash"]);
      assert.deepEqual(
        pod.metadata.ownerReferences?.map((owner) => [owner.kind, owner.name, owner.controller]),
        [["ModelServing", "llama-pd", true]],
      );
      const env = Object.fromEntries(
        (pod.spec.containers[0]?.env ?? []).map((variable) => [variable.name, variable.value]),
      );
      assert.equal(env["GROUP_SIZE"], "1");
      assert.equal(env["WORKER_INDEX"], "0");
      assert.equal(env["ENTRY_ADDRESS"], `llama-pd-1-prefill-1-0.${ns}`);
      assert.deepEqual(pod.spec.readinessGates, [{ conditionType: "tandem.dev/serving" }]);
      assert.equal(
        pod.status?.conditions?.find((condition) => condition.type === "tandem.dev/serving")?.status,
        "True",
      );
      assert.equal(state.ms.status?.readyReplicas, 2);
    },
  );

  test(
    "a multi-node instance gets a headless Service named after its entry pod, and worker env",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const ns = await namespace("e2e-multinode");
      const object = example("multinode-decode.yaml", ns);
      object.spec.replicas = 1;
      await admin().create(MODEL_SERVINGS, object);
      const state = await waitUntil(admin(), ns, "deepseek", "Available", CONVERGE_MS);
      const decode = podsOf(state, "decode");
      assert.deepEqual(
        decode.map((pod) => pod.metadata.name),
        ["deepseek-0-decode-0-0", "deepseek-0-decode-0-1", "deepseek-0-decode-0-2", "deepseek-0-decode-0-3"],
      );
      const worker = decode[2]!;
      const env = Object.fromEntries(
        (worker.spec.containers[0]?.env ?? []).map((variable) => [variable.name, variable.value]),
      );
      assert.deepEqual(
        [env["GROUP_SIZE"], env["WORKER_INDEX"], env["ENTRY_ADDRESS"]],
        ["4", "2", `deepseek-0-decode-0-0.${ns}`],
      );
      assert.equal(worker.metadata.labels?.["tandem.dev/entry"], undefined);
      const services = (await admin().list(SERVICES, ns, { labelSelector: "tandem.dev/modelserving=deepseek" })).items;
      assert.deepEqual(
        services.map((service: any) => service.metadata.name),
        ["deepseek-0-decode-0-0"],
      );
      assert.equal(services[0].spec.clusterIP, "None");
    },
  );

  test(
    "scaling out and in: groups are added and removed; group 0 keeps its pods",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const ns = "e2e-create";
      const before = await waitUntil(admin(), ns, "llama-pd", "Available", CONVERGE_MS);
      const group0 = uidsOf(before.pods.filter((pod) => pod.metadata.labels?.["tandem.dev/group"] === "0"));
      await admin().mergePatch(MODEL_SERVINGS, { namespace: ns, name: "llama-pd" }, { spec: { replicas: 3 } });
      const out = await waitUntil(
        admin(),
        ns,
        "llama-pd",
        "Available",
        CONVERGE_MS,
        (state) => state.pods.length === 9,
      );
      assert.equal(out.ms.status?.replicas, 3);
      await admin().mergePatch(MODEL_SERVINGS, { namespace: ns, name: "llama-pd" }, { spec: { replicas: 1 } });
      const scaledIn = await waitUntil(
        admin(),
        ns,
        "llama-pd",
        "Available",
        CONVERGE_MS,
        (state) => state.pods.length === 3,
      );
      assert.deepEqual(uidsOf(scaledIn.pods), group0, "group 0 pods were replaced by scaling");
      // Each action was recorded as a core/v1 Event on the ModelServing (docs/design/events.md).
      const events = (await admin().list(EVENTS, ns)).items.filter(
        (event: any) => event.involvedObject.kind === "ModelServing" && event.involvedObject.name === "llama-pd",
      );
      const reasons = new Set(events.map((event: any) => event.reason));
      for (const reason of ["InstanceCreated", "InstanceDeleted"])
        assert.ok(reasons.has(reason), `no ${reason} event among ${[...reasons].join(", ")}`);
      assert.ok(events.every((event: any) => event.source.component === "tandem.dev/controller" && event.count >= 1));
    },
  );

  test(
    "a registered router's Lease holds a scale-down until its drain confirmation (DESIGN §3), as the ServiceAccount",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const ns = await namespace("e2e-drain-router");
      const manifest = example("prefill-decode-2p1d.yaml", ns);
      manifest.spec.drain = { timeoutSeconds: 600 };
      await admin().create(MODEL_SERVINGS, manifest);
      await waitUntil(admin(), ns, "llama-pd", "Available", CONVERGE_MS);
      // A router replica registered in another namespace, routing this one.
      await ensureNamespace(admin(), "e2e-routers");
      await admin().create(
        LEASES,
        routerLeaseObject({
          id: "e2e-router",
          namespace: "e2e-routers",
          scope: { all: false, namespaces: [ns] },
          leaseDurationSeconds: 120,
          nowMs: Date.now(),
        }),
      );
      await admin().mergePatch(MODEL_SERVINGS, { namespace: ns, name: "llama-pd" }, { spec: { replicas: 1 } });
      const group1Entries = (pods: readonly any[]) =>
        pods.filter(
          (pod) =>
            pod.metadata.labels?.["tandem.dev/group"] === "1" && pod.metadata.labels?.["tandem.dev/entry"] === "true",
        );
      const waiting = await waitFor(
        async () => {
          const state = await readState(admin(), ns, "llama-pd");
          const progressing = state.ms.status?.conditions?.find((condition) => condition.type === "Progressing");
          return progressing?.reason === "DrainWaiting" ? { state, progressing } : undefined;
        },
        { timeoutMs: CONVERGE_MS, intervalMs: 250, what: "Progressing DrainWaiting" },
      );
      assert.match(waiting.progressing.message ?? "", /awaiting router\(s\) e2e-router; timeout at /);
      // Well past the 2 s settle: the controller still waits for the router's confirmation.
      await new Promise((resolve) => setTimeout(resolve, 4_000));
      const marked = group1Entries((await readState(admin(), ns, "llama-pd")).pods);
      assert.equal(marked.length, 3, "group 1's entries (two prefill, one decode) are still there");
      // The mark, the closed gate and the released finalizer came in one pods/status write.
      assert.ok(
        marked.every(
          (pod) =>
            pod.metadata.deletionTimestamp === undefined &&
            pod.metadata.annotations?.["tandem.dev/draining"] !== undefined &&
            !(pod.metadata.finalizers ?? []).includes("tandem.dev/recovery") &&
            pod.status?.conditions?.some(
              (condition: any) =>
                condition.type === "tandem.dev/serving" &&
                condition.status === "False" &&
                condition.reason === "Draining",
            ),
        ),
        JSON.stringify(
          marked.map((pod) => [pod.metadata.annotations, pod.metadata.finalizers, pod.status?.conditions]),
        ),
      );
      for (const pod of marked)
        await admin().mergePatch(
          PODS,
          { namespace: ns, name: pod.metadata.name },
          { metadata: { uid: pod.metadata.uid, annotations: { [drainedAnnotation("e2e-router")]: "true" } } },
        );
      await waitUntil(admin(), ns, "llama-pd", "Available", CONVERGE_MS, (state) => state.pods.length === 3);
      const events = (await admin().list(EVENTS, ns)).items.filter((event: any) => event.reason === "DrainConfirmed");
      assert.ok(
        events.length > 0 &&
          events.every((event: any) => String(event.message).includes("router(s) e2e-router confirmed")),
        JSON.stringify(events.map((event: any) => event.message)),
      );
      await admin().delete(LEASES, "e2e-router", "e2e-routers");
    },
  );

  test(
    "the EventRecorder on the real API server, as the controller's ServiceAccount: a repeat increments count",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const ns = await namespace("e2e-events");
      const transport = new KubeTransport(clientNodeSend(loadKubeConfig(cluster.kubeconfigs.controller)));
      const recorder = new EventRecorder({
        writer: new KubeWriter(transport),
        clock: new WallClock(),
        component: "tandem-controller",
        instance: "e2e",
      });
      const event = {
        regarding: { kind: "ModelServing" as const, namespace: ns, name: "m" },
        type: "Warning" as const,
        reason: "DrainTimeout" as const,
        message: "a repeat",
      };
      recorder.record(event);
      recorder.record(event);
      await recorder.flushed();
      assert.equal(recorder.droppedCount(), 0, "the API server refused a create or a patch");
      const stored = (await admin().list(EVENTS, ns)).items;
      assert.deepEqual(
        stored.map((item: any) => [item.reason, item.type, item.count, item.message, item.involvedObject.kind]),
        [["DrainTimeout", "Warning", 2, "a repeat", "ModelServing"]],
      );
    },
  );

  test(
    "ServingGroupRecreate: a deleted single-pod prefill rebuilds its whole group; deleting the ModelServing leaves no pod held by the recovery finalizer",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const ns = await namespace("e2e-tracking");
      const manifest = example("prefill-decode-2p1d.yaml", ns);
      manifest.spec.recoveryPolicy = "ServingGroupRecreate";
      manifest.spec.drain = { timeoutSeconds: 0 };
      await admin().create(MODEL_SERVINGS, manifest);
      const before = await waitUntil(admin(), ns, "llama-pd", "Available", CONVERGE_MS);
      assert.ok(
        before.pods.every((pod) => pod.metadata.finalizers?.includes("tandem.dev/recovery")),
        "every pod tracked",
      );
      const groupUids = (state: typeof before, group: string) =>
        uidsOf(state.pods.filter((pod) => pod.metadata.labels?.["tandem.dev/group"] === group));
      await admin().delete(PODS, "llama-pd-1-prefill-0-0", ns);
      const rebuilt = (state: typeof before) =>
        state.pods.length === before.pods.length &&
        groupUids(state, "1").every((uid) => !groupUids(before, "1").includes(uid));
      const after = await waitUntil(admin(), ns, "llama-pd", "Available", CONVERGE_MS, rebuilt);
      assert.deepEqual(groupUids(after, "0"), groupUids(before, "0"), "group 0 untouched");
      // No garbage collector runs here: the test deletes the pods as it would, after their owner.
      await admin().delete(MODEL_SERVINGS, "llama-pd", ns);
      for (const pod of after.pods) await admin().delete(PODS, pod.metadata.name, ns);
      await waitFor(async () => ((await admin().list(PODS, ns)).items.length === 0 ? true : undefined), {
        timeoutMs: CONVERGE_MS,
        intervalMs: 250,
        what: `the pods of ${ns}/llama-pd gone`,
      });
    },
  );

  test(
    "a Decode-only update replaces decode instances and keeps every prefill pod (same UIDs)",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const ns = await namespace("e2e-update");
      await admin().create(MODEL_SERVINGS, example("prefill-decode-2p1d.yaml", ns));
      const before = await waitUntil(admin(), ns, "llama-pd", "Available", CONVERGE_MS);
      const prefill = uidsOf(podsOf(before, "prefill"));
      const decode = uidsOf(podsOf(before, "decode"));
      await setRoleImage(admin(), ns, "llama-pd", "decode", "vllm/vllm-openai:v0.11.1");
      const updated = (state: Parameters<typeof podsOf>[0]): boolean =>
        podsOf(state, "decode").every((pod) => imagesOf(pod)[0] === "vllm/vllm-openai:v0.11.1");
      const after = await waitUntil(
        admin(),
        ns,
        "llama-pd",
        "RolloutComplete",
        CONVERGE_MS,
        (state) => updated(state) && state.ms.status?.currentRevision === state.ms.status?.updateRevision,
      );
      assert.deepEqual(uidsOf(podsOf(after, "prefill")), prefill, "prefill pods were replaced");
      assert.equal(
        uidsOf(podsOf(after, "decode")).filter((uid) => decode.includes(uid)).length,
        0,
        "decode pods kept their UIDs",
      );
      assert.notEqual(after.ms.status?.updateRevision, before.ms.status?.updateRevision);
    },
  );

  test("partition: groups below the partition keep their revision", { timeout: TEST_TIMEOUT_MS }, async () => {
    const ns = "e2e-update";
    await admin().mergePatch(
      MODEL_SERVINGS,
      { namespace: ns, name: "llama-pd" },
      { spec: { rolloutStrategy: { rollingUpdateConfiguration: { partition: 1 } } } },
    );
    await setRoleImage(admin(), ns, "llama-pd", "decode", "vllm/vllm-openai:v0.12.0");
    const decodeImage = (state: Parameters<typeof podsOf>[0], group: string): string | undefined =>
      imagesOf(podsOf(state, "decode").find((pod) => pod.metadata.labels?.["tandem.dev/group"] === group)!)[0];
    const state = await waitUntil(
      admin(),
      ns,
      "llama-pd",
      "RolloutComplete",
      CONVERGE_MS,
      (current) => decodeImage(current, "1") === "vllm/vllm-openai:v0.12.0",
    );
    assert.equal(decodeImage(state, "0"), "vllm/vllm-openai:v0.11.1", "group 0 (below the partition) was updated");
  });

  test(
    "tandem rollout undo rolls group 1 back through the API server; history lists the revisions",
    { timeout: TEST_TIMEOUT_MS },
    async (t) => {
      const ns = "e2e-update";
      const history = await historyCommand(rolloutClient(cluster, ns, "llama-pd"), { namespace: ns, name: "llama-pd" });
      t.diagnostic(history.stdout);
      assert.equal(history.exitCode, 0);
      assert.match(
        history.stdout,
        /^3 +llama-pd-\w+ +decode=vllm\/vllm-openai:v0\.12\.0 prefill=vllm\/vllm-openai:v0\.11\.0 +update$/m,
      );
      const undo = await undoCommand(
        rolloutClient(cluster, ns, "llama-pd"),
        { namespace: ns, name: "llama-pd" },
        undefined,
      );
      assert.equal(undo.exitCode, 0, undo.stderr);
      assert.match(undo.stdout, /to revision 2/);
      const state = await waitUntil(admin(), ns, "llama-pd", "RolloutComplete", CONVERGE_MS, (current) =>
        podsOf(current, "decode").every((pod) => imagesOf(pod)[0] === "vllm/vllm-openai:v0.11.1"),
      );
      assert.equal(
        state.ms.spec.rolloutStrategy.rollingUpdateConfiguration.partition,
        1,
        "undo changed a runtime field",
      );
    },
  );

  // On the KWOK nodes: the real scheduler, garbage collector, node lifecycle and taint eviction.
  test(
    "more GPUs than any node has: the scheduler's reason on the pod, the ModelServing says the pods cannot be scheduled",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const ns = "nodes-pending";
      await ensureNamespace(admin(), ns);
      await admin().create(MODEL_SERVINGS, modelServing("big", ns, 1, 16));
      const message = await waitFor(
        async () => {
          const state = await readState(admin(), ns, "big");
          const scheduled = state.pods[0]?.status?.conditions?.find((condition) => condition.type === "PodScheduled");
          const progressing = state.ms.status?.conditions?.find((condition) =>
            /cannot be scheduled/.test(condition.message ?? ""),
          );
          return scheduled?.reason === "Unschedulable" && progressing !== undefined
            ? `${scheduled.message ?? ""} | ${progressing.type}: ${progressing.message ?? ""}`
            : undefined;
        },
        { timeoutMs: CONVERGE_MS, what: "an Unschedulable pod and a status naming it" },
      );
      assert.match(message, /0\/16 nodes are available: 16 Insufficient nvidia\.com\/gpu/);
      assert.match(message, /Add capacity for them/);
    },
  );

  test(
    "deleting a ModelServing: the garbage collector removes its pods, Services and ControllerRevisions",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const ns = "nodes-gc";
      await ensureNamespace(admin(), ns);
      const object = modelServing("gc", ns, 2, 1);
      object.spec.template.roles[0].workerTemplate = { spec: { containers: [{ name: "worker", image: "vllm:v1" }] } };
      object.spec.template.roles[0].workerReplicas = 1;
      await admin().create(MODEL_SERVINGS, object);
      const state = await waitUntil(admin(), ns, "gc", "Available", CONVERGE_MS);
      const services = (await admin().list(SERVICES, ns)).items as any[];
      assert.ok(
        state.pods.length === 4 && services.length === 2 && state.revisionObjects.length >= 1,
        `before: ${state.pods.length} pods, ${services.length} Services, ${state.revisionObjects.length} revisions`,
      );
      for (const child of [...state.pods, ...services, ...state.revisionObjects])
        assert.equal(child.metadata.ownerReferences?.[0]?.kind, "ModelServing");
      await admin().call("DELETE", resourcePath(MODEL_SERVINGS, { namespace: ns, name: "gc" }), {
        apiVersion: "v1",
        kind: "DeleteOptions",
        propagationPolicy: "Background",
      });
      await waitFor(
        async () => {
          const counts = await Promise.all(
            [PODS, SERVICES, REVISIONS].map(
              async (resource) => ((await admin().list(resource, ns)).items as any[]).length,
            ),
          );
          return counts.every((count) => count === 0) ? true : undefined;
        },
        { timeoutMs: CONVERGE_MS, what: "no pod, Service or ControllerRevision left in the namespace" },
      );
    },
  );

  test(
    "a node goes NotReady: its pod is evicted, ServingGroupRecreate rebuilds that group on another node, the other group is untouched",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const ns = "nodes-notready";
      await ensureNamespace(admin(), ns);
      // 8 GPUs per pod: one pod per node, so the rebuilt pod must go to a node of its own.
      await admin().create(MODEL_SERVINGS, modelServing("evict", ns, 2, 8, { recoveryPolicy: "ServingGroupRecreate" }));
      const before = await waitUntil(admin(), ns, "evict", "Available", CONVERGE_MS);
      const [victim, bystander] = [...before.pods].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name)) as [
        any,
        any,
      ];
      const downNode: string = victim.spec.nodeName;
      await admin().mergePatch(
        NODE_RESOURCE,
        { name: downNode },
        { metadata: { labels: { [NODE_DOWN_LABEL]: "true" } } },
      );
      try {
        const after = await waitUntil(admin(), ns, "evict", "Available", CONVERGE_MS, (state) => {
          const rebuilt = livePods(state.pods).find((pod) => pod.metadata.name === victim.metadata.name);
          return rebuilt !== undefined && rebuilt.metadata.uid !== victim.metadata.uid && state.pods.length === 2;
        });
        const rebuilt = after.pods.find((pod) => pod.metadata.name === victim.metadata.name)!;
        assert.notEqual(rebuilt.spec.nodeName, downNode, "the rebuilt pod avoids the NotReady node (its taint)");
        assert.equal(
          after.pods.find((pod) => pod.metadata.name === bystander.metadata.name)?.metadata.uid,
          bystander.metadata.uid,
          "the other group keeps its pod",
        );
        const node = await admin().get(NODE_RESOURCE, downNode);
        assert.ok(
          (node.spec.taints ?? []).some(
            (taint: any) => taint.key === "node.kubernetes.io/not-ready" && taint.effect === "NoExecute",
          ),
          `the node lifecycle controller tainted ${downNode}: ${JSON.stringify(node.spec.taints)}`,
        );
      } finally {
        await admin().mergePatch(
          NODE_RESOURCE,
          { name: downNode },
          { metadata: { labels: { [NODE_DOWN_LABEL]: null } } },
        );
      }
    },
  );

  test(
    "an in-place update: KWOK restarts the container with a new containerID, the controller verifies it and keeps the pod",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const ns = "nodes-inplace";
      await ensureNamespace(admin(), ns);
      await admin().create(
        MODEL_SERVINGS,
        modelServing("inplace", ns, 2, 1, { rolloutStrategy: { type: "InPlaceUpdate" } }),
      );
      const before = await waitUntil(admin(), ns, "inplace", "Available", CONVERGE_MS);
      await setRoleImage(admin(), ns, "inplace", "server", "vllm:v2");
      const after = await waitUntil(admin(), ns, "inplace", "RolloutComplete", CONVERGE_MS);
      assert.deepEqual(
        after.pods.map((pod) => pod.metadata.uid).sort(),
        before.pods.map((pod) => pod.metadata.uid).sort(),
        "the same pods",
      );
      for (const pod of after.pods) {
        const status = pod.status?.containerStatuses?.at(0);
        const old = before.pods
          .find((candidate) => candidate.metadata.uid === pod.metadata.uid)
          ?.status?.containerStatuses?.at(0);
        assert.ok(status !== undefined, `${pod.metadata.name} reports its container`);
        assert.equal(status.image, "vllm:v2");
        assert.equal(status.restartCount, 1);
        assert.notEqual(status.containerID, old?.containerID, `${pod.metadata.name}: a new container`);
      }
    },
  );

  test(
    "an in-place update to a crashing image stalls: CrashLoopBackOff is named, the pod is not recreated",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const ns = "nodes-crash";
      await ensureNamespace(admin(), ns);
      await admin().create(
        MODEL_SERVINGS,
        modelServing("crash", ns, 1, 1, { rolloutStrategy: { type: "InPlaceUpdate" } }),
      );
      const before = await waitUntil(admin(), ns, "crash", "Available", CONVERGE_MS);
      await setRoleImage(admin(), ns, "crash", "server", "vllm:v2-crash");
      const stalled = await waitFor(
        async () => {
          const state = await readState(admin(), ns, "crash");
          const text = JSON.stringify([state.ms.status?.conditions, state.pods.map((pod) => pod.metadata.annotations)]);
          return /CrashLoopBackOff/.test(text) && /Stalled/.test(text) ? state : undefined;
        },
        { timeoutMs: CONVERGE_MS, what: "the in-place update stalled on CrashLoopBackOff" },
      );
      assert.deepEqual(
        stalled.pods.map((pod) => pod.metadata.uid),
        before.pods.map((pod) => pod.metadata.uid),
        "the pod is kept",
      );
    },
  );
  test(
    "tandem rollout restart replaces every pod through a new revision; --recreate rebuilds one role of one group, once",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const ns = await namespace("e2e-rollout-restart");
      const target = { namespace: ns, name: "llama-pd" };
      await admin().create(MODEL_SERVINGS, example("prefill-decode-2p1d.yaml", ns));
      const before = await waitUntil(admin(), ns, "llama-pd", "RolloutComplete", CONVERGE_MS);
      const restarted = await restartCommand(rolloutClient(cluster, ns, "llama-pd"), target, { recreate: false });
      assert.equal(restarted.exitCode, 0, restarted.stderr);
      const old = uidsOf(before.pods);
      const after = await waitUntil(admin(), ns, "llama-pd", "RolloutComplete", CONVERGE_MS, (current) =>
        uidsOf(current.pods).every((uid) => !old.includes(uid)),
      );
      assert.equal(after.pods.length, before.pods.length);
      assert.ok(after.pods.every((pod) => pod.metadata.annotations?.["tandem.dev/restartedAt"] !== undefined));
      assert.notEqual(after.ms.status?.updateRevision, before.ms.status?.updateRevision, "a new revision");
      const inGroup = (state: typeof after, group: string, role?: string) =>
        uidsOf(
          state.pods.filter((pod) => {
            const labels = pod.metadata.labels ?? {};
            return labels["tandem.dev/group"] === group && (role === undefined || labels["tandem.dev/role"] === role);
          }),
        );
      const mode = { recreate: true, group: 1, role: "prefill" } as const;
      const recreated = await restartCommand(rolloutClient(cluster, ns, "llama-pd"), target, mode);
      assert.equal(recreated.exitCode, 0, recreated.stderr);
      const rebuilt = await waitUntil(
        admin(),
        ns,
        "llama-pd",
        "RolloutComplete",
        CONVERGE_MS,
        (current) => current.ms.status?.recreate?.phase === "Done",
      );
      assert.deepEqual(inGroup(rebuilt, "0"), inGroup(after, "0"), "group 0 untouched");
      assert.deepEqual(inGroup(rebuilt, "1", "decode"), inGroup(after, "1", "decode"), "decode untouched");
      const prefill = inGroup(after, "1", "prefill");
      assert.equal(inGroup(rebuilt, "1", "prefill").length, prefill.length);
      assert.ok(
        inGroup(rebuilt, "1", "prefill").every((uid) => !prefill.includes(uid)),
        "every prefill pod rebuilt",
      );
      // A converged controller does not act on the recorded request again: a change of a runtime
      // parameter (not versioned, so it moves no pod) makes it plan once more, and the status it
      // writes for that generation proves the pass saw the recorded request.
      const { generation } = (
        await admin().mergePatch(
          MODEL_SERVINGS,
          { namespace: ns, name: "llama-pd" },
          { spec: { revisionHistoryLimit: 9 } },
        )
      ).metadata;
      const replanned = await waitUntil(
        admin(),
        ns,
        "llama-pd",
        "RolloutComplete",
        CONVERGE_MS,
        (current) => current.ms.status?.observedGeneration === generation,
      );
      assert.deepEqual(uidsOf(replanned.pods), uidsOf(rebuilt.pods));
    },
  );

  test(
    "a controller restarted mid-rollout finishes it: prefill untouched, no updated pod replaced again",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const ns = await namespace("e2e-restart");
      await admin().create(MODEL_SERVINGS, example("prefill-decode-2p1d.yaml", ns));
      const before = await waitUntil(admin(), ns, "llama-pd", "Available", CONVERGE_MS);
      const prefill = uidsOf(podsOf(before, "prefill"));
      await setRoleImage(admin(), ns, "llama-pd", "decode", "vllm/vllm-openai:v0.11.1");
      // Mid-rollout: a new decode instance exists, and an old one still runs.
      const isNew = (pod: any): boolean => imagesOf(pod)[0] === "vllm/vllm-openai:v0.11.1";
      const middle = await waitFor(
        async () => {
          const current = await readState(admin(), ns, "llama-pd");
          const decode = podsOf(current, "decode");
          return decode.some(isNew) && decode.some((pod) => !isNew(pod)) ? current : undefined;
        },
        { timeoutMs: CONVERGE_MS, intervalMs: 50, what: "the decode rollout to be under way" },
      );
      // Surge instances (decode-1) are temporary by design; the regular instance's new pods must stay.
      const regular = (pod: any): boolean => pod.metadata.labels["tandem.dev/instance"] === "decode-0";
      const newBefore = uidsOf(podsOf(middle, "decode").filter((pod) => isNew(pod) && regular(pod)));
      await controller?.running.stop();
      controller = await startTestController(cluster);
      const after = await waitUntil(admin(), ns, "llama-pd", "RolloutComplete", CONVERGE_MS, (state) =>
        podsOf(state, "decode").every(isNew),
      );
      assert.deepEqual(uidsOf(podsOf(after, "prefill")), prefill, "prefill pods were replaced");
      const newAfter = uidsOf(podsOf(after, "decode").filter(regular));
      for (const uid of newBefore)
        assert.ok(newAfter.includes(uid), `updated decode pod ${uid} was replaced again after the restart`);
    },
  );

  test(
    "leader hand-over: the standby takes the Lease when the leader stops, and reconciles",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      await controller?.running.stop();
      controller = undefined;
      const lease = { namespace: "tandem-system", name: "e2e-leader", timings: { retryPeriodMs: 500 } };
      const a = await startTestController(cluster, { leaderElection: { ...lease, identity: "controller-a" } });
      const b = await startTestController(cluster, { leaderElection: { ...lease, identity: "controller-b" } });
      try {
        const leader = await waitFor(
          () => Promise.resolve(a.running.isLeader() ? a : b.running.isLeader() ? b : undefined),
          { timeoutMs: 30_000, what: "a leader" },
        );
        const standby = leader === a ? b : a;
        assert.equal(standby.running.isLeader(), false, "two leaders");
        const ns = await namespace("e2e-leader");
        const object = example("prefill-decode-2p1d.yaml", ns);
        object.spec.replicas = 1;
        await admin().create(MODEL_SERVINGS, object);
        await waitUntil(admin(), ns, "llama-pd", "Available", CONVERGE_MS);
        assert.equal(standby.running.isSynced(), false, "the standby runs its caches");
        await leader.running.stop();
        await waitFor(() => Promise.resolve(standby.running.isLeader() ? true : undefined), {
          timeoutMs: 30_000,
          what: "the standby to take over",
        });
        const stored = await admin().get(LEASES, "e2e-leader", "tandem-system");
        assert.equal(stored.spec.holderIdentity, standby.running.identity);
        assert.match(stored.spec.renewTime, /\.\d{6}Z$/, "renewTime is not a MicroTime");
        assert.ok(stored.spec.leaseTransitions >= 1);
        await admin().mergePatch(MODEL_SERVINGS, { namespace: ns, name: "llama-pd" }, { spec: { replicas: 2 } });
        await waitUntil(admin(), ns, "llama-pd", "Available", CONVERGE_MS, (state) => state.pods.length === 6);
        assert.deepEqual(forbiddenLines(leader.logger), []);
      } finally {
        await a.running.stop();
        await b.running.stop();
        controller = b;
      }
    },
  );

  test(
    "tandem controller as a process: one namespace, /healthz, /readyz, /metrics, JSON logs, exit 0 on SIGTERM",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      // The only controller of this namespace: the in-process one (if still running) stops first.
      await controller?.running.stop();
      controller = undefined;
      const ns = await namespace("e2e-cli");
      const [port] = await freePorts(1);
      const {
        child,
        output: outputSoFar,
        exited,
      } = startTandem([
        "controller",
        "--kubeconfig",
        cluster.kubeconfigs.controller,
        "--namespace",
        ns,
        "--metrics-addr",
        `127.0.0.1:${port}`,
      ]);
      try {
        const url = `http://127.0.0.1:${port}`;
        await waitFor(async () => ((await fetch(`${url}/readyz`)).status === 200 ? true : undefined), {
          timeoutMs: 30_000,
          what: "/readyz 200",
        });
        assert.equal((await fetch(`${url}/healthz`)).status, 200);
        const object = example("prefill-decode-2p1d.yaml", ns);
        object.spec.replicas = 1;
        await admin().create(MODEL_SERVINGS, object);
        await waitUntil(admin(), ns, "llama-pd", "Available", CONVERGE_MS);
        const metrics = await waitFor(
          async () => {
            const text = await (await fetch(`${url}/metrics`)).text();
            return text.includes(`tandem_rollout_updated_ratio{modelserving="${ns}/llama-pd",role="decode"} 1`)
              ? text
              : undefined;
          },
          { timeoutMs: 10_000, what: "rollout ratio in /metrics" },
        );
        assert.match(metrics, /tandem_reconcile_duration_seconds_count \d+/);
        assert.match(metrics, /# TYPE tandem_api_errors_total counter/);
        assert.match(metrics, /tandem_api_requests_total\{verb="watch",kind="Pod"\} [1-9]/);
        child.kill("SIGTERM");
        const code = await exited;
        const output = outputSoFar();
        assert.equal(code, 0, output);
        const lines = output
          .trim()
          .split("\n")
          .map((line) => JSON.parse(line) as { msg: string; level: number });
        assert.ok(lines.some((line) => line.msg === "controller started"));
        assert.ok(lines.some((line) => line.msg === "controller stopped"));
        assert.ok(!/ 403 |forbidden/i.test(output), output);
      } finally {
        if (child.exitCode === null) child.kill("SIGKILL");
      }
    },
  );
});
