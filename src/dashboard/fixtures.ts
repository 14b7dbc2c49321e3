/**
 * A small scenario for the dashboard's tests (unit and browser): 3 groups of 2 prefill + 1 decode
 * instance under RoleRollingUpdate with router traffic, then a decode-only image update.
 * Steps: 0 apply, 1 wait Available, 2 patch decode to v2, 3 advance 35 s (mid-rollout), 4 wait
 * RolloutComplete, 5 advance 1 s.
 */
import type { Scenario } from "../sim/scenario.ts";
import { parseScenarioText } from "../sim/scenario.ts";

function role(name: string, replicas: number, image: string): string {
  return `{name: ${name}, replicas: ${replicas}, entryTemplate: {spec: {containers: [{name: vllm, image: "${image}", resources: {limits: {nvidia.com/gpu: "1"}}}]}}}`;
}

export const DASHBOARD_SCENARIO = `
name: dashboard-fixture
seed: 3
cluster:
  nodes: [{name: gpu, count: 4, gpus: 8}]
  timing: {scheduleSeconds: 1, pullSeconds: 5, startSeconds: 10, terminationSeconds: 2}
  router: {requestsPerSecond: 10, requestSeconds: 2}
steps:
  - apply:
      apiVersion: tandem.dev/v1alpha1
      kind: ModelServing
      metadata: {name: pd}
      spec:
        replicas: 3
        drain: {timeoutSeconds: 30}
        rolloutStrategy: {type: RoleRollingUpdate, rollingUpdateConfiguration: {maxUnavailable: 1}}
        template:
          roles: [${role("prefill", 2, "vllm:v1")}, ${role("decode", 1, "vllm:v1")}]
  - wait: {for: Available, timeoutSeconds: 600}
  - patch:
      name: pd
      merge:
        spec:
          template:
            roles: [${role("prefill", 2, "vllm:v1")}, ${role("decode", 1, "vllm:v2")}]
  - advance: {seconds: 35}
  - wait: {for: RolloutComplete, timeoutSeconds: 900}
  - advance: {seconds: 1}
`;

export function dashboardScenario(): Scenario {
  const parsed = parseScenarioText(DASHBOARD_SCENARIO);
  if (!parsed.ok) throw new Error(parsed.problems.map((problem) => `${problem.path}: ${problem.reason}`).join("\n"));
  return parsed.scenario;
}
