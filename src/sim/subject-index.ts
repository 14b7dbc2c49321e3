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
 * the few pods concerned in the order the server lists them: by namespace, then name. A pod's new
 * version costs what it changed: what was derived from parts it shares with the previous version
 * (the store shares every unchanged part) is kept.
 */
import type { Pod } from "../api/kube.ts";
import type { ModelServing, Role } from "../api/schema.ts";
import { ANNOTATION_IN_PLACE, LABEL_REVISION, LABEL_ROLE_HASH } from "../api/wellknown.ts";
import { isPodReady, isTerminating } from "../core/health.ts";
import {
  availablePendingFor,
  claimedIdentity,
  countKey,
  inPartition,
  instanceAvailable,
  instanceRolloutReason,
  isDraining,
  noDuplicatePods,
  partitionedUnits,
  placePod,
  rolloutPendingFrom,
  surgeBound,
  surgeLimits,
  surgeOrDrainReason,
  surgeViolation,
  withinSurgeLimits,
} from "../core/invariants.ts";
import type {
  AvailableCounts,
  InstanceOf,
  PartitionedUnit,
  PlacedPod,
  RevisionsByName,
  SurgeLimits,
  UpdateOfRole,
} from "../core/invariants.ts";
import { getOrCreate } from "../core/maps.ts";
import { OrdinalTable, positionOf } from "../core/ordinals.ts";
import { compareStored } from "./pod-changes.ts";
import type { PodChange } from "./pod-changes.ts";

/** Live pods per claimed identity (`claimedIdentity`), kept up to date from pod changes. */
export class IdentityClaims {
  readonly #claims = new Map<string, number>();
  /**
   * By pod uid, the claim of a frozen version of the pod (stored objects are deep-frozen: its
   * claim cannot change) that a later version sharing its claim parts claims too. A string-keyed
   * map, pruned as pods go, because it is read at most pod changes.
   */
  readonly #claimOf = new Map<string, { readonly pod: Pod; readonly claim: string | undefined }>();
  /** Identities claimed by more than one live pod. */
  #duplicated = 0;

  apply({ before, after }: PodChange): void {
    const sameUid = before !== undefined && after !== undefined && before.metadata.uid === after.metadata.uid;
    // A new version with the very parts the claim reads claims what the old one did, and what is
    // remembered of the pod still holds for it: nothing changes (most changes are status writes).
    if (sameUid && sameClaimParts(before, after)) return;
    const was = before === undefined ? undefined : this.#claimOfPod(before);
    const now = after === undefined ? undefined : claimedIdentity(after);
    if (before !== undefined && !sameUid) this.#claimOf.delete(before.metadata.uid ?? "");
    if (after !== undefined) {
      if (Object.isFrozen(after)) this.#claimOf.set(after.metadata.uid ?? "", { pod: after, claim: now });
      else this.#claimOf.delete(after.metadata.uid ?? "");
    }
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

  /** The claim of `pod`, a version of a counted pod: the remembered one when it shares the claim parts. */
  #claimOfPod(pod: Pod): string | undefined {
    const known = this.#claimOf.get(pod.metadata.uid ?? "");
    return known !== undefined && sameClaimParts(known.pod, pod) ? known.claim : claimedIdentity(pod);
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

const NO_UIDS: ReadonlySet<string> = new Set();

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
  /** `isPodReady` of the pod's stored object now. */
  ready: boolean;
  /**
   * The pod object found to match its revision (`settled`) and the revisions it was found under;
   * undefined while unverified.
   */
  settled: { readonly pod: Pod; readonly revisions: RevisionsByName } | undefined;
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
  /** Units whose pods changed since their last evaluation (evaluated before any answer). */
  readonly #dirty = new Set<Unit>();
  /**
   * Pods whose spec is not known to match its revision: added when a pod's new version may be
   * judged otherwise than its settled one (see `#replace`); `settled` removes them. Unordered:
   * nearly every pod version passes at the check after it is stored, so the few left are put in
   * stored order when read rather than kept in it at every change.
   */
  readonly #unverified = new Set<Entry>();
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
    const ordinals = ms.status?.ordinals;
    const before = this.#ms.status?.ordinals;
    const moved = ordinals !== before && JSON.stringify(ordinals ?? []) !== JSON.stringify(before ?? []);
    this.#ms = ms;
    // Pods are placed by position (`placePod`): a succession moves them, so all are placed again.
    if (moved) this.#placeAgain();
    // A status write keeps the parsed spec object (the parse memo shares it): nothing to compare.
    if (sameSpec && revisions === this.#context.revisions) return;
    const specJson = JSON.stringify(ms.spec);
    if (specJson === this.#context.specJson && revisions === this.#context.revisions) return;
    if (revisions !== this.#context.revisions) this.#unsettleChanged();
    this.#context = contextOf(ms, revisions, specJson);
    this.#rederive();
  }

  /**
   * Every stored pod placed again under the ModelServing now. A pod whose place is unchanged keeps
   * its entry (its verdicts, readiness, spec match and unit answers read its place, the spec and
   * the pod, none of which changed); the others are removed, then added where they now belong,
   * keeping their spec match: `revisionMismatch` builds a pod under the ordinals it carries, which
   * a move leaves as they were. The same answers as placing every pod anew, at the cost of the
   * pods that moved.
   */
  #placeAgain(): void {
    const ordinals = this.#ms.status?.ordinals ?? [];
    const table = ordinals.length === 0 ? undefined : OrdinalTable.read(ordinals);
    const moved: { readonly placed: PlacedPod; readonly settled: Entry["settled"] }[] = [];
    // Deleting the entry being visited leaves a Map's iteration well defined; moved ones are added after.
    for (const entry of this.#entries.values()) {
      if (isPlacedUnder(table, entry.placed)) continue;
      const placed = placedAgain(table, entry.placed);
      if (samePlace(entry.placed, placed)) {
        entry.unit.pods[entry.unit.pods.indexOf(entry.placed)] = placed;
        entry.placed = placed;
        continue;
      }
      this.#remove(entry.placed.pod);
      moved.push({ placed, settled: entry.settled });
    }
    for (const { placed, settled } of moved) {
      const entry = this.#add(placed);
      if (settled === undefined) continue;
      entry.settled = settled;
      this.#unverified.delete(entry);
    }
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

  /**
   * `availableCounts` within the surge limits (`withinSurgeLimits`) of the pods now: a pass over
   * the instances, asked only while a fault window is open.
   */
  keptCounts(): AvailableCounts {
    this.#flush();
    const counts = new Map<string, number>();
    for (const roles of this.#units.values()) {
      for (const instances of roles.values()) {
        for (const unit of instances.values()) {
          if (!unit.available || !withinSurgeLimits(this.#context.surge, unit)) continue;
          const key = countKey(unit.group, unit.role);
          counts.set(key, (counts.get(key) ?? 0) + 1);
        }
      }
    }
    return counts;
  }

  /**
   * Whether the instance `(group, role, instance)` is available now (`instanceAvailable`), and
   * whether any pod of it is stored (terminating ones too).
   */
  instance(group: number, role: string, instance: number): { readonly available: boolean; readonly stored: boolean } {
    this.#flush();
    const unit = this.#units.get(group)?.get(role)?.get(instance);
    return { available: unit?.available ?? false, stored: (unit?.pods.length ?? 0) > 0 };
  }

  /** `surgeBound` of the pods now, those whose uid is in `tolerated` left out. */
  surgeBound(tolerated: ReadonlySet<string> = NO_UIDS): string[] {
    if (this.#surging.size === 0) return [];
    const placed = this.#surging.placed();
    return surgeBound(
      this.#ms,
      tolerated.size === 0 ? placed : placed.filter((entry) => !tolerated.has(entry.pod.metadata.uid ?? "")),
    );
  }

  /** The uids of the pods `surgeBound` reports now (live, not draining, beyond the surge limits). */
  surgingUids(): Set<string> {
    return new Set(this.#surging.placed().map((entry) => entry.pod.metadata.uid ?? ""));
  }

  /** The surge limits the pods are judged against (`surgeLimits` of the spec). */
  get surgeLimits(): SurgeLimits {
    return this.#context.surge;
  }

  /** `partitionedUnits` of the pods now. */
  partitionedUnits(): Map<string, PartitionedUnit> {
    return partitionedUnits(this.#ms, this.#partitioned.placed(), this.#context.revisions);
  }

  /**
   * Pods not known to match their revision, in stored order: those not settled since they were
   * placed, and those whose stored version changed in what `revisionMismatch` reads (the spec
   * object, the labels and annotation naming the revision) or whose revisions changed since.
   */
  unverified(): PlacedPod[] {
    return [...this.#unverified].sort((a, b) => compareStored(a.placed.pod, b.placed.pod)).map((entry) => entry.placed);
  }

  /**
   * These pods (stored objects now) were found to match their revisions, the index's revisions
   * now: they need no more `podsMatchTheirRevision` check while they, or new versions the check
   * would judge alike under the same revisions (see `#replace`), are stored.
   */
  settled(pods: readonly PlacedPod[]): void {
    for (const { pod } of pods) {
      const entry = this.#entries.get(pod.metadata.uid ?? "");
      // A pod object already settled keeps the revisions it was first found to match under.
      if (entry?.placed.pod !== pod || entry.settled?.pod === pod) continue;
      this.#unverified.delete(entry);
      entry.settled = { pod, revisions: this.#context.revisions };
    }
  }

  /** `availablePending` of the ModelServing and its pods now (the first `limit` reasons). */
  availablePending(limit?: number): string[] {
    return availablePendingFor(this.#ms, this.counts(), limit);
  }

  /** `rolloutPending` of the ModelServing, its pods and its revisions now (the first `limit` reasons). */
  rolloutPending(limit?: number): string[] {
    this.#flush();
    return rolloutPendingFrom(
      this.#ms,
      this.#context.revisions,
      {
        // Its members are the pods with a reason, in stored order: the first `limit` are the answer.
        surgeAndDrain: (limit) =>
          this.#surgingOrDraining
            .entries()
            .slice(0, limit)
            .flatMap((entry) => entry.surgeOrDrain ?? []),
        instanceReason: (where, update) => this.#instanceReason(where, update),
      },
      limit,
    );
  }

  #instanceReason(where: InstanceOf, update: UpdateOfRole): string | undefined {
    const unit = this.#units.get(where.group)?.get(where.role.name)?.get(where.instance);
    if (unit === undefined) return instanceRolloutReason(this.#ms, where, [], update);
    // The answer depends on the unit's pods and the update (cleared when either changes).
    const cached = unit.rollout;
    if (cached !== undefined && cached.update.revision === update.revision && cached.update.hash === update.hash)
      return cached.reason;
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
    if (previous !== undefined && samePlaceParts(previous.pod, after)) return { ...previous, pod: after };
    return placePod(this.#ms, after);
  }

  /** Adds a placed pod (unverified) and returns its entry. */
  #add(placed: PlacedPod): Entry {
    const unit = this.#unitOf(placed.id);
    unit.pods.splice(
      storedIndex(unit.pods, (each) => each.pod, placed.pod),
      0,
      placed,
    );
    const entry: Entry = {
      placed,
      unit,
      surge: undefined,
      surgeOrDrain: undefined,
      ready: isPodReady(placed.pod),
      settled: undefined,
    };
    this.#entries.set(placed.pod.metadata.uid ?? "", entry);
    this.#unverified.add(entry);
    this.#judge(entry);
    this.#dirty.add(unit);
    return entry;
  }

  /**
   * A new stored version of the pod of `entry`, in the same instance: same uid and name, so same
   * places. What the index derived from the previous version is derived again only when the new
   * one differs in what it is derived from (most versions are status writes that change nothing
   * of it): the spec match when `revisionMismatch` would read other parts or other revisions, the
   * per-pod verdicts, the unit's answers.
   */
  #replace(entry: Entry, placed: PlacedPod): void {
    const { unit } = entry;
    const before = entry.placed.pod;
    unit.pods[unit.pods.indexOf(entry.placed)] = placed;
    entry.placed = placed;
    if (entry.settled?.revisions !== this.#context.revisions || !sameSpecParts(before, placed.pod))
      this.#unsettle(entry);
    const sameVerdicts = sameVerdictParts(before, placed.pod);
    if (!sameVerdicts) this.#judge(entry);
    // Readiness is read again only when what it is read from changed (conditions are rewritten less often than status).
    const ready =
      before.status?.conditions === placed.pod.status?.conditions && isTerminating(before) === isTerminating(placed.pod)
        ? entry.ready
        : isPodReady(placed.pod);
    // The unit's answers read of each pod its readiness, the verdict parts and two labels.
    if (ready !== entry.ready || !sameVerdicts || !sameUnitLabels(before, placed.pod)) this.#dirty.add(unit);
    entry.ready = ready;
  }

  #remove(pod: Pod): void {
    const entry = this.#entries.get(pod.metadata.uid ?? "");
    if (entry === undefined) return;
    this.#entries.delete(pod.metadata.uid ?? "");
    for (const subset of [this.#surging, this.#surgingOrDraining, this.#partitioned]) subset.delete(entry);
    this.#unverified.delete(entry);
    const { unit, placed } = entry;
    unit.pods.splice(unit.pods.indexOf(placed), 1);
    this.#dirty.add(unit);
  }

  /** The per-pod verdicts of `entry` under the current context. */
  #judge(entry: Entry): void {
    entry.surgeOrDrain = surgeOrDrainReason(this.#ms, entry.placed);
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
    return getOrCreate(instances, instance, (): Unit => ({
      group,
      role,
      instance,
      pods: [],
      available: false,
      rollout: undefined,
    }));
  }

  #count(key: string, delta: number): void {
    const count = (this.#counts.get(key) ?? 0) + delta;
    // A (group, role) without available instances has no key, as in `availableCounts`.
    if (count === 0) this.#counts.delete(key);
    else this.#counts.set(key, count);
    this.#version += 1;
  }

  /** `entry`'s pod is to be checked against its revision again. */
  #unsettle(entry: Entry): void {
    entry.settled = undefined;
    this.#unverified.add(entry);
  }

  /**
   * The revisions change: pods kept settled in a new version because it was judged alike under
   * the old revisions are checked again (a pod whose settled object is unchanged stays settled).
   */
  #unsettleChanged(): void {
    for (const entry of this.#entries.values())
      if (entry.settled !== undefined && entry.settled.pod !== entry.placed.pod) this.#unsettle(entry);
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

/**
 * Whether two versions of one pod in one place get the same `revisionMismatch` verdict under the
 * same revisions: it reads the place and, of the pod, the spec and the revision it names
 * (`specRevisionName`: the revision label and the in-place progress annotation).
 */
function sameSpecParts(before: Pod, after: Pod): boolean {
  return (
    before.spec === after.spec &&
    before.metadata.labels?.[LABEL_REVISION] === after.metadata.labels?.[LABEL_REVISION] &&
    before.metadata.annotations?.[ANNOTATION_IN_PLACE] === after.metadata.annotations?.[ANNOTATION_IN_PLACE]
  );
}

/**
 * Whether two versions of one pod in one place get the same per-pod verdicts (`#judge`): those
 * read the place, the name and, of the pod, only whether it is live and whether it is draining.
 */
function sameVerdictParts(before: Pod, after: Pod): boolean {
  return isTerminating(before) === isTerminating(after) && isDraining(before) === isDraining(after);
}

/**
 * Whether two versions of one pod in one place, equally ready and with the same verdict parts
 * (`sameVerdictParts`), leave its unit's answers as they were: `instanceAvailable` reads of each
 * pod its place, liveness, readiness, draining and revision label, `instanceRolloutReason` that
 * and its name and role hash label.
 */
function sameUnitLabels(before: Pod, after: Pod): boolean {
  if (before.metadata.labels === after.metadata.labels) return true;
  return (
    before.metadata.labels?.[LABEL_REVISION] === after.metadata.labels?.[LABEL_REVISION] &&
    before.metadata.labels?.[LABEL_ROLE_HASH] === after.metadata.labels?.[LABEL_ROLE_HASH]
  );
}

/**
 * `placePod` of a placed pod's same object under the ordinal table `table` (undefined: no
 * `status.ordinals`) of its ModelServing, whose name and uid are unchanged: the pod stays
 * controlled and its identity the same (`physical`, or `id` when it was placed without
 * ordinals), so only its position is read again, as `placePod` reads it.
 */
function placedAgain(table: OrdinalTable | undefined, { pod, id, physical }: PlacedPod): PlacedPod {
  const own = physical ?? id;
  if (table === undefined) return { pod, id: own };
  return { pod, id: { ...positionOf(table, own), index: own.index }, physical: own };
}

/**
 * Whether `placedAgain(table, placed)` would be `placed` as it is (the same position, and
 * `physical` present exactly when there is a table): the common case, decided without allocating.
 */
function isPlacedUnder(table: OrdinalTable | undefined, { id, physical }: PlacedPod): boolean {
  if (table === undefined) return physical === undefined;
  if (physical === undefined) return false;
  const group = table.groups.position(physical.group);
  return group === id.group && table.instances(group, physical.role).position(physical.instance) === id.instance;
}

/** Two versions of one pod (same uid) in the same instance as the same worker. */
function samePlace(a: PlacedPod, b: PlacedPod): boolean {
  return (
    a.pod.metadata.uid === b.pod.metadata.uid &&
    a.id.group === b.id.group &&
    a.id.role === b.id.role &&
    a.id.instance === b.id.instance &&
    a.id.index === b.id.index
  );
}

function contextOf(ms: ModelServing, revisions: RevisionsByName, specJson = JSON.stringify(ms.spec)): Context {
  return {
    specJson,
    revisions,
    roles: new Map(ms.spec.template.roles.map((role) => [role.name, role])),
    surge: surgeLimits(ms),
  };
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
