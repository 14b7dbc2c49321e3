/**
 * The drain handshake across controller restarts (issue 19's acceptance: "a controller restart at
 * any point of a drain converges with no lost confirmation and no extra deletion"), in the
 * simulated cluster: a rolling update drained through the simulated router (its Lease registered,
 * its confirmations per router id), with the controller restarted at instants spread over the
 * rollout — just before and after every instant the uninterrupted rollout writes at, and at
 * instants fast-check picks. Every run must pass with every invariant held (drainHonoured among
 * them: no entry disrupted before the settle and the live router's confirmation), cut no request,
 * delete each old pod once, and never wait out a drain's timeout (a lost confirmation would).
 *
 * Also: with no router registered a drained rollout takes the drain-free time plus at most the
 * settle per step; and drainHonoured catches a controller blind to the routers.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { plan as corePlan } from "../src/core/plan.ts";
import type { PlanFunction } from "../src/engine/reconciler.ts";
import type { Report } from "../src/sim/report.ts";
import { runScenario } from "../src/sim/runner.ts";
import { parseScenario } from "../src/sim/scenario.ts";

const container = (image: string) => ({
  spec: { containers: [{ name: "vllm", image, resources: { limits: { "nvidia.com/gpu": "1" } } }] },
});
const modelServing = {
  apiVersion: "tandem.dev/v1alpha1",
  kind: "ModelServing",
  metadata: { name: "m" },
  spec: {
    replicas: 2,
    drain: { timeoutSeconds: 120 },
    template: { roles: [{ name: "server", entryTemplate: container("vllm:v1") }] },
  },
};
const update = {
  patch: {
    name: "m",
    merge: { spec: { template: { roles: [{ name: "server", entryTemplate: container("vllm:v2") }] } } },
  },
};
const timing = { scheduleSeconds: 1, pullSeconds: 5, startSeconds: 10, terminationSeconds: 2 };

/** The rollout, with the controller restarted `restartAfterMs` after the update (none when undefined). */
function scenario(restartAfterMs: number | undefined) {
  const restart =
    restartAfterMs === undefined ? [] : [{ advance: { seconds: restartAfterMs / 1000 } }, { restartController: {} }];
  const parsed = parseScenario({
    name: "drain-restart",
    seed: 5,
    cluster: {
      nodes: [{ name: "gpu", count: 2, gpus: 4 }],
      timing,
      router: { requestsPerSecond: 20, requestSeconds: 4 },
    },
    steps: [
      { apply: modelServing },
      { wait: { for: "Available", timeoutSeconds: 600 } },
      update,
      ...restart,
      { wait: { for: "RolloutComplete", timeoutSeconds: 1800 } },
      { advance: { seconds: 30 } },
    ],
  });
  assert.ok(parsed.ok, JSON.stringify(parsed.ok ? [] : parsed.problems));
  return parsed.scenario;
}

function assertConverged(report: Report, label: string, deleted: number): void {
  assert.equal(report.verdict, "pass", `${label}: ${JSON.stringify(report.steps.filter((step) => !step.ok))}`);
  assert.deepEqual(
    report.invariants.filter((invariant) => invariant.violations > 0),
    [],
    label,
  );
  assert.equal(report.metrics.requests?.cut, 0, `${label}: no request cut`);
  assert.equal(report.metrics.podsDeleted.total, deleted, `${label}: each old pod deleted once`);
  assert.deepEqual(
    report.controllerEvents.filter((event) => event.reason === "DrainTimeout").map((event) => event.message),
    [],
    `${label}: no drain waited out its timeout`,
  );
}

describe("the drain handshake across a controller restart at any instant", () => {
  it("converges with no lost confirmation and no extra deletion", async () => {
    // The instants (ms after the update reached the controller) at which the uninterrupted rollout writes.
    const instants: number[] = [];
    let updatedAtMs: number | undefined;
    const recording: PlanFunction = (observed, nowMs) => {
      const planned = corePlan(observed, nowMs);
      const generation = (observed.modelServing as { metadata?: { generation?: number } }).metadata?.generation ?? 0;
      if (generation > 1) updatedAtMs ??= nowMs;
      if (updatedAtMs !== undefined && planned.actions.length > 0) instants.push(nowMs - updatedAtMs);
      return planned;
    };
    const baseline = await runScenario(scenario(undefined), { plan: recording });
    assertConverged(baseline, "no restart", 2);
    const confirmed = baseline.controllerEvents.filter((event) => event.reason === "DrainConfirmed");
    assert.equal(confirmed.length, 2, "each group's drain confirmed by the router");
    assert.ok(confirmed.every((event) => event.message.includes("router(s) router-0 confirmed")));
    const distinct = [...new Set(instants)].sort((a, b) => a - b);
    assert.ok(distinct.length >= 4, `the rollout writes at several instants: ${distinct.join(", ")}`);
    // The update reached the controller one informer lag after it was made.
    const lagMs = 100;
    const around = [...new Set(distinct.flatMap((ms) => [ms + lagMs - 1, ms + lagMs + 1]))];
    for (const ms of around) assertConverged(await runScenario(scenario(ms)), `restart ${ms} ms after the update`, 2);
    const lastMs = (distinct.at(-1) ?? 0) + lagMs;
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: lastMs }), async (ms) => {
        assertConverged(await runScenario(scenario(ms)), `restart ${ms} ms after the update`, 2);
      }),
      { numRuns: 8, seed: 19 },
    );
  });
});

describe("with no router registered", () => {
  /** Seconds from the update to RolloutComplete, at `timeoutSeconds` of drain, no router. */
  async function rolloutSeconds(timeoutSeconds: number): Promise<{ seconds: number; report: Report }> {
    const spec = { ...modelServing.spec, drain: { timeoutSeconds } };
    const parsed = parseScenario({
      name: "drain-no-router",
      seed: 5,
      cluster: { nodes: [{ name: "gpu", count: 2, gpus: 4 }], timing },
      steps: [
        { apply: { ...modelServing, spec } },
        { wait: { for: "Available", timeoutSeconds: 600 } },
        update,
        { wait: { for: "RolloutComplete", timeoutSeconds: 1800 } },
      ],
    });
    assert.ok(parsed.ok);
    const report = await runScenario(parsed.scenario);
    assert.equal(report.verdict, "pass", JSON.stringify(report.steps.filter((step) => !step.ok)));
    const wait = report.steps.at(-1);
    return { seconds: (wait?.endedAt ?? 0) - (wait?.startedAt ?? 0), report };
  }

  it("a rollout takes the drain-free time plus at most the 2 s settle per step, not the drain timeout", async () => {
    const free = await rolloutSeconds(0);
    const drained = await rolloutSeconds(600);
    const steps = drained.report.controllerEvents.filter((event) => event.reason === "DrainConfirmed").length;
    assert.equal(steps, 2, "each of the two groups drained once");
    assert.ok(drained.seconds >= free.seconds, `${drained.seconds} s with the drain, ${free.seconds} s without`);
    assert.ok(
      drained.seconds <= free.seconds + steps * 2 + 1,
      `${drained.seconds} s with the drain, ${free.seconds} s without: at most the settle per step (and a second of rounding)`,
    );
  });
});

describe("drainHonoured judges the routers from their Leases", () => {
  it("catches a controller that does not wait for a live router's confirmation", async () => {
    // Blind to the routers, the controller waits only the settle.
    const blind: PlanFunction = (observed, nowMs) => corePlan({ ...observed, routers: [] }, nowMs);
    const report = await runScenario(scenario(undefined), { plan: blind });
    const drain = report.invariants.find((invariant) => invariant.name === "drainHonoured");
    assert.equal(report.verdict, "fail");
    assert.match(
      drain?.first?.message ?? "",
      /^m-\d-server-0-0 deleted [\d.]+s before its drain timed out \(marked [\dTZ:.-]+, drain.timeoutSeconds 120\): router\(s\) router-0 had not confirmed$/,
    );
  });
});
