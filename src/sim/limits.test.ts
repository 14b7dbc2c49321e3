import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { MAX_NODES, MAX_PODS, MAX_REQUESTS, MAX_REQUESTS_IN_FLIGHT, MAX_SNAPSHOT_PODS } from "./limits.ts";
import { parseScenario } from "./scenario.ts";

const container = { spec: { containers: [{ name: "c", image: "v:1" }] } };

function apply(name: string, replicas: number, workerReplicas = 0): unknown {
  const role = {
    name: "decode",
    replicas: 1,
    workerReplicas,
    entryTemplate: container,
    ...(workerReplicas > 0 ? { workerTemplate: container } : {}),
  };
  return {
    apply: {
      apiVersion: "tandem.dev/v1alpha1",
      kind: "ModelServing",
      metadata: { name },
      spec: { replicas, template: { roles: [role] } },
    },
  };
}

function problemsOf(input: Record<string, unknown>): string[] {
  const result = parseScenario({ name: "s", ...input });
  return result.ok ? [] : result.problems.map((found) => `${found.path}: ${found.reason}`);
}

describe("scenario limits (checked when the scenario is parsed)", () => {
  it("refuses 200 pools of 10,000 nodes, naming the total, and takes exactly the limit", () => {
    const pools = (count: number) =>
      Array.from({ length: count }, (_, index) => ({ name: `p${index}`, count: 10_000, gpus: 8 }));
    assert.deepEqual(problemsOf({ cluster: { nodes: pools(200) }, steps: [apply("m", 1)] }), [
      "cluster.nodes: adds up to 2000000 nodes; the simulator runs at most 10000",
    ]);
    assert.deepEqual(problemsOf({ cluster: { nodes: pools(MAX_NODES / 10_000) }, steps: [apply("m", 1)] }), []);
  });

  it("refuses a role with workerReplicas 100,000, and pods over the limit summed over ModelServings", () => {
    assert.deepEqual(problemsOf({ steps: [apply("m", 1, 100_000)] }), [
      "steps[0].apply.spec: asks for 100001 pods (replicas × the sum over roles of replicas × (1 + workerReplicas)); the simulator runs at most 10000",
    ]);
    assert.deepEqual(problemsOf({ steps: [apply("a", MAX_PODS / 2), apply("b", MAX_PODS / 2)] }), []);
    assert.deepEqual(
      problemsOf({ steps: [apply("a", MAX_PODS / 2), apply("a", MAX_PODS / 2), apply("b", MAX_PODS / 2 + 1)] }),
      [
        "steps[2].apply.spec: asks for 5001 pods (replicas × the sum over roles of replicas × (1 + workerReplicas)) (10001 with the other ModelServings); the simulator runs at most 10000",
      ],
    );
  });

  it("refuses router traffic of week-long requests at 100,000/s, and more requests in all than the limit", () => {
    const router = (requestsPerSecond: number, requestSeconds: number) => ({
      router: { requestsPerSecond, requestSeconds },
    });
    assert.deepEqual(problemsOf({ cluster: router(100_000, 7 * 24 * 3600), steps: [apply("m", 1)] }), [
      "cluster.router: 100000 requests/s lasting 604800s each keep 60480000000 requests in flight; the simulator runs at most 10000 at once",
    ]);
    assert.deepEqual(
      problemsOf({
        cluster: router(MAX_REQUESTS_IN_FLIGHT, 1),
        steps: [apply("m", 1), { advance: { seconds: MAX_REQUESTS / MAX_REQUESTS_IN_FLIGHT } }],
      }),
      [],
    );
    assert.deepEqual(
      problemsOf({
        cluster: router(1000, 1),
        steps: [apply("m", 1), { wait: { for: "Available", timeoutSeconds: 3000 } }],
      }),
      [
        "cluster.router.requestsPerSecond: 1000 requests/s over up to 3000s of steps (their wait timeouts and advances) is 3000000 requests; the simulator runs at most 2000000 in all",
      ],
    );
  });

  it("refuses snapshots that would record more pods than the limit", () => {
    const snapshots = Array.from({ length: MAX_SNAPSHOT_PODS / 1000 + 1 }, (_, index) => ({ snapshot: `s${index}` }));
    assert.deepEqual(problemsOf({ steps: [apply("m", 1000), ...snapshots] }), [
      "steps: 201 snapshots of up to 1000 pods each would record 201000 pods; the simulator keeps at most 200000",
    ]);
  });
});
