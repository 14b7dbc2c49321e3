/**
 * The observed state of one ModelServing, organized for planning: the parsed spec, decoded
 * revisions, and its pods placed in the unit tree group → role → instance → pod index. Pure.
 */
import type { Pod, Service } from "../api/kube.ts";
import type { ModelServing } from "../api/schema.ts";
import { ModelServing as ModelServingSchema } from "../api/schema.ts";
import { parseModelServing } from "../api/parse.ts";
import type { Problem } from "../api/problems.ts";
import { LABEL_REVISION } from "../api/wellknown.ts";
import type { NamespacedOwner, PodIdentity } from "./identity.ts";
import { parsePodIdentity } from "./identity.ts";
import type { Observed } from "./observed.ts";
import type { DecodeResult, StoredRevision } from "./revision/controller-revision.ts";
import { decodeControllerRevision } from "./revision/controller-revision.ts";

/** A pod with its place in the unit tree and the revision label it was built from. */
export interface PodView {
  readonly pod: Pod;
  readonly id: PodIdentity;
  readonly uid: string;
  readonly revision: string | undefined;
}

/** The pods of one role instance, by pod index (0 = entry). */
export type InstancePods = ReadonlyMap<number, PodView>;

/** group → role → instance → pods. Maps iterate in ascending order of their keys. */
export type UnitTree = ReadonlyMap<number, ReadonlyMap<string, ReadonlyMap<number, InstancePods>>>;

export interface Model {
  readonly ms: ModelServing;
  readonly owner: NamespacedOwner;
  readonly generation: number;
  /** Every revision of this ModelServing that decoded, by name. */
  readonly revisions: ReadonlyMap<string, StoredRevision>;
  /** Revisions that could not be read, by name, with the reason. */
  readonly unreadable: ReadonlyMap<string, string>;
  /** All decode results, for record planning and GC. */
  readonly decoded: readonly DecodeResult[];
  readonly tree: UnitTree;
  readonly services: ReadonlyMap<string, Service>;
}

export type ModelResult =
  | { readonly ok: true; readonly model: Model }
  /** The stored object does not pass validation: the controller reports it and does nothing else. */
  | { readonly ok: false; readonly problems: readonly Problem[]; readonly raw: { readonly generation: number } };

/** Builds the model, or explains why the ModelServing cannot be acted on. */
export function buildModel(observed: Observed): ModelResult {
  const parsed = parseModelServing(observed.modelServing);
  if (!parsed.ok) return { ok: false, problems: parsed.problems, raw: { generation: rawGeneration(observed.modelServing) } };
  const ms = parsed.value;
  const owner = { name: ms.metadata.name, namespace: ms.metadata.namespace ?? "default", uid: ms.metadata.uid ?? "" };
  const decoded = observed.revisions.map(decodeControllerRevision);
  const revisions = new Map<string, StoredRevision>();
  const unreadable = new Map<string, string>();
  for (const result of decoded) {
    if (result.ok && result.revision.ownerUid === owner.uid) revisions.set(result.revision.name, result.revision);
    else if (!result.ok && result.name !== undefined) unreadable.set(result.name, result.reason);
  }
  const services = new Map(observed.services.filter((service) => ownedBy(service, owner.uid)).map((service) => [service.metadata.name, service]));
  return {
    ok: true,
    model: { ms, owner, generation: ms.metadata.generation ?? 0, revisions, unreadable, decoded, tree: buildTree(owner, observed.pods), services },
  };
}

function rawGeneration(value: unknown): number {
  const parsed = ModelServingSchema.shape.metadata.safeParse((value as { metadata?: unknown } | null)?.metadata);
  return parsed.success ? (parsed.data.generation ?? 0) : 0;
}

function ownedBy(object: { metadata: { ownerReferences?: { uid: string; controller?: boolean }[] } }, uid: string): boolean {
  return (object.metadata.ownerReferences ?? []).some((reference) => reference.controller === true && reference.uid === uid);
}

/**
 * Places every pod this ModelServing controls in the tree. Pods it does not control, or whose
 * identity does not parse, are left out: the controller neither adopts nor deletes them.
 */
function buildTree(owner: NamespacedOwner, pods: readonly Pod[]): UnitTree {
  const tree = new Map<number, Map<string, Map<number, Map<number, PodView>>>>();
  for (const pod of pods) {
    const uid = pod.metadata.uid;
    if (uid === undefined || !ownedBy(pod, owner.uid)) continue;
    const id = parsePodIdentity(owner.name, pod.metadata.name, pod.metadata.labels);
    if (id === undefined) continue;
    const roles = getOrCreate(tree, id.group, () => new Map<string, Map<number, Map<number, PodView>>>());
    const instances = getOrCreate(roles, id.role, () => new Map<number, Map<number, PodView>>());
    const instance = getOrCreate(instances, id.instance, () => new Map<number, PodView>());
    instance.set(id.index, { pod, id, uid, revision: pod.metadata.labels?.[LABEL_REVISION] });
  }
  return sortTree(tree);
}

function getOrCreate<K, V>(map: Map<K, V>, key: K, create: () => V): V {
  const existing = map.get(key);
  if (existing !== undefined) return existing;
  const created = create();
  map.set(key, created);
  return created;
}

function sortTree(tree: Map<number, Map<string, Map<number, Map<number, PodView>>>>): UnitTree {
  return sortedMap(tree, (roles) => sortedMap(roles, (instances) => sortedMap(instances, (pods) => sortedMap(pods, (pod) => pod))));
}

/** A copy of `map` whose iteration order is ascending by key, with each value mapped. */
function sortedMap<K extends number | string, V, W>(map: ReadonlyMap<K, V>, mapValue: (value: V) => W): Map<K, W> {
  return new Map([...map.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).map((key) => [key, mapValue(map.get(key) as V)]));
}
