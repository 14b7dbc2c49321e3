/**
 * Paused rollouts and the status at the end of a wait (issue "Correctness", items 1, 3 and 4):
 * - a paused rollout moves nothing to the update revision, also after a scale-down leaves units
 *   above the new replica count (they are scaled down, not made surge at the update revision), at
 *   the group and at the role level;
 * - a paused rollout with nothing else to do says RolloutPaused and how many units wait, never
 *   Converged;
 * - a wait for RolloutComplete ends only once the stored status agrees, so a report's final
 *   status has the update revision current.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parse as parseYaml } from "yaml";
import type { Condition, ModelServingStatus } from "../src/api/schema.ts";
import type { Report } from "../src/sim/report.ts";
import { runScenario } from "../src/sim/runner.ts";
import { parseScenario } from "../src/sim/scenario.ts";

async function run(yaml: string): Promise<Report> {
  const parsed = parseScenario(parseYaml(yaml));
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
  const report = await runScenario(parsed.scenario);
  assert.deepEqual(
    report.invariants.filter((result) => result.violations > 0),
    [],
    "every invariant holds",
  );
  return report;
}

function progressing(report: Report): Condition | undefined {
  return (report.final.status as ModelServingStatus | null)?.conditions?.find(
    (condition) => condition.type === "Progressing",
  );
}

const SERVER = (image: string, extra = "replicas: 1") =>
  `{name: server, ${extra}, entryTemplate: {spec: {containers: [{name: vllm, image: "${image}", resources: {limits: {nvidia.com/gpu: "4"}}}]}}}`;

/** The reproduction: paused, a new image, a node lost, replicas 4 → 2; then `more` steps. */
const pausedScaleDown = (more: string) => `
name: pause-scale
cluster: {nodes: [{name: gpu, count: 5, gpus: 4}], timing: {scheduleSeconds: 1, pullSeconds: 2, startSeconds: 5, terminationSeconds: 5}}
steps:
  - apply: {apiVersion: tandem.dev/v1alpha1, kind: ModelServing, metadata: {name: m}, spec: {replicas: 4, drain: {timeoutSeconds: 0},
      rolloutStrategy: {type: ServingGroupRollingUpdate, rollingUpdateConfiguration: {maxUnavailable: 1, maxSurge: 1}},
      template: {roles: [${SERVER("v:1")}]}}}
  - wait: {for: Available, timeoutSeconds: 600}
  - patch: {name: m, merge: {spec: {rolloutStrategy: {paused: true}}}}
  - advance: {seconds: 5}
  - patch: {name: m, merge: {spec: {template: {roles: [${SERVER("v:2")}]}}}}
  - advance: {seconds: 5}
  - failNode: {name: gpu-3}
  - patch: {name: m, merge: {spec: {replicas: 2}}}
  - advance: {seconds: 120}
  - snapshot: after
${more}`;

describe("a paused rollout moves nothing", () => {
  it("ServingGroupRollingUpdate, maxSurge 1: a group left above a lowered replicas is scaled down, not rebuilt at the update revision; RolloutPaused says 2 of 2 wait", async () => {
    const report = await run(pausedScaleDown(""));
    const after = report.snapshots.after ?? [];
    assert.deepEqual(
      after.filter((pod) => pod.images.includes("v:2")).map((pod) => pod.name),
      [],
      "no pod runs the update revision while paused",
    );
    assert.deepEqual(
      after.filter((pod) => pod.group === 2).map((pod) => pod.name),
      [],
      "group 2 (above replicas 2, its node fine) is gone",
    );
    const condition = progressing(report);
    assert.deepEqual([condition?.status, condition?.reason], ["False", "RolloutPaused"]);
    assert.match(
      condition?.message ?? "",
      /^The rollout is paused: 2 of 2 ServingGroup\(s\) the rollout may update wait for revision m-[0-9a-f]+\. Set spec\.rolloutStrategy\.paused to false to resume\.$/,
    );
  });

  it("resumed, the same rollout completes with 2 groups at the update revision and the status agrees (currentRevision promoted, Converged)", async () => {
    const report = await run(
      pausedScaleDown(`  - recoverNode: {name: gpu-3}
  - patch: {name: m, merge: {spec: {rolloutStrategy: {paused: false}}}}
  - wait: {for: RolloutComplete, timeoutSeconds: 600}`),
    );
    assert.equal(report.verdict, "pass", JSON.stringify(report.steps.filter((step) => !step.ok)));
    assert.deepEqual(
      report.final.pods.map((pod) => `${pod.name}=${pod.images.join(",")}`),
      // The surge group (ordinal 2) succeeded group 0 for good (docs/design/succession.md).
      ["m-1-server-0-0=v:2", "m-2-server-0-0=v:2"],
    );
    const status = report.final.status as ModelServingStatus;
    assert.equal(
      status.currentRevision,
      status.updateRevision,
      "the report's final status has the update revision current",
    );
    assert.deepEqual([progressing(report)?.status, progressing(report)?.reason], ["False", "Converged"]);
  });

  it("RoleRollingUpdate, role maxSurge 1: instances left above a lowered role replicas are scaled down, not moved; RolloutPaused counts instances", async () => {
    const report = await run(`
name: pause-role-scale
cluster: {nodes: [{name: gpu, count: 4, gpus: 4}], timing: {scheduleSeconds: 1, pullSeconds: 2, startSeconds: 5, terminationSeconds: 5}}
steps:
  - apply: {apiVersion: tandem.dev/v1alpha1, kind: ModelServing, metadata: {name: m}, spec: {replicas: 1, drain: {timeoutSeconds: 0},
      rolloutStrategy: {type: RoleRollingUpdate},
      template: {roles: [${SERVER("v:1", "replicas: 3, maxUnavailable: 1, maxSurge: 1")}]}}}
  - wait: {for: Available, timeoutSeconds: 600}
  - patch: {name: m, merge: {spec: {rolloutStrategy: {paused: true}}}}
  - advance: {seconds: 5}
  - patch: {name: m, merge: {spec: {template: {roles: [${SERVER("v:2", "replicas: 3, maxUnavailable: 1, maxSurge: 1")}]}}}}
  - advance: {seconds: 5}
  - failNode: {name: gpu-2}
  - patch: {name: m, merge: {spec: {template: {roles: [${SERVER("v:2", "replicas: 1, maxUnavailable: 1, maxSurge: 1")}]}}}}
  - advance: {seconds: 120}
  - snapshot: after
`);
    const after = report.snapshots.after ?? [];
    assert.deepEqual(
      after.filter((pod) => pod.images.includes("v:2")).map((pod) => pod.name),
      [],
      "no pod runs the update revision while paused",
    );
    assert.deepEqual(
      after.filter((pod) => pod.instance === "server-1").map((pod) => pod.name),
      [],
      "server-1 (above replicas 1, its node fine) is gone",
    );
    const condition = progressing(report);
    assert.deepEqual([condition?.status, condition?.reason], ["False", "RolloutPaused"]);
    assert.match(condition?.message ?? "", /: 1 of 1 instance\(s\) the rollout may update wait/);
  });
});
