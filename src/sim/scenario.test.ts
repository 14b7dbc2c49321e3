import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { DEFAULT_WAIT_TIMEOUT_SECONDS, applyObject, parseScenario, parseScenarioText } from "./scenario.ts";

const SCENARIOS = join(import.meta.dirname, "../../deploy/examples/scenarios");

const modelServing = {
  apiVersion: "tandem.dev/v1alpha1",
  kind: "ModelServing",
  metadata: { name: "m" },
  spec: {
    template: {
      roles: [{ name: "server", entryTemplate: { spec: { containers: [{ name: "c", image: "vllm:v1" }] } } }],
    },
  },
};

function problemsOf(input: unknown): string[] {
  const result = parseScenario(input);
  if (result.ok) assert.fail("expected problems");
  return result.problems.map((found) => `${found.path}: ${found.reason}`);
}

describe("scenario files", () => {
  it("parses every shipped scenario", () => {
    const files = readdirSync(SCENARIOS).filter((file) => file.endsWith(".yaml"));
    assert.ok(files.length >= 4);
    for (const file of files) {
      const result = parseScenarioText(readFileSync(join(SCENARIOS, file), "utf8"));
      assert.ok(result.ok, `${file}: ${result.ok ? "" : JSON.stringify(result.problems)}`);
    }
  });

  it("applies defaults: seed 1, empty cluster, wait timeout, deletePods count, default namespace", () => {
    const result = parseScenario({
      name: "s",
      steps: [
        { apply: modelServing },
        { wait: { for: "Available" } },
        { deletePods: { selector: "a=b" } },
        { restartController: null },
      ],
    });
    assert.ok(result.ok);
    assert.equal(result.scenario.seed, 1);
    assert.deepEqual(result.scenario.cluster, {});
    assert.deepEqual(
      result.scenario.steps.map((step) => step.kind),
      ["apply", "wait", "deletePods", "restartController"],
    );
    const [apply, wait, deletePods] = result.scenario.steps;
    assert.deepEqual(wait?.value, { for: "Available", timeoutSeconds: DEFAULT_WAIT_TIMEOUT_SECONDS });
    assert.deepEqual(deletePods?.value, { selector: "a=b", count: 1 });
    assert.equal(
      apply?.kind === "apply" ? (applyObject(apply).metadata as { namespace?: string }).namespace : undefined,
      "default",
    );
  });

  it("takes deletePods' optional groupPosition, a non-negative integer", () => {
    const result = parseScenario({
      name: "s",
      steps: [{ deletePods: { selector: "tandem.dev/modelserving=m", groupPosition: 0 } }],
    });
    assert.ok(result.ok);
    assert.deepEqual(result.scenario.steps[0]?.value, {
      selector: "tandem.dev/modelserving=m",
      count: 1,
      groupPosition: 0,
    });
    assert.deepEqual(problemsOf({ name: "s", steps: [{ deletePods: { selector: "a=b", groupPosition: -1 } }] }), [
      "steps[0].deletePods.groupPosition: must be 0 or more",
    ]);
  });

  it("names the field path and the reason of each problem", () => {
    assert.deepEqual(
      problemsOf({
        name: "s",
        seed: -1,
        cluster: { nodes: [{ name: "GPU", count: 0, gpus: 8 }], colour: "red" },
        steps: [
          { apply: modelServing },
          { wait: { for: "Ready", timeoutSeconds: 10 } },
          { advance: { seconds: 0 } },
          { snapshot: "a" },
          { snapshot: "a" },
        ],
      }),
      [
        "seed: must be 0 or more",
        "cluster.nodes[0].name: must be a lowercase DNS label of at most 42 characters",
        "cluster.nodes[0].count: must be 1 or more",
        "cluster.colour: is not a known field",
      ],
    );
    assert.deepEqual(
      problemsOf({
        name: "s",
        steps: [
          { apply: modelServing },
          { wait: { for: "Ready", timeoutSeconds: 10 } },
          { advance: { seconds: 0 } },
          { snapshot: "a" },
          { snapshot: "a" },
        ],
      }),
      [
        'steps[1].wait.for: must be one of "Available", "RolloutComplete", "Seconds"',
        "steps[2].advance.seconds: must be 0.001 or more",
        'steps[4].snapshot: label "a" is used by an earlier snapshot',
      ],
    );
  });

  it("rejects unknown step kinds, steps with several keys, and unknown fields of a step", () => {
    assert.deepEqual(
      problemsOf({
        name: "s",
        steps: [
          { explode: {} },
          { wait: { for: "Seconds" }, advance: { seconds: 1 } },
          { failNode: { name: "n", when: 3 } },
        ],
      }),
      [
        "steps[0].explode: is not a step kind; must be one of apply, wait, snapshot, patch, deletePods, failNode, recoverNode, restartController, restart, recreate, rollback, advance, crashRouter, restartRouter, expect",
        "steps[1]: must be a mapping with exactly one key, the step kind (one of apply, wait, snapshot, patch, deletePods, failNode, recoverNode, restartController, restart, recreate, rollback, advance, crashRouter, restartRouter, expect)",
        "steps[2].failNode.when: is not a known field",
      ],
    );
  });

  it("validates applied ModelServings as tandem validate does, under the step's path", () => {
    const bad = structuredClone(modelServing);
    bad.spec.template.roles[0]!.name = "Server";
    assert.deepEqual(problemsOf({ name: "s", steps: [{ apply: bad }] }), [
      "steps[0].apply.spec.template.roles[0].name: must be a DNS-1035 label: lowercase letters, digits and '-', starting with a letter and ending with a letter or digit",
    ]);
    assert.deepEqual(problemsOf({ name: "s", steps: [{ apply: { ...modelServing, kind: "Deployment" } }] }), [
      "steps[0].apply.kind: must be one of ModelServing, ModelRoute, Pod, Service, ControllerRevision, Event, Lease, Node, Namespace",
    ]);
  });

  it("accepts a valid ModelRoute and validates one as tandem validate does", () => {
    const route = {
      apiVersion: "tandem.dev/v1alpha1",
      kind: "ModelRoute",
      metadata: { name: "r" },
      spec: { model: "m", modelServing: "ms", engine: "vllm", roles: { serve: "server" } },
    };
    assert.equal(parseScenario({ name: "s", steps: [{ apply: route }] }).ok, true);
    const problems = problemsOf({
      name: "s",
      steps: [{ apply: { ...route, spec: { ...route.spec, engine: "trt" } } }],
    });
    assert.equal(problems.length, 1);
    assert.match(problems[0] ?? "", /^steps\[0\]\.apply\.spec\.engine: /);
  });

  it("reports YAML errors, duplicate keys included, and a missing name or steps", () => {
    const duplicate = parseScenarioText("name: a\nname: b\nsteps: []\n");
    if (duplicate.ok) assert.fail("expected a YAML problem");
    assert.match(duplicate.problems[0]?.reason ?? "", /^not valid YAML: Map keys must be unique/);
    assert.deepEqual(problemsOf({ steps: [] }), ["name: is required", "steps: must list at least 1 item"]);
  });
});
