/**
 * The ControllerRevision that stores one revision (DESIGN §2.6, seed §3): encoding, and a decoder
 * that never throws and never guesses. Data is immutable: nothing here or elsewhere rewrites it;
 * only `revision` (the number) may advance.
 */
import { z } from "zod";
import { problemsFromZod } from "../../api/index.ts";
import { nestingProblem } from "../../api/nesting.ts";
import {
  ANNOTATION_COLLISION_COUNT,
  ANNOTATION_REVISION_FORMAT,
  LABEL_MODEL_SERVING,
  LABEL_REVISION_HASH,
} from "../../api/wellknown.ts";
import type { OwnerReference } from "../../api/kube.ts";
import type { Owner } from "../identity.ts";
import { ownerReference } from "../identity.ts";
import { deepFreeze } from "../frozen.ts";
import { isJsonValue } from "./canonical.ts";
import { REVISION_FORMAT, RevisionDataSchema } from "./format.ts";
import type { RevisionData } from "./format.ts";
import { revisionHash, revisionName } from "./hash.ts";

/** An `apps/v1` ControllerRevision as Tandem writes it. */
export interface ControllerRevision {
  readonly apiVersion: "apps/v1";
  readonly kind: "ControllerRevision";
  readonly metadata: {
    readonly name: string;
    readonly namespace?: string;
    readonly labels: Readonly<Record<string, string>>;
    readonly annotations: Readonly<Record<string, string>>;
    readonly ownerReferences: readonly OwnerReference[];
  };
  readonly data: RevisionData;
  readonly revision: number;
}

/** What to write: the owner, the canonical projection, its number, and the collision count its hash uses. */
export interface RevisionToEncode {
  readonly owner: Owner;
  readonly data: RevisionData;
  readonly revision: number;
  readonly collisionCount: number;
}

/** The ControllerRevision storing `data`, named `<owner>-<hash>`; `data` is the hash input. */
export function encodeControllerRevision(input: RevisionToEncode): ControllerRevision {
  const { owner, data, revision, collisionCount } = input;
  const hash = revisionHash(data, collisionCount);
  const annotations: Record<string, string> = { [ANNOTATION_REVISION_FORMAT]: REVISION_FORMAT };
  if (collisionCount > 0) annotations[ANNOTATION_COLLISION_COUNT] = String(collisionCount);
  return {
    apiVersion: "apps/v1",
    kind: "ControllerRevision",
    metadata: {
      name: revisionName(owner.name, hash),
      ...(owner.namespace === undefined ? {} : { namespace: owner.namespace }),
      labels: { [LABEL_MODEL_SERVING]: owner.name, [LABEL_REVISION_HASH]: hash },
      annotations,
      ownerReferences: [ownerReference(owner)],
    },
    data: structuredClone(data),
    revision,
  };
}

/** A revision read back and verified. */
export interface StoredRevision {
  readonly name: string;
  readonly hash: string;
  readonly revision: number;
  readonly collisionCount: number;
  /** UID of the controller owner reference, if any. */
  readonly ownerUid: string | undefined;
  readonly data: RevisionData;
}

/**
 * The outcome of decoding. An unreadable revision carries its name and number when those could be
 * read (so it can still be listed, counted and collected) and a reason a person can act on.
 */
export type DecodeResult =
  | { readonly ok: true; readonly revision: StoredRevision }
  | {
      readonly ok: false;
      readonly name: string | undefined;
      readonly revision: number | undefined;
      readonly reason: string;
    };

const Envelope = z.looseObject({
  metadata: z.looseObject({
    name: z.string().min(1),
    labels: z.record(z.string(), z.string()).optional(),
    annotations: z.record(z.string(), z.string()).optional(),
    ownerReferences: z.array(z.looseObject({ uid: z.string(), controller: z.boolean().optional() })).optional(),
  }),
  revision: z.int().min(0),
  data: z.unknown(),
});
type Envelope = z.infer<typeof Envelope>;

const COLLISION_COUNT_PATTERN = /^(0|[1-9][0-9]{0,8})$/;

/**
 * Reads a ControllerRevision (any JSON-shaped value). Never throws. Unreadable when: it is not a
 * ControllerRevision envelope; its format annotation is missing or not a format this controller
 * reads; its hash label or collision-count annotation is missing or malformed; its data is not
 * JSON or not a valid projection; its data's canonical bytes do not reproduce the recorded hash;
 * or its name does not end with that hash.
 */
export function decodeControllerRevision(object: unknown): DecodeResult {
  const envelope = Envelope.safeParse(object);
  if (!envelope.success) {
    return {
      ok: false,
      name: undefined,
      revision: undefined,
      reason: `not a ControllerRevision: ${describeIssues(envelope.error)}`,
    };
  }
  const { name } = envelope.data.metadata;
  const unreadable = (reason: string): DecodeResult => ({ ok: false, name, revision: envelope.data.revision, reason });
  const identity = readIdentity(envelope.data);
  if (typeof identity === "string") return unreadable(identity);
  const data = readData(envelope.data.data);
  if (typeof data === "string") return unreadable(data);
  const computed = revisionHash(data, identity.collisionCount);
  if (computed !== identity.hash) {
    return unreadable(
      `data does not reproduce the recorded hash ${identity.hash} (it hashes to ${computed}): it was changed after it was written; ` +
        `restore the original data or, if nothing runs this revision, delete the ControllerRevision`,
    );
  }
  if (!name.endsWith(`-${identity.hash}`)) return unreadable(`name does not end with its hash "-${identity.hash}"`);
  const ownerUid = envelope.data.metadata.ownerReferences?.find((reference) => reference.controller === true)?.uid;
  return {
    ok: true,
    revision: {
      name,
      hash: identity.hash,
      revision: envelope.data.revision,
      collisionCount: identity.collisionCount,
      ownerUid,
      data,
    },
  };
}

/** The format, hash and collision count recorded in metadata, or why they cannot be trusted. */
function readIdentity(envelope: Envelope): { hash: string; collisionCount: number } | string {
  const annotations = envelope.metadata.annotations ?? {};
  const format = annotations[ANNOTATION_REVISION_FORMAT];
  if (format === undefined) {
    return `annotation ${ANNOTATION_REVISION_FORMAT} is missing: the revision was not written by Tandem or was edited; delete it if nothing runs it`;
  }
  if (format !== REVISION_FORMAT) {
    return `revision format ${JSON.stringify(format)} is not one this controller reads (it reads format ${REVISION_FORMAT}): upgrade the controller to one that reads it`;
  }
  const hash = envelope.metadata.labels?.[LABEL_REVISION_HASH];
  if (hash === undefined || hash === "") return `label ${LABEL_REVISION_HASH} is missing`;
  const collision = annotations[ANNOTATION_COLLISION_COUNT] ?? "0";
  if (!COLLISION_COUNT_PATTERN.test(collision)) {
    return `annotation ${ANNOTATION_COLLISION_COUNT} must be a non-negative decimal integer, not ${JSON.stringify(collision)}`;
  }
  return { hash, collisionCount: Number(collision) };
}

/** The data as a validated projection, or why it is not one. */
function readData(data: unknown): RevisionData | string {
  const tooDeep = nestingProblem(data); // before any recursive walk of it
  if (tooDeep !== undefined) return `data ${tooDeep.path}: ${tooDeep.reason}`;
  if (!isJsonValue(data)) return "data is missing or not JSON";
  const parsed = RevisionDataSchema.safeParse(data);
  if (!parsed.success)
    return `data is not a revision format ${REVISION_FORMAT} projection: ${describeIssues(parsed.error)}`;
  // Validation has no defaults or transforms, so the parsed value is the stored data itself.
  // Frozen when the stored data is (read from a cache), so the hash memos apply to it; a caller's
  // mutable object is left as it is.
  return Object.isFrozen(data) ? deepFreeze(parsed.data) : parsed.data;
}

function describeIssues(error: z.ZodError): string {
  return problemsFromZod(error.issues)
    .map((problem) => `${problem.path}: ${problem.reason}`)
    .join("; ");
}
