import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseModelServing } from "../../api/index.ts";
import type { ModelServing, ModelServingInput } from "../../api/index.ts";
import { applyRevision } from "./apply.ts";
import { revisionBytes } from "./hash.ts";
import { revisionData } from "./projection.ts";

const template = (image: string) => ({ spec: { containers: [{ name: "engine", image }] } });

/** v1: prefill ×4 and decode with 1 worker, coordinated, with a gang minimum. */
const V1: ModelServingInput = {
  apiVersion: "tandem.dev/v1alpha1",
  kind: "ModelServing",
  metadata: { name: "llama" },
  spec: {
    replicas: 2,
    rolloutStrategy: {
      type: "RoleRollingUpdate",
      rollingUpdateConfiguration: { maxUnavailable: 1 },
      coordination: { maxSkew: "10%", dependencies: [{ role: "decode", dependsOn: ["prefill"] }] },
    },
    template: {
      gangPolicy: { minRoleReplicas: { prefill: 2, decode: 1 } },
      roles: [
        { name: "prefill", replicas: 4, maxUnavailable: 1, entryTemplate: template("vllm:v1") },
        {
          name: "decode",
          replicas: 2,
          workerReplicas: 1,
          entryTemplate: template("vllm:v1"),
          workerTemplate: template("vllm:v1"),
        },
      ],
    },
  },
};

function valid(input: unknown): ModelServing {
  const parsed = parseModelServing(input);
  if (!parsed.ok) assert.fail(JSON.stringify(parsed.problems));
  return parsed.value;
}

/** `base` with its spec edited by `edit` (on a copy). */
function edited(base: ModelServing, edit: (spec: ModelServing["spec"]) => void): ModelServing {
  const copy = structuredClone(base);
  edit(copy.spec);
  return valid(copy);
}

describe("applyRevision", () => {
  const v1 = valid(V1);
  const v1Data = revisionData(v1);

  it("rolls back the image but keeps capacity scaled to 6; workerReplicas follows the revision", () => {
    const v2 = edited(v1, (spec) => {
      const decode = spec.template.roles[1];
      if (decode?.workerTemplate === undefined) return;
      decode.entryTemplate = template("vllm:v2");
      decode.workerReplicas = 3;
      decode.workerTemplate = template("vllm:v2");
    });
    const scaled = edited(v2, (spec) => {
      spec.replicas = 6;
      const prefill = spec.template.roles[0];
      if (prefill !== undefined) prefill.replicas = 6;
    });
    const rolledBack = valid({ ...scaled, spec: applyRevision(scaled.spec, v1Data) });
    assert.equal(rolledBack.spec.replicas, 6);
    assert.deepEqual(
      rolledBack.spec.template.roles.map((role) => [role.name, role.replicas, role.workerReplicas]),
      [
        ["prefill", 6, 0],
        ["decode", 2, 1],
      ],
    );
    assert.equal(revisionBytes(revisionData(rolledBack)), revisionBytes(v1Data));
    assert.deepEqual(rolledBack.spec.rolloutStrategy, scaled.spec.rolloutStrategy);
    assert.deepEqual(rolledBack.spec.template.gangPolicy, scaled.spec.template.gangPolicy);
  });

  it("keeps every runtime field of the spec", () => {
    const runtime = edited(v1, (spec) => {
      Object.assign(spec, { revisionHistoryLimit: 3, recoveryPolicy: "None", drain: { timeoutSeconds: 9 } });
      spec.rolloutStrategy.paused = true;
      spec.template.restartGracePeriodSeconds = 20;
    });
    const other = revisionData(edited(v1, (spec) => (spec.schedulerName = "volcano")));
    const result = applyRevision(runtime.spec, other);
    assert.deepEqual({ ...result, schedulerName: "default-scheduler" }, runtime.spec);
    assert.equal(result.schedulerName, "volcano");
  });

  it("appends roles only in the revision in name order with replicas 1, and removes roles absent from it", () => {
    const three = edited(v1, (spec) => {
      spec.template.roles = [
        { name: "router", replicas: 3, workerReplicas: 0, entryTemplate: template("router:v1") },
        { name: "embed", replicas: 1, workerReplicas: 0, entryTemplate: template("embed:v1") },
        ...spec.template.roles,
      ];
    });
    const onlyRouter = edited(v1, (spec) => {
      spec.rolloutStrategy = {
        type: "ServingGroupRollingUpdate",
        paused: false,
        rollingUpdateConfiguration: { maxUnavailable: 1, maxSurge: 0, partition: 0 },
      };
      delete spec.template.gangPolicy;
      spec.template.roles = [{ name: "router", replicas: 5, workerReplicas: 0, entryTemplate: template("router:v0") }];
    });
    const result = applyRevision(onlyRouter.spec, revisionData(three));
    assert.deepEqual(
      result.template.roles.map((role) => [role.name, role.replicas]),
      [
        ["router", 5],
        ["decode", 1],
        ["embed", 1],
        ["prefill", 1],
      ],
    );
    assert.deepEqual(result.template.roles[0]?.entryTemplate, template("router:v1"));
    valid({ ...onlyRouter, spec: result });
  });

  it("removes references to removed roles from gangPolicy and coordination", () => {
    const prefillOnly = revisionData(
      edited(v1, (spec) => {
        spec.rolloutStrategy.coordination = undefined;
        spec.template.gangPolicy = undefined;
        spec.template.roles = spec.template.roles.slice(0, 1);
      }),
    );
    const result = applyRevision(v1.spec, prefillOnly);
    assert.deepEqual(result.template.gangPolicy, { minRoleReplicas: { prefill: 2 } });
    // One role left: nothing to coordinate, so the rollback stays valid.
    assert.equal(result.rolloutStrategy.coordination, undefined);
  });

  it("drops a coordination whose explicit role list loses every member", () => {
    const coordinated = edited(v1, (spec) => {
      spec.template.roles.push({
        name: "router",
        replicas: 1,
        workerReplicas: 0,
        entryTemplate: template("router:v1"),
      });
      spec.rolloutStrategy.coordination = { maxSkew: "10%", roles: ["prefill", "decode"] };
    });
    const routerOnly = revisionData(
      edited(v1, (spec) => {
        spec.rolloutStrategy.coordination = undefined;
        spec.template.gangPolicy = undefined;
        spec.template.roles = [
          { name: "router", replicas: 1, workerReplicas: 0, entryTemplate: template("router:v1") },
        ];
      }),
    );
    assert.equal(applyRevision(coordinated.spec, routerOnly).rolloutStrategy.coordination, undefined);
  });

  it("removes plugins and a workers' template the revision does not have, and modifies neither argument", () => {
    const withExtras = edited(v1, (spec) => {
      spec.plugins = [{ name: "lora" }];
    });
    const noWorkers = edited(v1, (spec) => {
      const decode = spec.template.roles[1];
      if (decode === undefined) return;
      decode.workerReplicas = 0;
      delete decode.workerTemplate;
    });
    const data = revisionData(noWorkers);
    const before = JSON.stringify([withExtras.spec, data]);
    const result = applyRevision(withExtras.spec, data);
    assert.equal(result.plugins, undefined);
    assert.equal(result.template.roles[1]?.workerTemplate, undefined);
    assert.equal(JSON.stringify([withExtras.spec, data]), before);
    assert.notEqual(
      result.template.roles[0]?.entryTemplate,
      data.roles.find((role) => role.name === "prefill")?.entryTemplate,
    );
  });
});
