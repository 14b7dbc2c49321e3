/**
 * The observed state of one ModelServing, organized for planning: the parsed spec, decoded
 * revisions, and its pods placed in the unit tree group → role → instance → pod index. Pure.
 */
import type { Pod, Service } from "../api/kube.ts";
import type { ModelServing, Role } from "../api/schema.ts";
import { ModelServing as ModelServingSchema } from "../api/schema.ts";
import { parseModelServing } from "../api/parse.ts";
import type { Problem } from "../api/problems.ts";
import { LABEL_REVISION } from "../api/wellknown.ts";
import type { InstanceRef, NamespacedOwner, PodIdentity } from "./identity.ts";
import { parsePodIdentity, parseServiceInstance } from "./identity.ts";
import type { PodFacts } from "./health.ts";
import { podFacts } from "./health.ts";
import { onFrozen } from "./frozen.ts";
import { compareStrings, getOrCreate } from "./maps.ts";
import type { Observed, ObservedRouter } from "./observed.ts";
import type { DrainPolicy } from "./drain.ts";
import { scopeCovers } from "../api/router-lease.ts";
import type { DecodeResult, StoredRevision } from "./revision/controller-revision.ts";
import { decodeControllerRevision } from "./revision/controller-revision.ts";
import type { RevisionData } from "./revision/format.ts";
import { revisionData } from "./revision/projection.ts";
import { OrdinalTable, positionOf } from "./ordinals.ts";

/** A pod with its place in the unit tree and the revision label it was built from. */
export interface PodView {
  readonly pod: Pod;
  readonly id: PodIdentity;
  readonly uid: string;
  readonly revision: string | undefined;
  /** What planning asks of the pod, read once per pod object. */
  readonly facts: PodFacts;
}

/** A Service this ModelServing controls, with the instance it serves when its labels and name agree. */
export interface ServiceView {
  readonly service: Service;
  /** Undefined for a Service whose labels do not name the instance its name belongs to. */
  readonly instance: InstanceRef | undefined;
}

/** The pods of one role instance, by pod index (0 = entry). */
export type InstancePods = ReadonlyMap<number, PodView>;

/** group → role → instance → pods. Maps iterate in ascending order of their keys. */
export type UnitTree = ReadonlyMap<number, ReadonlyMap<string, ReadonlyMap<number, InstancePods>>>;

/** One group's pods in the tree: role → instance → pods. */
export type GroupPods = ReadonlyMap<string, ReadonlyMap<number, InstancePods>>;

/** The pod maps of every instance of a group (`roles`), or of `roles` of every group. */
export function instancePodsOf(groups: Iterable<GroupPods>): InstancePods[] {
  const all: InstancePods[] = [];
  for (const roles of groups)
    for (const instances of roles.values()) for (const pods of instances.values()) all.push(pods);
  return all;
}

/** Some pod of `instances` (pod maps; undefined for an instance without pods) passes `test`. */
export function somePod(instances: Iterable<InstancePods | undefined>, test: (view: PodView) => boolean): boolean {
  for (const pods of instances) for (const view of pods?.values() ?? []) if (test(view)) return true;
  return false;
}

export interface Model {
  readonly ms: ModelServing;
  readonly owner: NamespacedOwner;
  readonly generation: number;
  /** The spec's roles by name (names are unique in a valid spec). */
  readonly roles: ReadonlyMap<string, Role>;
  /** The spec's versioned fields, `revisionData(ms)`: what the update revision records. */
  readonly data: RevisionData;
  /** Every revision of this ModelServing that decoded, by name. */
  readonly revisions: ReadonlyMap<string, StoredRevision>;
  /** Revisions that could not be read, by name, with the reason. */
  readonly unreadable: ReadonlyMap<string, string>;
  /** All decode results, for record planning and GC. */
  readonly decoded: readonly DecodeResult[];
  /**
   * group position → role → instance position → pods (docs/design/succession.md): pods are placed
   * by `ordinals`, read from `status.ordinals`; a retired unit sits at a negative position.
   */
  readonly tree: UnitTree;
  /** The durable map between positions and the ordinals in pod names and labels. */
  readonly ordinals: OrdinalTable;
  /**
   * The revision labels of every pod this ModelServing controls with a parsed identity (a second
   * pod with one identity, which `tree` cannot hold, included: it still runs that revision).
   */
  readonly podRevisionNames: ReadonlySet<string>;
  /** Controlled Services by name. */
  readonly services: ReadonlyMap<string, ServiceView>;
  /** How its drains wait: `spec.drain.timeoutSeconds` and the routers whose scope covers its namespace. */
  readonly drain: DrainPolicy;
}

export type ModelResult =
  | { readonly ok: true; readonly model: Model }
  /** The stored object does not pass validation: the controller reports it and does nothing else. */
  | { readonly ok: false; readonly problems: readonly Problem[]; readonly raw: { readonly generation: number } };

/** Builds the model, or explains why the ModelServing cannot be acted on. */
export function buildModel(observed: Observed): ModelResult {
  const spec = onFrozen(specMemo, observed.modelServing, readSpec);
  if (!spec.ok)
    return { ok: false, problems: spec.problems, raw: { generation: rawGeneration(observed.modelServing) } };
  const { ms, data, roles } = spec;
  const owner = { name: ms.metadata.name, namespace: ms.metadata.namespace ?? "default", uid: ms.metadata.uid ?? "" };
  const decoded = observed.revisions.map((object) => onFrozen(decodedMemo, object, decodeControllerRevision));
  const revisions = new Map<string, StoredRevision>();
  const unreadable = new Map<string, string>();
  for (const result of decoded) {
    if (result.ok && result.revision.ownerUid === owner.uid) revisions.set(result.revision.name, result.revision);
    else if (!result.ok && result.name !== undefined) unreadable.set(result.name, result.reason);
  }
  const services = new Map<string, ServiceView>();
  const ordinals = OrdinalTable.read(ms.status?.ordinals);
  for (const service of observed.services) {
    const view = readForOwner(serviceViewMemo, owner, service, readServiceView);
    if (view !== undefined) services.set(service.metadata.name, view);
  }
  return {
    ok: true,
    model: {
      ms,
      owner,
      generation: ms.metadata.generation ?? 0,
      roles,
      data,
      revisions,
      unreadable,
      decoded,
      ...buildTree(owner, observed.pods, ordinals),
      ordinals,
      services,
      drain: {
        timeoutSeconds: ms.spec.drain.timeoutSeconds,
        routers: routersCovering(observed.routers, owner.namespace),
      },
    },
  };
}

/**
 * The routers whose scope covers `namespace`, one per id sorted by id (two Leases naming one
 * holder are one router, live while either is: it confirms under one key).
 */
function routersCovering(routers: readonly ObservedRouter[], namespace: string): DrainPolicy["routers"] {
  const liveUntil = new Map<string, number>();
  for (const router of routers) {
    if (scopeCovers(router.scope, namespace))
      liveUntil.set(router.id, Math.max(liveUntil.get(router.id) ?? -Infinity, router.liveUntilMs));
  }
  return [...liveUntil].sort(([a], [b]) => compareStrings(a, b)).map(([id, liveUntilMs]) => ({ id, liveUntilMs }));
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

/** A stored ModelServing parsed, with its roles by name and revision data; or why it does not parse. */
type Spec =
  | {
      readonly ok: true;
      readonly ms: ModelServing;
      readonly roles: ReadonlyMap<string, Role>;
      readonly data: RevisionData;
    }
  | { readonly ok: false; readonly problems: readonly Problem[] };

function readSpec(stored: unknown): Spec {
  const parsed = parseModelServing(stored);
  if (!parsed.ok) return parsed;
  const storedSpec = (stored as { spec?: unknown }).spec;
  const roles = new Map(parsed.value.spec.template.roles.map((role) => [role.name, role]));
  return { ok: true, ms: parsed.value, roles, data: onFrozen(dataMemo, storedSpec, () => revisionData(parsed.value)) };
}

function rawGeneration(value: unknown): number {
  const parsed = ModelServingSchema.shape.metadata.safeParse((value as { metadata?: unknown } | null)?.metadata);
  return parsed.success ? (parsed.data.generation ?? 0) : 0;
}

function ownedBy(
  object: { metadata: { ownerReferences?: { uid: string; controller?: boolean }[] } },
  uid: string,
): boolean {
  return (object.metadata.ownerReferences ?? []).some(
    (reference) => reference.controller === true && reference.uid === uid,
  );
}

/**
 * Places every pod this ModelServing controls in the tree, and collects their revision labels.
 * Pods it does not control, or whose identity does not parse, are left out: the controller
 * neither adopts nor deletes them.
 */
function buildTree(
  owner: NamespacedOwner,
  pods: readonly Pod[],
  ordinals: OrdinalTable,
): { tree: UnitTree; podRevisionNames: Set<string> } {
  const views: { view: PodView; at: { group: number; role: string; instance: number; index: number } }[] = [];
  const podRevisionNames = new Set<string>();
  for (const pod of pods) {
    const view = readForOwner(podViewMemo, owner, pod, readPodView);
    if (view === undefined) continue;
    views.push({ view, at: { ...positionOf(ordinals, view.id), index: view.id.index } });
    if (view.revision !== undefined) podRevisionNames.add(view.revision);
  }
  // Stable, so of two pods with one identity the later one still wins, as a plain insert would.
  views.sort(
    ({ at: a }, { at: b }) =>
      a.group - b.group || compareStrings(a.role, b.role) || a.instance - b.instance || a.index - b.index,
  );
  // Inserting in key order makes every map iterate in ascending key order.
  const tree = new Map<number, Map<string, Map<number, Map<number, PodView>>>>();
  for (const { view, at } of views) {
    const { group, role, instance, index } = at;
    const roles = getOrCreate(tree, group, () => new Map<string, Map<number, Map<number, PodView>>>());
    const instances = getOrCreate(roles, role, () => new Map<number, Map<number, PodView>>());
    getOrCreate(instances, instance, () => new Map<number, PodView>()).set(index, view);
  }
  return { tree, podRevisionNames };
}

/** A read of one object for one owner (ownership and identity depend on the owner). */
interface OwnedRead<V> {
  readonly ownerName: string;
  readonly ownerUid: string;
  readonly value: V;
}

/**
 * Pod and Service views per object. Keyed on the object, and only when it is frozen, so a view
 * never goes stale; the owner is compared because ownership and identity depend on it.
 */
const podViewMemo = new WeakMap<Pod, OwnedRead<PodView | undefined>>();
const serviceViewMemo = new WeakMap<Service, OwnedRead<ServiceView | undefined>>();

/** `read(owner, object)`, remembered per frozen object for the owner it was read for. */
function readForOwner<T extends object, V>(
  memo: WeakMap<T, OwnedRead<V>>,
  owner: NamespacedOwner,
  object: T,
  read: (owner: NamespacedOwner, object: T) => V,
): V {
  const cached = memo.get(object);
  if (cached !== undefined && cached.ownerName === owner.name && cached.ownerUid === owner.uid) return cached.value;
  const value = read(owner, object);
  if (Object.isFrozen(object)) memo.set(object, { ownerName: owner.name, ownerUid: owner.uid, value });
  return value;
}

/** The pod's view when `owner` controls it and its identity parses; undefined otherwise. */
function readPodView(owner: NamespacedOwner, pod: Pod): PodView | undefined {
  const uid = pod.metadata.uid;
  if (uid === undefined || !ownedBy(pod, owner.uid)) return undefined;
  const id = parsePodIdentity(owner.name, pod.metadata.name, pod.metadata.labels);
  return id === undefined
    ? undefined
    : { pod, id, uid, revision: pod.metadata.labels?.[LABEL_REVISION], facts: podFacts(pod) };
}

/** The Service's view when `owner` controls it; undefined otherwise. */
function readServiceView(owner: NamespacedOwner, service: Service): ServiceView | undefined {
  if (!ownedBy(service, owner.uid)) return undefined;
  return { service, instance: parseServiceInstance(owner.name, service.metadata.name, service.metadata.labels) };
}
