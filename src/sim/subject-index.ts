/**
 * Indexes the invariant checker keeps up to date as pods change (`pod-changes.ts`), so that a
 * check costs what changed rather than a pass over every pod:
 * - `IdentityClaims`: how many live pods claim each identity (`noDuplicatePods`);
 * - `SubjectIndex`: one ModelServing's placed pods by instance, the availability of each instance
 *   and the available counts (`availableCounts`), and the few pods that matter to `surgeBound`,
 *   `partitionedUnits`, `podsMatchTheirRevision` and the rollout's surge-or-drain reasons.
 *
 * Every answer is the named predicate of `src/core/invariants.ts` applied per pod or per instance
 * (the same pieces the whole-set functions are made of), so it equals the whole-set function over
 * the server's stored pods. Where a whole-set function needs pods in stored order, the index keeps
 * the few pods concerned in the order the server lists them: by namespace, then name.
 */
import type { Pod } from "../api/kube.ts";
import type { ModelServing, Role } from "../api/schema.ts";
import { availablePendingFor, claimedIdentity, countKey, inPartition, instanceAvailable, instanceRolloutReason, noDuplicatePods, partitionedUnits, placePod, rolloutPendingFrom, surgeBound, surgeLimits, surgeOrDrainReason, surgeViolation } from "../core/invariants.ts";
import type { AvailableCounts, InstanceOf, PartitionedUnit, PlacedPod, RevisionsByName, SurgeLimits, UpdateOfRole } from "../core/invariants.ts";
import { getOrCreate } from "../core/maps.ts";
import { compareStored } from "./pod-changes.ts";
import type { PodChange } from "./pod-changes.ts";

/** Live pods per claimed identity (`claimedIdentity`), kept up to date from pod changes. */
export class IdentityClaims {
  readonly #claims = new Map<string, number>();
  /**
   * By pod uid, the claim of the pod's last counted object when that object is frozen (stored
   * objects are: its claim cannot change). A string-keyed map, pruned as pods go, because it is
   * read and written at every pod change.
   */
  readonly #claimOf = new Map<string, { readonly pod: Pod; readonly claim: string | undefined }>();
  /** Identities claimed by more than one live pod. */
  #duplicated = 0;

  apply({ before, after }: PodChange): void {
    const known = before === undefined ? undefined : this.#claimOf.get(before.metadata.uid ?? "");
    const was = before === undefined ? undefined : known?.pod === before ? known.claim : claimedIdentity(before);
    // A new version that shares every part the claim reads claims what the old one did.
    const now = after === undefined ? undefined : before !== undefined && sameClaimParts(before, after) ? was : claimedIdentity(after);
    if (before !== undefined) this.#claimOf.delete(before.metadata.uid ?? "");
    if (after !== undefined && Object.isFrozen(after)) this.#claimOf.set(after.metadata.uid ?? "", { pod: after, claim: now });
    if (was === now) return;
    this.#count(was, -1);
    this.#count(now, 1);
  }

  /**
   * `noDuplicatePods(storedPods())`, where `storedPods` lists the stored pods the claims were
   * counted from (called only when an identity is claimed twice).
   */
  violations(storedPods: () => readonly Pod[]): string[] {
    // Without a doubly claimed identity there is nothing to report; else the predicate says what.
    return this.#duplicated === 0 ? [] : noDuplicatePods(storedPods());
  }

  #count(key: string | undefined, delta: number): void {
    if (key === undefined) return;
    const before = this.#claims.get(key) ?? 0;
    const after = before + delta;
    if (after === 0) this.#claims.delete(key);
    else this.#claims.set(key, after);
    if (before < 2 && after >= 2) this.#duplicated += 1;
    if (before >= 2 && after < 2) this.#duplicated -= 1;
  }
}

/** What the index derives from the ModelServing's spec and revisions; replaced when either changes. */
interface Context {
  readonly specJson: string;
  readonly revisions: RevisionsByName;
  readonly roles: ReadonlyMap<string, Role>;
  readonly surge: SurgeLimits;
}

/** One instance `(group, role, j)` with its placed pods. */
interface Unit {
  readonly group: number;
  readonly role: string;
  readonly instance: number;
  /** In stored order (namespace, name), as `podsByInstance` lists them. */
  readonly pods: PlacedPod[];
  /** `instanceAvailable` under the current context. */
  available: boolean;
  /** `instanceRolloutReason` as last asked: for which update, and the answer. */
  rollout: { readonly update: UpdateOfRole; readonly reason: string | undefined } | undefined;
}

/** One placed pod with its per-pod verdicts under the current context. */
interface Entry {
  /** The pod's stored object now (replaced in place while the pod keeps its instance). */
  placed: PlacedPod;
  readonly unit: Unit;
  surge: string | undefined;
  surgeOrDrain: string | undefined;
}

/**
 * One ModelServing's pods, indexed. Feed it every pod change (`podChanged`) and each stored
 * version of the ModelServing and its revisions (`observe`); its answers are then those of the
 * whole-set predicates over the stored pods now.
 */
export class SubjectIndex {
  #ms: ModelServing;
  #context: Context;
  /** By pod uid. */
  readonly #entries = new Map<string, Entry>();
  /** By group, role and ordinal (no key to build when looked up); only instances with pods. */
  readonly #units = new Map<number, Map<string, Map<number, Unit>>>();
  readonly #counts = new Map<string, number>();
  /** Pods with a `surgeViolation`, a `surgeOrDrainReason`, or `inPartition`. */
  readonly #surging = new StoredOrder();
  readonly #surgingOrDraining = new StoredOrder();
  readonly #partitioned = new StoredOrder();
  /** The `surgeOrDrainReason`s of `#surgingOrDraining` in stored order, until one changes. */
  #surgeOrDrainReasons: string[] | undefined;
  /** Units whose pods changed since their last evaluation (evaluated before any answer). */
  readonly #dirty = new Set<Unit>();
  /** Pods whose spec has not been found to match its revision (`settled` removes them). */
  readonly #unverified = new StoredOrder();
  #version = 0;

  /** `pods`: the stored pods now; later changes come through `podChanged`. */
  constructor(ms: ModelServing, revisions: RevisionsByName, pods: readonly Pod[]) {
    this.#ms = ms;
    this.#context = contextOf(ms, revisions);
    for (const pod of pods) this.podChanged({ before: undefined, after: pod });
  }

  get ms(): ModelServing {
    return this.#ms;
  }

  get revisions(): RevisionsByName {
    return this.#context.revisions;
  }

  /** Grows whenever the available counts or the context (spec, revisions) change. */
  get version(): number {
    this.#flush();
    return this.#version;
  }

  /** The stored ModelServing (parsed; same uid) and its revisions now. */
  observe(ms: ModelServing, revisions: RevisionsByName): void {
    if (ms === this.#ms && revisions === this.#context.revisions) return;
    const sameSpec = ms.spec === this.#ms.spec;
    this.#ms = ms;
    // A status write keeps the parsed spec object (the parse memo shares it): nothing to compare.
    if (sameSpec && revisions === this.#context.revisions) return;
    const specJson = JSON.stringify(ms.spec);
    if (specJson === this.#context.specJson && revisions === this.#context.revisions) return;
    this.#context = contextOf(ms, revisions, specJson);
    this.#rederive();
  }

  podChanged({ before, after }: PodChange): void {
    const entry = before === undefined ? undefined : this.#entries.get(before.metadata.uid ?? "");
    const placed = after === undefined ? undefined : this.#place(entry, after);
    if (entry !== undefined && placed !== undefined && samePlace(entry.placed, placed)) {
      this.#replace(entry, placed);
      return;
    }
    if (before !== undefined) this.#remove(before);
    if (placed !== undefined) this.#add(placed);
  }

  /** `availableCounts` of the pods now. */
  counts(): AvailableCounts {
    this.#flush();
    return this.#counts;
  }

  /** `surgeBound` of the pods now. */
  surgeBound(): string[] {
    return this.#surging.size === 0 ? [] : surgeBound(this.#ms, this.#surging.placed());
  }

  /** `partitionedUnits` of the pods now. */
  partitionedUnits(): { units: Map<string, PartitionedUnit>; mixed: string[] } {
    return partitionedUnits(this.#ms, this.#partitioned.placed());
  }

  /** Pods not yet found to match their revision, in stored order. */
  unverified(): PlacedPod[] {
    return this.#unverified.placed();
  }

  /** These pods (stored objects now) need no more `podsMatchTheirRevision` check. */
  settled(pods: readonly PlacedPod[]): void {
    for (const { pod } of pods) {
      const entry = this.#entries.get(pod.metadata.uid ?? "");
      if (entry?.placed.pod === pod) this.#unverified.delete(entry);
    }
  }

  /** `availablePending` of the ModelServing and its pods now (the first `limit` reasons). */
  availablePending(limit?: number): string[] {
    return availablePendingFor(this.#ms, this.counts(), limit);
  }

  /** `rolloutPending` of the ModelServing, its pods and its revisions now (the first `limit` reasons). */
  rolloutPending(limit?: number): string[] {
    this.#flush();
    return rolloutPendingFrom(this.#ms, this.#context.revisions, {
      surgeAndDrain: () => (this.#surgeOrDrainReasons ??= this.#surgingOrDraining.entries().flatMap((entry) => entry.surgeOrDrain ?? [])),
      instanceReason: (where, update) => this.#instanceReason(where, update),
    }, limit);
  }

  #instanceReason(where: InstanceOf, update: UpdateOfRole): string | undefined {
    const unit = this.#units.get(where.group)?.get(where.role.name)?.get(where.instance);
    if (unit === undefined) return instanceRolloutReason(this.#ms, where, [], update);
    // The answer depends on the unit's pods and the update (cleared when either changes).
    const cached = unit.rollout;
    if (cached !== undefined && cached.update.revision === update.revision && cached.update.hash === update.hash) return cached.reason;
    const reason = instanceRolloutReason(this.#ms, where, unit.pods, update);
    unit.rollout = { update, reason };
    return reason;
  }

  /**
   * `placePod` of `after`, reusing the identity of `entry` (the placement of the pod's previous
   * version) when `after` shares every part `placePod` reads: the same inputs give the same place.
   */
  #place(entry: Entry | undefined, after: Pod): PlacedPod | undefined {
    const previous = entry?.placed;
    if (previous !== undefined && samePlaceParts(previous.pod, after)) return { pod: after, id: previous.id };
    return placePod(this.#ms, after);
  }

  #add(placed: PlacedPod): void {
    const unit = this.#unitOf(placed.id);
    unit.pods.splice(storedIndex(unit.pods, (each) => each.pod, placed.pod), 0, placed);
    const entry: Entry = { placed, unit, surge: undefined, surgeOrDrain: undefined };
    this.#entries.set(placed.pod.metadata.uid ?? "", entry);
    this.#unverified.add(entry);
    this.#judge(entry);
    this.#dirty.add(unit);
  }

  /** A new stored version of the pod of `entry`, in the same instance: same uid and name, so same places. */
  #replace(entry: Entry, placed: PlacedPod): void {
    const { unit } = entry;
    unit.pods[unit.pods.indexOf(entry.placed)] = placed;
    entry.placed = placed;
    this.#unverified.add(entry);
    this.#judge(entry);
    this.#dirty.add(unit);
  }

  #remove(pod: Pod): void {
    const entry = this.#entries.get(pod.metadata.uid ?? "");
    if (entry === undefined) return;
    this.#entries.delete(pod.metadata.uid ?? "");
    for (const subset of [this.#surging, this.#surgingOrDraining, this.#partitioned, this.#unverified]) subset.delete(entry);
    if (entry.surgeOrDrain !== undefined) this.#surgeOrDrainReasons = undefined;
    const { unit, placed } = entry;
    unit.pods.splice(unit.pods.indexOf(placed), 1);
    this.#dirty.add(unit);
  }

  /** The per-pod verdicts of `entry` under the current context. */
  #judge(entry: Entry): void {
    const surgeOrDrain = surgeOrDrainReason(this.#ms, entry.placed);
    if (surgeOrDrain !== entry.surgeOrDrain) this.#surgeOrDrainReasons = undefined;
    entry.surgeOrDrain = surgeOrDrain;
    entry.surge = surgeViolation(this.#context.surge, entry.placed);
    this.#surging.toggle(entry, entry.surge !== undefined);
    this.#surgingOrDraining.toggle(entry, entry.surgeOrDrain !== undefined);
    this.#partitioned.toggle(entry, inPartition(this.#ms, entry.placed));
  }

  #flush(): void {
    for (const unit of this.#dirty) this.#evaluate(unit);
    this.#dirty.clear();
  }

  /** Re-evaluates a unit whose pods changed: its availability (and the counts), its rollout answer. */
  #evaluate(unit: Unit): void {
    unit.rollout = undefined;
    const available = instanceAvailable(unit.pods, this.#context.roles.get(unit.role), this.#context.revisions);
    if (available !== unit.available) {
      unit.available = available;
      this.#count(countKey(unit.group, unit.role), available ? 1 : -1);
    }
    if (unit.pods.length === 0) this.#units.get(unit.group)?.get(unit.role)?.delete(unit.instance);
  }

  /** The unit of `id`, created empty when it has none. */
  #unitOf({ group, role, instance }: PlacedPod["id"]): Unit {
    const roles = getOrCreate(this.#units, group, () => new Map<string, Map<number, Unit>>());
    const instances = getOrCreate(roles, role, () => new Map<number, Unit>());
    return getOrCreate(instances, instance, (): Unit => ({ group, role, instance, pods: [], available: false, rollout: undefined }));
  }

  #count(key: string, delta: number): void {
    const count = (this.#counts.get(key) ?? 0) + delta;
    // A (group, role) without available instances has no key, as in `availableCounts`.
    if (count === 0) this.#counts.delete(key);
    else this.#counts.set(key, count);
    this.#version += 1;
  }

  /** Everything derived from the context, again (the spec or the revisions changed). */
  #rederive(): void {
    this.#dirty.clear();
    for (const entry of this.#entries.values()) this.#judge(entry);
    this.#counts.clear();
    for (const roles of this.#units.values()) {
      for (const instances of roles.values()) {
        for (const unit of instances.values()) {
          unit.available = false;
          this.#evaluate(unit);
        }
      }
    }
    this.#version += 1;
  }
}

/**
 * Whether `after` has the very objects `claimedIdentity` reads from `before` (copy-on-write stores
 * share every unchanged part), so both claim the same identity.
 */
function sameClaimParts(before: Pod, after: Pod): boolean {
  return (
    before.metadata.labels === after.metadata.labels &&
    before.metadata.namespace === after.metadata.namespace &&
    before.metadata.deletionTimestamp === after.metadata.deletionTimestamp &&
    before.spec === after.spec
  );
}

/**
 * Whether `after` has the very objects `placePod` reads from `before` (name and uid too: the
 * placement is by uid), so under one ModelServing both have the same place.
 */
function samePlaceParts(before: Pod, after: Pod): boolean {
  return (
    before.metadata.uid === after.metadata.uid &&
    before.metadata.name === after.metadata.name &&
    before.metadata.labels === after.metadata.labels &&
    before.metadata.ownerReferences === after.metadata.ownerReferences
  );
}

/** Two versions of one pod (same uid) in the same instance as the same worker. */
function samePlace(a: PlacedPod, b: PlacedPod): boolean {
  return a.pod.metadata.uid === b.pod.metadata.uid && a.id.group === b.id.group && a.id.role === b.id.role && a.id.instance === b.id.instance && a.id.index === b.id.index;
}

function contextOf(ms: ModelServing, revisions: RevisionsByName, specJson = JSON.stringify(ms.spec)): Context {
  return { specJson, revisions, roles: new Map(ms.spec.template.roles.map((role) => [role.name, role])), surge: surgeLimits(ms) };
}

/**
 * A set of entries kept in the order the API server lists their pods (by namespace, then name),
 * so reading it in that order costs no sort: a binary search and a splice per change.
 */
class StoredOrder {
  readonly #members = new Set<Entry>();
  readonly #sorted: Entry[] = [];

  get size(): number {
    return this.#sorted.length;
  }

  entries(): readonly Entry[] {
    return this.#sorted;
  }

  placed(): PlacedPod[] {
    return this.#sorted.map((entry) => entry.placed);
  }

  toggle(entry: Entry, member: boolean): void {
    if (member) this.add(entry);
    else this.delete(entry);
  }

  add(entry: Entry): void {
    if (this.#members.has(entry)) return;
    this.#members.add(entry);
    this.#sorted.splice(storedIndex(this.#sorted, podOfEntry, entry.placed.pod), 0, entry);
  }

  delete(entry: Entry): void {
    if (!this.#members.delete(entry)) return;
    // Another pod may sort equal for a moment (one re-created under its name): find this one.
    let index = storedIndex(this.#sorted, podOfEntry, entry.placed.pod);
    while (index < this.#sorted.length && this.#sorted[index] !== entry) index++;
    this.#sorted.splice(index, 1);
  }
}

/** The first position in `sorted` (stored order of `podOf`) whose pod does not sort before `pod`. */
function storedIndex<T>(sorted: readonly T[], podOf: (item: T) => Pod, pod: Pod): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    const candidate = sorted[middle];
    if (candidate !== undefined && compareStored(podOf(candidate), pod) < 0) low = middle + 1;
    else high = middle;
  }
  return low;
}

function podOfEntry(entry: Entry): Pod {
  return entry.placed.pod;
}
