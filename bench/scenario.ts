/**
 * The simulator bench's scenario: creation and a decode-image rollout of N ServingGroups of
 * 2 prefill + 1 decode instance (entry + 3 workers), shared by `bench/main.ts` and
 * `bench/incremental.ts`.
 */
import { parseScenario } from "../src/sim/scenario.ts";
import type { Scenario } from "../src/sim/scenario.ts";

const container = (image: string) => ({
  spec: { containers: [{ name: "vllm", image, resources: { limits: { "nvidia.com/gpu": "1" } } }] },
});

function roles(image: string): unknown[] {
  return [
    { name: "prefill", replicas: 2, entryTemplate: container("vllm:v1") },
    {
      name: "decode",
      replicas: 1,
      maxUnavailable: 0,
      maxSurge: 1,
      workerReplicas: 3,
      entryTemplate: container(image),
      workerTemplate: container(image),
    },
  ];
}

/** N groups need 6 GPUs each, plus room for one surge decode instance (4 GPUs) per group in flight. */
export function benchScenario(groups: number): Scenario {
  const result = parseScenario({
    name: `bench-${groups}-groups`,
    cluster: { nodes: [{ name: "gpu", count: Math.ceil((groups * 10) / 8), gpus: 8 }] },
    steps: [
      {
        apply: {
          apiVersion: "tandem.dev/v1alpha1",
          kind: "ModelServing",
          metadata: { name: "bench" },
          spec: {
            replicas: groups,
            drain: { timeoutSeconds: 0 },
            rolloutStrategy: { type: "RoleRollingUpdate", rollingUpdateConfiguration: { maxUnavailable: "10%" } },
            template: { roles: roles("vllm:v1") },
          },
        },
      },
      { wait: { for: "Available", timeoutSeconds: 3600 } },
      { patch: { name: "bench", merge: { spec: { template: { roles: roles("vllm:v2") } } } } },
      { wait: { for: "RolloutComplete", timeoutSeconds: 36_000 } },
    ],
  });
  if (!result.ok) throw new Error(JSON.stringify(result.problems));
  return result.scenario;
}
