/**
 * fast-check arbitraries for ModelServing manifests as users write them: optional fields present
 * or omitted at random, values within the valid ranges. Shared by property tests.
 */
import fc from "fast-check";

const roleNames = ["prefill", "decode", "encode", "router", "server"] as const;

export const intOrPercent = fc.oneof(
  fc.integer({ min: 0, max: 4 }),
  fc.integer({ min: 0, max: 100 }).map((p) => `${p}%`),
);

const container = fc.record(
  {
    name: fc.constantFrom("vllm", "sglang"),
    image: fc.constantFrom("vllm:v1", "vllm:v2", "sglang:v0.5"),
    args: fc.array(fc.constantFrom("--tp", "8", "--pp", "2"), { maxLength: 3 }),
    env: fc.array(
      fc.record(
        { name: fc.constantFrom("HF_HOME", "LOG_LEVEL"), value: fc.constantFrom("a", "b") },
        { noNullPrototype: true },
      ),
      { maxLength: 1 },
    ),
  },
  { requiredKeys: ["name", "image"], noNullPrototype: true },
);

export const podTemplate = fc.record(
  {
    metadata: fc.record(
      {
        labels: fc.dictionary(fc.constantFrom("app", "tier"), fc.constantFrom("x", "y"), {
          maxKeys: 2,
          noNullPrototype: true,
        }),
      },
      { requiredKeys: [], noNullPrototype: true },
    ),
    spec: fc.record(
      { containers: fc.array(container, { minLength: 1, maxLength: 1 }), nodeSelector: fc.constant({ pool: "gpu" }) },
      { requiredKeys: ["containers"], noNullPrototype: true },
    ),
  },
  { requiredKeys: ["spec"], noNullPrototype: true },
);

const role = (name: string) =>
  fc
    .record(
      {
        replicas: fc.integer({ min: 0, max: 4 }),
        workerReplicas: fc.integer({ min: 0, max: 3 }),
        entryTemplate: podTemplate,
        workerTemplate: podTemplate,
      },
      { requiredKeys: ["entryTemplate", "workerTemplate"], noNullPrototype: true },
    )
    .map((r) => ({ name, ...r }));

/** A structurally valid ModelServing input with 1–3 distinct roles under ServingGroupRollingUpdate. */
export const modelServingInput = fc
  .uniqueArray(fc.constantFrom(...roleNames), { minLength: 1, maxLength: 3 })
  .chain((names) => fc.tuple(...names.map(role)))
  .chain((roles) =>
    fc.record(
      {
        replicas: fc.integer({ min: 0, max: 5 }),
        schedulerName: fc.constantFrom("default-scheduler", "volcano"),
        revisionHistoryLimit: fc.integer({ min: 0, max: 20 }),
        recoveryPolicy: fc.constantFrom("ServingGroupRecreate", "RoleRecreate", "None"),
        drain: fc.record(
          { timeoutSeconds: fc.integer({ min: 0, max: 900 }) },
          { requiredKeys: [], noNullPrototype: true },
        ),
        rolloutStrategy: fc.record(
          {
            paused: fc.boolean(),
            rollingUpdateConfiguration: fc.record(
              { maxUnavailable: fc.constant(1), maxSurge: intOrPercent, partition: intOrPercent },
              { requiredKeys: [], noNullPrototype: true },
            ),
          },
          { requiredKeys: [], noNullPrototype: true },
        ),
        template: fc.record(
          { restartGracePeriodSeconds: fc.integer({ min: 0, max: 60 }), roles: fc.constant(roles) },
          { requiredKeys: ["roles"], noNullPrototype: true },
        ),
      },
      { requiredKeys: ["template"], noNullPrototype: true },
    ),
  )
  .map((spec) => ({ apiVersion: "tandem.dev/v1alpha1", kind: "ModelServing", metadata: { name: "llm" }, spec }));
