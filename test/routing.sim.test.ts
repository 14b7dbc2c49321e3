/**
 * Scenario tests of the simulated traffic through the router's own decisions (DESIGN §6, §7;
 * issue 19): prefill/decode pairing in a RoleRollingUpdate that changes both roles' KV format,
 * router replicas with their own caches and Leases, a replica crashed and restarted mid-rollout.
 *
 * One acceptance test (no router → no drain wait) needs the controller to wait for every live
 * router's confirmation (DESIGN §3.5); until it does (it waits for the single
 * `tandem.dev/drained`), it is skipped with that reason.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Report } from "../src/sim/report.ts";
import type { RouterEvent } from "../src/sim/router.ts";
import { runScenario } from "../src/sim/runner.ts";
import { parseScenario } from "../src/sim/scenario.ts";

type Pairing = "SameGroup" | "SameRevision";

/** A role whose engine produces and accepts KV format `kv` (its image is named after it). */
function role(name: string, kv: string, gpus: number): Record<string, unknown> {
  return {
    name,
    replicas: 2,
    entryTemplate: {
      spec: {
        containers: [
          {
            name: "vllm",
            image: `vllm:${kv}`,
            env: [{ name: "KV_FORMAT", value: kv }],
            resources: { limits: { "nvidia.com/gpu": String(gpus) } },
          },
        ],
      },
    },
  };
}

const roles = (kv: string): Record<string, unknown>[] => [role("prefill", kv, 2), role("decode", kv, 2)];

interface Options {
  readonly pairing: Pairing;
  readonly replicas: number;
  readonly seed?: number;
  /** Steps run between the patch and the wait for RolloutComplete. */
  readonly midRollout?: readonly Record<string, unknown>[];
  readonly drainSeconds?: number;
}

/**
 * Two ServingGroups of 2 prefill + 2 decode (vLLM NIXL through ModelRoute "llama"), then a
 * RoleRollingUpdate changing both roles' KV format from v1 to v2, under 20 requests/s of 4 s.
 */
function pdRollout(options: Options): Parameters<typeof runScenario>[0] {
  const spec = {
    replicas: 2,
    drain: { timeoutSeconds: options.drainSeconds ?? 60 },
    rolloutStrategy: { type: "RoleRollingUpdate", rollingUpdateConfiguration: { maxUnavailable: 1 } },
    template: { roles: roles("v1") },
  };
  const route = {
    model: "llama",
    modelServing: "m",
    engine: "vllm",
    roles: { prefill: "prefill", decode: "decode" },
    pairing: options.pairing,
  };
  const applyRoute = {
    apply: { apiVersion: "tandem.dev/v1alpha1", kind: "ModelRoute", metadata: { name: "llama" }, spec: route },
  };
  const steps = [applyRoute, ...rolloutSteps(spec, roles("v2"), options.midRollout), { advance: { seconds: 30 } }];
  const cluster = {
    nodes: [{ name: "gpu", count: 4, gpus: 8 }],
    timing: { scheduleSeconds: 1, pullSeconds: 5, startSeconds: 10, terminationSeconds: 2 },
    router: { requestsPerSecond: 20, requestSeconds: 4, replicas: options.replicas },
  };
  return scenarioOf({ name: `pd-${options.pairing}`, seed: options.seed ?? 1, cluster, steps });
}

/**
 * Four ServingGroups of one aggregated decode instance (the implicit route), a decode image update
 * group by group, under 30 requests/s of 4 s through `replicas` router replicas (0: no router).
 */
function decodeRollout(options: {
  seed: number;
  replicas: number;
  drainSeconds?: number;
  midRollout?: readonly Record<string, unknown>[];
}): Parameters<typeof runScenario>[0] {
  const decode = (image: string) => [
    {
      name: "decode",
      replicas: 1,
      entryTemplate: {
        spec: { containers: [{ name: "vllm", image, resources: { limits: { "nvidia.com/gpu": "4" } } }] },
      },
    },
  ];
  const spec = {
    replicas: 4,
    drain: { timeoutSeconds: options.drainSeconds ?? 120 },
    rolloutStrategy: { type: "RoleRollingUpdate", rollingUpdateConfiguration: { maxUnavailable: 1 } },
    template: { roles: decode("vllm:v1") },
  };
  const steps = rolloutSteps(spec, decode("vllm:v2"), options.midRollout);
  const router =
    options.replicas === 0 ? {} : { router: { requestsPerSecond: 30, requestSeconds: 4, replicas: options.replicas } };
  const cluster = {
    nodes: [{ name: "gpu", count: 3, gpus: 8 }],
    timing: { scheduleSeconds: 1, pullSeconds: 5, startSeconds: 10, terminationSeconds: 2 },
    ...router,
  };
  return scenarioOf({ name: "decode-rollout", seed: options.seed, cluster, steps });
}

/** ModelServing "m" with `spec` until Available, 30 s of traffic, a patch to `roles`, `midRollout`, RolloutComplete. */
function rolloutSteps(
  spec: Record<string, unknown>,
  roles: readonly Record<string, unknown>[],
  midRollout: readonly Record<string, unknown>[] = [],
): Record<string, unknown>[] {
  return [
    { apply: { apiVersion: "tandem.dev/v1alpha1", kind: "ModelServing", metadata: { name: "m" }, spec } },
    { wait: { for: "Available", timeoutSeconds: 600 } },
    { advance: { seconds: 30 } },
    { patch: { name: "m", merge: { spec: { template: { roles } } } } },
    ...midRollout,
    { wait: { for: "RolloutComplete", timeoutSeconds: 1800 } },
  ];
}

function scenarioOf(raw: unknown): Parameters<typeof runScenario>[0] {
  const parsed = parseScenario(raw);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
  return parsed.scenario;
}

/** Runs `scenario`, collecting the router's events. */
async function run(scenario: Parameters<typeof runScenario>[0]): Promise<{ report: Report; events: RouterEvent[] }> {
  const events: RouterEvent[] = [];
  const report = await runScenario(scenario, {
    observer: {
      attach: (_cluster, router) => {
        router?.subscribe((event) => events.push(event));
      },
    },
  });
  return { report, events };
}

function requests(report: Report): NonNullable<Report["metrics"]["requests"]> {
  const counted = report.metrics.requests;
  assert.ok(counted !== undefined, "the scenario has traffic");
  return counted;
}

describe("routing: prefill/decode pairing through a RoleRollingUpdate of both KV formats", () => {
  it("SameRevision pairs new with new and old with old: 0 incompatible, 0 failed, every leg counted on its role", async () => {
    for (const replicas of [1, 3]) {
      const { report } = await run(pdRollout({ pairing: "SameRevision", replicas }));
      assert.equal(report.verdict, "pass", JSON.stringify(report.steps.filter((step) => !step.ok)));
      const counted = requests(report);
      assert.equal(counted.incompatible, 0);
      assert.equal(counted.failed, 0);
      const prefill = counted.byRole["prefill"]?.total ?? 0;
      const decode = counted.byRole["decode"]?.total ?? 0;
      assert.ok(
        decode > 2000 && prefill >= decode && prefill - decode < 20,
        `one prefill and one decode leg per request: ${prefill}, ${decode}`,
      );
    }
  });

  it("SameGroup pairs an updated prefill with an old decode of its group: the decode refuses, the request fails as incompatible", async () => {
    const { report, events } = await run(pdRollout({ pairing: "SameGroup", replicas: 1 }));
    const counted = requests(report);
    assert.ok(counted.incompatible > 0, JSON.stringify(counted));
    assert.equal(counted.byRole["decode"]?.failed, counted.incompatible, "every failure is a refused decode");
    assert.ok(
      events
        .filter((event) => event.type === "RequestFailed")
        .every((event) => /^kv format mismatch: prefill v[12], decode v[12]$/.test(event.reason ?? "")),
    );
  });
});

describe("routing: router replicas", () => {
  it("3 replicas, one crashed and restarted mid-rollout: its requests in flight are cut, the others route on, the rollout completes", async () => {
    const midRollout = [
      { advance: { seconds: 5 } },
      { crashRouter: { replica: 1 } },
      { advance: { seconds: 20 } },
      { restartRouter: { replica: 1 } },
    ];
    const { report, events } = await run(pdRollout({ pairing: "SameRevision", replicas: 3, midRollout }));
    assert.equal(report.verdict, "pass", JSON.stringify(report.steps.filter((step) => !step.ok)));
    const crash = report.steps.find((step) => step.kind === "crashRouter");
    const restart = report.steps.find((step) => step.kind === "restartRouter");
    assert.ok(crash !== undefined && restart !== undefined);
    assert.match(crash.message, /^router replica router-1 crashed/);
    const crashMs = crash.startedAt * 1000;
    const cutAtCrash = events.filter((event) => event.type === "RequestCut" && event.atMs === crashMs);
    assert.ok(
      cutAtCrash.length > 0 && cutAtCrash.every((event) => event.replica === "router-1"),
      "the crash cuts router-1's requests, only those",
    );
    const whileDown = events.filter(
      (event) => event.atMs > crashMs && event.atMs < restart.startedAt * 1000 && event.type === "RequestStarted",
    );
    assert.ok(whileDown.length > 0 && whileDown.every((event) => event.replica !== "router-1"));
    assert.ok(
      events.some(
        (event) =>
          event.type === "RequestStarted" && event.replica === "router-1" && event.atMs > restart.startedAt * 1000,
      ),
      "routes again after its restart",
    );
    assert.equal(requests(report).incompatible, 0);
    assert.equal(requests(report).failed, 0);
  });

  it("20 seeds of a decode rollout with 3 replicas, one restarted cleanly mid-drain: nothing fails, nothing is cut, no drain times out", async () => {
    const midRollout = [{ advance: { seconds: 1 } }, { restartRouter: { replica: 1 } }];
    for (let seed = 1; seed <= 20; seed++) {
      const { report } = await run(decodeRollout({ seed, replicas: 3, midRollout }));
      assert.equal(report.verdict, "pass", `seed ${seed}: ${JSON.stringify(report.steps.filter((step) => !step.ok))}`);
      assert.match(report.steps.find((step) => step.kind === "restartRouter")?.message ?? "", /restarting cleanly/);
      const counted = requests(report);
      assert.equal(counted.failed + counted.cut, 0, `seed ${seed}: ${JSON.stringify(counted)}`);
      assert.ok(counted.total > 1000, `seed ${seed}: traffic ran (${counted.total} legs)`);
      assert.deepEqual(
        report.controllerEvents.filter((event) => event.reason === "DrainTimeout"),
        [],
        `seed ${seed}`,
      );
    }
  });

  it("20 seeds of a decode rollout with 3 replicas, one crashed and restarted mid-drain: nothing fails, nothing is cut but the crashed replica's own requests, no drain times out", async () => {
    const midRollout = [
      { advance: { seconds: 1 } },
      { crashRouter: { replica: 1 } },
      { advance: { seconds: 3 } },
      { restartRouter: { replica: 1 } },
    ];
    for (let seed = 1; seed <= 20; seed++) {
      const { report, events } = await run(decodeRollout({ seed, replicas: 3, midRollout }));
      assert.equal(report.verdict, "pass", `seed ${seed}: ${JSON.stringify(report.steps.filter((step) => !step.ok))}`);
      const crashMs = (report.steps.find((step) => step.kind === "crashRouter")?.startedAt ?? -1) * 1000;
      assert.equal(requests(report).failed, 0, `seed ${seed}`);
      const cut = events.filter((event) => event.type === "RequestCut");
      assert.ok(
        cut.every((event) => event.replica === "router-1" && event.atMs === crashMs),
        `seed ${seed}: only the crash cuts`,
      );
      assert.deepEqual(
        report.controllerEvents.filter((event) => event.reason === "DrainTimeout"),
        [],
        `seed ${seed}`,
      );
    }
  });

  // Holds today only because the controller waits for no replica in particular (the single ack).
  it("a replica that crashes for good is waited for only its Lease duration, not the drain timeout", async () => {
    const { report } = await run(
      decodeRollout({ seed: 1, replicas: 3, drainSeconds: 600, midRollout: [{ crashRouter: { replica: 2 } }] }),
    );
    assert.equal(report.verdict, "pass", JSON.stringify(report.steps.filter((step) => !step.ok)));
    assert.deepEqual(
      report.controllerEvents.filter((event) => event.reason === "DrainTimeout"),
      [],
    );
    const confirmed = report.controllerEvents.filter((event) => event.reason === "DrainConfirmed");
    const started = report.controllerEvents.filter((event) => event.reason === "DrainStarted");
    assert.ok(started.length > 0 && confirmed.length === started.length);
    assert.ok(
      confirmed.every((event, index) => event.first - (started[index]?.first ?? 0) <= 15 + 5),
      "within the 15 s Lease duration of the crash, plus a request",
    );
  });

  it("with no router registered, a rollout with drain takes the drain-free time plus at most the 2 s settle per step", async () => {
    const rollout = async (drainSeconds: number): Promise<number> => {
      const { report } = await run(decodeRollout({ seed: 1, replicas: 0, drainSeconds }));
      assert.equal(report.verdict, "pass", JSON.stringify(report.steps.filter((step) => !step.ok)));
      const wait = report.steps.find((step) => step.kind === "wait" && step.message.startsWith("RolloutComplete"));
      return (wait?.endedAt ?? 0) - (wait?.startedAt ?? 0);
    };
    const drainFree = await rollout(0);
    assert.ok((await rollout(600)) <= drainFree + 2 * 4, "four groups, one drain each");
  });

  it("with drain disabled the same rollout cuts requests: the handshake is what keeps them", async () => {
    const { report } = await run(pdRollout({ pairing: "SameRevision", replicas: 3, drainSeconds: 0 }));
    assert.ok(requests(report).cut > 0, JSON.stringify(report.metrics.requests));
  });
});
