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
import type { PodFacts } from "./health.ts";
import { podFacts } from "./health.ts";
import { onFrozen } from "./frozen.ts";
import { compareStrings, getOrCreate } from "./maps.ts";
import type { Observed } from "./observed.ts";
import type { DecodeResult, StoredRevision } from "./revision/controller-revision.ts";
import { decodeControllerRevision } from "./revision/controller-revision.ts";
import type { RevisionData } from "./revision/format.ts";
import { revisionData } from "./revision/projection.ts";

/** A pod with its place in the unit tree and the revision label it was built from. */
export interface PodView {
  readonly pod: Pod;
  readonly id: PodIdentity;
  readonly uid: string;
  readonly revision: string | undefined;
  /** What planning asks of the pod, read once per pod object. */
  readonly facts: PodFacts;
}

/** The pods of one role instance, by pod index (0 = entry). */
export type InstancePods = ReadonlyMap<number, PodView>;

/** group → role → instance → pods. Maps iterate in ascending order of their keys. */
export type UnitTree = ReadonlyMap<number, ReadonlyMap<string, ReadonlyMap<number, InstancePods>>>;

export interface Model {
  readonly ms: ModelServing;
  readonly owner: NamespacedOwner;
  readonly generation: number;
  /** The spec's versioned fields, `revisionData(ms)`: what the update revision records. */
  readonly data: RevisionData;
  /** Every revision of this ModelServing that decoded, by name. */
  readonly revisions: ReadonlyMap<string, StoredRevision>;
  /** Revisions that could not be read, by name, with the reason. */
  readonly unreadable: ReadonlyMap<string, string>;
  /** All decode results, for record planning and GC. */
  readonly decoded: readonly DecodeResult[];
  readonly tree: UnitTree;
  /** Every pod view of `tree`, in its iteration order: for passes that need no place in it. */
  readonly views: readonly PodView[];
  readonly services: ReadonlyMap<string, Service>;
}

export type ModelResult =
  | { readonly ok: true; readonly model: Model }
  /** The stored object does not pass validation: the controller reports it and does nothing else. */
  | { readonly ok: false; readonly problems: readonly Problem[]; readonly raw: { readonly generation: number } };

/** Builds the model, or explains why the ModelServing cannot be acted on. */
export function buildModel(observed: Observed): ModelResult {
  const spec = onFrozen(specMemo, observed.modelServing, readSpec);
  if (!spec.ok) return { ok: false, problems: spec.problems, raw: { generation: rawGeneration(observed.modelServing) } };
  const { ms, data } = spec;
  const owner = { name: ms.metadata.name, namespace: ms.metadata.namespace ?? "default", uid: ms.metadata.uid ?? "" };
  const decoded = observed.revisions.map((object) => onFrozen(decodedMemo, object, decodeControllerRevision));
  const revisions = new Map<string, StoredRevision>();
  const unreadable = new Map<string, string>();
  for (const result of decoded) {
    if (result.ok && result.revision.ownerUid === owner.uid) revisions.set(result.revision.name, result.revision);
    else if (!result.ok && result.name !== undefined) unreadable.set(result.name, result.reason);
  }
  const services = new Map(observed.services.filter((service) => ownedBy(service, owner.uid)).map((service) => [service.metadata.name, service]));
  return {
    ok: true,
    model: { ms, owner, generation: ms.metadata.generation ?? 0, data, revisions, unreadable, decoded, ...buildTree(owner, observed.pods), services },
  };
}

/**
 * Memos of pure functions of one stored object, keyed on that object (`onFrozen`: only frozen
 * objects, so a memoized result can never go stale; a WeakMap frees it with the object). Results
 * are shared by every plan of that object and, like all of a Model, never mutated.
 */
const specMemo = new WeakMap<object, Spec>();
const decodedMemo = new WeakMap<object, DecodeResult>();
/**
 * Revision data per stored spec object: the data is a function of the spec alone, and the API
 * server shares an unchanged spec between versions that only change the status, so every plan of
 * one spec gets the same (frozen) data object and the memos keyed on it (hashes, pod counts) hold.
 */
const dataMemo = new WeakMap<object, RevisionData>();

/** A stored ModelServing parsed, with its revision data; or why it does not parse. */
type Spec = { readonly ok: true; readonly ms: ModelServing; readonly data: RevisionData } | { readonly ok: false; readonly problems: readonly Problem[] };

function readSpec(stored: unknown): Spec {
  const parsed = parseModelServing(stored);
  if (!parsed.ok) return parsed;
  const storedSpec = (stored as { spec?: unknown }).spec;
  return { ok: true, ms: parsed.value, data: onFrozen(dataMemo, storedSpec, () => revisionData(parsed.value)) };
}

function rawGeneration(value: unknown): number {
  const parsed = ModelServingSchema.shape.metadata.safeParse((value as { metadata?: unknown } | null)?.metadata);
  return parsed.success ? (parsed.data.generation ?? 0) : 0;
}

function ownedBy(object: { metadata: { ownerReferences?: { uid: string; controller?: boolean }[] } }, uid: string): boolean {
  return (object.metadata.ownerReferences ?? []).some((reference) => reference.controller === true && reference.uid === uid);
}

/**
 * Places every pod this ModelServing controls in the tree, and lists the placed views in tree
 * order. Pods it does not control, or whose identity does not parse, are left out: the controller
 * neither adopts nor deletes them.
 */
function buildTree(owner: NamespacedOwner, pods: readonly Pod[]): { tree: UnitTree; views: PodView[] } {
  const views: PodView[] = [];
  for (const pod of pods) {
    const view = podView(owner, pod);
    if (view !== undefined) views.push(view);
  }
  // Stable, so of two pods with one identity the later one still wins, as a plain insert would.
  views.sort((a, b) => a.id.group - b.id.group || compareStrings(a.id.role, b.id.role) || a.id.instance - b.id.instance || a.id.index - b.id.index);
  // Inserting in key order makes every map iterate in ascending key order.
  const tree = new Map<number, Map<string, Map<number, Map<number, PodView>>>>();
  const placed: PodView[] = [];
  for (const view of views) {
    const { group, role, instance, index } = view.id;
    const roles = getOrCreate(tree, group, () => new Map<string, Map<number, Map<number, PodView>>>());
    const instances = getOrCreate(roles, role, () => new Map<number, Map<number, PodView>>());
    const instancePods = getOrCreate(instances, instance, () => new Map<number, PodView>());
    // Sorted, a replaced view (same identity) is the one placed last, and keeps its position.
    if (instancePods.has(index)) placed[placed.length - 1] = view;
    else placed.push(view);
    instancePods.set(index, view);
  }
  return { tree, views: placed };
}

/**
 * Pod views per pod object, with the owner they were read for. Keyed on the pod, and only when it
 * is frozen, so a view never goes stale; the owner is compared because ownership and identity
 * depend on it.
 */
const viewMemo = new WeakMap<Pod, { readonly ownerName: string; readonly ownerUid: string; readonly view: PodView | undefined }>();

/** The pod's view when `owner` controls it and its identity parses; undefined otherwise. */
function podView(owner: NamespacedOwner, pod: Pod): PodView | undefined {
  const cached = viewMemo.get(pod);
  if (cached !== undefined && cached.ownerName === owner.name && cached.ownerUid === owner.uid) return cached.view;
  const view = readPodView(owner, pod);
  if (Object.isFrozen(pod)) viewMemo.set(pod, { ownerName: owner.name, ownerUid: owner.uid, view });
  return view;
}

function readPodView(owner: NamespacedOwner, pod: Pod): PodView | undefined {
  const uid = pod.metadata.uid;
  if (uid === undefined || !ownedBy(pod, owner.uid)) return undefined;
  const id = parsePodIdentity(owner.name, pod.metadata.name, pod.metadata.labels);
  return id === undefined ? undefined : { pod, id, uid, revision: pod.metadata.labels?.[LABEL_REVISION], facts: podFacts(pod) };
}
