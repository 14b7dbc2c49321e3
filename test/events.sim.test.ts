/**
 * The controller's Kubernetes Events in the simulated cluster (real engine, core and recorder,
 * virtual time): a rolling update drained through the simulated router, a recovery, a drain that
 * times out, and a controller restart over the converged result, read from the report's `controllerEvents`.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ControllerEventRecord, Report } from "../src/sim/report.ts";
import { runScenario } from "../src/sim/runner.ts";
import { parseScenario } from "../src/sim/scenario.ts";

const gpu = (image: string) => ({
  spec: { containers: [{ name: "vllm", image, resources: { limits: { "nvidia.com/gpu": "1" } } }] },
});

const modelServing = {
  apiVersion: "tandem.dev/v1alpha1",
  kind: "ModelServing",
  metadata: { name: "m" },
  spec: {
    replicas: 2,
    recoveryPolicy: "RoleRecreate",
    drain: { timeoutSeconds: 120 },
    template: {
      roles: [
        {
          name: "decode",
          replicas: 1,
          workerReplicas: 1,
          entryTemplate: gpu("vllm:v1"),
          workerTemplate: gpu("vllm:v1"),
        },
      ],
    },
  },
};

const image = (tag: string) => ({
  patch: {
    name: "m",
    merge: {
      spec: {
        template: {
          roles: [
            { name: "decode", replicas: 1, workerReplicas: 1, entryTemplate: gpu(tag), workerTemplate: gpu(tag) },
          ],
        },
      },
    },
  },
});
const complete = { wait: { for: "RolloutComplete", timeoutSeconds: 900 } };

async function play(steps: unknown[], seed = 5): Promise<Report> {
  const parsed = parseScenario({
    name: "events",
    seed,
    cluster: {
      nodes: [{ name: "gpu", count: 2, gpus: 8 }],
      timing: { scheduleSeconds: 1, pullSeconds: 5, startSeconds: 10, terminationSeconds: 2 },
      router: { requestsPerSecond: 20, requestSeconds: 4 },
    },
    steps: [{ apply: modelServing }, { wait: { for: "Available", timeoutSeconds: 900 } }, ...steps],
  });
  assert.ok(parsed.ok, JSON.stringify(parsed.ok ? [] : parsed.problems));
  const report = await runScenario(parsed.scenario);
  assert.equal(report.verdict, "pass", JSON.stringify(report.steps.filter((step) => !step.ok)));
  return report;
}

const line = (event: ControllerEventRecord) => `${event.reason} ${event.object}`;

describe("controller Events in the simulator", () => {
  it("a rolling update drained through the router and a recovery, each event once; none after a restart", async () => {
    const report = await play([
      image("vllm:v2"),
      complete,
      { advance: { seconds: 30 } },
      { deletePods: { selector: "tandem.dev/role=decode,tandem.dev/group=1,tandem.dev/entry=true", count: 1 } },
      { wait: { for: "Available", timeoutSeconds: 900 } },
      { advance: { seconds: 60 } },
      { restartController: {} },
      { advance: { seconds: 120 } },
    ]);
    const events = report.controllerEvents;
    assert.deepEqual(events.map(line), [
      "InstanceCreated ModelServing/m",
      "InstanceCreated ModelServing/m",
      // Group by group (maxUnavailable 1, no surge): the router confirms each drain.
      "RolloutStarted ModelServing/m",
      "DrainStarted ModelServing/m",
      "DrainConfirmed ModelServing/m",
      "InstanceDeleted ModelServing/m",
      "InstanceCreated ModelServing/m",
      "DrainStarted ModelServing/m",
      "DrainConfirmed ModelServing/m",
      "InstanceDeleted ModelServing/m",
      "InstanceCreated ModelServing/m",
      "RolloutCompleted ModelServing/m",
      "Recovering ModelServing/m",
      "InstanceCreated ModelServing/m",
      // The restarted controller finds everything done: no event.
    ]);
    const [, , started, drain, confirmed, deleted, created] = events;
    assert.match(started!.message, /^Rolling out revision m-\w+ \(current revision m-\w+\)\.$/);
    assert.match(
      drain!.message,
      /^Draining decode-0 of group 1 \(replacing m-\w+ with m-\w+\): pod\(s\) m-1-decode-0-0, m-1-decode-0-1 out of traffic; waiting up to 120s for router\(s\) router-0 to confirm before deleting\.$/,
    );
    assert.match(
      confirmed!.message,
      /^Drained decode-0 of group 1 .*: router\(s\) router-0 confirmed pod\(s\) m-1-decode-0-0; deleting\.$/,
    );
    assert.match(
      deleted!.message,
      /^Deleting decode-0 of group 1 \(replacing m-\w+ with m-\w+\): pod\(s\) m-1-decode-0-0, m-1-decode-0-1\.$/,
    );
    assert.match(
      created!.message,
      /^Creating decode-0 of group 1 at revision m-\w+ \(replacement for the rollout to m-\w+\)\.$/,
    );
    const [recovering, rebuilt] = events.slice(-2);
    assert.equal(recovering!.type, "Warning");
    assert.match(
      recovering!.message,
      /^recoveryPolicy RoleRecreate: decode-0 of group 1 failed \(lost m-1-decode-0-0\); rebuilding the instance; deleting pod\(s\) m-1-decode-0-1\.$/,
    );
    assert.match(rebuilt!.message, /^Creating decode-0 of group 1 at revision m-\w+ \(its earlier pods are gone/);
    assert.ok(
      events.every((event) => event.count === 1),
      "no event was planned twice",
    );
    assert.ok(
      confirmed!.first >= drain!.first + 2 && confirmed!.first < drain!.first + 120,
      "confirmed by the router, before the timeout",
    );
  });

  it("with no router registered, a drain waits only the 2 s settle and says so", async () => {
    const parsed = parseScenario({
      name: "events-timeout",
      seed: 2,
      cluster: {
        nodes: [{ name: "gpu", count: 2, gpus: 8 }],
        timing: { scheduleSeconds: 1, pullSeconds: 5, startSeconds: 10, terminationSeconds: 2 },
      },
      steps: [
        { apply: modelServing },
        { wait: { for: "Available", timeoutSeconds: 900 } },
        { patch: { name: "m", merge: { spec: { replicas: 1 } } } },
        { advance: { seconds: 200 } },
      ],
    });
    assert.ok(parsed.ok);
    const report = await runScenario(parsed.scenario);
    const drain = report.controllerEvents.filter(
      (event) => event.reason.startsWith("Drain") || event.reason === "InstanceDeleted",
    );
    assert.deepEqual(
      drain.map((event) => [event.reason, event.type]),
      [
        ["DrainStarted", "Normal"],
        ["DrainConfirmed", "Normal"],
        ["InstanceDeleted", "Normal"],
      ],
    );
    // Event times are whole seconds: the settle of 2 s reads as 2 or 3.
    const waitedSeconds = drain[1]!.first - drain[0]!.first;
    assert.ok(
      waitedSeconds >= 2 && waitedSeconds <= 3,
      `the settle, not spec.drain.timeoutSeconds (120 s): ${waitedSeconds}`,
    );
    assert.match(
      drain[0]!.message,
      /out of traffic; no live router routes its namespace: waiting 2s before deleting\.$/,
    );
    assert.match(
      drain[1]!.message,
      /^Drained group 1 \(scale-down\): no live router routes its namespace, and the settle after the mark is over; deleting\.$/,
    );
  });

  it("the same seed gives a byte-identical report, controller Events included", async () => {
    const steps = [image("vllm:v2"), complete];
    const [a, b] = [await play(steps, 9), await play(steps, 9)];
    assert.ok(a.controllerEvents.length > 0);
    assert.equal(JSON.stringify(a), JSON.stringify(b));
  });
});
