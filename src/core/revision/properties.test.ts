/**
 * Property tests of revision identity (DESIGN §2.6): what the hash ignores, what it sees, and the
 * encode/decode and rollback round trips. Runs are seeded, so every run checks the same cases.
 *
 * Inputs are parsed with the zod schema (structure and defaults); semantic validation never changes
 * a parsed value, so the projection sees exactly what `parseModelServing` would return.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { ModelServing } from "../../api/index.ts";
import type { ModelServingInput } from "../../api/index.ts";
import { applyRevision } from "./apply.ts";
import { decodeControllerRevision, encodeControllerRevision } from "./controller-revision.ts";
import { revisionBytes, revisionHash } from "./hash.ts";
import { normalizeRevisionData, revisionData } from "./projection.ts";

const SEED = 42;
const RUNS = 200;
function run<Ts extends unknown[]>(property: fc.IPropertyWithHooks<Ts>): void {
  fc.assert(property, { seed: SEED, numRuns: RUNS });
}

type Json = Record<string, unknown>;

// ---- arbitraries: ModelServing inputs as a user writes them (defaults mostly omitted) ----

const imageArb = fc.constantFrom("vllm:v1", "vllm:v2", "sglang:v1", "registry.local/engine@sha256:abc");
const envArb = fc.uniqueArray(
  fc.record({ name: fc.constantFrom("A", "B", "HF_HOME"), value: fc.constantFrom("1", "x", "/data") }),
  {
    selector: (env) => env.name,
    maxLength: 3,
  },
);
const containerArb = (name: string) =>
  fc.record(
    {
      name: fc.constant(name),
      image: imageArb,
      args: fc.array(fc.constantFrom("--model", "m", "", "--tp=2"), { minLength: 1, maxLength: 3 }),
      env: envArb.filter((env) => env.length > 0),
      resources: fc.record({ limits: fc.record({ "nvidia.com/gpu": fc.integer({ min: 1, max: 8 }) }) }),
    },
    { requiredKeys: ["name", "image"] },
  );
const containersArb = fc
  .uniqueArray(fc.constantFrom("engine", "sidecar", "proxy"), { minLength: 1, maxLength: 2 })
  .chain((names) => fc.tuple(...names.map(containerArb)));
const templateArb = fc.record(
  {
    metadata: fc.record({
      labels: fc.dictionary(fc.constantFrom("app", "tier", "canary"), fc.constantFrom("", "a", "b"), {
        minKeys: 1,
        maxKeys: 2,
      }),
    }),
    spec: fc.record(
      {
        containers: containersArb,
        initContainers: fc.tuple(containerArb("init")),
        nodeSelector: fc.dictionary(fc.constantFrom("pool", "zone"), fc.constantFrom("gpu", "a"), {
          minKeys: 1,
          maxKeys: 2,
        }),
      },
      { requiredKeys: ["containers"] },
    ),
  },
  { requiredKeys: ["spec"] },
);
const roleArb = (name: string) =>
  fc
    .record({
      replicas: fc.integer({ min: 0, max: 4 }),
      workerReplicas: fc.integer({ min: 0, max: 3 }),
      entry: templateArb,
      worker: templateArb,
    })
    .map(({ replicas, workerReplicas, entry, worker }): Json => ({
      name,
      replicas,
      entryTemplate: entry,
      ...(workerReplicas > 0 ? { workerReplicas, workerTemplate: worker } : {}),
    }));
const pluginsArb = (roleNames: readonly string[]) =>
  fc.array(
    fc.record(
      {
        name: fc.constantFrom("lora", "metrics", "topology"),
        config: fc.record(
          { level: fc.integer({ min: 0, max: 3 }), mode: fc.constantFrom("fast", "safe") },
          { requiredKeys: [] },
        ),
        scope: fc.record(
          { roles: fc.subarray([...roleNames]), target: fc.constantFrom("All", "Entry", "Worker") },
          { requiredKeys: [] },
        ),
      },
      { requiredKeys: ["name"] },
    ),
    { minLength: 1, maxLength: 3 },
  );
const modelServingArb: fc.Arbitrary<Json> = fc
  .uniqueArray(fc.constantFrom("prefill", "decode", "router", "embed"), { minLength: 1, maxLength: 4 })
  .chain((names) =>
    fc.record(
      {
        roles: fc.tuple(...names.map(roleArb)),
        plugins: pluginsArb(names),
        schedulerName: fc.constantFrom("volcano", "kai"),
        replicas: fc.integer({ min: 0, max: 6 }),
      },
      { requiredKeys: ["roles"] },
    ),
  )
  .map(({ roles, ...spec }) => ({
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "m" },
    spec: { ...spec, template: { roles } },
  }));

// ---- helpers ----

function parse(input: unknown): ModelServing {
  return ModelServing.parse(input);
}

function hashOf(input: unknown): string {
  return revisionHash(revisionData(parse(input)), 0);
}

function clone<T>(value: T): T {
  return structuredClone(value);
}

function rolesOf(input: Json): Json[] {
  return ((input.spec as Json).template as Json).roles as Json[];
}

function templatesOf(input: Json): Json[] {
  return rolesOf(input).flatMap(
    (role) => [role.entryTemplate, role.workerTemplate].filter((t) => t !== undefined) as Json[],
  );
}

function containersOf(template: Json): Json[] {
  const spec = template.spec as Json;
  return [...(spec.containers as Json[]), ...((spec.initContainers as Json[] | undefined) ?? [])];
}

/** Rebuilds every object with its keys in reverse order. */
function reverseKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reverseKeys);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(
    Object.entries(value)
      .reverse()
      .map(([key, member]) => [key, reverseKeys(member)]),
  );
}

/** Writes out the defaults of every versioned field the input omits. */
function withExplicitDefaults(input: Json): Json {
  const out = clone(input);
  const spec = out.spec as Json;
  spec.schedulerName ??= "default-scheduler";
  for (const role of rolesOf(out)) role.workerReplicas ??= 0;
  for (const plugin of (spec.plugins as Json[] | undefined) ?? []) {
    if (plugin.scope !== undefined) (plugin.scope as Json).target ??= "All";
  }
  return out;
}

const EMPTY_ADDITIONS = [
  "labels",
  "annotations",
  "env",
  "initContainers",
  "volumes",
  "plugins",
  "workingDir",
  "resources",
  "securityContext",
] as const;
type EmptyAddition = (typeof EMPTY_ADDITIONS)[number];

/** Adds empty values where the input has none: `{}`, `[]`, `""`, nested empties. */
function withEmpties(input: Json, kinds: readonly EmptyAddition[]): Json {
  const out = clone(input);
  const spec = out.spec as Json;
  if (kinds.includes("plugins")) spec.plugins ??= [];
  for (const template of templatesOf(out)) {
    const metadata = (template.metadata ??= {}) as Json;
    if (kinds.includes("labels")) metadata.labels ??= {};
    if (kinds.includes("annotations")) metadata.annotations = {};
    const podSpec = template.spec as Json;
    if (kinds.includes("initContainers")) podSpec.initContainers ??= [];
    if (kinds.includes("volumes")) podSpec.volumes = [];
    for (const container of containersOf(template)) {
      if (kinds.includes("env")) container.env ??= [];
      if (kinds.includes("workingDir")) container.workingDir = "";
      if (kinds.includes("resources")) container.resources ??= { requests: {} };
      if (kinds.includes("securityContext")) container.securityContext = { capabilities: { add: [] }, runAsUser: null };
    }
  }
  return out;
}

/** Adds what the controller injects into pods: env, the serving gate, reserved labels. */
function withInjected(ms: ModelServing): ModelServing {
  const out = clone(ms);
  for (const role of out.spec.template.roles) {
    for (const template of [role.entryTemplate, role.workerTemplate]) {
      if (template === undefined) continue;
      const labels = ((template.metadata ??= {}).labels ??= {});
      labels["tandem.dev/revision"] = "m-0123456789";
      (template.spec as Json).readinessGates = [{ conditionType: "tandem.dev/serving" }];
      for (const container of [...template.spec.containers, ...(template.spec.initContainers ?? [])]) {
        container.env = [
          { name: "GROUP_SIZE", value: "2" },
          ...(container.env ?? []),
          { name: "ENTRY_ADDRESS", value: "m-0-a-0-0.ns" },
          { name: "WORKER_INDEX", value: "0" },
        ];
      }
    }
  }
  return out;
}

// ---- properties ----

describe("revision hash ignores what does not change pods", () => {
  it("ignores key order at every level", () => {
    run(fc.property(modelServingArb, (input) => assert.equal(hashOf(reverseKeys(input)), hashOf(input))));
  });

  it("ignores role order", () => {
    run(
      fc.property(modelServingArb, fc.nat(), (input, rotation) => {
        const rotated = clone(input);
        const roles = rolesOf(rotated);
        const shift = rotation % roles.length;
        ((rotated.spec as Json).template as Json).roles = [...roles.slice(shift), ...roles.slice(0, shift)].reverse();
        assert.equal(hashOf(rotated), hashOf(input));
      }),
    );
  });

  it("ignores explicit defaults vs omitted fields", () => {
    run(fc.property(modelServingArb, (input) => assert.equal(hashOf(withExplicitDefaults(input)), hashOf(input))));
  });

  it("ignores empty maps, arrays and strings vs absent", () => {
    run(
      fc.property(modelServingArb, fc.subarray([...EMPTY_ADDITIONS]), (input, kinds) =>
        assert.equal(hashOf(withEmpties(input, kinds)), hashOf(input)),
      ),
    );
  });

  it("ignores controller-injected env, the serving readiness gate and reserved labels", () => {
    run(
      fc.property(modelServingArb, (input) => {
        const ms = parse(input);
        assert.equal(revisionHash(revisionData(withInjected(ms)), 0), revisionHash(revisionData(ms), 0));
      }),
    );
  });

  it("ignores every runtime field", () => {
    const runtimeChanges: readonly ((spec: Json, roles: Json[]) => void)[] = [
      (spec) => (spec.replicas = 7),
      (_spec, roles) => ((roles[0] as Json).replicas = 9),
      (_spec, roles) => Object.assign(roles[0] as Json, { maxUnavailable: "50%", maxSurge: 2, partition: 1 }),
      (spec) => (spec.revisionHistoryLimit = 2),
      (spec) => (spec.recoveryPolicy = "None"),
      (spec) => (spec.drain = { timeoutSeconds: 5 }),
      (spec) =>
        (spec.rolloutStrategy = {
          type: "RoleRollingUpdate",
          paused: true,
          rollingUpdateConfiguration: { maxUnavailable: 3, maxSurge: 1, partition: "50%" },
        }),
      (spec, roles) =>
        (spec.rolloutStrategy = { coordination: { maxSkew: "10%", roles: roles.map((role) => role.name) } }),
      (spec) => ((spec.template as Json).restartGracePeriodSeconds = 30),
      (spec, roles) =>
        ((spec.template as Json).gangPolicy = { minRoleReplicas: { [(roles[0] as Json).name as string]: 1 } }),
    ];
    run(
      fc.property(modelServingArb, fc.nat({ max: runtimeChanges.length - 1 }), (input, which) => {
        const changed = clone(input);
        (runtimeChanges[which] as (spec: Json, roles: Json[]) => void)(changed.spec as Json, rolesOf(changed));
        assert.equal(hashOf(changed), hashOf(input));
      }),
    );
  });
});

describe("revision hash sees every versioned change", () => {
  const versionedChanges: readonly ((spec: Json, roles: Json[]) => void)[] = [
    (spec) => (spec.schedulerName = "another-scheduler"),
    (spec) => (spec.plugins = [...((spec.plugins as Json[] | undefined) ?? []), { name: "new-plugin" }]),
    (spec) => (spec.plugins = [{ name: "only", config: { knob: "changed" } }]),
    (_spec, roles) => (firstContainer(roles).image = "vllm:v99"),
    (_spec, roles) => (firstContainer(roles).args = ["--changed"]),
    (_spec, roles) => (firstContainer(roles).env = [{ name: "NEW", value: "1" }]),
    (_spec, roles) => (((roles[0] as Json).entryTemplate as Json).metadata = { labels: { fresh: "" } }),
    (_spec, roles) =>
      Object.assign(roles[0] as Json, {
        workerReplicas: (((roles[0] as Json).workerReplicas as number | undefined) ?? 0) + 1,
        workerTemplate: { spec: { containers: [{ name: "w", image: "w:1" }] } },
      }),
    (_spec, roles) =>
      roles.push({ name: "extra", entryTemplate: { spec: { containers: [{ name: "c", image: "c:1" }] } } }),
    (_spec, roles) => ((roles[0] as Json).name = "renamed"),
  ];
  it("changes the hash on any change to a versioned field", () => {
    run(
      fc.property(modelServingArb, fc.nat({ max: versionedChanges.length - 1 }), (input, which) => {
        const changed = clone(input);
        (versionedChanges[which] as (spec: Json, roles: Json[]) => void)(changed.spec as Json, rolesOf(changed));
        assert.notEqual(hashOf(changed), hashOf(input), `change #${which} kept the hash`);
      }),
    );
  });
});

function firstContainer(roles: Json[]): Json {
  return (((roles[0] as Json).entryTemplate as Json).spec as { containers: Json[] }).containers[0] as Json;
}

describe("revision data round trips", () => {
  it("normalization is idempotent", () => {
    run(
      fc.property(modelServingArb, (input) => {
        const data = revisionData(parse(input));
        assert.equal(revisionBytes(normalizeRevisionData(data)), revisionBytes(data));
      }),
    );
  });

  it("decodes what it encodes, for any collision count", () => {
    run(
      fc.property(
        modelServingArb,
        fc.integer({ min: 0, max: 3 }),
        fc.integer({ min: 1, max: 50 }),
        (input, collisionCount, revision) => {
          const data = revisionData(parse(input));
          const encoded = encodeControllerRevision({
            owner: { name: "m", uid: "u-1" },
            data,
            revision,
            collisionCount,
          });
          // Through JSON, as the API server stores it.
          const decoded = decodeControllerRevision(JSON.parse(JSON.stringify(encoded)));
          assert.ok(decoded.ok, decoded.ok ? "" : decoded.reason);
          assert.equal(decoded.revision.name, encoded.metadata.name);
          assert.equal(decoded.revision.revision, revision);
          assert.equal(decoded.revision.collisionCount, collisionCount);
          assert.equal(revisionBytes(decoded.revision.data), revisionBytes(data));
        },
      ),
    );
  });

  it("rollback restores the revision's versioned fields and keeps the runtime ones", () => {
    run(
      fc.property(modelServingArb, modelServingArb, (currentInput, targetInput) => {
        const current = parse(currentInput);
        const target = revisionData(parse(targetInput));
        const spec = applyRevision(current.spec, target);
        const rolledBack = parse({ ...current, spec } satisfies ModelServingInput);
        assert.equal(revisionBytes(revisionData(rolledBack)), revisionBytes(target));
        assert.equal(rolledBack.spec.replicas, current.spec.replicas);
        for (const role of rolledBack.spec.template.roles) {
          const before = current.spec.template.roles.find((candidate) => candidate.name === role.name);
          assert.equal(role.replicas, before?.replicas ?? 1);
        }
      }),
    );
  });
});
