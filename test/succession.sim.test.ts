/**
 * Surge without double starts (docs/design/succession.md), in the simulated cluster (real engine
 * and core, virtual time): a surge unit that becomes Ready takes the place of the outdated unit it
 * replaces for good, so the pods a rollout creates are the pods of the units that change — also
 * with a node failure and a controller restart mid-rollout. Counts, never times.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { PodRecord, Report } from "../src/sim/report.ts";
import { runScenario } from "../src/sim/runner.ts";
import { parseScenario } from "../src/sim/scenario.ts";

const gpu = (image: string) => ({
  spec: { containers: [{ name: "vllm", image, resources: { limits: { "nvidia.com/gpu": "1" } } }] },
});

/** 4 groups of 1 prefill + 1 decode with one worker (the case), `strategy` as given. */
/** One prefill instance, and one decode instance of an entry and a worker at `decodeImage`. */
function roles(decodeImage: string, decode: Record<string, unknown>): Record<string, unknown>[] {
  return [
    { name: "prefill", replicas: 1, entryTemplate: gpu("vllm:v1") },
    {
      name: "decode",
      replicas: 1,
      workerReplicas: 1,
      entryTemplate: gpu(decodeImage),
      workerTemplate: gpu(decodeImage),
      ...decode,
    },
  ];
}

function modelServing(
  strategy: Record<string, unknown>,
  decode: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "m" },
    spec: {
      replicas: 4,
      drain: { timeoutSeconds: 0 },
      rolloutStrategy: strategy,
      template: { roles: roles("vllm:v1", decode) },
    },
  };
}

const decodeImage = (image: string, surge: Record<string, unknown> = { maxUnavailable: 0, maxSurge: 1 }) => ({
  spec: { template: { roles: roles(image, surge) } },
});

const ROLE_SURGE = modelServing({ type: "RoleRollingUpdate" }, { maxUnavailable: 0, maxSurge: 1 });
const GROUP_SURGE = modelServing({
  type: "ServingGroupRollingUpdate",
  rollingUpdateConfiguration: { maxUnavailable: 0, maxSurge: 1 },
});

/** What happens mid-rollout, after the update is applied. */
type Fault = "none" | "node" | "restart";

/**
 * Rolls `update` out on `manifest`, with `fault` injected `faultAfterSeconds` after the update
 * (mid-rollout: the role rollout takes about 20 virtual seconds, the group one about 65).
 */
async function rollOut(
  manifest: Record<string, unknown>,
  fault: Fault,
  faultAfterSeconds: number,
  update = decodeImage("vllm:v2"),
) {
  const faults: Record<Fault, unknown[]> = {
    none: [],
    node: [{ advance: { seconds: faultAfterSeconds } }, { failNode: { name: "gpu-1" } }],
    restart: [{ advance: { seconds: faultAfterSeconds } }, { restartController: {} }],
  };
  const parsed = parseScenario({
    name: `succession-${fault}`,
    seed: 5,
    cluster: {
      nodes: [{ name: "gpu", count: 4, gpus: 8 }],
      timing: { scheduleSeconds: 1, pullSeconds: 5, startSeconds: 10, terminationSeconds: 2 },
    },
    steps: [
      { apply: manifest },
      { wait: { for: "Available", timeoutSeconds: 900 } },
      { snapshot: "before" },
      { patch: { name: "m", merge: update } },
      ...faults[fault],
      { snapshot: "hit" },
      { wait: { for: "RolloutComplete", timeoutSeconds: 3600 } },
      { snapshot: "after" },
    ],
  });
  assert.ok(parsed.ok, JSON.stringify(parsed.ok ? [] : parsed.problems));
  const report = await runScenario(parsed.scenario);
  assert.equal(report.verdict, "pass", JSON.stringify([report.steps.filter((step) => !step.ok), failed(report)]));
  return report;
}

function failed(report: Report): unknown {
  return report.invariants.filter((invariant) => invariant.violations > 0);
}

/** Pods created from the update on (the patch step and every later one), by role. */
function createdByRollout(report: Report, role: string): number {
  const from = report.steps.findIndex((step) => step.kind === "patch");
  return report.steps.slice(from).reduce((sum, step) => sum + (step.podsCreated[role] ?? 0), 0);
}

const ofRole = (pods: readonly PodRecord[] | undefined, role: string) =>
  (pods ?? []).filter((pod) => pod.role === role);

/** Pods of `role` a failed node took from the `hit` snapshot on (gone by the end): each is rebuilt once. */
function lostOnNode(report: Report, role: string, node: string): number {
  return ofRole(report.snapshots["hit"], role).filter((pod) => pod.node === node).length;
}

describe("surge without double starts", () => {
  for (const fault of ["none", "node", "restart"] as const) {
    it(`RoleRollingUpdate, decode maxSurge 1 maxUnavailable 0 (fault: ${fault}): decode pods created = the 8 of the 4 changed instances${fault === "node" ? " + those the node took" : ""}; prefill untouched`, async () => {
      const report = await rollOut(ROLE_SURGE, fault, fault === "node" ? 12 : 8);
      const lost = fault === "node" ? lostOnNode(report, "decode", "gpu-1") : 0;
      // A lost unit is rebuilt once, at most: an old one's rebuild may be its change, or a successor spares it.
      assert.ok(createdByRollout(report, "decode") <= 8 + lost, `${createdByRollout(report, "decode")} > 8 + ${lost}`);
      assert.ok(createdByRollout(report, "decode") >= 8);
      if (fault !== "node") assert.equal(createdByRollout(report, "decode"), 8);
      const prefillLost = fault === "node" ? lostOnNode(report, "prefill", "gpu-1") : 0;
      // Prefill never changes: only a pod the node took may be rebuilt.
      assert.ok(createdByRollout(report, "prefill") <= prefillLost);
      const after = report.snapshots["after"] ?? [];
      assert.equal(ofRole(after, "decode").length, 8);
      assert.ok(ofRole(after, "decode").every((pod) => pod.images.every((image) => image === "vllm:v2")));
      // Pod names stay unique and below replicas + maxSurge: instance ordinals 0 or 1.
      assert.ok(ofRole(after, "decode").every((pod) => /^decode-[01]$/.test(pod.instance ?? "")));
    });

    it(`ServingGroupRollingUpdate, group maxSurge 1 maxUnavailable 0 (fault: ${fault}): pods created = the 12 of the 4 changed groups${fault === "node" ? " + those the node took" : ""}`, async () => {
      const report = await rollOut(GROUP_SURGE, fault, fault === "node" ? 30 : 25, decodeImage("vllm:v2", {}));
      const lost =
        fault === "node" ? lostOnNode(report, "decode", "gpu-1") + lostOnNode(report, "prefill", "gpu-1") : 0;
      assert.ok(createdByRollout(report, "decode") + createdByRollout(report, "prefill") <= 12 + lost);
      assert.ok(createdByRollout(report, "decode") + createdByRollout(report, "prefill") >= 12);
      if (fault !== "node") {
        assert.equal(createdByRollout(report, "decode"), 8);
        assert.equal(createdByRollout(report, "prefill"), 4);
      }
      const after = report.snapshots["after"] ?? [];
      assert.equal(after.length, 12);
      // Group ordinals stay below replicas + maxSurge = 5, each used by one group.
      const groups = new Set(after.map((pod) => pod.group));
      assert.equal(groups.size, 4);
      assert.ok([...groups].every((group) => group !== null && group >= 0 && group < 5));
    });
  }
});
