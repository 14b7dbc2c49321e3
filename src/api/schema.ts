/**
 * The ModelServing API (DESIGN §1), as one zod schema. Everything else derives from it: the
 * TypeScript types below, defaulting (zod `default`/`prefault`), the structural errors of
 * `parseModelServing`, and the CRD's OpenAPI v3 schema (`crd.ts`). Semantic rules that span fields
 * live in `validate.ts`.
 *
 * Objects Tandem owns are strict (an unknown field is an error, so a typo never silently does
 * nothing); Kubernetes types Tandem does not own (pod templates, plugin config) keep unknown
 * fields and are marked `x-kubernetes-preserve-unknown-fields` for the API server.
 */
import { z } from "zod";
import { MAX_MODEL_SERVING_NAME_LENGTH } from "./wellknown.ts";
import { quote } from "./problems.ts";

export const API_GROUP = "tandem.dev";
export const API_VERSION = "v1alpha1";
export const API_GROUP_VERSION = `${API_GROUP}/${API_VERSION}`;
export const KIND = "ModelServing";
export const PLURAL = "modelservings";
export const SHORT_NAME = "msv";

/** Keeps unknown fields, both in zod (`looseObject`) and for the API server's pruning. */
const PRESERVE = { "x-kubernetes-preserve-unknown-fields": true } as const;

const nonNegativeInt = () => z.int32().min(0);

/** A percent from 0% to 100%, the only string form of an IntOrString budget. */
export const PERCENT_PATTERN = /^(100|[1-9]?[0-9])%$/;

/** A DNS-1035 label (without its 63-character limit, which callers state themselves). */
export const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

/** Kubernetes IntOrString restricted to budgets: an integer ≥ 0 or a percent from 0% to 100%. */
export const IntOrPercent = z
  .union(
    [nonNegativeInt(), z.string().regex(PERCENT_PATTERN, { error: "must be a percent from 0% to 100%, like 25%" })],
    { error: "must be a non-negative integer or a percent from 0% to 100%" },
  )
  .meta({ "x-kubernetes-int-or-string": true });
export type IntOrPercent = z.infer<typeof IntOrPercent>;

const StringMap = z.record(z.string(), z.string());

export const EnvVar = z.looseObject({
  name: z.string().min(1),
  value: z.string().optional(),
  valueFrom: z.looseObject({}).meta(PRESERVE).optional(),
});

export const Container = z
  .looseObject({
    name: z.string().min(1),
    image: z
      .string()
      .min(1)
      .regex(/^\S*$/, {
        error: (issue) => `must not contain spaces (${typeof issue.input === "string" ? quote(issue.input) : ""})`,
      }),
    env: z.array(EnvVar).optional(),
  })
  .meta(PRESERVE);
export type Container = z.infer<typeof Container>;

export const PodSpec = z
  .looseObject({
    containers: z.array(Container).min(1),
    initContainers: z.array(Container).optional(),
    schedulerName: z.string().optional(),
  })
  .meta(PRESERVE);
export type PodSpec = z.infer<typeof PodSpec>;

export const PodTemplateSpec = z.strictObject({
  metadata: z
    .looseObject({ labels: StringMap.optional(), annotations: StringMap.optional() })
    .meta(PRESERVE)
    .optional(),
  spec: PodSpec,
});
export type PodTemplateSpec = z.infer<typeof PodTemplateSpec>;

/** Why a name is not a DNS-1035 label, in plain words. */
export const DNS1035_REASON =
  "must be a DNS-1035 label: lowercase letters, digits and '-', starting with a letter and ending with a letter or digit";

/** A role name: a DNS-1035 label of at most 12 characters (it is part of every pod name). */
export const RoleName = z.string({ error: "is required" }).max(12).regex(DNS1035_LABEL, { error: DNS1035_REASON });

/** A ModelServing name as another object names it (a route): what `validate.ts` requires of metadata.name. */
export const ModelServingName = z
  .string({ error: "is required" })
  .max(MAX_MODEL_SERVING_NAME_LENGTH)
  .regex(DNS1035_LABEL, { error: DNS1035_REASON });

export const Role = z.strictObject({
  name: RoleName.describe("Role name: DNS-1035 label, at most 12 characters."),
  replicas: nonNegativeInt().default(1).describe("Instances of this role in each ServingGroup."),
  entryTemplate: PodTemplateSpec.describe("Pod template of each instance's entry pod (k=0). Versioned."),
  workerReplicas: nonNegativeInt().default(0).describe("Worker pods per instance. Versioned."),
  workerTemplate: PodTemplateSpec.optional().describe(
    "Pod template of the workers; required if workerReplicas > 0. Versioned.",
  ),
  maxUnavailable: IntOrPercent.optional().describe(
    "Instances of this role that may be unavailable in each group during an update (default 1; percent of role replicas, rounded down).",
  ),
  maxSurge: IntOrPercent.optional().describe(
    "Extra instances of this role per group during an update (default 0; percent rounded up).",
  ),
  partition: IntOrPercent.optional().describe(
    "Instances with ordinal below this keep their revision (default 0; percent rounded up).",
  ),
});
export type Role = z.infer<typeof Role>;

export const GangPolicy = z.strictObject({
  minRoleReplicas: z.record(z.string(), nonNegativeInt()).optional(),
});

export const ServingGroupTemplate = z.strictObject({
  restartGracePeriodSeconds: nonNegativeInt()
    .default(0)
    .describe("How long a failed pod may stay before recovery acts."),
  gangPolicy: GangPolicy.optional(),
  roles: z.array(Role).min(1).max(8),
});

export const PluginTarget = z.enum(["All", "Entry", "Worker"]);

export const Plugin = z.strictObject({
  name: z.string().min(1),
  config: z.looseObject({}).meta(PRESERVE).optional(),
  scope: z
    .strictObject({
      roles: z.array(z.string()).optional(),
      target: PluginTarget.default("All"),
    })
    .optional(),
});
export type Plugin = z.infer<typeof Plugin>;

export const RolloutStrategyType = z.enum(["ServingGroupRollingUpdate", "RoleRollingUpdate", "InPlaceUpdate"]);
export type RolloutStrategyType = z.infer<typeof RolloutStrategyType>;

export const RollingUpdateConfiguration = z.strictObject({
  maxUnavailable: IntOrPercent.default(1).describe(
    "ServingGroups that may be disrupted at once (percent of replicas, rounded down).",
  ),
  maxSurge: IntOrPercent.default(0).describe("Extra ServingGroups during an update (percent rounded up)."),
  partition: IntOrPercent.default(0).describe(
    "Groups with ordinal below this keep their revision (percent rounded up).",
  ),
});

export const Coordination = z.strictObject({
  roles: z.array(z.string()).optional().describe("Roles that take part; empty means all roles."),
  maxSkew: z
    .string()
    .regex(PERCENT_PATTERN, { error: "must be a percent from 1% to 100%, like 10%" })
    .describe("Largest allowed difference of update progress between participating roles."),
  dependencies: z.array(z.strictObject({ role: z.string(), dependsOn: z.array(z.string()).min(1) })).optional(),
});
export type Coordination = z.infer<typeof Coordination>;

export const RolloutStrategy = z.strictObject({
  type: RolloutStrategyType.default("ServingGroupRollingUpdate"),
  paused: z.boolean().default(false).describe("Freezes updates; recovery continues."),
  rollingUpdateConfiguration: RollingUpdateConfiguration.prefault({}),
  coordination: Coordination.optional(),
});

export const RecoveryPolicy = z.enum(["ServingGroupRecreate", "RoleRecreate", "None"]);
export type RecoveryPolicy = z.infer<typeof RecoveryPolicy>;

export const ModelServingSpec = z.strictObject({
  replicas: nonNegativeInt().default(1).describe("Number of ServingGroups."),
  schedulerName: z.string().min(1).default("default-scheduler"),
  plugins: z.array(Plugin).optional(),
  revisionHistoryLimit: nonNegativeInt().default(10).describe("Unreferenced revisions kept for rollback."),
  recoveryPolicy: RecoveryPolicy.default("RoleRecreate"),
  drain: z.strictObject({ timeoutSeconds: nonNegativeInt().default(300) }).prefault({}),
  rolloutStrategy: RolloutStrategy.prefault({}),
  template: ServingGroupTemplate,
});
export type ModelServingSpec = z.infer<typeof ModelServingSpec>;

export const Condition = z.strictObject({
  type: z.string(),
  status: z.enum(["True", "False", "Unknown"]),
  reason: z.string().optional(),
  message: z.string().optional(),
  lastTransitionTime: z.string().optional(),
  observedGeneration: z.int32().optional(),
});
export type Condition = z.infer<typeof Condition>;

/** A durable unit revision record (DESIGN §4): group g, or role instance (g, role, j) → revision. */
export const UnitRecord = z.strictObject({
  group: nonNegativeInt(),
  role: z.string().optional(),
  instance: nonNegativeInt().optional(),
  revision: z.string(),
});
export type UnitRecord = z.infer<typeof UnitRecord>;

/**
 * Where a unit's pods live (docs/design/succession.md): the planner reasons about positions
 * (0..replicas−1, surge above), pod names and the `tandem.dev/group` / `tandem.dev/instance`
 * labels carry ordinals. An entry is stored only where a position's ordinal differs from its own
 * number. Without `role`: group position `group` is served by group ordinal `ordinal`; with
 * `role`: in group position `group`, that role's instance position `instance` is served by
 * instance ordinal `ordinal`. `retired`: the unit at that ordinal was succeeded by a surge unit
 * and is surplus (drained and deleted); no new pod takes the ordinal until its pods are gone.
 */
export const OrdinalEntry = z.strictObject({
  group: nonNegativeInt().optional(),
  role: z.string().optional(),
  instance: nonNegativeInt().optional(),
  ordinal: nonNegativeInt(),
  retired: z.literal(true).optional(),
});
export type OrdinalEntry = z.infer<typeof OrdinalEntry>;

/**
 * The explicit recreate request the controller took up last (annotation `tandem.dev/recreate`,
 * src/api/recreate.ts; src/core/recreate.ts): its id and unit, how far it got, and while it is
 * `Replacing` the UIDs of the pods it replaces, so it happens once across controller restarts.
 */
export const RecreateRecord = z.strictObject({
  id: z.string(),
  group: nonNegativeInt().optional(),
  role: z.string().optional(),
  phase: z.enum(["Replacing", "Done", "Rejected"]),
  pods: z.array(z.string()).optional().describe("UIDs of the pods the request replaces, while Replacing."),
  message: z.string().optional().describe("Why a Rejected request was refused."),
});
export type RecreateRecord = z.infer<typeof RecreateRecord>;

export const ModelServingStatus = z.strictObject({
  observedGeneration: z.int32().optional(),
  replicas: z.int32().optional(),
  readyReplicas: z.int32().optional(),
  availableReplicas: z.int32().optional(),
  updatedReplicas: z.int32().optional(),
  currentRevision: z.string().optional(),
  updateRevision: z.string().optional(),
  collisionCount: z.int32().optional(),
  labelSelector: z.string().optional(),
  roles: z
    .array(z.strictObject({ name: z.string(), replicas: z.int32(), ready: z.int32(), updated: z.int32() }))
    .optional(),
  conditions: z.array(Condition).optional(),
  units: z.array(UnitRecord).optional(),
  ordinals: z.array(OrdinalEntry).optional(),
  recreate: RecreateRecord.optional(),
});
export type ModelServingStatus = z.infer<typeof ModelServingStatus>;

export const ObjectMeta = z
  .looseObject({
    name: z.string().min(1),
    namespace: z.string().optional(),
    uid: z.string().optional(),
    generation: z.int().optional(),
    resourceVersion: z.string().optional(),
    labels: StringMap.optional(),
    annotations: StringMap.optional(),
  })
  .meta(PRESERVE);
export type ObjectMeta = z.infer<typeof ObjectMeta>;

/** The envelope of every Tandem kind: apiVersion tandem.dev/v1alpha1, the kind, metadata, spec, status. */
export function tandemObject<Kind extends string, Spec extends z.ZodType, Status extends z.ZodType>(
  kind: Kind,
  spec: Spec,
  status: Status,
) {
  return z.strictObject({
    apiVersion: z.literal(API_GROUP_VERSION),
    kind: z.literal(kind),
    metadata: ObjectMeta,
    spec,
    status: status.optional(),
  });
}

export const ModelServing = tandemObject(
  KIND,
  ModelServingSpec.describe(
    "The desired serving: ServingGroups of roles of multi-pod instances, and how to update them.",
  ),
  ModelServingStatus.describe("Observed state, written by the controller."),
).describe(
  "ModelServing runs multi-role, multi-node LLM inference: replicas ServingGroups, each with every role's instances.",
);

/** A ModelServing with every default applied (the output of `parseModelServing`). */
export type ModelServing = z.infer<typeof ModelServing>;
/** A ModelServing as a user may write it: defaulted fields optional. */
export type ModelServingInput = z.input<typeof ModelServing>;
