/**
 * Small helpers on stored objects: keys, references, deletion state, admission checks that apply
 * to every kind, and freezing (stored objects are immutable; the server replaces, never edits).
 */
import { labelProblems } from "../engine/labels.ts";
import type {
  JsonObject,
  JsonValue,
  Kind,
  KubeObject,
  ObjectMeta,
  ObjectRef,
  OwnerReference,
} from "../engine/ports.ts";
import { setOwnKey } from "./json.ts";

/** The store key: kind, namespace ("" when cluster-scoped) and name. */
export function keyOf(object: { kind: string; metadata: { name: string; namespace?: string | undefined } }): string {
  return `${object.kind}/${object.metadata.namespace ?? ""}/${object.metadata.name}`;
}

export function refOf<K extends Kind>(object: KubeObject<K>): ObjectRef<K> {
  const { name, namespace } = object.metadata;
  return namespace === undefined ? { kind: object.kind, name } : { kind: object.kind, namespace, name };
}

/** True once a delete has started: the object has a deletionTimestamp. */
export function isDeleting(object: KubeObject): boolean {
  return object.metadata.deletionTimestamp !== undefined;
}

/** The metadata fields only the server may set, in the order it sets them on a stored object. */
export const SERVER_FIELDS_IN_ORDER = [
  "uid",
  "resourceVersion",
  "generation",
  "creationTimestamp",
  "deletionTimestamp",
  "deletionGracePeriodSeconds",
] as const satisfies readonly (keyof ObjectMeta)[];

const SERVER_FIELDS: ReadonlySet<string> = new Set(SERVER_FIELDS_IN_ORDER);

/** A copy of `object` without the metadata fields only the server may set. */
export function withoutServerFields(object: KubeObject): KubeObject {
  const source = object.metadata as unknown as JsonObject;
  const metadata: JsonObject = {};
  for (const field of Object.keys(source))
    if (!SERVER_FIELDS.has(field)) setOwnKey(metadata, field, source[field] as JsonValue);
  return { ...object, metadata: metadata as unknown as ObjectMeta };
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * Why the API server refuses `object` whatever its kind, or undefined: the name must be a DNS
 * subdomain, labels valid, at most one ownerReference a controller, and every ownerReference and
 * finalizer well-formed.
 */
export function admissionProblem(object: KubeObject): string | undefined {
  const { name, labels, ownerReferences, finalizers } = object.metadata;
  if (typeof name !== "string" || name.length > 253 || !DNS_SUBDOMAIN.test(name)) {
    return `metadata.name ${JSON.stringify(name)} must be a lowercase DNS subdomain of at most 253 characters`;
  }
  const labelProblem = labelProblems(labels ?? {})[0];
  if (labelProblem !== undefined) return `metadata.labels: ${labelProblem}`;
  const references = ownerReferences ?? [];
  const malformed = (reference: OwnerReference): boolean =>
    !isNonEmptyString(reference.apiVersion) ||
    !isNonEmptyString(reference.kind) ||
    !isNonEmptyString(reference.name) ||
    !isNonEmptyString(reference.uid);
  if (references.some(malformed)) {
    return "metadata.ownerReferences: apiVersion, kind, name and uid are required";
  }
  if (references.filter((reference) => reference.controller === true).length > 1) {
    return "metadata.ownerReferences: only one reference can have controller set to true";
  }
  if ((finalizers ?? []).some((finalizer) => typeof finalizer !== "string" || finalizer === "")) {
    return "metadata.finalizers: each finalizer must be a non-empty string";
  }
  if (object.spec !== undefined && (typeof object.spec !== "object" || Array.isArray(object.spec)))
    return "spec must be an object";
  return undefined;
}

function isNonEmptyString(value: unknown): boolean {
  return typeof value === "string" && value !== "";
}
