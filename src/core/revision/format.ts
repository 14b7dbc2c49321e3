/**
 * Revision data, format 1: the shape of `ControllerRevision.data` (the canonical projection of a
 * ModelServing's versioned fields, DESIGN §2.6). The schema is frozen on purpose and independent of
 * the ModelServing API schema: a later, stricter API must still read every revision written before
 * it. It has no defaults and no transforms, so validating data never changes it. Widening it
 * (accepting more) is compatible; narrowing it needs a new format number.
 */
import { z } from "zod";

/** The value of annotation `tandem.dev/revision-format` this controller writes and reads. */
export const REVISION_FORMAT = "1";

const StringMap = z.record(z.string(), z.string());

const RevisionEnvVar = z.looseObject({ name: z.string().min(1) });

const RevisionContainer = z.looseObject({
  name: z.string().min(1),
  image: z.string().min(1),
  env: z.array(RevisionEnvVar).optional(),
});

const RevisionPodTemplate = z.strictObject({
  metadata: z.looseObject({ labels: StringMap.optional(), annotations: StringMap.optional() }).optional(),
  spec: z.looseObject({
    containers: z.array(RevisionContainer).min(1),
    initContainers: z.array(RevisionContainer).optional(),
  }),
});
export type RevisionPodTemplate = z.infer<typeof RevisionPodTemplate>;

const RevisionRole = z.strictObject({
  name: z.string().min(1),
  entryTemplate: RevisionPodTemplate,
  workerReplicas: z.int().min(0),
  workerTemplate: RevisionPodTemplate.optional(),
});
export type RevisionRole = z.infer<typeof RevisionRole>;

const RevisionPlugin = z.strictObject({
  name: z.string().min(1),
  config: z.looseObject({}).optional(),
  scope: z
    .strictObject({ roles: z.array(z.string()).optional(), target: z.enum(["All", "Entry", "Worker"]) })
    .optional(),
});
export type RevisionPlugin = z.infer<typeof RevisionPlugin>;

export const RevisionDataSchema = z.strictObject({
  schedulerName: z.string().min(1),
  plugins: z.array(RevisionPlugin).optional(),
  roles: z
    .array(RevisionRole)
    .min(1)
    .refine((roles) => new Set(roles.map((role) => role.name)).size === roles.length, {
      error: "role names must be unique",
    }),
});

/** The canonical projection of a ModelServing's versioned fields: what a revision stores and hashes. */
export type RevisionData = z.infer<typeof RevisionDataSchema>;
