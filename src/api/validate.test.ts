import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseModelServing } from "./parse.ts";
import type { Problem } from "./problems.ts";
import { findCycle } from "./validate.ts";

type Json = Record<string, any>;

function pod(image = "vllm/vllm-openai:v0.11.0"): Json {
  return { spec: { containers: [{ name: "vllm", image }] } };
}

/** A valid 2-role ModelServing (prefill ×2; decode ×1 with one worker); tests mutate a copy. */
function manifest(): Json {
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "llm" },
    spec: {
      replicas: 2,
      template: {
        roles: [
          { name: "prefill", replicas: 2, entryTemplate: pod() },
          { name: "decode", replicas: 1, workerReplicas: 1, entryTemplate: pod(), workerTemplate: pod() },
        ],
      },
    },
  };
}

function problems(mutate: (m: Json) => void): Problem[] {
  const m = manifest();
  mutate(m);
  const result = parseModelServing(m);
  return result.ok ? [] : [...result.problems];
}

/** Asserts that the mutation yields exactly these problems. */
function rejects(mutate: (m: Json) => void, ...expected: [path: string, reason: string][]): void {
  assert.deepEqual(
    problems(mutate),
    expected.map(([path, reason]) => ({ path, reason })),
  );
}

function roleRolling(m: Json): void {
  m.spec.rolloutStrategy = { type: "RoleRollingUpdate" };
}

describe("structure", () => {
  it("accepts the base manifest and applies defaults", () => {
    const result = parseModelServing(manifest());
    assert.ok(result.ok);
    const spec = result.value.spec;
    assert.equal(spec.schedulerName, "default-scheduler");
    assert.equal(spec.revisionHistoryLimit, 10);
    assert.equal(spec.recoveryPolicy, "RoleRecreate");
    assert.deepEqual(spec.drain, { timeoutSeconds: 300 });
    assert.deepEqual(spec.rolloutStrategy, {
      type: "ServingGroupRollingUpdate",
      paused: false,
      rollingUpdateConfiguration: { maxUnavailable: 1, maxSurge: 0, partition: 0 },
    });
    assert.equal(spec.template.restartGracePeriodSeconds, 0);
    assert.equal(spec.template.roles[0]?.workerReplicas, 0);
  });

  it("names unknown fields, wrong types, enums and ranges with their paths", () => {
    rejects((m) => (m.spec.replica = 3), ["spec.replica", "is not a known field"]);
    rejects((m) => (m.spec.replicas = -1), ["spec.replicas", "must be 0 or more"]);
    rejects((m) => (m.spec.replicas = 1.5), ["spec.replicas", "must be an integer, not number 1.5"]);
    rejects((m) => (m.spec.replicas = "2"), ["spec.replicas", 'must be an integer, not string "2"']);
    rejects(
      (m) => (m.spec.recoveryPolicy = "Restart"),
      ["spec.recoveryPolicy", 'must be one of "ServingGroupRecreate", "RoleRecreate", "None"'],
    );
    rejects(
      (m) => delete m.spec.template.roles[0].entryTemplate,
      ["spec.template.roles[0].entryTemplate", "is required"],
    );
    rejects(
      (m) => (m.spec.template.roles[0].entryTemplate.spec.containers = []),
      ["spec.template.roles[0].entryTemplate.spec.containers", "must list at least 1 item"],
    );
    rejects(
      (m) => (m.apiVersion = "workload.serving.volcano.sh/v1alpha1"),
      ["apiVersion", 'must be "tandem.dev/v1alpha1"'],
    );
  });

  it("keeps unknown fields of Kubernetes pod templates", () => {
    const result = parseModelServing(manifest());
    assert.ok(result.ok);
    const m = manifest();
    m.spec.template.roles[0].entryTemplate.spec.nodeSelector = { pool: "h100" };
    m.spec.template.roles[0].entryTemplate.spec.containers[0].resources = { limits: { "nvidia.com/gpu": "1" } };
    const kept = parseModelServing(m);
    assert.ok(kept.ok);
    assert.deepEqual(kept.value.spec.template.roles[0]?.entryTemplate.spec.nodeSelector, { pool: "h100" });
  });
});

describe("roles", () => {
  it("requires 1 to 8 roles", () => {
    rejects((m) => (m.spec.template.roles = []), ["spec.template.roles", "must list at least 1 item"]);
    rejects(
      (m) => (m.spec.template.roles = Array.from({ length: 9 }, (_, i) => ({ name: `r${i}`, entryTemplate: pod() }))),
      ["spec.template.roles", "must list at most 8 items"],
    );
  });

  it("requires unique DNS-1035 names of at most 12 characters", () => {
    rejects(
      (m) => (m.spec.template.roles[1].name = "prefill"),
      ["spec.template.roles[1].name", 'duplicates spec.template.roles[0].name "prefill": role names must be unique'],
    );
    rejects(
      (m) => (m.spec.template.roles[0].name = "Prefill"),
      [
        "spec.template.roles[0].name",
        "must be a DNS-1035 label: lowercase letters, digits and '-', starting with a letter and ending with a letter or digit",
      ],
    );
    rejects(
      (m) => (m.spec.template.roles[0].name = "1prefill"),
      [
        "spec.template.roles[0].name",
        "must be a DNS-1035 label: lowercase letters, digits and '-', starting with a letter and ending with a letter or digit",
      ],
    );
    rejects(
      (m) => (m.spec.template.roles[0].name = "prefill-stage"),
      ["spec.template.roles[0].name", "must be at most 12 characters"],
    );
  });

  it("keeps generated pod names and revision names within 63 characters", () => {
    const long = "a".repeat(50);
    rejects(
      (m) => {
        m.metadata.name = long;
        m.spec.replicas = 10;
      },
      [
        "metadata.name",
        `with role "prefill" the generated pod name "${long}-9-prefill-1-0" has 64 characters, more than 63: shorten metadata.name or the role name`,
      ],
    );
    rejects(
      (m) => (m.metadata.name = "a".repeat(53)),
      [
        "metadata.name",
        'must be at most 52 characters (it has 53): revision names "<name>-<hash>" are label values of at most 63',
      ],
    );
    rejects(
      (m) => (m.metadata.name = "llm.v2"),
      [
        "metadata.name",
        "must be a DNS-1035 label: lowercase letters, digits and '-', starting with a letter and ending with a letter or digit",
      ],
    );
    assert.deepEqual(
      problems((m) => {
        m.metadata.name = "a".repeat(49);
        m.spec.replicas = 10;
      }),
      [],
    );
  });

  it("requires workerTemplate when workerReplicas > 0", () => {
    rejects(
      (m) => delete m.spec.template.roles[1].workerTemplate,
      ["spec.template.roles[1].workerTemplate", "is required when workerReplicas is more than 0 (it is 1)"],
    );
    assert.deepEqual(
      problems((m) => (m.spec.template.roles[1].workerReplicas = 0)),
      [],
    );
  });
});

describe("pod templates", () => {
  it("requires non-empty container images without spaces", () => {
    rejects(
      (m) => (m.spec.template.roles[0].entryTemplate.spec.containers[0].image = ""),
      ["spec.template.roles[0].entryTemplate.spec.containers[0].image", "must not be empty"],
    );
    rejects(
      (m) => (m.spec.template.roles[1].workerTemplate.spec.containers[0].image = "vllm:v1 --x"),
      ["spec.template.roles[1].workerTemplate.spec.containers[0].image", 'must not contain spaces ("vllm:v1 --x")'],
    );
    rejects(
      (m) => (m.spec.template.roles[0].entryTemplate.spec.initContainers = [{ name: "fetch", image: " " }]),
      ["spec.template.roles[0].entryTemplate.spec.initContainers[0].image", 'must not contain spaces (" ")'],
    );
    rejects(
      (m) => delete m.spec.template.roles[0].entryTemplate.spec.containers[0].image,
      ["spec.template.roles[0].entryTemplate.spec.containers[0].image", "is required"],
    );
  });

  it("requires unique container names within a pod", () => {
    rejects(
      (m) => (m.spec.template.roles[0].entryTemplate.spec.initContainers = [{ name: "vllm", image: "busybox" }]),
      [
        "spec.template.roles[0].entryTemplate.spec.initContainers[0].name",
        'duplicates containers[0].name "vllm": container names must be unique within a pod',
      ],
    );
  });

  it("refuses env vars and labels the controller owns", () => {
    rejects(
      (m) =>
        (m.spec.template.roles[0].entryTemplate.spec.containers[0].env = [
          { name: "A", value: "1" },
          { name: "GROUP_SIZE", value: "2" },
        ]),
      [
        "spec.template.roles[0].entryTemplate.spec.containers[0].env[1].name",
        "GROUP_SIZE is set by the controller (GROUP_SIZE, ENTRY_ADDRESS, WORKER_INDEX); remove it from the template",
      ],
    );
    rejects(
      (m) => (m.spec.template.roles[0].entryTemplate.metadata = { labels: { "tandem.dev/group": "0", app: "x" } }),
      [
        'spec.template.roles[0].entryTemplate.metadata.labels["tandem.dev/group"]',
        "uses the prefix tandem.dev/, which is reserved for the controller",
      ],
    );
  });

  it("lets a template carry tandem.dev/restartedAt (set by tandem rollout restart) as an annotation only", () => {
    rejects(
      (m) =>
        (m.spec.template.roles[0].entryTemplate.metadata = {
          annotations: { "tandem.dev/restartedAt": "2026-12-02T01:00:00Z" },
        }),
    );
    rejects(
      (m) => (m.spec.template.roles[0].entryTemplate.metadata = { labels: { "tandem.dev/restartedAt": "now" } }),
      [
        'spec.template.roles[0].entryTemplate.metadata.labels["tandem.dev/restartedAt"]',
        "uses the prefix tandem.dev/, which is reserved for the controller",
      ],
    );
  });
});

describe("budgets", () => {
  it("accepts integers ≥ 0 and percents from 0% to 100%", () => {
    rejects(
      (m) => (m.spec.rolloutStrategy = { rollingUpdateConfiguration: { maxUnavailable: "150%" } }),
      ["spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable", "must be a percent from 0% to 100%, like 25%"],
    );
    rejects(
      (m) => (m.spec.rolloutStrategy = { rollingUpdateConfiguration: { maxSurge: -1 } }),
      ["spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge", "must be 0 or more"],
    );
    rejects(
      (m) => (m.spec.rolloutStrategy = { rollingUpdateConfiguration: { partition: true } }),
      [
        "spec.rolloutStrategy.rollingUpdateConfiguration.partition",
        "must be a non-negative integer or a percent from 0% to 100%",
      ],
    );
    assert.deepEqual(
      problems(
        (m) =>
          (m.spec.rolloutStrategy = {
            rollingUpdateConfiguration: { maxUnavailable: "100%", maxSurge: "0%", partition: 2 },
          }),
      ),
      [],
    );
  });

  it("refuses maxUnavailable and maxSurge both resolving to 0 where something can be updated", () => {
    rejects(
      (m) => (m.spec.rolloutStrategy = { rollingUpdateConfiguration: { maxUnavailable: "49%" } }),
      [
        "spec.rolloutStrategy.rollingUpdateConfiguration",
        "maxUnavailable and maxSurge both resolve to 0 for 2 group(s), so no group could ever be updated: raise one of them",
      ],
    );
    // 1% surge of 2 groups rounds up to 1.
    assert.deepEqual(
      problems((m) => (m.spec.rolloutStrategy = { rollingUpdateConfiguration: { maxUnavailable: 0, maxSurge: "1%" } })),
      [],
    );
    // A partition at or above replicas leaves nothing to update: allowed (it pauses the rollout).
    assert.deepEqual(
      problems((m) => (m.spec.rolloutStrategy = { rollingUpdateConfiguration: { maxUnavailable: 0, partition: 2 } })),
      [],
    );
    rejects(
      (m) => {
        roleRolling(m);
        m.spec.template.roles[0].maxUnavailable = "49%";
      },
      [
        "spec.template.roles[0]",
        'maxUnavailable and maxSurge both resolve to 0 for 2 instance(s) of role "prefill", so none could ever be updated: raise one of them',
      ],
    );
    rejects(
      (m) => {
        roleRolling(m);
        m.spec.rolloutStrategy.rollingUpdateConfiguration = { maxUnavailable: 0 };
      },
      [
        "spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable",
        "resolves to 0 for 2 group(s), so no group could ever be disrupted to update it under RoleRollingUpdate: raise it",
      ],
    );
  });

  it("takes role-level budgets only under RoleRollingUpdate", () => {
    rejects(
      (m) => (m.spec.template.roles[0].partition = 1),
      [
        "spec.template.roles[0].partition",
        "applies only to rolloutStrategy.type RoleRollingUpdate; ServingGroupRollingUpdate replaces whole groups; use spec.rolloutStrategy.rollingUpdateConfiguration.partition",
      ],
    );
    rejects(
      (m) => {
        m.spec.rolloutStrategy = { type: "InPlaceUpdate" };
        m.spec.template.roles[1].maxUnavailable = 1;
      },
      [
        "spec.template.roles[1].maxUnavailable",
        "applies only to rolloutStrategy.type RoleRollingUpdate; InPlaceUpdate takes group-level budgets only; use spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable",
      ],
    );
    assert.deepEqual(
      problems((m) => {
        roleRolling(m);
        m.spec.template.roles[0].partition = "50%";
        m.spec.template.roles[1].maxSurge = 1;
      }),
      [],
    );
  });

  it("takes group-level maxSurge only under ServingGroupRollingUpdate", () => {
    rejects(
      (m) => (m.spec.rolloutStrategy = { type: "InPlaceUpdate", rollingUpdateConfiguration: { maxSurge: 1 } }),
      [
        "spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge",
        "applies only to ServingGroupRollingUpdate; in-place updates keep their pods, so there is nothing to surge",
      ],
    );
    rejects(
      (m) => (m.spec.rolloutStrategy = { type: "RoleRollingUpdate", rollingUpdateConfiguration: { maxSurge: "10%" } }),
      [
        "spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge",
        "applies only to ServingGroupRollingUpdate; set maxSurge on the roles instead",
      ],
    );
    rejects(
      (m) => (m.spec.rolloutStrategy = { type: "InPlaceUpdate", rollingUpdateConfiguration: { maxUnavailable: 0 } }),
      [
        "spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable",
        "resolves to 0 for 2 group(s), so no group could ever be disrupted to update it under InPlaceUpdate: raise it",
      ],
    );
  });
});

describe("coordination", () => {
  function coordinated(m: Json, coordination: Json): void {
    roleRolling(m);
    m.spec.template.roles.push({ name: "router", entryTemplate: pod() });
    m.spec.rolloutStrategy.coordination = coordination;
  }

  it("applies only to RoleRollingUpdate", () => {
    rejects(
      (m) => (m.spec.rolloutStrategy = { coordination: { maxSkew: "10%" } }),
      [
        "spec.rolloutStrategy.coordination",
        "applies only to rolloutStrategy.type RoleRollingUpdate (it is ServingGroupRollingUpdate)",
      ],
    );
  });

  it("requires maxSkew as a percent in (0%, 100%]", () => {
    rejects((m) => coordinated(m, {}), ["spec.rolloutStrategy.coordination.maxSkew", "is required"]);
    rejects(
      (m) => coordinated(m, { maxSkew: 10 }),
      ["spec.rolloutStrategy.coordination.maxSkew", "must be a string, not number 10"],
    );
    rejects(
      (m) => coordinated(m, { maxSkew: "0%" }),
      [
        "spec.rolloutStrategy.coordination.maxSkew",
        "must be more than 0%: with no skew allowed no role could ever start",
      ],
    );
    rejects(
      (m) => coordinated(m, { maxSkew: "101%" }),
      ["spec.rolloutStrategy.coordination.maxSkew", "must be a percent from 1% to 100%, like 10%"],
    );
  });

  it("requires existing, distinct roles, at least two of them", () => {
    rejects(
      (m) => coordinated(m, { maxSkew: "10%", roles: ["prefill", "decoder"] }),
      ["spec.rolloutStrategy.coordination.roles[1]", 'names no role in spec.template.roles ("decoder")'],
      ["spec.rolloutStrategy.coordination.roles", "must include at least 2 roles to coordinate (it includes 1)"],
    );
    rejects(
      (m) => coordinated(m, { maxSkew: "10%", roles: ["prefill", "prefill"] }),
      ["spec.rolloutStrategy.coordination.roles[1]", 'lists role "prefill" twice'],
      ["spec.rolloutStrategy.coordination.roles", "must include at least 2 roles to coordinate (it includes 1)"],
    );
    rejects(
      (m) => {
        roleRolling(m);
        m.spec.template.roles.pop();
        m.spec.rolloutStrategy.coordination = { maxSkew: "10%" };
      },
      ["spec.rolloutStrategy.coordination", "must include at least 2 roles to coordinate (it includes 1)"],
    );
  });

  it("requires dependencies between participating roles, without self-edges or cycles", () => {
    const outside =
      'names role "router", which does not take part in the coordination (see spec.rolloutStrategy.coordination.roles and spec.template.roles)';
    rejects(
      (m) =>
        coordinated(m, {
          maxSkew: "10%",
          roles: ["prefill", "decode"],
          dependencies: [{ role: "router", dependsOn: ["decode"] }],
        }),
      ["spec.rolloutStrategy.coordination.dependencies[0].role", outside],
    );
    rejects(
      (m) => coordinated(m, { maxSkew: "10%", dependencies: [{ role: "decode", dependsOn: ["decode"] }] }),
      ["spec.rolloutStrategy.coordination.dependencies[0].dependsOn[0]", 'role "decode" cannot depend on itself'],
    );
    rejects(
      (m) =>
        coordinated(m, {
          maxSkew: "10%",
          dependencies: [
            { role: "router", dependsOn: ["decode"] },
            { role: "decode", dependsOn: ["prefill"] },
            { role: "prefill", dependsOn: ["router"] },
          ],
        }),
      ["spec.rolloutStrategy.coordination.dependencies", "form a cycle: router -> decode -> prefill -> router"],
    );
    rejects(
      (m) =>
        coordinated(m, {
          maxSkew: "10%",
          dependencies: [
            { role: "router", dependsOn: ["decode"] },
            { role: "router", dependsOn: ["prefill"] },
          ],
        }),
      [
        "spec.rolloutStrategy.coordination.dependencies[1].role",
        'lists the dependencies of role "router" a second time; merge them into one entry',
      ],
    );
    rejects(
      (m) => coordinated(m, { maxSkew: "10%", dependencies: [{ role: "router", dependsOn: [] }] }),
      ["spec.rolloutStrategy.coordination.dependencies[0].dependsOn", "must list at least 1 item"],
    );
    assert.deepEqual(
      problems((m) =>
        coordinated(m, {
          maxSkew: "10%",
          dependencies: [
            { role: "router", dependsOn: ["decode", "prefill"] },
            { role: "decode", dependsOn: ["prefill"] },
          ],
        }),
      ),
      [],
    );
  });

  it("findCycle returns the first cycle in listing order, or undefined for a DAG", () => {
    assert.deepEqual(
      findCycle(
        new Map([
          ["a", ["b"]],
          ["b", ["c"]],
          ["c", []],
        ]),
      ),
      undefined,
    );
    assert.deepEqual(
      findCycle(
        new Map([
          ["a", ["b"]],
          ["b", ["c"]],
          ["c", ["b"]],
        ]),
      ),
      ["b", "c", "b"],
    );
  });
});

describe("gang policy and plugins", () => {
  it("requires minRoleReplicas keys to be roles with at most their replicas", () => {
    rejects(
      (m) => (m.spec.template.gangPolicy = { minRoleReplicas: { prefil: 1 } }),
      ["spec.template.gangPolicy.minRoleReplicas.prefil", 'names no role in spec.template.roles ("prefil")'],
    );
    rejects(
      (m) => (m.spec.template.gangPolicy = { minRoleReplicas: { decode: 2 } }),
      ["spec.template.gangPolicy.minRoleReplicas.decode", 'is 2, more than the 1 replica(s) of role "decode"'],
    );
    assert.deepEqual(
      problems((m) => (m.spec.template.gangPolicy = { minRoleReplicas: { prefill: 2, decode: 0 } })),
      [],
    );
  });

  it("requires plugin scopes to name roles", () => {
    rejects(
      (m) => (m.spec.plugins = [{ name: "lora", scope: { roles: ["decode", "x"], target: "Entry" } }]),
      ["spec.plugins[0].scope.roles[1]", 'names no role in spec.template.roles ("x")'],
    );
    rejects(
      (m) => (m.spec.plugins = [{ name: "lora", scope: { target: "Leader" } }]),
      ["spec.plugins[0].scope.target", 'must be one of "All", "Entry", "Worker"'],
    );
  });
});
