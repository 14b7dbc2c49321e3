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
 *   failure has not fully shown), every ModelServing has all its desired groups available
 *   again, counting only instances within the surge limits, and every instance the faults hit (a
 *   deleted pod's, a crashed node's pods') is available again or, not desired, gone (`hitRecovered`;
 *   failures the scenario injects are not the rollout's to budget, and the controller may act on
 *   a view that does not show the fault yet: an instance it is bound to scale down does not end
 *   one; nor does capacity standing in for the instance hit, which may have been down already — a
 *   replacement still starting — so that nothing looks unavailable until the controller applies
 *   its recovery policy, under ServingGroupRecreate to the whole group);
 * - `roleBudget` under RoleRollingUpdate only: the group strategies replace whole groups, so
 *   their disruption is counted by `groupBudget`;
 * - only over units that had been available for the current shape (role replica counts): a group
 *   or role still being created or scaled up is not "disrupted";
 * - from what was under way when the budgets themselves changed (`budgetKey`: the strategy, the
 *   group floor or maxUnavailable or a role's floor, e.g. a lower maxUnavailable, a switch to
 *   RoleRollingUpdate, a scale of the groups or one that lowers a percentage): the disruptions
 *   then are tolerated until they recover (`UnderWay`, `trackUnderWay`), any new one is judged
 *   against the new budget. The record is taken at the first check that sees the change; a
 *   controller that reacted in that same instant would have its own disruptions counted as under
 *   way — not possible while the informer lag is above zero, as it is in every scenario.
 *
 * `surgeBound` is judged only when the stored status is for the current generation (the
 * controller has seen the spec it is held to). The pods beyond the surge limits when those change
 * (a lower maxSurge, a strategy switch) are tolerated until they go: surge that carries capacity
 * goes only within the budgets (`trackSurgeKept`); any other pod beyond the limits is a violation.
 *
 * `partitionHolds` remembers, per instance below a partition, the role hash of what its pods run
 * when first seen there (their label; past an in-place patch, the target's, which the label
 * follows only at the finish); a live pod of that instance with another hash while it is still
 * below the partition is a violation (pods gone do not erase the memory: recovery must rebuild the
 * same revision). One exception: an instance whose stored record named another revision at that
 * first sight (a move under way as the partition came) may also finish that move; once it
 * settles (every live pod Ready, serving, not moving in place), only the hash it settled on holds.
 *
 * `drainHonoured` is judged at each pod write as it happens (`drainViolation`: an entry marked
 * draining while it served is deleted or restarted in place only after the 2 s settle and the
 * confirmation of every router live since its mark, judged from the committed Leases, or after
 * the drain timeout), outside fault windows, and reported at the next check.
 *
 * `pauseHolds` treats a pause the controller has observed as a partition over every live instance
 * (`#pauseViolations`); `settledWithinBound` and `convergedMatchesPods` hold a status that says
 * there is nothing to do to the pods, outside fault windows, once a contradiction has outlasted
 * `SETTLED_GRACE_MS` (`#settledViolations`).
 *
 * Violations are counted by onset: a message that was not reported at the previous check.
 *
 * A check costs what changed since the previous one, not a pass over every pod: the stored pods
 * are followed through the server's change feed (`pod-changes.ts`) into indexes
 * (`subject-index.ts`) that answer with the same per-pod and per-instance predicates the
 * whole-set functions are made of; the budgets and the memory of available units are looked at
 * again only when the available counts changed.
 */
import type { Pod } from "../api/kube.ts";
import { parseModelServing } from "../api/parse.ts";
import type { ModelServing } from "../api/schema.ts";
import { resolveGroupBudget, roleFloor } from "../api/budgets.ts";
import { ANNOTATION_DRAINING, LABEL_MODEL_SERVING } from "../api/wellknown.ts";
import {
  INVARIANT_NAMES,
  drainViolation,
  NOTHING_UNDER_WAY,
  belowPartition,
  countKey,
  disruptionsUnderWay,
  groupAvailable,
  groupBudget,
  ofCountKey,
  pausedPods,
  placePod,
  placedPods,
  revisionMismatch,
  roleBudget,
  sameComparedSpec,
  settledClaim,
  specRevisionName,
  stillUnderWay,
} from "../core/invariants.ts";
import type {
  AvailableCounts,
  InvariantName,
  PartitionedUnit,
  PlacedPod,
  RevisionsByName,
  UnderWay,
} from "../core/invariants.ts";
import type { Revision } from "../core/pods.ts";
import { decodeControllerRevision } from "../core/revision/controller-revision.ts";
import type { KubeObject } from "../engine/ports.ts";
import { RouterRegistry } from "../engine/routers.ts";
import { scopeCovers } from "../api/router-lease.ts";
import { drainingSinceMs } from "../core/health.ts";
import type { ApiServer } from "./apiserver.ts";
import { PodChanges } from "./pod-changes.ts";
import type { PodChange } from "./pod-changes.ts";
import { IdentityClaims, SubjectIndex } from "./subject-index.ts";
import { getOrCreate } from "../core/maps.ts";
import { roleHash } from "../core/role-hash.ts";
import { recordedRevisions } from "../core/units.ts";
import type { RecordedRevision } from "../core/units.ts";

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
  /**
   * The time on the epoch the controller writes its drain marks in (its Clock's `nowMs`), for
   * `drainHonoured`; without it that invariant is not judged.
   */
  epochNowMs?: () => number;
  /**
   * Simulated time, for the grace `settledWithinBound` and `convergedMatchesPods` give the
   * controller to see what changed; without it those two are not judged.
   */
  nowMs?: () => number;
}

/**
 * How long a status claiming there is nothing to do may contradict the pods before it counts: the
 * controller sees a change an informer lag later and writes the status after its next plan, later
 * still under API errors and after a restart (virtual ms).
 */
export const SETTLED_GRACE_MS = 30_000;

/** Reasons `convergedMatchesPods` lists at most per ModelServing and check. */
const MAX_CONTRADICTIONS = 5;

/** What the checker remembers about one ModelServing (by uid). */
interface Memory {
  /** Per shape (`<role>:<replicas>,…` of the spec's roles), the units that were available under it. */
  readonly established: Map<string, EstablishedUnits>;
  /** Grows whenever `established` changes. */
  version: number;
  /**
   * Every group in `established` is below this: the largest `spec.replicas` seen since groups
   * were last forgotten (a group is established only below the replicas of its time).
   */
  groupBound: number;
  /** The index version and shape `established` was last brought up to date with. */
  establishedAt: { index: SubjectIndex; version: number; shape: string } | undefined;
  /**
   * The budgets judged at the last check (`budgetKey`), the disruptions under way since they last
   * changed, and the ModelServing and index version that was computed for.
   */
  underWay: { key: string; ms: ModelServing; index: SubjectIndex; version: number; value: UnderWay } | undefined;
  /** The budget violations last computed, and for which index version and memory version. */
  budgets: { index: SubjectIndex; version: number; memory: number; group: string[]; role: string[] } | undefined;
  /** unitKey → the instance and the role hashes it may run while below a partition (`PartitionMemory`). */
  readonly partitioned: Map<string, PartitionMemory>;
  /**
   * The surge limits judged at the last check (`surgeKey`), the ModelServing they were read
   * from, and the uids of the pods beyond them when they last changed (`trackSurgeKept`).
   */
  surgeKept: { key: string; ms: ModelServing; uids: ReadonlySet<string> } | undefined;
  /** While a pause the controller has observed lasts: what `pauseHolds` holds each instance to (`PauseMemory`). */
  paused: PauseMemory | undefined;
  /** Per invariant, since when (virtual ms) a settled status has contradicted the pods (`#settledViolations`). */
  readonly contradicted: Map<InvariantName, number>;
}

/**
 * What `pauseHolds` remembers while a pause lasts: the records and current revision stored when the
 * controller was first seen to observe it (a unit first seen later is held to its record then),
 * and per instance the role hashes it may run, as `partitionHolds` does (`PartitionMemory`).
 */
interface PauseMemory {
  readonly recorded: RecordedRevision;
  readonly currentRevision: string | undefined;
  readonly units: Map<string, PartitionMemory>;
  /** The first check of this pause is still to come: instances seen then may finish a move under way. */
  first: boolean;
}

/**
 * What `partitionHolds` remembers of an instance below a partition: the role hash it ran when first
 * seen there and, when its record named another revision then (a move under way as the partition
 * came), that revision's too: the move may finish (docs/design/rollout.md, "Partition raised
 * mid-rollout"). Narrowed to the one hash the instance settles on.
 */
interface PartitionMemory {
  readonly unit: PartitionedUnit;
  readonly hashes: readonly string[];
}

/**
 * The role hashes an instance first seen below a partition may run there (`PartitionMemory`): the
 * one it runs, and, unless it is settled (no move has begun), the one of the revision its record
 * names (else the current revision) when that differs. `recorded` reads the stored records, which
 * are those of the instant the partition came.
 */
function partitionHashes(
  ms: ModelServing,
  unit: PartitionedUnit,
  recorded: RecordedRevision,
  revisions: RevisionsByName,
): string[] {
  if (unit.settled) return [unit.hash];
  const name = recorded(unit.group, unit.role, unit.instance) ?? ms.status?.currentRevision;
  const revision = name === undefined ? undefined : revisions.get(name);
  const target = revision === undefined ? undefined : roleHash(revision.data, unit.role);
  // Caught mid-move (some pods patched in place, others not yet): what the others ran comes first.
  const ran = unit.hashes.filter((hash) => hash !== target);
  const from = ran.length === 1 ? (ran[0] ?? unit.hash) : unit.hash;
  return target === undefined || target === from ? [from] : [from, target];
}

/** Units established under one shape: the groups that were available, the role pairs (`countKey`) that had their desired count. */
interface EstablishedUnits {
  readonly groups: Set<number>;
  readonly roles: Set<string>;
}

interface Tally {
  violations: number;
  first: { t: number; message: string } | null;
  previous: Set<string>;
}

/** A stored ModelServing, parsed, with the index of its pods. */
interface Subject {
  readonly ms: ModelServing;
  readonly index: SubjectIndex;
}

/** A decoded ControllerRevision and the uid of the ModelServing that owns it. */
interface Decoded {
  readonly revision: Revision;
  readonly ownerUid: string | undefined;
}

export class InvariantChecker {
  readonly #server: ApiServer;
  readonly #podSpecs: boolean;
  readonly #faultActive: () => boolean;
  readonly #memory = new Map<string, Memory>();
  readonly #tallies = new Map<InvariantName, Tally>(
    INVARIANT_NAMES.map((name) => [name, { violations: 0, first: null, previous: new Set<string>() }]),
  );
  /**
   * Each stored ControllerRevision decoded once (by uid and revision number). The objects are
   * never changed, so `#specsMatched` may compare revisions by identity.
   */
  readonly #decoded = new Map<string, Decoded | undefined>();
  /**
   * Pod specs (frozen stored parts: the server shares an unchanged spec between a pod's versions)
   * found to be what a revision builds, with the inputs that verdict came from: the same spec,
   * revision object, owner and identity give the same verdict, so it is not computed again. A
   * pod's new spec that `revisionMismatch` sees as its previous one (the scheduler's binding only
   * adds nodeName) inherits the previous one's entry (`#carryMatch`).
   */
  readonly #specsMatched = new WeakMap<object, { revision: Revision; ownerUid: string; id: PlacedPod["id"] }>();
  readonly #podChanges: PodChanges;
  readonly #claims = new IdentityClaims();
  /** Per ModelServing uid: the index of its pods (kept while it is stored). */
  readonly #indexes = new Map<string, SubjectIndex>();
  /** What the indexes reflect: the server's resourceVersion and the valid ModelServings then. */
  #synced: { resourceVersion: string; subjects: Subject[] } | undefined;
  /** The stored ControllerRevisions last read, and the revisions by owner uid they make. */
  #revisions: { stored: readonly KubeObject[]; byOwner: Map<string, RevisionsByName> } = {
    stored: [],
    byOwner: new Map(),
  };
  #lastResourceVersion = "";
  #faultOpen = false;
  readonly #nowMs: (() => number) | undefined;
  /** The earliest instant a contradiction now open (`contradicted`) outlasts its grace, if any. */
  #graceDueMs: number | undefined;
  /** The instances the faults of the open window hit, by ModelServing uid (see `faultInjected`). */
  #faultHit: { readonly uid: string; readonly id: PlacedPod["id"] }[] = [];
  /** `drainHonoured` violations found in pod writes since the last check. */
  #undrained: string[] = [];
  /** Router Leases as committed, for `drainHonoured`. */
  readonly #routers = new RouterRegistry();

  constructor(server: ApiServer, options: CheckerOptions = {}) {
    this.#server = server;
    this.#podChanges = new PodChanges(server);
    this.#podSpecs = options.podSpecs ?? true;
    this.#faultActive = options.faultActive ?? (() => false);
    this.#nowMs = options.nowMs;
    const { epochNowMs } = options;
    if (epochNowMs !== undefined) {
      // The routers as a controller watching without lag would judge them (see `#judgeDrain`).
      server.onCommit("Lease", (before, after) => {
        const lease = after ?? before;
        if (lease !== undefined) this.#routers.apply(after === undefined ? "DELETED" : "MODIFIED", lease, epochNowMs());
      });
      server.onCommit("Pod", (before, after) => {
        this.#judgeDrain(before as unknown as Pod | undefined, after as unknown as Pod | undefined, epochNowMs());
      });
    }
  }

  /**
   * A fault was injected now, hitting the pods `hit` (as stored before it): budgets are not judged
   * until everything is available again, the instances of those pods included.
   */
  faultInjected(hit: readonly Pod[] = []): void {
    this.#faultOpen = true;
    for (const { ms } of this.#sync().subjects) {
      for (const pod of hit) {
        const placed = placePod(ms, pod);
        if (placed !== undefined) this.#faultHit.push({ uid: ms.metadata.uid ?? "", id: placed.id });
      }
    }
  }

  /** Evaluates every invariant at the current instant (nothing to do when nothing was committed). */
  check(): void {
    const resourceVersion = this.#server.resourceVersion();
    // Nothing committed: only a contradiction whose grace has run out is news.
    if (
      resourceVersion === this.#lastResourceVersion &&
      !(this.#graceDueMs !== undefined && (this.#nowMs?.() ?? 0) >= this.#graceDueMs)
    )
      return;
    this.#lastResourceVersion = resourceVersion;
    this.#graceDueMs = undefined;
    const { subjects } = this.#sync();
    const found = new Map<InvariantName, string[]>(INVARIANT_NAMES.map((name) => [name, []]));
    const add = (name: InvariantName, messages: readonly string[]) => found.get(name)?.push(...messages);
    add(
      "noDuplicatePods",
      this.#claims.violations(() => this.#storedPods()),
    );
    add("drainHonoured", this.#undrained);
    this.#undrained = [];
    if (
      this.#faultOpen &&
      !this.#faultActive() &&
      subjects.every(allGroupsAvailable) &&
      this.#faultHit.every((hit) => hitRecovered(subjects, hit))
    ) {
      this.#faultOpen = false;
      this.#faultHit = [];
    }
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

  /**
   * What a wait for `target` still waits for in the stored ModelServing `stored` now:
   * `availablePending` or `rolloutPending` of `src/core/invariants.ts` over the stored pods and
   * revisions; undefined when the stored object is not a valid ModelServing. With `limit`, the
   * reasons stop there (a caller asking only whether any is left passes 1).
   */
  pending(stored: KubeObject, target: "Available" | "RolloutComplete", limit?: number): string[] | undefined {
    if (this.#parse(stored) === undefined) return undefined;
    const index = this.#sync().subjects.find((subject) => subject.ms.metadata.uid === stored.metadata.uid)?.index;
    if (index === undefined) return undefined;
    return target === "Available" ? index.availablePending(limit) : index.rolloutPending(limit);
  }

  #checkSubject(subject: Subject, add: (name: InvariantName, messages: readonly string[]) => void): void {
    const { ms, index } = subject;
    const memory = this.#memoryOf(ms);
    const shape = ms.spec.template.roles.map((role) => `${role.name}:${role.replicas}`).join(",");
    const rollingOut =
      ms.status?.currentRevision !== undefined && ms.status.currentRevision !== ms.status.updateRevision;
    trackUnderWay(memory, shape, index);
    if (rollingOut && !this.#faultOpen) {
      const budgets = budgetViolations(memory, shape, index);
      add("groupBudget", budgets.group);
      // The group strategies replace whole groups: their budget is the group's (DESIGN §2.1, §2.10).
      if (ms.spec.rolloutStrategy.type === "RoleRollingUpdate") add("roleBudget", budgets.role);
    }
    establish(memory, shape, index);
    // Judged against the spec the controller has seen: right after a scale-down, the units above
    // the new count are still live until the controller has observed it and marked them.
    trackSurgeKept(memory, index);
    if (ms.status?.observedGeneration === ms.metadata.generation)
      add("surgeBound", index.surgeBound(memory.surgeKept?.uids));
    add("partitionHolds", this.#partitionViolations(memory, subject));
    add("pauseHolds", this.#pauseViolations(memory, subject));
    this.#settledViolations(memory, subject, add);
    if (this.#podSpecs) add("podsMatchTheirRevision", this.#podSpecViolations(subject));
  }

  /**
   * `drainHonoured` on one pod write, judged as it happens (the pod before the write is gone by
   * the next check), outside fault windows, against its ModelServing's drain timeout now and the
   * routers live since its mark: judged from the Leases as committed, a router's liveness starts
   * no later and ends no later than the lagging controller's, so a controller that waits as
   * DESIGN §3.5 says is never blamed. A pod whose ModelServing is gone or being deleted goes with
   * it, drained or not.
   */
  #judgeDrain(before: Pod | undefined, after: Pod | undefined, nowMs: number): void {
    // Most writes are to pods no drain marks: no ModelServing to look up.
    if (before?.metadata.annotations?.[ANNOTATION_DRAINING] === undefined || this.#faultOpen) return;
    const name = before.metadata.labels?.[LABEL_MODEL_SERVING];
    const stored =
      name === undefined
        ? undefined
        : this.#server.peek({ kind: "ModelServing", namespace: before.metadata.namespace ?? "default", name });
    const ms =
      stored === undefined || stored.metadata.deletionTimestamp !== undefined ? undefined : this.#parse(stored);
    if (ms === undefined) return;
    const markedAtMs = drainingSinceMs(before) ?? 0;
    const namespace = before.metadata.namespace ?? "default";
    const mustConfirm = this.#routers
      .routers()
      .filter(
        (router) =>
          scopeCovers(router.scope, namespace) && router.liveSinceMs <= markedAtMs && nowMs < router.liveUntilMs,
      )
      .map((router) => router.id);
    const violation = drainViolation(
      before,
      after,
      { timeoutSeconds: ms.spec.drain.timeoutSeconds, mustConfirm },
      nowMs,
    );
    if (violation !== undefined) this.#undrained.push(violation);
  }

  #partitionViolations(memory: Memory, subject: Subject): string[] {
    const { ms, index } = subject;
    const units = index.partitionedUnits();
    const violations: string[] = [];
    let recorded: RecordedRevision | undefined;
    for (const [key, unit] of units) {
      let had = memory.partitioned.get(key);
      if (had === undefined) {
        recorded ??= recordedRevisions(ms.status?.units ?? []);
        had = { unit, hashes: partitionHashes(ms, unit, recorded, index.revisions) };
        memory.partitioned.set(key, had);
      }
      const allowed = had.hashes;
      const foreign = unit.hashes.find((hash) => !allowed.includes(hash));
      if (foreign !== undefined) {
        const finishing =
          allowed[1] === undefined ? "" : ` (or, finishing the move under way when the partition came, ${allowed[1]})`;
        violations.push(
          `${ms.metadata.name} ${key} is below the partition and ran role hash ${allowed[0] ?? ""}${finishing}, now ${foreign}`,
        );
      } else if (unit.settled && allowed.length > 1) memory.partitioned.set(key, { unit, hashes: [unit.hash] });
    }
    // Units the partition no longer covers are forgotten; units without pods are remembered.
    for (const [key, { unit }] of [...memory.partitioned])
      if (!belowPartition(ms, unit.group, unit.role, unit.instance)) memory.partitioned.delete(key);
    return violations;
  }

  /**
   * `pauseHolds`: from the first check at which the stored status shows the controller has observed
   * a paused spec, until the spec is no longer paused, every live pod (`pausedPods`) keeps what it
   * ran then — or finishes the move its record named then — and one first seen later, or
   * built again after all its pods went, runs its record then (else the current revision then, or
   * now: a promotion while paused is no move).
   */
  #pauseViolations(memory: Memory, subject: Subject): string[] {
    const { ms, index } = subject;
    if (!ms.spec.rolloutStrategy.paused) {
      memory.paused = undefined;
      return [];
    }
    if (memory.paused === undefined) {
      if (ms.status?.observedGeneration !== ms.metadata.generation) return [];
      memory.paused = {
        recorded: recordedRevisions(ms.status?.units ?? []),
        currentRevision: ms.status?.currentRevision,
        units: new Map(),
        first: true,
      };
    }
    const paused = memory.paused;
    const units = pausedPods(placedPods(ms, this.#storedPods()), index.revisions);
    // The controller's own assert refused a plan (`pauseBroken`): the bug it caught counts here too.
    const refused = ms.status?.conditions?.find(
      (condition) => condition.type === "RolloutBlocked" && condition.reason === "InvariantViolated",
    );
    const violations = refused === undefined ? [] : [`${ms.metadata.name}: ${refused.message ?? "InvariantViolated"}`];
    const hashOf = (name: string | undefined, role: string) => {
      const revision = name === undefined ? undefined : index.revisions.get(name);
      return revision === undefined ? undefined : roleHash(revision.data, role);
    };
    for (const [key, unit] of units) {
      let had = paused.units.get(key);
      if (had === undefined) {
        const record = paused.recorded(unit.group, unit.role, unit.instance) ?? paused.currentRevision;
        const hashes = paused.first
          ? partitionHashes(ms, unit, paused.recorded, index.revisions)
          : [...new Set([hashOf(record, unit.role), hashOf(ms.status?.currentRevision, unit.role)])].filter(
              (hash) => hash !== undefined,
            );
        had = { unit, hashes };
        paused.units.set(key, had);
      }
      if (!had.hashes.includes(unit.hash))
        violations.push(
          `${ms.metadata.name} ${key} moved while the rollout is paused: it may run role hash ${had.hashes.join(" or ")}, now ${unit.hash}`,
        );
      else if (unit.settled && had.hashes.length > 1) paused.units.set(key, { unit, hashes: [unit.hash] });
    }
    // A pod gone is forgotten: built again, it is held to its instance's record at the pause (a
    // surge group scaled down while paused may come back as a desired group at the current
    // revision: fuzz-faults-820059).
    for (const key of [...paused.units.keys()]) if (!units.has(key)) paused.units.delete(key);
    paused.first = false;
    return violations;
  }

  /**
   * `settledWithinBound` and `convergedMatchesPods` (`settledClaim`): a status that says there is
   * nothing to do, contradicted by the pods outside a fault window for `SETTLED_GRACE_MS` on end,
   * is a violation (the controller stopped short while its status said it was done).
   */
  #settledViolations(
    memory: Memory,
    subject: Subject,
    add: (name: InvariantName, messages: readonly string[]) => void,
  ): void {
    const nowMs = this.#nowMs?.();
    if (nowMs === undefined) return;
    const { ms, index } = subject;
    const claim = this.#faultOpen ? undefined : settledClaim(ms);
    if (claim === undefined && memory.contradicted.size === 0) return;
    // Converged: no surge at all (pods beyond the desired are bound), and the pods done.
    const pending =
      claim === "Converged" ? [...index.rolloutPending(), ...index.availablePending(MAX_CONTRADICTIONS)] : [];
    const beyond = pending.filter((reason) => reason.includes(": surge or extra pod "));
    const found = new Map<InvariantName, string[]>([
      [
        "settledWithinBound",
        claim === undefined
          ? []
          : [...index.surgeBound(), ...beyond].map(
              (message) => `${message}, while condition Progressing says ${claim}`,
            ),
      ],
      [
        "convergedMatchesPods",
        pending
          .filter((reason) => !beyond.includes(reason))
          .slice(0, MAX_CONTRADICTIONS)
          .map((reason) => `${reason}, while condition Progressing says Converged`),
      ],
    ]);
    for (const [name, messages] of found) {
      if (messages.length === 0) {
        memory.contradicted.delete(name);
        continue;
      }
      const sinceMs = getOrCreate(memory.contradicted, name, () => nowMs);
      if (nowMs - sinceMs >= SETTLED_GRACE_MS) add(name, messages);
      else this.#graceDueMs = Math.min(this.#graceDueMs ?? Number.POSITIVE_INFINITY, sinceMs + SETTLED_GRACE_MS);
    }
  }

  /**
   * `podsMatchTheirRevision` over the pods not yet verified: each stored pod object that matches
   * passes once (it is settled); one that does not is judged again at every check.
   */
  #podSpecViolations(subject: Subject): string[] {
    const violations: string[] = [];
    const matched: PlacedPod[] = [];
    for (const entry of subject.index.unverified()) {
      const mismatch = this.#revisionMismatch(subject.ms, entry, subject.index.revisions);
      if (mismatch === undefined) matched.push(entry);
      else violations.push(mismatch);
    }
    subject.index.settled(matched);
    return violations;
  }

  /** `revisionMismatch`, remembered for specs that matched (see `#specsMatched`). */
  #revisionMismatch(ms: ModelServing, entry: PlacedPod, revisions: RevisionsByName): string | undefined {
    const { pod, id } = entry;
    const ownerUid = ms.metadata.uid ?? "";
    const revision = revisions.get(specRevisionName(pod));
    const matched = this.#specsMatched.get(pod.spec);
    if (
      matched !== undefined &&
      matched.revision === revision &&
      matched.ownerUid === ownerUid &&
      sameIdentity(matched.id, id)
    )
      return undefined;
    const mismatch = revisionMismatch(ms, entry, revisions);
    if (mismatch === undefined && revision !== undefined && Object.isFrozen(pod.spec))
      this.#specsMatched.set(pod.spec, { revision, ownerUid, id });
    return mismatch;
  }

  #carryMatch({ before, after }: PodChange): void {
    if (before === undefined || after === undefined || before.spec === after.spec) return;
    const matched = this.#specsMatched.get(before.spec);
    if (matched !== undefined && Object.isFrozen(after.spec) && sameComparedSpec(before, after))
      this.#specsMatched.set(after.spec, matched);
  }

  /**
   * Brings the indexes up to the server's state now (once per resourceVersion): the pod changes
   * since the last sync go to every index, then each stored ModelServing's index sees its stored
   * version and revisions (an index is built from all stored pods when its ModelServing first
   * parses, and dropped when it is no longer stored).
   */
  #sync(): { subjects: Subject[] } {
    const resourceVersion = this.#server.resourceVersion();
    if (this.#synced?.resourceVersion === resourceVersion) return this.#synced;
    for (const change of this.#podChanges.take()) {
      this.#claims.apply(change);
      if (this.#podSpecs) this.#carryMatch(change);
      for (const index of this.#indexes.values()) index.podChanged(change);
    }
    const byOwner = this.#revisionsByOwner();
    const subjects: Subject[] = [];
    const storedUids = new Set<string>();
    for (const stored of this.#server.stored("ModelServing")) {
      const uid = stored.metadata.uid ?? "";
      storedUids.add(uid);
      const ms = this.#parse(stored);
      if (ms === undefined) continue;
      const revisions = byOwner.get(uid) ?? NO_REVISIONS;
      let index = this.#indexes.get(uid);
      if (index === undefined) {
        index = new SubjectIndex(ms, revisions, this.#storedPods());
        this.#indexes.set(uid, index);
      }
      index.observe(ms, revisions);
      subjects.push({ ms, index });
    }
    for (const uid of [...this.#indexes.keys()]) if (!storedUids.has(uid)) this.#indexes.delete(uid);
    this.#synced = { resourceVersion, subjects };
    return this.#synced;
  }

  /** Every stored pod, in stored order (a listing: read only when an answer needs all pods). */
  #storedPods(): readonly Pod[] {
    return this.#server.stored("Pod") as unknown as Pod[];
  }

  /** The stored ModelServing parsed and defaulted (`parseModelServing` remembers stored objects); undefined when invalid. */
  #parse(stored: KubeObject): ModelServing | undefined {
    const result = parseModelServing(stored);
    return result.ok ? result.value : undefined;
  }

  /**
   * The readable revisions of each ModelServing (by owner uid), by name. Read again only when the
   * stored ControllerRevisions changed (they are frozen and replaced on change); an owner whose
   * revisions are unchanged keeps its map object, so the indexes see no change.
   */
  #revisionsByOwner(): Map<string, RevisionsByName> {
    const stored = this.#server.stored("ControllerRevision");
    const last = this.#revisions;
    // The store hands out the same frozen array until a ControllerRevision changes.
    if (stored === last.stored) return last.byOwner;
    const byOwner = new Map<string, Map<string, Revision>>();
    // By name over all owners first: a later revision of the same name hides an earlier one.
    for (const [name, decoded] of this.#decodedByName(stored)) {
      const owner = decoded.ownerUid ?? "";
      getOrCreate(byOwner, owner, () => new Map<string, Revision>()).set(name, decoded.revision);
    }
    const kept = new Map<string, RevisionsByName>();
    for (const [owner, revisions] of byOwner) {
      const before = last.byOwner.get(owner);
      kept.set(owner, before !== undefined && sameRevisions(before, revisions) ? before : revisions);
    }
    this.#revisions = { stored, byOwner: kept };
    return kept;
  }

  #decodedByName(stored: readonly KubeObject[]): Map<string, Decoded> {
    const byName = new Map<string, Decoded>();
    for (const object of stored) {
      const key = `${object.metadata.uid ?? ""}@${String(object["revision"])}`;
      if (!this.#decoded.has(key)) {
        const result = decodeControllerRevision(object);
        this.#decoded.set(
          key,
          result.ok
            ? {
                revision: { name: result.revision.name, data: result.revision.data },
                ownerUid: result.revision.ownerUid,
              }
            : undefined,
        );
      }
      const decoded = this.#decoded.get(key);
      if (decoded !== undefined) byName.set(decoded.revision.name, decoded);
    }
    return byName;
  }

  #memoryOf(ms: ModelServing): Memory {
    const uid = ms.metadata.uid ?? "";
    let memory = this.#memory.get(uid);
    if (memory === undefined) {
      memory = {
        established: new Map(),
        version: 0,
        groupBound: 0,
        establishedAt: undefined,
        underWay: undefined,
        budgets: undefined,
        partitioned: new Map(),
        surgeKept: undefined,
        paused: undefined,
        contradicted: new Map(),
      };
      this.#memory.set(uid, memory);
    }
    return memory;
  }

  #tally(name: InvariantName, messages: readonly string[]): void {
    const tally = this.#tallies.get(name);
    // Nothing reported now nor at the previous check (the usual case): no onset, nothing to remember.
    if (tally === undefined || (messages.length === 0 && tally.previous.size === 0)) return;
    const current = new Set(messages);
    for (const message of current) {
      if (tally.previous.has(message)) continue;
      tally.violations += 1;
      tally.first ??= { t: this.#server.clock.nowMs() / 1000, message };
    }
    tally.previous = current;
  }
}

const NO_REVISIONS: RevisionsByName = new Map();

function sameRevisions(a: RevisionsByName, b: RevisionsByName): boolean {
  if (a.size !== b.size) return false;
  const entries = [...b];
  return [...a].every(
    ([name, revision], position) => entries[position]?.[0] === name && entries[position][1] === revision,
  );
}

function sameIdentity(a: PlacedPod["id"], b: PlacedPod["id"]): boolean {
  return a.group === b.group && a.role === b.role && a.instance === b.instance && a.index === b.index;
}

/**
 * Every desired group is available, counting only the capacity the spec lets the controller keep
 * (`keptCounts`): a group that only an instance beyond the surge limits keeps available (above a
 * role's count lowered in the instant of the fault) is still down, as the controller sees it once
 * it has seen the fault, and loses that instance to the scale-down.
 */
function allGroupsAvailable({ ms, index }: Subject): boolean {
  const counts = index.keptCounts();
  for (let group = 0; group < ms.spec.replicas; group++) if (!groupAvailable(ms, group, counts)) return false;
  return true;
}

/**
 * Whether the instance `id` of the ModelServing `uid`, hit by a fault, is back: available again,
 * or, when it is not desired (its group or role scaled below it or removed, a surge instance), not
 * rebuilt: no pod of it is stored (the pods the fault hit are gone, so the controller has seen it).
 */
function hitRecovered(
  subjects: readonly Subject[],
  { uid, id }: { readonly uid: string; readonly id: PlacedPod["id"] },
): boolean {
  const subject = subjects.find(({ ms }) => ms.metadata.uid === uid);
  if (subject === undefined) return true;
  const { ms, index } = subject;
  const { available, stored } = index.instance(id.group, id.role, id.instance);
  if (available) return true;
  const role = ms.spec.template.roles.find((each) => each.name === id.role);
  return (
    !stored &&
    (id.group >= ms.spec.replicas ||
      role === undefined ||
      id.instance >= role.replicas ||
      id.group < 0 ||
      id.instance < 0)
  );
}

/**
 * `groupBudget` and `roleBudget` over the groups and role pairs established under `shape`. They
 * depend on the spec and counts (the index version) and the memory: computed again only when
 * either changed since the last time.
 */
function budgetViolations(memory: Memory, shape: string, index: SubjectIndex): { group: string[]; role: string[] } {
  const cached = memory.budgets;
  if (
    cached !== undefined &&
    cached.index === index &&
    cached.version === index.version &&
    cached.memory === memory.version
  )
    return cached;
  const { ms } = index;
  const counts = index.counts();
  const judged = memory.established.get(shape) ?? NOTHING_ESTABLISHED;
  const underWay = memory.underWay?.value ?? NOTHING_UNDER_WAY;
  const budgets = {
    index,
    version: index.version,
    memory: memory.version,
    group: groupBudget(ms, counts, judged.groups, underWay),
    role: roleBudget(ms, counts, judged.roles, underWay),
  };
  memory.budgets = budgets;
  return budgets;
}

const NOTHING_ESTABLISHED: EstablishedUnits = { groups: new Set(), roles: new Set() };

/**
 * What the budgets of `ms` are, as far as the checker judges them: the strategy (`roleBudget` is
 * judged under RoleRollingUpdate only), the number of groups and the group `maxUnavailable` (the
 * group floor, `replicas − maxUnavailable`, that `groupBudget` counts available groups against:
 * a scale-up raises it under disruptions begun below it), and each role's floor, all resolved.
 * Two specs with the same key judge the same counts alike.
 */
function budgetKey(ms: ModelServing): string {
  const floors = ms.spec.template.roles.map((role) => `${role.name}:${roleFloor(role)}`);
  return `${ms.spec.rolloutStrategy.type} ${ms.spec.replicas} ${resolveGroupBudget(ms.spec).maxUnavailable} ${floors.join(",")}`;
}

/**
 * Brings `memory.underWay` up to date: at the first check that sees other budgets than the
 * previous one, the disruptions under way then (over the units established under `shape`) are
 * recorded — the controller cannot undo them, and the new budgets tolerate them until they
 * recover (`UnderWay`); at later checks they shrink as units recover. Budgets cached from other
 * under-way disruptions are invalidated through `memory.version`.
 */
function trackUnderWay(memory: Memory, shape: string, index: SubjectIndex): void {
  const { ms } = index;
  const last = memory.underWay;
  if (last !== undefined && last.ms === ms && last.index === index && last.version === index.version) return;
  // The key is the spec's: a new index version of the same ModelServing object keeps it.
  const key = last?.ms === ms ? last.key : budgetKey(ms);
  let value = NOTHING_UNDER_WAY;
  if (last !== undefined && last.key !== key)
    value = disruptionsUnderWay(ms, index.counts(), memory.established.get(shape) ?? NOTHING_ESTABLISHED);
  else if (last !== undefined && last.value !== NOTHING_UNDER_WAY)
    value = stillUnderWay(ms, index.counts(), last.value);
  if (value !== (last?.value ?? NOTHING_UNDER_WAY)) memory.version += 1;
  memory.underWay = { key, ms, index, version: index.version, value };
}

/** The surge limits `surgeBound` judges `index`'s pods against, as a comparable string. */
function surgeKey(index: SubjectIndex): string {
  const limits = index.surgeLimits;
  return `${limits.groupLimit} ${[...limits.instanceLimits].map(([role, limit]) => `${role}:${limit}`).join(",")}`;
}

/**
 * Brings `memory.surgeKept` up to date: at the first check that sees other surge limits than the
 * previous one (a lower maxSurge, a switch to a strategy without role surge), the pods beyond the
 * new limits then are recorded. Surge that carries capacity the budgets need goes only within
 * them (DESIGN §2.2), so it may outlast the change: those pods are tolerated until they go, like
 * disruptions under way (`UnderWay`); any other pod beyond the limits is a violation.
 */
function trackSurgeKept(memory: Memory, index: SubjectIndex): void {
  const last = memory.surgeKept;
  if (last?.ms === index.ms) return;
  const key = surgeKey(index);
  const uids = last === undefined || last.key === key ? (last?.uids ?? new Set<string>()) : index.surgingUids();
  memory.surgeKept = { key, ms: index.ms, uids };
}

/**
 * Records the groups and role pairs available now under `shape`; forgets groups scaled away.
 * Nothing to do when neither the counts, the spec nor the shape changed since the last time: it
 * would forget and add nothing.
 */
function establish(memory: Memory, shape: string, index: SubjectIndex): void {
  const at = memory.establishedAt;
  if (at !== undefined && at.index === index && at.version === index.version && at.shape === shape) return;
  memory.establishedAt = { index, version: index.version, shape };
  const { ms } = index;
  const counts: AvailableCounts = index.counts();
  const forgot = forgetGroupsFrom(memory, ms.spec.replicas);
  const units = getOrCreate(memory.established, shape, (): EstablishedUnits => ({
    groups: new Set(),
    roles: new Set(),
  }));
  const size = units.groups.size + units.roles.size;
  if (!allEstablished(units, ms)) addAvailable(units, ms, counts);
  if (forgot || units.groups.size + units.roles.size !== size) memory.version += 1;
}

/**
 * Whether `units` hold every group below `spec.replicas` and every role pair of them: they hold no
 * others (groups at or above are forgotten first, role names are the shape's), so then nothing
 * can be added.
 */
function allEstablished(units: EstablishedUnits, ms: ModelServing): boolean {
  return (
    units.groups.size === ms.spec.replicas && units.roles.size === ms.spec.replicas * ms.spec.template.roles.length
  );
}

/** Adds to `units` the groups available now (`groupAvailable`) and the role pairs with their desired count. */
function addAvailable(units: EstablishedUnits, ms: ModelServing, counts: AvailableCounts): void {
  for (let group = 0; group < ms.spec.replicas; group++) {
    let available = true;
    for (const role of ms.spec.template.roles) {
      const key = countKey(group, role.name);
      if ((counts.get(key) ?? 0) >= role.replicas) units.roles.add(key);
      else available = false;
    }
    if (available) units.groups.add(group);
  }
}

/** Forgets the established groups and role pairs at or above group `replicas` (scaled away); whether there were any. */
function forgetGroupsFrom(memory: Memory, replicas: number): boolean {
  if (replicas >= memory.groupBound) {
    memory.groupBound = replicas;
    return false;
  }
  memory.groupBound = replicas;
  let forgot = false;
  for (const { groups, roles } of memory.established.values()) {
    for (const group of groups) if (group >= replicas) forgot = groups.delete(group) || forgot;
    for (const key of roles) if (ofCountKey(key).group >= replicas) forgot = roles.delete(key) || forgot;
  }
  return forgot;
}
