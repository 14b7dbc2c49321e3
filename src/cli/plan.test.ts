import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { PLAN_BEFORE_IMAGE, planCommand } from "./plan.ts";

const EXAMPLE = join(import.meta.dirname, "../../deploy/examples/coordinated-chain.yaml");
const text = readFileSync(EXAMPLE, "utf8");

const container = (image: string) =>
  `{spec: {containers: [{name: vllm, image: "${image}", resources: {limits: {nvidia.com/gpu: "1"}}}]}}`;
function shape(strategy: string, roles: string): string {
  return `apiVersion: tandem.dev/v1alpha1
kind: ModelServing
metadata: {name: m}
spec:
  replicas: 4
  drain: {timeoutSeconds: 0}
  rolloutStrategy: ${strategy}
  template:
    roles:
${roles}`;
}
const prefill = `      - {name: prefill, replicas: 2, entryTemplate: ${container("vllm:v2")}}`;
const decode = (budget: string) =>
  `      - {name: decode, replicas: 1, workerReplicas: 1, ${budget}entryTemplate: ${container("vllm:v2")}, workerTemplate: ${container("vllm:v2")}}`;
const SHAPES = {
  groups: shape(
    "{type: ServingGroupRollingUpdate, rollingUpdateConfiguration: {maxUnavailable: 0, maxSurge: 1, partition: 1}}",
    `${prefill}\n${decode("")}`,
  ),
  roles: shape(
    "{type: RoleRollingUpdate, rollingUpdateConfiguration: {maxUnavailable: 1}}",
    `${prefill}\n${decode("maxUnavailable: 0, maxSurge: 1, ")}`,
  ),
  inplace: shape(
    "{type: InPlaceUpdate, rollingUpdateConfiguration: {maxUnavailable: 50%}}",
    `${prefill}\n${decode("")}`,
  ),
};

/** A scenario whose cluster `--timing` plays on (its steps are not run). */
const CLUSTER = `name: timing
seed: 3
cluster:
  nodes: [{name: gpu, count: 6, gpus: 4}]
  timing: {scheduleSeconds: 1, pullSeconds: 20, startSeconds: 60, terminationSeconds: 5}
  images: {"vllm:v2": {startSeconds: 90}}
steps:
  - advance: {seconds: 1}
`;

describe("tandem plan", () => {
  it("ServingGroupRollingUpdate: a surge group first, then one group at a time above the partition", async () => {
    const output = await planCommand({ file: { path: "groups.yaml", text: SHAPES.groups } });
    assert.equal(output.exitCode, 0);
    assert.equal(
      output.stdout,
      [
        "ModelServing/m: ServingGroupRollingUpdate, 4 group(s)",
        "changed: 3 group(s) at or above the partitions; the budgets let 1 move at once",
        "played by the controller in the simulator: room for every pod, each unit starting in 60s, no faults",
        "step  at (s)  starts (g = group)       surge  lowest serving",
        "1     0.1     g4 (surge); removed: g3  1      groups 4/4",
        "2     60.6    g3 (surge); removed: g2  1      groups 4/4",
        "3     121.1   g2 (surge); removed: g1  1      groups 4/4",
        "complete after 3 step(s): 3 group start(s) for 3 changed, 12 pod(s) created, 12 deleted",
        "",
      ].join("\n"),
    );
  });

  it("RoleRollingUpdate: decode surges in every group, prefill moves one group at a time", async () => {
    const output = await planCommand({ file: { path: "roles.yaml", text: SHAPES.roles } });
    assert.equal(output.exitCode, 0);
    assert.equal(
      output.stdout,
      [
        "ModelServing/m: RoleRollingUpdate, 4 group(s)",
        "changed: 12 instance(s) at or above the partitions (prefill 8, decode 4); the budgets let 5 move at once (prefill 1, decode 4)",
        "played by the controller in the simulator: room for every pod, each unit starting in 60s, no faults",
        "step  at (s)  starts (g = group)                                   surge  lowest serving",
        "1     0.1     decode 1 @ g0-3 (surge)                              4      groups 3/4; prefill 7/8; decode 4/4",
        "2     0.3     prefill 1 @ g3 (recreate); removed: decode 0 @ g0-3  4      groups 3/4; prefill 7/8; decode 4/4",
        "3     60.8    prefill 0 @ g3 (recreate)                            0      groups 3/4; prefill 7/8; decode 4/4",
        "4     121.2   prefill 1 @ g2 (recreate)                            0      groups 3/4; prefill 7/8; decode 4/4",
        "5     181.6   prefill 0 @ g2 (recreate)                            0      groups 3/4; prefill 7/8; decode 4/4",
        "6     242.0   prefill 1 @ g1 (recreate)                            0      groups 3/4; prefill 7/8; decode 4/4",
        "7     302.4   prefill 0 @ g1 (recreate)                            0      groups 3/4; prefill 7/8; decode 4/4",
        "8     362.8   prefill 1 @ g0 (recreate)                            0      groups 3/4; prefill 7/8; decode 4/4",
        "9     423.2   prefill 0 @ g0 (recreate)                            0      groups 3/4; prefill 7/8; decode 4/4",
        "complete after 9 step(s): 12 instance start(s) for 12 changed, 16 pod(s) created, 16 deleted",
        "",
      ].join("\n"),
    );
  });

  it("InPlaceUpdate: half the groups at a time, no pod created", async () => {
    const output = await planCommand({ file: { path: "inplace.yaml", text: SHAPES.inplace } });
    assert.equal(output.exitCode, 0);
    assert.equal(
      output.stdout,
      [
        "ModelServing/m: InPlaceUpdate, 4 group(s)",
        "changed: 4 group(s) at or above the partitions; the budgets let 2 move at once",
        "played by the controller in the simulator: room for every pod, each unit starting in 60s, no faults",
        "step  at (s)  starts (g = group)  surge  lowest serving",
        "1     0.1     g2-3 (in-place)     0      groups 2/4",
        "2     60.4    g0-1 (in-place)     0      groups 2/4",
        "complete after 2 step(s): 4 group start(s) for 4 changed, 0 pod(s) created, 0 deleted",
        "",
      ].join("\n"),
    );
  });

  it("coordinated: the shipped chain, inner stages first and old capacity torn down in reverse", async () => {
    const output = await planCommand({ file: { path: "chain.yaml", text } });
    assert.equal(output.exitCode, 0);
    assert.equal(
      output.stdout,
      [
        "ModelServing/vl-chain: RoleRollingUpdate (coordinated, maxSkew 10%), 1 group(s)",
        "changed: 160 instance(s) at or above the partitions (encode 10, prefill 50, decode 100); the budgets let 16 move at once (encode 1, prefill 5, decode 10)",
        "played by the controller in the simulator: room for every pod, each unit starting in 60s, no faults",
        "step  at (s)  starts (g = group)                                                                     surge  lowest serving",
        "1     2.2     encode 9 @ g0 (recreate); prefill 45-49 @ g0 (recreate)                                0      groups 0/1; encode 9/10; prefill 45/50; decode 100/100",
        "2     64.5    decode 90-99 @ g0 (recreate)                                                           0      groups 0/1; encode 10/10; prefill 50/50; decode 90/100",
        "3     126.8   decode 80-89 @ g0 (recreate); encode 8 @ g0 (recreate); prefill 40-44 @ g0 (recreate)  0      groups 0/1; encode 9/10; prefill 45/50; decode 90/100",
        "4     189.1   decode 70-79 @ g0 (recreate); encode 7 @ g0 (recreate); prefill 35-39 @ g0 (recreate)  0      groups 0/1; encode 9/10; prefill 45/50; decode 90/100",
        "5     251.4   decode 60-69 @ g0 (recreate); encode 6 @ g0 (recreate); prefill 30-34 @ g0 (recreate)  0      groups 0/1; encode 9/10; prefill 45/50; decode 90/100",
        "6     313.7   decode 50-59 @ g0 (recreate); encode 5 @ g0 (recreate); prefill 25-29 @ g0 (recreate)  0      groups 0/1; encode 9/10; prefill 45/50; decode 90/100",
        "7     376.0   decode 40-49 @ g0 (recreate); encode 4 @ g0 (recreate); prefill 20-24 @ g0 (recreate)  0      groups 0/1; encode 9/10; prefill 45/50; decode 90/100",
        "8     438.3   decode 30-39 @ g0 (recreate); encode 3 @ g0 (recreate); prefill 15-19 @ g0 (recreate)  0      groups 0/1; encode 9/10; prefill 45/50; decode 90/100",
        "9     500.6   decode 20-29 @ g0 (recreate); encode 2 @ g0 (recreate); prefill 10-14 @ g0 (recreate)  0      groups 0/1; encode 9/10; prefill 45/50; decode 90/100",
        "10    562.9   decode 10-19 @ g0 (recreate); encode 1 @ g0 (recreate); prefill 5-9 @ g0 (recreate)    0      groups 0/1; encode 9/10; prefill 45/50; decode 90/100",
        "11    625.2   decode 0-9 @ g0 (recreate); prefill 1-4 @ g0 (recreate)                                0      groups 0/1; encode 10/10; prefill 46/50; decode 90/100",
        "12    625.3   prefill 0 @ g0 (recreate)                                                              0      groups 0/1; encode 10/10; prefill 45/50; decode 90/100",
        "13    625.4   encode 0 @ g0 (recreate)                                                               0      groups 0/1; encode 9/10; prefill 45/50; decode 90/100",
        "complete after 13 step(s): 160 instance start(s) for 160 changed, 160 pod(s) created, 160 deleted",
        "",
      ].join("\n"),
    );
  });
  it("moves only the roles that differ between --from and --to", async () => {
    const decodeOnly = text.replace(
      /(name: decode[\s\S]*?image: )vllm\/vllm-openai:v0\.11\.0/,
      "$1vllm/vllm-openai:v0.12.0",
    );
    const output = await planCommand({
      file: { path: "chain.yaml", text },
      from: { path: "before.yaml", text },
      to: { path: "after.yaml", text: decodeOnly },
    });
    assert.equal(output.exitCode, 0);
    assert.match(
      output.stdout,
      /^changed: 100 instance\(s\) at or above the partitions \(decode 100\); the budgets let 10 move at once \(decode 10\)$/m,
    );
    assert.match(output.stdout, /^1 +2\.2 +decode 90-99 @ g0 \(recreate\) +0 +groups 0\/1; decode 90\/100$/m);
    assert.match(output.stdout, /^complete after 10 step\(s\): 100 instance start\(s\) for 100 changed/m);
    assert.deepEqual(await planCommand({ file: { path: "chain.yaml", text }, from: { path: "same.yaml", text } }), {
      exitCode: 0,
      stdout: "ModelServing/vl-chain: no role changes: nothing to roll out.\n",
      stderr: "",
    });
  });

  it("without --from every container image changes: the before side runs an image no spec names", async () => {
    const same = SHAPES.inplace.replaceAll("vllm:v2", PLAN_BEFORE_IMAGE);
    assert.deepEqual(await planCommand({ file: { path: "x.yaml", text: same } }), {
      exitCode: 0,
      stdout: "ModelServing/m: no role changes: nothing to roll out.\n",
      stderr: "",
    });
  });

  it("exits 1 with the controller's reason and fix when the rollout would not complete", async () => {
    const blocked = text
      .replace("replicas: 10\n        maxUnavailable: 10%", "replicas: 1\n        maxUnavailable: 1")
      .replace("replicas: 50\n        maxUnavailable: 10%", "replicas: 5\n        maxUnavailable: 1")
      .replace("replicas: 100\n        maxUnavailable: 10%", "replicas: 10\n        maxUnavailable: 1");
    const output = await planCommand({ file: { path: "chain.yaml", text: blocked } });
    assert.equal(output.exitCode, 1);
    assert.match(
      output.stdout,
      /^blocked after 1 step\(s\) .*: The coordinated rollout cannot proceed: role encode must keep an old instance .* set maxSurge on role encode/m,
    );
  });

  it("--timing plays the rollout again on the scenario's cluster and prints the makespan beside the bound", async () => {
    const output = await planCommand({
      file: { path: "roles.yaml", text: SHAPES.roles },
      timing: { path: "cluster.yaml", text: CLUSTER },
    });
    assert.equal(output.exitCode, 0);
    const expected = [
      "timing on the cluster of cluster.yaml (seed 3):",
      "  estimated makespan 866.542s",
      "  lower bound 788s, set by prefill: ⌈8 changed instance(s) ÷ 1 at once⌉ = 8 step(s) × (5s termination + 91s unit start) + 20s first pull",
      "  makespan ÷ bound 1.10",
      "",
    ].join("\n");
    assert.ok(output.stdout.endsWith(expected), output.stdout);
  });

  it("refuses bad input naming the file and the field, exit 1", async () => {
    const badTiming = await planCommand({
      file: { path: "roles.yaml", text: SHAPES.roles },
      timing: {
        path: "cluster.yaml",
        text: "name: x\ncluster: {timing: {startSeconds: -1}}\nsteps: [{advance: {seconds: 1}}]\n",
      },
    });
    assert.deepEqual(badTiming, {
      exitCode: 1,
      stdout: "",
      stderr: "--timing cluster.yaml: cluster.timing.startSeconds: must be 0 or more\n",
    });
    const badTo = await planCommand({
      file: { path: "roles.yaml", text: SHAPES.roles },
      to: { path: "after.yaml", text: "kind: ConfigMap\n" },
    });
    assert.equal(badTo.exitCode, 1);
    assert.match(badTo.stderr, /^after\.yaml: /);
    const badFile = await planCommand({
      file: { path: "m.yaml", text: SHAPES.roles.replace("replicas: 4", "replicas: -1") },
    });
    assert.equal(badFile.exitCode, 1);
    assert.match(badFile.stderr, /^m\.yaml: ModelServing\/m: spec\.replicas: /);
  });
  it("docs/plan.md shows the current table of the shipped prefill/decode example", async () => {
    const example = join(import.meta.dirname, "../../deploy/examples/prefill-decode-2p1d.yaml");
    const output = await planCommand({
      file: { path: "deploy/examples/prefill-decode-2p1d.yaml", text: readFileSync(example, "utf8") },
    });
    const doc = readFileSync(join(import.meta.dirname, "../../docs/plan.md"), "utf8");
    assert.ok(doc.includes(`$ tandem plan deploy/examples/prefill-decode-2p1d.yaml\n${output.stdout}`), output.stdout);
  });
});
