/**
 * The invariant checker of a scenario run: evaluates the named predicates of
 * `src/core/invariants.ts` over the objects stored on the simulated API server after every
 * instant of simulated time (the runner calls `check()` after each settle), and keeps what the
 * pure predicates cannot know — memory across time and whether a rollout is being judged.
 *
 * When the budgets are judged (`groupBudget`, `roleBudget`), precisely:
 * - only while a rollout is under way for that ModelServing: its stored
 *   `status.currentRevision` differs from `status.updateRevision` (the controller has recorded a
 *   new update revision and not yet promoted it; disruptions come only after that write, which is
 *   a barrier);
 * - only outside a fault window: `failNode`, `recoverNode` and `deletePods` open one, and it
 *   closes at the first instant no crashed node still holds a pod (`faultActive`: until then the
 *   failure has not fully shown) and every ModelServing has all its desired groups available
 *   again (failures the scenario injects are not the rollout's to budget);
 * - `roleBudget` under RoleRollingUpdate only: the group strategies replace whole groups, so
 *   their disruption is counted by `groupBudget`;
 * - only over units that had been available for the current shape (role replica counts): a group
 *   or role still being created or scaled up is not "disrupted".
 *
 * `surgeBound` is judged only when the stored status is for the current generation (the
 * controller has seen the spec it is held to).
 *
 * `partitionHolds` remembers, per instance below a partition, the role hash of its pods when first
 * seen there; a live pod of that instance with another hash while it is still below the partition
 * is a violation (pods gone do not erase the memory: recovery must rebuild the same revision).
 *
 * Violations are counted by onset: a message that was not reported at the previous check.
 */
import type { Pod } from "../api/kube.ts";
import { parseModelServing } from "../api/parse.ts";
import type { ModelServing } from "../api/schema.ts";
import { INVARIANT_NAMES, availableCounts, belowPartition, groupAvailable, groupBudget, noDuplicatePods, partitionedUnits, placedPods, podsByInstance, podsMatchTheirRevision, roleBudget, surgeBound } from "../core/invariants.ts";
import type { AvailableCounts, InvariantName, PartitionedUnit, PlacedPod, RevisionsByName } from "../core/invariants.ts";
import type { Revision } from "../core/pods.ts";
import { decodeControllerRevision } from "../core/revision/controller-revision.ts";
import type { ApiServer } from "./apiserver.ts";

/** One invariant's line in the report. */
export interface InvariantResult {
  name: InvariantName;
  violations: number;
  /** The first violation: virtual seconds and message; null when it held throughout. */
  first: { t: number; message: string } | null;
}

export interface CheckerOptions {
  /** Evaluate `podsMatchTheirRevision` (rebuilds each new pod version once). Default true. */
  podSpecs?: boolean;
  /**
   * True while an injected fault is still unfolding even though nothing may look unavailable yet
   * (a crashed node whose pods have not been marked or evicted). Keeps the fault window open.
   */
  faultActive?: () => boolean;
}

/** What the checker remembers about one ModelServing (by uid). */
interface Memory {
  /** `<shape>|<group>` of groups that were available, `<shape>|<group>/<role>` of role pairs. */
  readonly established: Set<string>;
  /** unitKey → the instance and the role hash it had when first seen below a partition. */
  readonly partitioned: Map<string, PartitionedUnit>;
}

interface Tally {
  violations: number;
  first: { t: number; message: string } | null;
  previous: Set<string>;
}

/** A ModelServing as parsed, with the observation the predicates need. */
interface Subject {
  readonly ms: ModelServing;
  readonly placed: PlacedPod[];
  readonly revisions: RevisionsByName;
}

export class InvariantChecker {
  readonly #server: ApiServer;
  readonly #podSpecs: boolean;
  readonly #faultActive: () => boolean;
  readonly #memory = new Map<string, Memory>();
  readonly #tallies = new Map<InvariantName, Tally>(INVARIANT_NAMES.map((name) => [name, { violations: 0, first: null, previous: new Set<string>() }]));
  readonly #parsed = new Map<string, { resourceVersion: string; ms: ModelServing | undefined }>();
  readonly #decoded = new Map<string, { revision: number; value: Revision & { ownerUid: string | undefined } } | undefined>();
  /**
   * Stored pod objects whose spec was found to match its revision. A stored pod is frozen and
   * replaced on every write, so an object stands for one (uid, resourceVersion).
   */
  readonly #podsVerified = new WeakSet<Pod>();
  /** `placedPods` of each ModelServing (by uid) at one server resourceVersion, shared with the runner's waits. */
  #placed: { resourceVersion: string; byUid: Map<string, PlacedPod[]> } = { resourceVersion: "", byUid: new Map() };
  /** Per parsed ModelServing: each stored pod object's placement, null when not placed. */
  readonly #placedByPod = new WeakMap<ModelServing, WeakMap<Pod, PlacedPod | null>>();
  #lastResourceVersion = "";
  #faultOpen = false;

  constructor(server: ApiServer, options: CheckerOptions = {}) {
    this.#server = server;
    this.#podSpecs = options.podSpecs ?? true;
    this.#faultActive = options.faultActive ?? (() => false);
  }

  /** A fault was injected now: budgets are not judged until everything is available again. */
  faultInjected(): void {
    this.#faultOpen = true;
  }

  /** Evaluates every invariant at the current instant (nothing to do when nothing was committed). */
  check(): void {
    const resourceVersion = this.#server.resourceVersion();
    if (resourceVersion === this.#lastResourceVersion) return;
    this.#lastResourceVersion = resourceVersion;
    const pods = this.#server.stored("Pod") as unknown as Pod[];
    const subjects = this.#subjects(pods);
    const found = new Map<InvariantName, string[]>(INVARIANT_NAMES.map((name) => [name, []]));
    const add = (name: InvariantName, messages: readonly string[]) => found.get(name)?.push(...messages);
    add("noDuplicatePods", noDuplicatePods(pods));
    if (this.#faultOpen && !this.#faultActive() && subjects.every(allGroupsAvailable)) this.#faultOpen = false;
    for (const subject of subjects) this.#checkSubject(subject, add);
    for (const [name, messages] of found) this.#tally(name, messages);
  }

  /** The report's `invariants[]`, in `INVARIANT_NAMES` order. */
  results(): InvariantResult[] {
    return INVARIANT_NAMES.map((name) => {
      const tally = this.#tallies.get(name);
      return { name, violations: tally?.violations ?? 0, first: tally?.first ?? null };
    });
  }

  #checkSubject(subject: Subject, add: (name: InvariantName, messages: readonly string[]) => void): void {
    const { ms, placed, revisions } = subject;
    const memory = this.#memoryOf(ms);
    const counts = availableCounts(ms, podsByInstance(placed), revisions);
    const shape = ms.spec.template.roles.map((role) => `${role.name}:${role.replicas}`).join(",");
    const rollingOut = ms.status?.currentRevision !== undefined && ms.status.currentRevision !== ms.status.updateRevision;
    if (rollingOut && !this.#faultOpen) {
      add("groupBudget", groupBudget(ms, counts, establishedGroups(memory, shape)));
      // The group strategies replace whole groups: their budget is the group's (DESIGN §2.1, §2.10).
      if (ms.spec.rolloutStrategy.type === "RoleRollingUpdate") add("roleBudget", roleBudget(ms, counts, establishedRoles(memory, shape)));
    }
    establish(memory, shape, ms, counts);
    // Judged against the spec the controller has seen: right after a scale-down, the units above
    // the new count are still live until the controller has observed it and marked them.
    if (ms.status?.observedGeneration === ms.metadata.generation) add("surgeBound", surgeBound(ms, placed));
    add("partitionHolds", this.#partitionViolations(memory, subject));
    if (this.#podSpecs) add("podsMatchTheirRevision", this.#podSpecViolations(subject));
  }

  #partitionViolations(memory: Memory, subject: Subject): string[] {
    const { ms } = subject;
    const { units, mixed } = partitionedUnits(ms, subject.placed);
    const violations = [...mixed];
    for (const [key, unit] of units) {
      const had = memory.partitioned.get(key);
      if (had === undefined) memory.partitioned.set(key, unit);
      else if (had.hash !== unit.hash) violations.push(`${ms.metadata.name} ${key} is below the partition and ran role hash ${had.hash}, now ${unit.hash}`);
    }
    // Units the partition no longer covers are forgotten; units without pods are remembered.
    for (const [key, unit] of [...memory.partitioned]) if (!belowPartition(ms, unit.group, unit.role, unit.instance)) memory.partitioned.delete(key);
    return violations;
  }

  #podSpecViolations(subject: Subject): string[] {
    const unverified = subject.placed.filter((entry) => !this.#podsVerified.has(entry.pod));
    const violations = podsMatchTheirRevision(subject.ms, unverified, subject.revisions);
    for (const entry of unverified) {
      if (!violations.some((message) => message.includes(`pod ${entry.pod.metadata.name}`))) this.#podsVerified.add(entry.pod);
    }
    return violations;
  }

  #subjects(pods: readonly Pod[]): Subject[] {
    const subjects: Subject[] = [];
    for (const stored of this.#server.stored("ModelServing")) {
      const ms = this.parse(stored);
      if (ms === undefined) continue;
      subjects.push({ ms, placed: this.placedPods(ms, pods), revisions: this.revisionsOf(ms.metadata.uid ?? "") });
    }
    return subjects;
  }

  /**
   * `placedPods(ms, pods)` of `src/core/invariants.ts`, computed once per stored version of the
   * cluster: `pods` must be the server's stored pods now (`stored("Pod")`), and `ms` parsed from
   * the stored ModelServing now (`parse`), so equal resourceVersions mean equal inputs.
   */
  placedPods(ms: ModelServing, pods: readonly Pod[]): PlacedPod[] {
    const resourceVersion = this.#server.resourceVersion();
    if (this.#placed.resourceVersion !== resourceVersion) this.#placed = { resourceVersion, byUid: new Map() };
    const uid = ms.metadata.uid ?? "";
    let placed = this.#placed.byUid.get(uid);
    if (placed === undefined) {
      placed = this.#placedEach(ms, pods);
      this.#placed.byUid.set(uid, placed);
    }
    return placed;
  }

  /**
   * `placedPods(ms, pods)` pod by pod, each answer remembered per (parsed ModelServing, stored
   * pod) object pair: both are immutable (stored pods are frozen; `parse` caches one object per
   * resourceVersion), so the answer for a pair never changes. `placedPods` judges each pod alone
   * and keeps their order, so the result is the same as one call over all pods.
   */
  #placedEach(ms: ModelServing, pods: readonly Pod[]): PlacedPod[] {
    let memo = this.#placedByPod.get(ms);
    if (memo === undefined) {
      memo = new WeakMap();
      this.#placedByPod.set(ms, memo);
    }
    const placed: PlacedPod[] = [];
    for (const pod of pods) {
      let entry = memo.get(pod);
      if (entry === undefined) {
        entry = placedPods(ms, [pod])[0] ?? null;
        memo.set(pod, entry);
      }
      if (entry !== null) placed.push(entry);
    }
    return placed;
  }

  /** The readable revisions owned by the ModelServing with `ownerUid`, by name (decoded once each). */
  revisionsOf(ownerUid: string): RevisionsByName {
    return new Map([...this.#revisions()].filter(([, revision]) => revision.ownerUid === ownerUid).map(([name, revision]) => [name, { name, data: revision.data }]));
  }

  /** The stored ModelServing parsed and defaulted (cached by uid and resourceVersion); undefined when invalid. */
  parse(stored: { metadata: { uid?: string; resourceVersion?: string } }): ModelServing | undefined {
    const uid = stored.metadata.uid ?? "";
    const resourceVersion = stored.metadata.resourceVersion ?? "";
    const cached = this.#parsed.get(uid);
    if (cached?.resourceVersion === resourceVersion) return cached.ms;
    const result = parseModelServing(stored);
    const ms = result.ok ? result.value : undefined;
    this.#parsed.set(uid, { resourceVersion, ms });
    return ms;
  }

  #revisions(): Map<string, Revision & { ownerUid: string | undefined }> {
    const byName = new Map<string, Revision & { ownerUid: string | undefined }>();
    for (const stored of this.#server.stored("ControllerRevision")) {
      const key = `${stored.metadata.uid ?? ""}@${String(stored["revision"])}`;
      if (!this.#decoded.has(key)) {
        const result = decodeControllerRevision(stored);
        this.#decoded.set(key, result.ok ? { revision: result.revision.revision, value: { name: result.revision.name, data: result.revision.data, ownerUid: result.revision.ownerUid } } : undefined);
      }
      const decoded = this.#decoded.get(key);
      if (decoded !== undefined) byName.set(decoded.value.name, decoded.value);
    }
    return byName;
  }

  #memoryOf(ms: ModelServing): Memory {
    const uid = ms.metadata.uid ?? "";
    let memory = this.#memory.get(uid);
    if (memory === undefined) {
      memory = { established: new Set(), partitioned: new Map() };
      this.#memory.set(uid, memory);
    }
    return memory;
  }

  #tally(name: InvariantName, messages: readonly string[]): void {
    const tally = this.#tallies.get(name);
    if (tally === undefined) return;
    const current = new Set(messages);
    for (const message of current) {
      if (tally.previous.has(message)) continue;
      tally.violations += 1;
      tally.first ??= { t: this.#server.clock.nowMs() / 1000, message };
    }
    tally.previous = current;
  }
}

function allGroupsAvailable(subject: Subject): boolean {
  const counts = availableCounts(subject.ms, podsByInstance(subject.placed), subject.revisions);
  for (let group = 0; group < subject.ms.spec.replicas; group++) if (!groupAvailable(subject.ms, group, counts)) return false;
  return true;
}

/** Records the groups and role pairs available now under `shape`; forgets groups scaled away. */
function establish(memory: Memory, shape: string, ms: ModelServing, counts: AvailableCounts): void {
  for (const key of [...memory.established]) {
    const group = Number(key.slice(key.indexOf("|") + 1).split("/")[0]);
    if (group >= ms.spec.replicas) memory.established.delete(key);
  }
  for (let group = 0; group < ms.spec.replicas; group++) {
    if (groupAvailable(ms, group, counts)) memory.established.add(`${shape}|${group}`);
    for (const role of ms.spec.template.roles) {
      if ((counts.get(`${group}/${role.name}`) ?? 0) >= role.replicas) memory.established.add(`${shape}|${group}/${role.name}`);
    }
  }
}

function establishedGroups(memory: Memory, shape: string): Set<number> {
  const prefix = `${shape}|`;
  return new Set([...memory.established].filter((key) => key.startsWith(prefix) && !key.includes("/", prefix.length)).map((key) => Number(key.slice(prefix.length))));
}

function establishedRoles(memory: Memory, shape: string): Set<string> {
  const prefix = `${shape}|`;
  return new Set([...memory.established].filter((key) => key.startsWith(prefix) && key.includes("/", prefix.length)).map((key) => key.slice(prefix.length)));
}
