/**
 * The serving lifecycle in the simulated cluster (real engine and core, virtual time), asserting
 * exact pods by name and UID: creation, scaling, recovery per policy, node failure, controller
 * restarts, and injected API errors.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Controller } from "../src/engine/controller.ts";
import { SimCluster } from "../src/sim/cluster.ts";
import type { PodRecord, Report } from "../src/sim/report.ts";
import { runScenario } from "../src/sim/runner.ts";
import { parseScenario } from "../src/sim/scenario.ts";

const gpu = (image: string, gpus = 1) => ({
  spec: { containers: [{ name: "vllm", image, resources: { limits: { "nvidia.com/gpu": String(gpus) } } }] },
});

function modelServing(spec: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "m" },
    spec: {
      replicas: 2,
      drain: { timeoutSeconds: 0 },
      template: {
        roles: [
          { name: "prefill", replicas: 2, entryTemplate: gpu("vllm:v1") },
          {
            name: "decode",
            replicas: 1,
            workerReplicas: 1,
            entryTemplate: gpu("vllm:v1", 2),
            workerTemplate: gpu("vllm:v1", 2),
          },
        ],
      },
      ...spec,
    },
  };
}

const ready = { wait: { for: "Available", timeoutSeconds: 900 } };
const settle = { advance: { seconds: 120 } };

async function play(
  steps: unknown[],
  nodes = { name: "gpu", count: 4, gpus: 8 },
  spec: Record<string, unknown> = {},
): Promise<Report> {
  const parsed = parseScenario({
    name: "lifecycle",
    seed: 3,
    cluster: {
      nodes: [nodes],
      timing: { scheduleSeconds: 1, pullSeconds: 5, startSeconds: 10, terminationSeconds: 2 },
    },
    steps: [{ apply: modelServing(spec) }, ready, ...steps],
  });
  assert.ok(parsed.ok, JSON.stringify(parsed.ok ? [] : parsed.problems));
  const report = await runScenario(parsed.scenario);
  assert.equal(report.verdict, "pass", JSON.stringify(report.steps.filter((step) => !step.ok)));
  return report;
}

const names = (pods: readonly PodRecord[]) => pods.map((pod) => pod.name).sort();
const uids = (pods: readonly PodRecord[]) => new Map(pods.map((pod) => [pod.name, pod.uid]));
const groupPods = (group: number, prefill: number, decodeInstances = 1, workers = 1) => [
  ...Array.from({ length: decodeInstances }, (_, j) =>
    Array.from({ length: 1 + workers }, (_, k) => `m-${group}-decode-${j}-${k}`),
  ).flat(),
  ...Array.from({ length: prefill }, (_, j) => `m-${group}-prefill-${j}-0`),
];

/** Names whose UID differs between two snapshots (or that appear in only one). */
function changed(before: readonly PodRecord[], after: readonly PodRecord[]): string[] {
  const old = uids(before);
  return after
    .filter((pod) => old.get(pod.name) !== pod.uid)
    .map((pod) => pod.name)
    .sort();
}

describe("lifecycle in the simulator", () => {
  it("creates from zero exactly the DESIGN §1 pods", async () => {
    const report = await play([{ snapshot: "up" }]);
    assert.deepEqual(names(report.snapshots["up"] ?? []), [...groupPods(0, 2), ...groupPods(1, 2)].sort());
    const entry = report.snapshots["up"]?.find((pod) => pod.name === "m-1-decode-0-0");
    assert.deepEqual(
      [entry?.group, entry?.role, entry?.instance, entry?.entry, entry?.ready],
      [1, "decode", "decode-0", true, true],
    );
  });

  it("scales groups 2 → 4 → 1, highest groups removed, survivors untouched", async () => {
    const report = await play([
      { snapshot: "two" },
      { patch: { name: "m", merge: { spec: { replicas: 4 } } } },
      ready,
      { snapshot: "four" },
      { patch: { name: "m", merge: { spec: { replicas: 1 } } } },
      settle,
      { snapshot: "one" },
    ]);
    const four = report.snapshots["four"] ?? [];
    assert.deepEqual(names(four), [0, 1, 2, 3].flatMap((g) => groupPods(g, 2)).sort());
    assert.deepEqual(changed(report.snapshots["two"] ?? [], four), [2, 3].flatMap((g) => groupPods(g, 2)).sort());
    const one = report.snapshots["one"] ?? [];
    assert.deepEqual(names(one), groupPods(0, 2).sort());
    assert.deepEqual(changed(report.snapshots["two"] ?? [], one), []);
  });

  it("scales a role 2 → 3 → 1 inside each group and keeps every other pod", async () => {
    const roles = (prefill: number) => ({
      spec: {
        template: {
          roles: [
            { name: "prefill", replicas: prefill, entryTemplate: gpu("vllm:v1") },
            {
              name: "decode",
              replicas: 1,
              workerReplicas: 1,
              entryTemplate: gpu("vllm:v1", 2),
              workerTemplate: gpu("vllm:v1", 2),
            },
          ],
        },
      },
    });
    const report = await play([
      { snapshot: "two" },
      { patch: { name: "m", merge: roles(3) } },
      ready,
      { snapshot: "three" },
      { patch: { name: "m", merge: roles(1) } },
      settle,
      { snapshot: "one" },
    ]);
    assert.deepEqual(changed(report.snapshots["two"] ?? [], report.snapshots["three"] ?? []), [
      "m-0-prefill-2-0",
      "m-1-prefill-2-0",
    ]);
    const one = report.snapshots["one"] ?? [];
    assert.deepEqual(names(one), [...groupPods(0, 1), ...groupPods(1, 1)].sort());
    assert.deepEqual(changed(report.snapshots["two"] ?? [], one), []);
  });

  for (const [policy, expected] of [
    ["RoleRecreate", ["m-1-decode-0-0", "m-1-decode-0-1"]],
    ["ServingGroupRecreate", groupPods(1, 2).sort()],
    ["None", ["m-1-decode-0-0"]],
  ] as const) {
    it(`kill an entry pod under ${policy}: rebuilds ${policy === "None" ? "only that pod" : policy === "RoleRecreate" ? "only that instance" : "the whole group"}`, async () => {
      const report = await play(
        [
          { snapshot: "before" },
          { deletePods: { selector: "tandem.dev/group=1,tandem.dev/role=decode,tandem.dev/entry=true", count: 1 } },
          ready,
          settle,
          { snapshot: "after" },
        ],
        undefined,
        { recoveryPolicy: policy },
      );
      assert.deepEqual(
        changed(report.snapshots["before"] ?? [], report.snapshots["after"] ?? []),
        [...expected].sort(),
      );
    });
  }

  it("node failure: the lost instances are rebuilt on other nodes when capacity exists", async () => {
    const report = await play(
      [
        { snapshot: "before" },
        { failNode: { name: "gpu-0" } },
        { advance: { seconds: 400 } },
        ready,
        { snapshot: "after" },
      ],
      { name: "gpu", count: 5, gpus: 8 },
    );
    const after = report.snapshots["after"] ?? [];
    assert.ok(after.every((pod) => pod.node !== "gpu-0" && pod.ready));
    assert.deepEqual(names(after), [...groupPods(0, 2), ...groupPods(1, 2)].sort());
  });

  it("node failure without spare capacity: Pending with the scheduler's reason in the status", async () => {
    const parsed = parseScenario({
      name: "full",
      seed: 3,
      cluster: {
        nodes: [{ name: "gpu", count: 1, gpus: 8 }],
        timing: { scheduleSeconds: 1, pullSeconds: 5, startSeconds: 10, terminationSeconds: 2 },
      },
      steps: [
        { apply: modelServing({ replicas: 1 }) },
        ready,
        { failNode: { name: "gpu-0" } },
        { advance: { seconds: 600 } },
      ],
    });
    assert.ok(parsed.ok);
    const report = await runScenario(parsed.scenario);
    const status = report.final.status as { conditions?: { type: string; status: string; message?: string }[] };
    const available = status.conditions?.find((condition) => condition.type === "Available");
    assert.equal(available?.status, "False");
    assert.match(available.message ?? "", /Pending \(Unschedulable/);
  });

  it("a controller restart mid-creation converges with no duplicate pod", async () => {
    const parsed = parseScenario({
      name: "restart",
      seed: 3,
      cluster: { nodes: [{ name: "gpu", count: 4, gpus: 8 }] },
      steps: [{ apply: modelServing() }, { advance: { seconds: 0.5 } }, { restartController: {} }, ready],
    });
    assert.ok(parsed.ok);
    const report = await runScenario(parsed.scenario);
    assert.equal(report.verdict, "pass");
    assert.equal(report.metrics.podsCreated.total, 8, "each pod created exactly once");
  });

  it("injected 409s, 500s and timeouts on a third of the controller's writes: converges, no duplicates, no lost pods", async () => {
    const cluster = new SimCluster({
      seed: 9,
      nodes: [{ name: "gpu", count: 4, gpus: 8 }],
      timing: { scheduleSeconds: 1, pullSeconds: 5, startSeconds: 10, terminationSeconds: 2 },
    });
    for (const [error, numerator] of [
      ["Conflict", 1],
      ["ServerError", 1],
      ["Timeout", 1],
    ] as const) {
      cluster.server.faults.failWithChance({ client: "controller" }, numerator, 9, { error, stream: `chaos-${error}` });
    }
    const controller = new Controller({
      reader: cluster.reader(),
      writer: cluster.writer(),
      clock: cluster.clock.onEpoch(),
      recorder: cluster.recorder(),
      rng: cluster.rng("controller"),
    });
    controller.start();
    cluster.onSettle(() => controller.idle());
    const ms = modelServing();
    await cluster.writer("user").create({ ...ms, metadata: { name: "m", namespace: "default" } } as never);
    const up = await cluster.waitFor(
      () =>
        cluster.server
          .stored("Pod")
          .filter((pod) =>
            (pod.status?.["conditions"] as { type: string; status: string }[] | undefined)?.some(
              (c) => c.type === "Ready" && c.status === "True",
            ),
          ).length === 8,
      1_800_000,
    );
    await controller.stop();
    cluster.stop();
    assert.ok(up, "not every pod became Ready");
    assert.deepEqual(
      cluster.server
        .stored("Pod")
        .map((pod) => pod.metadata.name)
        .sort(),
      [...groupPods(0, 2), ...groupPods(1, 2)].sort(),
    );
    assert.equal(cluster.events().filter((event) => event.type === "PodCreated").length, 8, "no pod created twice");
  });

  it("a new update while surge instances of the last one serve (after a scale-up mid-rollout) keeps every budget (regression, seed 2)", async () => {
    const roles = (image: string) => [
      { name: "prefill", replicas: 2, entryTemplate: gpu("vllm:v1") },
      {
        name: "decode",
        replicas: 1,
        maxUnavailable: 0,
        maxSurge: 1,
        workerReplicas: 1,
        entryTemplate: gpu(image),
        workerTemplate: gpu(image),
      },
    ];
    const wait = (what: string) => ({ wait: { for: what, timeoutSeconds: 1200 } });
    const replicas = (count: number) => ({ patch: { name: "m", merge: { spec: { replicas: count } } } });
    const image = (tag: string) => ({ patch: { name: "m", merge: { spec: { template: { roles: roles(tag) } } } } });
    const spec = {
      replicas: 4,
      rolloutStrategy: { type: "RoleRollingUpdate", rollingUpdateConfiguration: { maxUnavailable: 1 } },
      template: { roles: roles("vllm:v1") },
    };
    // RolloutComplete is seen before the controller promotes the update revision, so the scale-up
    // to 5 lands mid-rollout: the new groups surge, and v3 arrives while those surge instances serve.
    const steps = [
      { apply: modelServing(spec) },
      wait("Available"),
      replicas(2),
      wait("Available"),
      image("vllm:v2"),
      wait("RolloutComplete"),
      replicas(5),
      wait("Available"),
      image("vllm:v3"),
      wait("RolloutComplete"),
    ];
    const parsed = parseScenario({
      name: "surge-across-updates",
      seed: 2,
      cluster: { nodes: [{ name: "gpu", count: 4, gpus: 8 }] },
      steps,
    });
    assert.ok(parsed.ok, JSON.stringify(parsed.ok ? [] : parsed.problems));
    const report = await runScenario(parsed.scenario);
    assert.deepEqual(
      report.invariants.filter((result) => result.violations > 0),
      [],
    );
    assert.equal(report.verdict, "pass");
  });

  it("more workers per decode instance and one more group in one update: every instance is rebuilt whole, once (regression: an endless rebuild, seeds 2-4)", async () => {
    const roles = (image: string, workers: number) => [
      { name: "prefill", replicas: 2, entryTemplate: gpu("vllm:v1") },
      {
        name: "decode",
        replicas: 1,
        maxUnavailable: 0,
        maxSurge: 1,
        workerReplicas: workers,
        entryTemplate: gpu(image),
        workerTemplate: gpu(image),
      },
    ];
    const spec = {
      replicas: 3,
      rolloutStrategy: { type: "RoleRollingUpdate", rollingUpdateConfiguration: { maxUnavailable: 1 } },
      template: { roles: roles("vllm:v1", 1) },
    };
    // The old instance's pods terminate at different times: pods created beside them started while
    // others were missing, which read as broken and was rebuilt, forever.
    const steps = [
      { apply: modelServing(spec) },
      { wait: { for: "Available", timeoutSeconds: 1200 } },
      { patch: { name: "m", merge: { spec: { replicas: 4, template: { roles: roles("vllm:v2", 2) } } } } },
      { wait: { for: "RolloutComplete", timeoutSeconds: 1200 } },
    ];
    for (const seed of [2, 3, 4]) {
      const parsed = parseScenario({
        name: "more-workers",
        seed,
        cluster: { nodes: [{ name: "gpu", count: 4, gpus: 8 }] },
        steps,
      });
      assert.ok(parsed.ok, JSON.stringify(parsed.ok ? [] : parsed.problems));
      const report = await runScenario(parsed.scenario);
      assert.equal(report.verdict, "pass", JSON.stringify(report.steps.filter((step) => !step.ok)));
      // Created at v1, then once at v2: never a third time.
      const creations = new Map<string, number>();
      for (const event of report.events)
        if (event.type === "PodCreated") creations.set(event.pod, (creations.get(event.pod) ?? 0) + 1);
      assert.deepEqual(
        [...creations].filter(([, count]) => count > 2),
        [],
        `seed ${seed}: pods created more than twice`,
      );
    }
  });
});
