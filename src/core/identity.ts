/**
 * Names and identity labels of the objects a ModelServing owns (DESIGN §1, contract):
 * ServingGroup `g` → role → instance `j` → pod `k` (k=0 entry, k≥1 workers), pod name
 * `<ms>-<g>-<role>-<j>-<k>`, one headless Service per instance with workers, named after its
 * entry pod.
 */
import type { OwnerReference } from "../api/kube.ts";
import { API_GROUP_VERSION, KIND } from "../api/schema.ts";
import { LABEL_ENTRY, LABEL_GROUP, LABEL_INSTANCE, LABEL_MODEL_SERVING, LABEL_ROLE } from "../api/wellknown.ts";

/** The ModelServing that owns an object. */
export interface Owner {
  readonly name: string;
  readonly namespace?: string | undefined;
  readonly uid: string;
}

/** An owner whose namespace is known: what pods and Services are built for. */
export type NamespacedOwner = Owner & { readonly namespace: string };

/** The controller owner reference every object a ModelServing owns carries. */
export function ownerReference(owner: Owner): OwnerReference {
  return {
    apiVersion: API_GROUP_VERSION,
    kind: KIND,
    name: owner.name,
    uid: owner.uid,
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** Where a pod sits in its ModelServing. */
export interface PodIdentity {
  readonly group: number;
  readonly role: string;
  readonly instance: number;
  /** 0 for the entry pod, 1..workerReplicas for workers. */
  readonly index: number;
}

/** `<role>-<j>`, the value of `tandem.dev/instance`. */
export function instanceId(role: string, instance: number): string {
  return `${role}-${instance}`;
}

export function podName(modelServing: string, id: PodIdentity): string {
  return `${modelServing}-${id.group}-${id.role}-${id.instance}-${id.index}`;
}

/** The headless Service of an instance with workers: named after the entry pod. */
export function serviceName(modelServing: string, group: number, role: string, instance: number): string {
  return podName(modelServing, { group, role, instance, index: 0 });
}

/** `<entry-pod>.<namespace>`, resolved by the instance's headless Service (DESIGN §1). */
export function entryAddress(
  modelServing: string,
  namespace: string,
  group: number,
  role: string,
  instance: number,
): string {
  return `${serviceName(modelServing, group, role, instance)}.${namespace}`;
}

const ORDINAL = /^(0|[1-9][0-9]{0,8})$/;

function parseOrdinal(value: string | undefined): number | undefined {
  return value !== undefined && ORDINAL.test(value) ? Number(value) : undefined;
}

/** Where an instance sits in its ModelServing: a pod identity without the pod index. */
export type InstanceRef = Omit<PodIdentity, "index">;

/** The instance an object's identity labels name for `modelServing`; undefined when any is missing or inconsistent. */
function parseInstanceLabels(
  modelServing: string,
  labels: Readonly<Record<string, string>> | undefined,
): InstanceRef | undefined {
  if (labels?.[LABEL_MODEL_SERVING] !== modelServing) return undefined;
  const group = parseOrdinal(labels[LABEL_GROUP]);
  const role = labels[LABEL_ROLE];
  const instanceLabel = labels[LABEL_INSTANCE];
  if (group === undefined || role === undefined || instanceLabel === undefined) return undefined;
  if (!instanceLabel.startsWith(`${role}-`)) return undefined;
  const instance = parseOrdinal(instanceLabel.slice(role.length + 1));
  return instance === undefined ? undefined : { group, role, instance };
}

/**
 * Reads a pod's identity from its labels and name; undefined when anything is missing or
 * inconsistent (such a pod is neither adopted nor deleted).
 */
export function parsePodIdentity(
  modelServing: string,
  name: string,
  labels: Readonly<Record<string, string>> | undefined,
): PodIdentity | undefined {
  const at = parseInstanceLabels(modelServing, labels);
  if (at === undefined) return undefined;
  const prefix = podName(modelServing, { ...at, index: 0 }).slice(0, -1);
  const index = name.startsWith(prefix) ? parseOrdinal(name.slice(prefix.length)) : undefined;
  if (index === undefined || (index === 0) !== (labels?.[LABEL_ENTRY] === "true")) return undefined;
  return { ...at, index };
}

/**
 * The instance an instance Service serves: the one its labels name, when its name is the one that
 * instance's Service gets (`serviceName`); undefined otherwise.
 */
export function parseServiceInstance(
  modelServing: string,
  name: string,
  labels: Readonly<Record<string, string>> | undefined,
): InstanceRef | undefined {
  const at = parseInstanceLabels(modelServing, labels);
  return at !== undefined && name === serviceName(modelServing, at.group, at.role, at.instance) ? at : undefined;
}
