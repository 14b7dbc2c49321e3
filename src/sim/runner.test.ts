import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import type { Action } from "../core/actions.ts";
import { plan as corePlan } from "../core/plan.ts";
import type { PlanFunction } from "../engine/reconciler.ts";
import type { SimCluster } from "./cluster.ts";
import { runScenario } from "./runner.ts";
import { parseScenario, parseScenarioText } from "./scenario.ts";
import type { Scenario, Step } from "./scenario.ts";

const SCENARIOS = join(import.meta.dirname, "../../deploy/examples/scenarios");

function load(file: string): Scenario {
  const result = parseScenarioText(readFileSync(join(SCENARIOS, file), "utf8"));
  if (!result.ok) throw new Error(JSON.stringify(result.problems));
  return result.scenario;
}

const container = (image: string) => ({
  spec: { containers: [{ name: "vllm", image, resources: { limits: { "nvidia.com/gpu": "1" } } }] },
});

/** Three single-role groups, budget one group at a time. */
function small(steps: unknown[], extra: Record<string, unknown> = {}): Scenario {
  const apply = {
    apply: {
      apiVersion: "tandem.dev/v1alpha1",
      kind: "ModelServing",
      metadata: { name: "m" },
      spec: {
        replicas: 3,
        drain: { timeoutSeconds: 0 },
        template: { roles: [{ name: "server", entryTemplate: container("vllm:v1") }] },
      },
    },
  };
  const result = parseScenario({
    name: "small",
    cluster: { nodes: [{ name: "gpu", count: 2, gpus: 4 }] },
    steps: [apply, { wait: { for: "Available", timeoutSeconds: 600 } }, ...steps],
    ...extra,
  });
  if (!result.ok) throw new Error(JSON.stringify(result.problems));
  return result.scenario;
}

const imagePatch = (image: string) => ({
  patch: { name: "m", merge: { spec: { template: { roles: [{ name: "server", entryTemplate: container(image) }] } } } },
});

describe("scenario runner", () => {
  it("gives a byte-identical report for the same scenario and seed, other timings for another seed", async () => {
    const scenario = load("pod-deletion.yaml");
    const first = JSON.stringify(await runScenario(scenario));
    const second = JSON.stringify(await runScenario(scenario));
    assert.equal(first, second);
    const other = await runScenario(scenario, { seed: 2 });
    assert.equal(other.seed, 2);
    assert.notDeepEqual(
      other.steps.map((step) => step.endedAt),
      (JSON.parse(first) as { steps: { endedAt: number }[] }).steps.map((step) => step.endedAt),
    );
  });

  it("shows the deleted decode pod's PodDeleted, then its replacement's PodCreated and PodReady, with times", async () => {
    const report = await runScenario(load("pod-deletion.yaml"));
    assert.equal(report.verdict, "pass", JSON.stringify(report.steps));
    const deletion = report.steps[3];
    assert.equal(deletion?.kind, "deletePods");
    const victim = /deleted (\S+)/.exec(deletion.message)?.[1] ?? "";
    assert.match(victim, /^llama-pd-\d-decode-0-0$/);
    const after = report.events.filter((event) => event.pod === victim && event.t >= deletion.startedAt);
    assert.deepEqual(
      after.map((event) => event.type),
      ["PodNotReady", "PodDeleted", "PodCreated", "PodReady"],
    );
    const times = after.map((event) => event.t);
    assert.deepEqual(
      [...times].sort((a, b) => a - b),
      times,
    );
    const readyAt = times.at(-1) ?? 0;
    const availableAt = report.steps[4]?.endedAt ?? 0;
    assert.ok(
      availableAt >= readyAt && availableAt - readyAt < 1,
      `Available (${availableAt}s) follows the replacement's Ready (${readyAt}s) once the controller has seen it`,
    );
    assert.equal(after[0]?.role, "decode");
    assert.deepEqual(report.metrics.podsDeleted, { total: 1, byRole: { decode: 1 } });
    // Prefill pods kept their UIDs.
    const uids = (label: string) =>
      (report.snapshots[label] ?? []).filter((pod) => pod.role === "prefill").map((pod) => pod.uid);
    assert.deepEqual(uids("after"), uids("before"));
    assert.deepEqual(Object.keys(report), [
      "scenario",
      "seed",
      "verdict",
      "simulatedSeconds",
      "steps",
      "invariants",
      "metrics",
      "snapshots",
      "final",
      "events",
      "controllerEvents",
    ]);
    assert.deepEqual(Object.keys(report.final.pods[0] ?? {}), [
      "name",
      "uid",
      "group",
      "role",
      "instance",
      "entry",
      "revision",
      "images",
      "node",
      "phase",
      "ready",
    ]);
  });

  it("passes every shipped scenario: node failure, partition canary with rollback included", async () => {
    for (const file of ["node-failure.yaml", "partition-canary.yaml"]) {
      const report = await runScenario(load(file));
      assert.equal(
        report.verdict,
        "pass",
        `${file}: ${JSON.stringify(report.steps.filter((step) => !step.ok))} ${JSON.stringify(report.invariants)}`,
      );
      if (file !== "partition-canary.yaml") continue;
      const images = (label: string) =>
        (report.snapshots[label] ?? []).map((pod) => `${pod.group ?? "?"}:${pod.images.join(",")}`);
      assert.deepEqual(images("canary"), ["0:vllm:v1", "1:vllm:v1", "2:vllm:v1", "3:vllm:v2"]);
      assert.deepEqual(
        images("canary-after-deletion"),
        ["0:vllm:v1", "1:vllm:v1", "2:vllm:v1", "3:vllm:v2"],
        "group 0 came back at its own revision",
      );
      assert.deepEqual(images("all-updated"), ["0:vllm:v2", "1:vllm:v2", "2:vllm:v2", "3:vllm:v2"]);
    }
  });

  it("replaces only decode instances in a decode image update and holds every invariant", async () => {
    const report = await runScenario(load("decode-image-update.yaml"));
    assert.equal(report.verdict, "pass", JSON.stringify(report.steps));
    const prefill = (label: string) =>
      (report.snapshots[label] ?? []).filter((pod) => pod.role === "prefill").map((pod) => `${pod.name}/${pod.uid}`);
    assert.deepEqual(prefill("after"), prefill("before"));
    const decodeImages = (report.snapshots["after"] ?? [])
      .filter((pod) => pod.role === "decode")
      .flatMap((pod) => pod.images);
    assert.deepEqual([...new Set(decodeImages)], ["vllm:v2"]);
    assert.ok(report.invariants.every((result) => result.violations === 0));
  });

  it("records per step, by role, the pods created and deleted and the legs ended; they add up to the run's totals, and the legs left are in flight", async () => {
    const { steps, ...scenario } = load("decode-update-under-traffic.yaml");
    const [route, servings, available, serving, , patch, , , complete] = steps;
    const crashAndRestart: Step[] = [
      { kind: "crashRouter", value: { replica: 0 } },
      { kind: "advance", value: { seconds: 5 } },
      { kind: "restartRouter", value: { replica: 0 } },
    ];
    const report = await runScenario({
      ...scenario,
      steps: [route, servings, available, serving, ...crashAndRestart, patch, complete].map(
        (step) => step ?? assert.fail("a step of the shipped scenario is missing"),
      ),
    });
    assert.equal(report.verdict, "pass");
    const requests = report.metrics.requests;
    assert.ok(requests !== undefined);
    for (const field of ["podsCreated", "podsDeleted"] as const) {
      const summed: Record<string, number> = {};
      for (const step of report.steps)
        for (const [role, count] of Object.entries(step[field])) summed[role] = (summed[role] ?? 0) + count;
      assert.deepEqual(summed, report.metrics[field].byRole, field);
    }
    for (const [role, counts] of Object.entries(requests.byRole)) {
      const summed = { ok: 0, failed: 0, cut: 0 };
      for (const step of report.steps)
        for (const key of ["ok", "failed", "cut"] as const) summed[key] += step.requests?.[role]?.[key] ?? 0;
      assert.deepEqual(summed, { ok: counts.ok, failed: counts.failed, cut: counts.cut }, role);
      assert.equal(counts.inFlight, counts.total - counts.ok - counts.failed - counts.cut, role);
    }
    assert.ok(requests.inFlight > 0, "requests of 8 s are in flight when the run ends");
    const crashed = report.steps.find((step) => step.kind === "crashRouter");
    assert.ok(
      crashed !== undefined &&
        Object.values(crashed.requests ?? {}).every((counts) => counts.ok === 0 && counts.cut > 0),
      "the crash cuts, on both roles, and nothing ends ok in its instant",
    );
    assert.deepEqual(report.steps[0], {
      index: 0,
      kind: "apply",
      ok: true,
      startedAt: 0,
      endedAt: 0,
      message: "created ModelRoute default/llama",
      podsCreated: {},
      podsDeleted: {},
      requests: {},
    });
  });

  it("with minReconcileIntervalMs, plans less often, holds every invariant, and is still byte-identical per seed", async () => {
    const counted =
      (calls: { count: number }): PlanFunction =>
      (observed, nowMs) => {
        calls.count++;
        return corePlan(observed, nowMs);
      };
    const every = { count: 0 };
    const coalesced = { count: 0 };
    const reference = await runScenario(load("decode-image-update.yaml"), { plan: counted(every) });
    const first = await runScenario(load("decode-image-update.yaml"), {
      plan: counted(coalesced),
      minReconcileIntervalMs: 1_000,
    });
    const second = await runScenario(load("decode-image-update.yaml"), { minReconcileIntervalMs: 1_000 });
    assert.equal(first.verdict, "pass", JSON.stringify(first.steps));
    assert.ok(first.invariants.every((result) => result.violations === 0));
    assert.equal(JSON.stringify(first), JSON.stringify(second));
    assert.equal(reference.verdict, "pass");
    assert.ok(coalesced.count < every.count, `${coalesced.count} plans coalesced, ${every.count} without`);
  });

  it("with chaos, fails the controller's requests and drops watches until untilStep, then nothing; the rollout completes; byte-identical per seed", async () => {
    const scenario = small([
      imagePatch("vllm:v2"),
      { advance: { seconds: 60 } },
      imagePatch("vllm:v3"),
      { advance: { seconds: 60 } },
      { wait: { for: "RolloutComplete", timeoutSeconds: 1800 } },
    ]);
    const chaos = { percent: 30, untilStep: 6 };
    const failed = new Map<number, number>();
    const drops: number[] = [];
    let step = -1;
    const observer = {
      attach(cluster: SimCluster) {
        const drop = cluster.server.dropWatches.bind(cluster.server);
        cluster.server.dropWatches = (kind) => {
          drops.push(step + 1);
          return drop(kind);
        };
        const faults = cluster.server.faults;
        const decide = faults.decide.bind(faults);
        faults.decide = (request) => {
          const effect = decide(request);
          if (effect !== undefined)
            failed.set(step, (failed.get(step) ?? 0) + (request.client === "controller" ? 1 : 1000));
          return effect;
        };
      },
      stepStarted(index: number) {
        step = index;
      },
    };
    const report = await runScenario(scenario, { chaos, observer });
    assert.equal(report.verdict, "pass", JSON.stringify(report.steps.filter((record) => !record.ok)));
    const before = [...failed].filter(([index]) => index < chaos.untilStep).reduce((sum, [, count]) => sum + count, 0);
    assert.ok(before > 0 && before < 1000, `${before}: only the controller's requests fail, and some do`);
    assert.deepEqual(
      [...failed].filter(([index]) => index >= chaos.untilStep),
      [],
      "nothing fails from untilStep on",
    );
    // Drops come before a step starts (the observer hears of the step after): steps 0..untilStep-1.
    assert.ok(
      drops.length > 0 && drops.every((index) => index < chaos.untilStep),
      `watches dropped before steps ${drops.join(", ")}`,
    );
    const again = await runScenario(scenario, { chaos });
    assert.equal(JSON.stringify(again), JSON.stringify(report));
    const calm = await runScenario(scenario);
    assert.notEqual(JSON.stringify(calm), JSON.stringify(report));
  });

  it("a controller restarted mid-rollout converges without duplicate pods", async () => {
    const report = await runScenario(
      small([
        imagePatch("vllm:v2"),
        { advance: { seconds: 50 } },
        { restartController: {} },
        { wait: { for: "RolloutComplete", timeoutSeconds: 900 } },
      ]),
    );
    assert.equal(report.verdict, "pass", JSON.stringify(report.steps));
    assert.equal(report.invariants.find((result) => result.name === "noDuplicatePods")?.violations, 0);
  });

  it("a restarted controller over a converged system writes nothing", async () => {
    const settled = [{ wait: { for: "Seconds", timeoutSeconds: 120 } }];
    const without = await runScenario(small([...settled, { advance: { seconds: 300 } }]));
    const withRestart = await runScenario(
      small([...settled, { restartController: {} }, { advance: { seconds: 300 } }]),
    );
    assert.equal(withRestart.verdict, "pass");
    assert.ok(without.metrics.apiWrites.total > 0);
    assert.deepEqual(withRestart.metrics.apiWrites, without.metrics.apiWrites);
    assert.ok(without.controllerEvents.length > 0);
    assert.deepEqual(
      withRestart.controllerEvents,
      without.controllerEvents,
      "nor records an Event (docs/design/events.md)",
    );
  });

  it("a wait that times out fails the run there, with what it was waiting for", async () => {
    const report = await runScenario(
      small(
        [imagePatch("vllm:bad"), { wait: { for: "RolloutComplete", timeoutSeconds: 300 } }, { snapshot: "never" }],
        { cluster: { nodes: [{ name: "gpu", count: 2, gpus: 4 }], images: { "vllm:bad": { crash: true } } } },
      ),
    );
    assert.equal(report.verdict, "fail");
    assert.equal(report.steps.length, 4, "the snapshot after the failed wait did not run");
    const wait = report.steps[3];
    assert.equal(wait?.ok, false);
    assert.equal(wait.endedAt - wait.startedAt, 300);
    assert.match(wait.message, /^RolloutComplete not reached after 300s: .*m: server-0 of group 2: not available/);
    assert.deepEqual(report.snapshots, {});
    assert.ok(
      report.invariants.every((result) => result.violations === 0),
      "a stuck rollout stays within its budget",
    );
  });

  it("the controller's clock shares the simulator's epoch: a crash-looping pod is recovered after its grace period", async () => {
    const report = await runScenario(
      small([imagePatch("vllm:bad"), { advance: { seconds: 300 } }], {
        cluster: { nodes: [{ name: "gpu", count: 2, gpus: 4 }], images: { "vllm:bad": { crash: true } } },
      }),
    );
    const bad = report.events.filter(
      (event) => event.pod === "m-2-server-0-0" && event.t > (report.steps[2]?.startedAt ?? 0),
    );
    const recreations = bad.filter((event) => event.type === "PodCreated").length;
    assert.ok(
      recreations >= 3,
      `the failed instance is rebuilt again and again (RoleRecreate), not left alone: ${JSON.stringify(bad)}`,
    );
    assert.match(JSON.stringify(report.final.status), /"lastTransitionTime":"2026-01-01T/);
  });

  it("rolls back to the previous revision through the rollout commands", async () => {
    const report = await runScenario(
      small([
        imagePatch("vllm:v2"),
        { wait: { for: "RolloutComplete", timeoutSeconds: 900 } },
        { rollback: { name: "m" } },
        { wait: { for: "RolloutComplete", timeoutSeconds: 900 } },
      ]),
    );
    assert.equal(report.verdict, "pass", JSON.stringify(report.steps));
    assert.match(report.steps[4]?.message ?? "", /back from m-\w+ to revision 1 \(m-\w+\)/);
    assert.deepEqual([...new Set(report.final.pods.flatMap((pod) => pod.images))], ["vllm:v1"]);
    assert.deepEqual(
      report.final.revisions.map((revision) => revision.revision),
      [2, 3],
      "re-using revision 1 advances its number",
    );
  });

  it("expect: passes while the counts and the stored condition hold; otherwise fails naming each difference", async () => {
    const cluster = {
      nodes: [{ name: "gpu", count: 2, gpus: 4 }],
      router: { requestsPerSecond: 5, requestSeconds: 1 },
    };
    const holds = {
      expect: {
        requests: { failed: 0, cut: 0, incompatible: 0 },
        podsCreated: { server: 3, total: 3 },
        podsDeleted: { total: 0 },
        condition: { type: "Available", status: "True" },
      },
    };
    const passed = await runScenario(small([{ advance: { seconds: 10 } }, holds], { cluster }));
    assert.equal(passed.verdict, "pass", JSON.stringify(passed.steps.at(-1)));
    assert.equal(passed.steps.at(-1)?.message, "as expected: requests, podsCreated, podsDeleted, condition");
    const differs = {
      expect: {
        podsCreated: { server: 4, prefill: 1 },
        podsDeleted: { server: 0 },
        condition: { type: "Available", status: "False", reason: "Nope" },
      },
    };
    const failed = await runScenario(small([differs, { advance: { seconds: 1 } }], { cluster }));
    assert.equal(failed.verdict, "fail");
    assert.equal(failed.steps.length, 3, "the run stops at the failed expect");
    assert.match(
      failed.steps.at(-1)?.message ?? "",
      /^expect failed: podsCreated\.server is 3, expected 4; podsCreated\.prefill is 0, expected 1; condition Available has status True, expected False; condition Available has reason \w+, expected Nope$/,
    );
    const missing = await runScenario(small([{ expect: { condition: { type: "Nonexistent" } } }]));
    assert.equal(
      missing.steps.at(-1)?.message,
      "expect failed: condition Nonexistent: not in the status of ModelServing default/m",
    );
  });

  it("validates router steps and fields: a replica that exists, requests only with traffic, replicas bounded", () => {
    const problems = (cluster: Record<string, unknown>, steps: unknown[]): string[] => {
      const parsed = parseScenario({ name: "s", cluster, steps });
      return parsed.ok ? [] : parsed.problems.map((found) => `${found.path}: ${found.reason}`);
    };
    const router = { requestsPerSecond: 1, requestSeconds: 1, replicas: 2 };
    assert.deepEqual(
      problems({ router }, [{ crashRouter: { replica: 2 } }, { restartRouter: { replica: 1 } }, { expect: {} }]),
      [
        "steps[2].expect: must name at least one of requests, podsCreated, podsDeleted, condition",
        "steps[0].crashRouter.replica: is 2, but cluster.router.replicas is 2: replicas are numbered 0..1",
      ],
    );
    assert.deepEqual(problems({}, [{ crashRouter: { replica: 0 } }, { expect: { requests: { cut: 0 } } }]), [
      "steps[0].crashRouter: needs cluster.router: there is no router replica to act on",
      "steps[1].expect.requests: needs cluster.router: without traffic there are no requests to count",
    ]);
    assert.deepEqual(problems({ router: { ...router, replicas: 17 } }, [{ advance: { seconds: 1 } }]), [
      "cluster.router.replicas: is 17; the simulator runs at most 16 router replicas",
    ]);
    assert.deepEqual(problems({ router: { ...router, replicas: 0 } }, [{ expect: { requests: { ok: 1 } } }]), [
      "cluster.router.replicas: must be 1 or more",
    ]);
  });

  it("fails steps that cannot act: unknown node, nothing to delete, an invalid patch, a patch beyond the pod limit", async () => {
    for (const [step, message] of [
      [{ failNode: { name: "gpu-9" } }, /^no node gpu-9; nodes are gpu-0, gpu-1$/],
      [{ deletePods: { selector: "tandem.dev/role=nobody" } }, /^no pod matches/],
      [
        { patch: { name: "m", merge: { spec: { replicas: -1 } } } },
        /^patch refused, the result is invalid: spec.replicas: must be 0 or more$/,
      ],
      [
        { patch: { name: "m", merge: { spec: { replicas: 20_000 } } } },
        /^patch refused: the result asks for 20000 pods \(replicas × the sum over roles of replicas × \(1 \+ workerReplicas\)\); the simulator runs at most 10000$/,
      ],
    ] as const) {
      const report = await runScenario(small([step]));
      assert.equal(report.verdict, "fail");
      assert.match(report.steps.at(-1)?.message ?? "", message);
    }
  });

  it("catches a controller that deletes a serving pod before its drain ends, and holds when it waits (drainHonoured)", async () => {
    const spec = {
      replicas: 2,
      drain: { timeoutSeconds: 60 },
      template: { roles: [{ name: "server", entryTemplate: container("vllm:v1") }] },
    };
    const apply = { apply: { apiVersion: "tandem.dev/v1alpha1", kind: "ModelServing", metadata: { name: "m" }, spec } };
    const steps = [
      apply,
      { wait: { for: "Available", timeoutSeconds: 600 } },
      imagePatch("vllm:v2"),
      { wait: { for: "RolloutComplete", timeoutSeconds: 1800 } },
    ];
    const parsed = parseScenario({
      name: "drain",
      cluster: { nodes: [{ name: "gpu", count: 2, gpus: 4 }], router: { requestsPerSecond: 20, requestSeconds: 4 } },
      steps,
    });
    assert.ok(parsed.ok);
    // Shown drain.timeoutSeconds 0, the controller deletes each pod in the plan that marks it.
    const hasty: PlanFunction = (observed, nowMs) => {
      const stored = observed.modelServing as { spec: Record<string, unknown> };
      return corePlan(
        { ...observed, modelServing: { ...stored, spec: { ...stored.spec, drain: { timeoutSeconds: 0 } } } },
        nowMs,
      );
    };
    const caught = await runScenario(parsed.scenario, { plan: hasty });
    const drain = caught.invariants.find((result) => result.name === "drainHonoured");
    assert.equal(caught.verdict, "fail");
    assert.ok((drain?.violations ?? 0) >= 1);
    assert.match(
      drain?.first?.message ?? "",
      /^m-\d-server-0-0 deleted [\d.]+s before its drain timed out \(marked [\dTZ:.-]+, drain.timeoutSeconds 60\): (router\(s\) router-0 had not confirmed|[\d.]+s after the mark, within the 2s settle)$/,
    );
    const honoured = await runScenario(parsed.scenario);
    assert.equal(honoured.verdict, "pass", JSON.stringify(honoured.steps.filter((step) => !step.ok)));
    assert.equal(honoured.metrics.requests?.cut, 0, "drained pods are deleted with no request on them");
  });

  it("catches a controller that moves units while the rollout is paused (pauseHolds)", async () => {
    // Shown the spec unpaused, the controller carries the rollout on.
    const unpausing: PlanFunction = (observed, nowMs) => {
      const stored = observed.modelServing as { spec: { rolloutStrategy?: Record<string, unknown> } };
      return corePlan(
        {
          ...observed,
          modelServing: {
            ...stored,
            spec: { ...stored.spec, rolloutStrategy: { ...stored.spec.rolloutStrategy, paused: false } },
          },
        },
        nowMs,
      );
    };
    const pause = { patch: { name: "m", merge: { spec: { rolloutStrategy: { paused: true } } } } };
    const scenario = small([pause, { advance: { seconds: 5 } }, imagePatch("vllm:v2"), { advance: { seconds: 300 } }]);
    const caught = await runScenario(scenario, { plan: unpausing });
    const paused = caught.invariants.find((result) => result.name === "pauseHolds");
    assert.ok((paused?.violations ?? 0) >= 1);
    assert.match(
      paused?.first?.message ?? "",
      /^m \d\/server-0#0 moved while the rollout is paused: it may run role hash \w+, now \w+$/,
    );
    const held = await runScenario(scenario);
    assert.equal(held.verdict, "pass", JSON.stringify(held.invariants.filter((result) => result.violations > 0)));
    assert.deepEqual([...new Set(held.final.pods.flatMap((pod) => pod.images))], ["vllm:v1"]);
  });

  it("catches a status that says Converged while pods differ from the spec, or a unit stays beyond the bound (convergedMatchesPods, settledWithinBound)", async () => {
    // Every status this controller writes says Converged; it never deletes a pod.
    const liar: PlanFunction = (observed, nowMs) => {
      const planned = corePlan(observed, nowMs);
      const converged = {
        type: "Progressing",
        status: "False" as const,
        reason: "Converged",
        message: "Nothing to do",
        observedGeneration:
          (observed.modelServing as { metadata?: { generation?: number } } | undefined)?.metadata?.generation ?? 0,
        lastTransitionTime: "2026-01-01T00:00:00Z",
      };
      const actions = planned.actions
        .filter((action) => action.type !== "DeletePod")
        .map((action) =>
          action.type === "WriteStatus"
            ? {
                ...action,
                status: {
                  ...action.status,
                  conditions: [
                    ...(action.status.conditions ?? []).filter((condition) => condition.type !== "Progressing"),
                    converged,
                  ],
                },
              }
            : action,
        );
      return { ...planned, actions };
    };
    const scaleDown = { patch: { name: "m", merge: { spec: { replicas: 2 } } } };
    const extra = await runScenario(
      small([{ wait: { for: "Available", timeoutSeconds: 600 } }, scaleDown, { advance: { seconds: 120 } }]),
      { plan: liar },
    );
    const bound = extra.invariants.find((result) => result.name === "settledWithinBound");
    assert.ok((bound?.violations ?? 0) >= 1);
    assert.match(
      bound?.first?.message ?? "",
      /^m: surge or extra pod m-2-server-0-0 is still there, while condition Progressing says Converged$/,
    );
    const stale = await runScenario(
      small([
        { wait: { for: "Available", timeoutSeconds: 600 } },
        imagePatch("vllm:v2"),
        { advance: { seconds: 120 } },
      ]),
      { plan: liar },
    );
    const converged = stale.invariants.find((result) => result.name === "convergedMatchesPods");
    assert.ok((converged?.violations ?? 0) >= 1);
    assert.match(
      converged?.first?.message ?? "",
      /^m: server-0 of group \d: .*, while condition Progressing says Converged$/,
    );
  });

  it("catches a plan that ignores the rollout budget", async () => {
    // Every pod of an outdated revision is deleted at once as soon as a rollout starts.
    const reckless: PlanFunction = (observed, nowMs) => {
      const planned = corePlan(observed, nowMs);
      const status = (observed.modelServing as { status?: { currentRevision?: string; updateRevision?: string } })
        .status;
      if (status?.currentRevision === undefined || status.currentRevision === status.updateRevision) return planned;
      const deletions: Action[] = observed.pods
        .filter(
          (pod) =>
            pod.metadata.deletionTimestamp === undefined &&
            pod.metadata.labels?.["tandem.dev/revision"] === status.currentRevision,
        )
        .map((pod) => ({ type: "DeletePod", name: pod.metadata.name, uid: pod.metadata.uid ?? "", reason: "Update" }));
      return { ...planned, actions: [...planned.actions, ...deletions] };
    };
    const report = await runScenario(
      small([imagePatch("vllm:v2"), { wait: { for: "RolloutComplete", timeoutSeconds: 900 } }]),
      { plan: reckless },
    );
    assert.equal(report.verdict, "fail");
    const budget = report.invariants.find((result) => result.name === "groupBudget");
    assert.ok((budget?.violations ?? 0) > 0);
    assert.match(
      budget?.first?.message ?? "",
      /^m: [23] ServingGroup\(s\) unavailable \(groups .*\) with maxUnavailable 1$/,
    );
  });

  it("does not charge the rollout with a pod deleted in the instant a scale-down leaves only a doomed instance standing in for it", async () => {
    // Regression (test/fuzz-regressions/pod-deleted-during-scale-down.json): the controller sees the
    // patch (3 → 2 instances, new image) before the deletion of server-0 in group 0 and moves group
    // 2; group 0 looked available only through server-2, beyond the new count, and the fault window
    // closed in the instant it opened.
    const server = (image: string, replicas: number) => ({ name: "server", replicas, entryTemplate: container(image) });
    const result = parseScenario({
      name: "deleted-during-scale-down",
      cluster: {
        nodes: [{ name: "gpu", count: 5, gpus: 4 }],
        timing: { scheduleSeconds: 1, pullSeconds: 10, startSeconds: 5, terminationSeconds: 5 },
      },
      steps: [
        {
          apply: {
            apiVersion: "tandem.dev/v1alpha1",
            kind: "ModelServing",
            metadata: { name: "m" },
            spec: { replicas: 3, drain: { timeoutSeconds: 5 }, template: { roles: [server("vllm:v1", 3)] } },
          },
        },
        { wait: { for: "Available", timeoutSeconds: 600 } },
        { deletePods: { selector: "tandem.dev/group=0", count: 1 } },
        { patch: { name: "m", merge: { spec: { template: { roles: [server("vllm:v2", 2)] } } } } },
        { wait: { for: "RolloutComplete", timeoutSeconds: 900 } },
      ],
    });
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    const report = await runScenario(result.scenario);
    assert.deepEqual(
      report.invariants.filter((invariant) => invariant.violations > 0),
      [],
    );
    assert.equal(report.verdict, "pass", JSON.stringify(report.steps.at(-1)));
  });

  it("does not charge the rollout with the group rebuilt for a deleted pod of a surge instance while every group still looked available", async () => {
    // Regression (fuzz-faults-coordinated-235): under ServingGroupRecreate the deletion of a started
    // surge decode's entry pod breaks that instance, and the controller rebuilds the whole group a
    // lag later; the old decode still served, so the fault window closed in the instant it opened
    // and the rebuild (both prefill instances down) was charged to the rollout's role budget.
    const roles = (image: string) => [
      { name: "prefill", replicas: 2, entryTemplate: container("p:v1") },
      {
        name: "decode",
        replicas: 1,
        maxSurge: 1,
        maxUnavailable: 0,
        workerReplicas: 1,
        entryTemplate: container(image),
        workerTemplate: container(`${image}-w`),
      },
    ];
    const result = parseScenario({
      name: "surge-pod-deleted-group-rebuilt",
      cluster: {
        nodes: [{ name: "gpu", count: 2, gpus: 4 }],
        timing: { scheduleSeconds: 1, pullSeconds: 10, startSeconds: 5, terminationSeconds: 5 },
      },
      steps: [
        {
          apply: {
            apiVersion: "tandem.dev/v1alpha1",
            kind: "ModelServing",
            metadata: { name: "m" },
            spec: {
              replicas: 1,
              recoveryPolicy: "ServingGroupRecreate",
              drain: { timeoutSeconds: 5 },
              rolloutStrategy: { type: "RoleRollingUpdate" },
              template: { roles: roles("d:v1") },
            },
          },
        },
        { wait: { for: "Available", timeoutSeconds: 600 } },
        { patch: { name: "m", merge: { spec: { template: { roles: roles("d:v2") } } } } },
        // The surge decode-1 runs (pulled) but is not Ready yet.
        { wait: { for: "Seconds", timeoutSeconds: 13 } },
        { deletePods: { selector: "tandem.dev/instance=decode-1,tandem.dev/entry=true", count: 1 } },
        { wait: { for: "RolloutComplete", timeoutSeconds: 900 } },
      ],
    });
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    const report = await runScenario(result.scenario);
    assert.deepEqual(
      report.invariants.filter((invariant) => invariant.violations > 0),
      [],
    );
    assert.equal(report.verdict, "pass", JSON.stringify(report.steps.at(-1)));
  });

  it("deletePods with groupPosition deletes a pod of the group at that position, whatever ordinal it carries after a succession (fuzz-faults-910001)", async () => {
    const roles = [{ name: "server", entryTemplate: container("vllm:v2") }];
    const surge = { type: "ServingGroupRollingUpdate", rollingUpdateConfiguration: { maxUnavailable: 0, maxSurge: 1 } };
    const report = await runScenario(
      small([
        { patch: { name: "m", merge: { spec: { rolloutStrategy: surge, template: { roles } } } } },
        { wait: { for: "RolloutComplete", timeoutSeconds: 600 } },
        { deletePods: { selector: "tandem.dev/modelserving=m", groupPosition: 0 } },
        { deletePods: { selector: "tandem.dev/modelserving=m", groupPosition: 3 } },
      ]),
    );
    const ordinals = (report.final.status as { ordinals?: { group: number; role?: string; ordinal: number }[] })
      .ordinals;
    const first = ordinals?.find((entry) => entry.group === 0 && entry.role === undefined)?.ordinal;
    assert.ok(
      first !== undefined && first !== 0,
      `a surge group succeeded group position 0: ${JSON.stringify(ordinals)}`,
    );
    assert.deepEqual(
      report.steps.slice(4).map((step) => [step.ok, step.message]),
      [
        [true, `deleted m-${first}-server-0-0`],
        [false, 'no pod matches "tandem.dev/modelserving=m" in group position 3 (not already being deleted)'],
      ],
    );
  });

  it("catches a plan that builds pods unlike their revision", async () => {
    // Every pod is created with an image its revision does not declare.
    const rogue: PlanFunction = (observed, nowMs) => {
      const planned = corePlan(observed, nowMs);
      const actions = planned.actions.map((action): Action => {
        if (action.type !== "CreatePod") return action;
        const containers = action.pod.spec.containers.map((container) => ({ ...container, image: "vllm:rogue" }));
        return { ...action, pod: { ...action.pod, spec: { ...action.pod.spec, containers } } };
      });
      return { ...planned, actions };
    };
    const report = await runScenario(small([]), { plan: rogue });
    assert.equal(report.verdict, "fail");
    const specs = report.invariants.find((result) => result.name === "podsMatchTheirRevision");
    assert.ok((specs?.violations ?? 0) > 0);
    assert.match(specs?.first?.message ?? "", /^pod m-\d+-server-0-0: spec differs from what revision m-\w+ builds$/);
  });

  it(
    // Regression (seeds 1-3): the surge group used to keep the only free GPU the last outdated
    // group's replacement needed, so the rollout never completed.
    "finishes a surge rollout on a full cluster once maxUnavailable allows it",
    async () => {
      const server = (image: string) => ({ name: "server", replicas: 1, entryTemplate: container(image) });
      const result = parseScenario({
        name: "surge-tight",
        cluster: { nodes: [{ name: "gpu", count: 3, gpus: 1 }] },
        steps: [
          {
            apply: {
              apiVersion: "tandem.dev/v1alpha1",
              kind: "ModelServing",
              metadata: { name: "m" },
              spec: {
                replicas: 3,
                drain: { timeoutSeconds: 0 },
                rolloutStrategy: { rollingUpdateConfiguration: { maxUnavailable: 0, maxSurge: 1 } },
                template: { roles: [server("vllm:v1")] },
              },
            },
          },
          { wait: { for: "Available", timeoutSeconds: 600 } },
          { patch: { name: "m", merge: { spec: { template: { roles: [server("vllm:v2")] } } } } },
          { advance: { seconds: 600 } },
          {
            patch: {
              name: "m",
              merge: { spec: { rolloutStrategy: { rollingUpdateConfiguration: { maxUnavailable: 1, maxSurge: 1 } } } },
            },
          },
          { wait: { for: "RolloutComplete", timeoutSeconds: 1200 } },
        ],
      });
      if (!result.ok) throw new Error(JSON.stringify(result.problems));
      const report = await runScenario(result.scenario);
      assert.equal(report.verdict, "pass", JSON.stringify(report.steps.at(-1)));
    },
  );
});

describe("scenario runner: restart and recreate steps", () => {
  it("restart rolls a new revision out to every pod; recreate rebuilds one group once; a bad group names the field", async () => {
    const report = await runScenario(
      small([
        { restart: { name: "m" } },
        { wait: { for: "RolloutComplete", timeoutSeconds: 900 } },
        { expect: { podsCreated: { total: 6 }, podsDeleted: { total: 3 } } },
        { recreate: { name: "m", group: 2 } },
        { wait: { for: "RolloutComplete", timeoutSeconds: 900 } },
        { expect: { podsCreated: { total: 7 }, podsDeleted: { total: 4 } } },
        { recreate: { name: "m", group: 3 } },
      ]),
    );
    assert.deepEqual(
      report.steps.map((step) => [step.kind, step.ok]),
      [
        ["apply", true],
        ["wait", true],
        ["restart", true],
        ["wait", true],
        ["expect", true],
        ["recreate", true],
        ["wait", true],
        ["expect", true],
        ["recreate", false],
      ],
      JSON.stringify(report.steps),
    );
    assert.match(
      report.steps[2]?.message ?? "",
      /every pod template carries tandem\.dev\/restartedAt=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ/,
    );
    assert.equal(
      report.steps[8]?.message,
      "recreate.group: ModelServing default/m: there is no ServingGroup 3: its ServingGroups are 0..2",
    );
    assert.equal(
      report.invariants.every((result) => result.violations === 0),
      true,
      JSON.stringify(report.invariants),
    );
  });
});
