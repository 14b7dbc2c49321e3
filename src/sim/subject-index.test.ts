import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Pod } from "../api/kube.ts";
import { parseModelServing } from "../api/parse.ts";
import type { ModelServing, OrdinalEntry } from "../api/schema.ts";
import {
  availableCounts,
  availablePending,
  noDuplicatePods,
  partitionedUnits,
  placedPods,
  podsByInstance,
  rolloutPending,
  surgeBound,
  surgeLimits,
} from "../core/invariants.ts";
import type { PlacedPod, RevisionsByName } from "../core/invariants.ts";
import { buildPod } from "../core/pods.ts";
import type { Revision } from "../core/pods.ts";
import { revisionData } from "../core/revision/projection.ts";
import { roleHash } from "../core/role-hash.ts";
import { deepFreeze } from "../core/frozen.ts";
import type { JsonObject, KubeObject } from "../engine/ports.ts";
import type { CommitListener } from "./apiserver.ts";
import { shareEqualParts } from "./json.ts";
import { PodChanges } from "./pod-changes.ts";
import { Prng } from "./prng.ts";
import { IdentityClaims, SubjectIndex } from "./subject-index.ts";

function modelServing(
  image: string,
  replicas: number,
  partition: number,
  updateRevision = "m-rev2",
  ordinals?: readonly OrdinalEntry[],
): ModelServing {
  const container = { spec: { containers: [{ name: "c", image }] } };
  const result = parseModelServing({
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "m", namespace: "default", uid: "u-1", generation: 1 },
    spec: {
      replicas,
      rolloutStrategy: { type: "RoleRollingUpdate", rollingUpdateConfiguration: { partition } },
      template: {
        roles: [
          {
            name: "decode",
            replicas: 2,
            maxSurge: 1,
            workerReplicas: 1,
            entryTemplate: container,
            workerTemplate: container,
          },
          { name: "prefill", replicas: 1, entryTemplate: container },
        ],
      },
    },
    status: {
      observedGeneration: 1,
      updateRevision,
      currentRevision: "m-rev1",
      conditions: [{ type: "Available", status: "True", reason: "r", message: "x", observedGeneration: 1 }],
      ...(ordinals === undefined ? {} : { ordinals }),
    },
  });
  if (!result.ok) throw new Error(JSON.stringify(result.problems));
  return result.value;
}

const owner = { name: "m", namespace: "default", uid: "u-1" };
const rev1: Revision = { name: "m-rev1", data: revisionData(modelServing("vllm:v1", 2, 0)) };
const rev2: Revision = { name: "m-rev2", data: revisionData(modelServing("vllm:v2", 2, 0)) };
/** Builds the pods `rev2` builds: a pod moved between the two changes its revision label only. */
const rev2Renamed: Revision = { name: "m-rev2b", data: rev2.data };

/** What a pod of the simulated universe looks like now. */
interface PodState {
  revision: Revision;
  ready: boolean;
  draining: boolean;
  /** An in-place update to its revision is past its patch (the spec check then reads the annotation). */
  patched: boolean;
  /** Someone else changed its role hash label (only that label). */
  rehashed: boolean;
  terminating: boolean;
  bound: boolean;
  /** A second pod under another name claims the same identity: a duplicate. */
  impostor: boolean;
  /** Its controller reference is gone: the ModelServing no longer owns it. */
  orphan: boolean;
  generation: number;
}

function podOf(slot: string, state: PodState, impostor = false): Pod {
  const [group, role, instance, index] = slot.split("/") as [string, string, string, string];
  const built = buildPod(owner, state.revision, {
    group: Number(group),
    role,
    instance: Number(instance),
    index: Number(index),
  });
  if (built === undefined) throw new Error(`no pod for ${slot}`);
  built.metadata.uid = `uid-${slot}-${state.generation}${impostor ? "-impostor" : ""}`;
  if (impostor) built.metadata.name = `m-impostor-${group}-${role}-${instance}-${index}`;
  if (state.rehashed) built.metadata.labels = { ...built.metadata.labels, "tandem.dev/role-hash": "rehashed" };
  const annotations = {
    ...(state.draining ? { "tandem.dev/draining": "2026-01-01T00:00:00Z" } : {}),
    ...(state.patched
      ? {
          "tandem.dev/inplace": JSON.stringify({
            from: rev1.name,
            to: state.revision.name,
            phase: "Patched",
            containerIDs: {},
          }),
        }
      : {}),
  };
  if (Object.keys(annotations).length > 0) built.metadata.annotations = annotations;
  if (state.terminating) built.metadata.deletionTimestamp = "2026-01-01T00:00:00Z";
  if (state.bound) built.spec.nodeName = "gpu-0";
  if (state.orphan) built.metadata.ownerReferences = [];
  built.status = { phase: "Running", conditions: [{ type: "Ready", status: state.ready ? "True" : "False" }] };
  return built;
}

const SLOTS = [0, 1, 2, 3].flatMap((group) => [
  ...[0, 1, 2].flatMap((instance) => [0, 1].map((index) => `${group}/decode/${instance}/${index}`)),
  ...[0, 1].map((instance) => `${group}/prefill/${instance}/0`),
]);

/**
 * The stored pods by slot, telling a commit listener of every change as the API server's change
 * feed does: the part of the server `PodChanges` follows.
 */
class PodStore extends Map<string, Pod> {
  #listener: CommitListener | undefined;

  /**
   * Stores `pod` frozen, sharing each part equal to the previous version's as the API server does
   * (so the index's reuse of what unchanged parts gave is exercised).
   */
  override set(key: string, pod: Pod): this {
    const before = this.get(key);
    if (before !== undefined && !Object.isFrozen(pod)) {
      shareEqualParts(pod as unknown as JsonObject, before as unknown as JsonObject, "metadata");
      shareEqualParts(pod.metadata as unknown as JsonObject, before.metadata as unknown as JsonObject);
    }
    const stored = deepFreeze(pod);
    super.set(key, stored);
    this.#listener?.(before as unknown as KubeObject | undefined, stored as unknown as KubeObject);
    return this;
  }

  override delete(key: string): boolean {
    const before = this.get(key);
    if (!super.delete(key)) return false;
    this.#listener?.(before as unknown as KubeObject, undefined);
    return true;
  }

  stored(): readonly KubeObject[] {
    return listing(this) as unknown as KubeObject[];
  }

  onCommit(_kind: string, listener: CommitListener): void {
    this.#listener = listener;
  }
}

/** Stored pods in the server's order: by name (one namespace). */
function listing(pods: ReadonlyMap<string, Pod>): Pod[] {
  return [...pods.values()].sort((a, b) =>
    a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0,
  );
}

/** Changes one pod of the universe at random: creates, deletes, re-creates or edits it. */
function step(rng: Prng, states: Map<string, PodState>, pods: Map<string, Pod>): void {
  const slot = SLOTS[rng.int(0, SLOTS.length)] ?? "";
  const state = states.get(slot);
  const choice = rng.int(0, 13);
  if (state === undefined || choice === 0) {
    const revision = rng.int(0, 2) === 0 ? rev1 : rev2;
    states.set(slot, {
      revision,
      ready: false,
      draining: false,
      patched: false,
      rehashed: false,
      terminating: false,
      bound: false,
      impostor: rng.int(0, 6) === 0,
      orphan: false,
      generation: (state?.generation ?? 0) + 1,
    });
  } else if (choice === 1) {
    states.delete(slot);
    pods.delete(slot);
    pods.delete(`${slot}!`);
    return;
  } else {
    const flip = (
      ["ready", "draining", "terminating", "bound", "ready", "orphan", "patched", "rehashed", "impostor"] as const
    )[choice - 2];
    if (flip !== undefined) state[flip] = !state[flip];
    else if (choice === 11) state.revision = state.revision === rev1 ? rev2 : rev1;
    else state.revision = state.revision === rev2 ? rev2Renamed : rev2;
  }
  const next = states.get(slot);
  if (next === undefined) return;
  pods.set(slot, podOf(slot, next));
  if (next.impostor) pods.set(`${slot}!`, podOf(slot, next, true));
  else pods.delete(`${slot}!`);
}

/** A pod settled: its object now, what `revisionMismatch` read of it then, and the revisions then. */
interface SettledParts {
  readonly pod: Pod;
  /** The ordinals the pod carries (group/role/instance/index), as `revisionMismatch` builds it. */
  readonly place: string;
  readonly spec: Pod["spec"];
  readonly revisionLabel: string | undefined;
  readonly inPlace: string | undefined;
  readonly revisions: RevisionsByName;
}

function settledParts({ pod, id, physical }: PlacedPod, revisions: RevisionsByName): SettledParts {
  // The ordinals it carries, not its position: a pod is built (and checked) under those.
  const own = physical ?? id;
  const place = `${own.group}/${own.role}/${own.instance}/${own.index}`;
  return {
    pod,
    place,
    spec: pod.spec,
    revisionLabel: pod.metadata.labels?.["tandem.dev/revision"],
    inPlace: pod.metadata.annotations?.["tandem.dev/inplace"],
    revisions,
  };
}

/**
 * A settled pod stays settled while its object is the same, or while each new version has the very
 * parts its spec check read when it was settled and the revisions are the same.
 */
function stillSettled(was: SettledParts | undefined, now: SettledParts): boolean {
  if (was === undefined) return false;
  return (
    was.pod === now.pod ||
    (was.place === now.place &&
      was.spec === now.spec &&
      was.revisionLabel === now.revisionLabel &&
      was.inPlace === now.inPlace &&
      was.revisions === now.revisions)
  );
}

/** `status.ordinals` entries: group positions 0 and 3 served by each other's ordinal. */
const SWAPPED_GROUPS: readonly OrdinalEntry[] = [
  { group: 0, ordinal: 3 },
  { group: 3, ordinal: 0 },
];
/** Decode instance positions 0 and 2 of group position 1 served by each other's ordinal. */
const SWAPPED_INSTANCES: readonly OrdinalEntry[] = [
  { group: 1, role: "decode", instance: 0, ordinal: 2 },
  { group: 1, role: "decode", instance: 2, ordinal: 0 },
];
/** Group ordinal 2 retired: its pods sit at a negative position. */
const RETIRED_GROUP: OrdinalEntry = { ordinal: 2, retired: true };

/** A limit no list reaches: every reason, uncapped. */
const EVERY_REASON = Number.MAX_SAFE_INTEGER;

function sortedEntries(counts: ReadonlyMap<string, number>): [string, number][] {
  return [...counts].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

describe("SubjectIndex and IdentityClaims", () => {
  for (const seed of [1, 2, 3]) {
    it(`answer as the whole-set predicates over random pod changes (seed ${seed})`, () => {
      const rng = new Prng(seed);
      const states = new Map<string, PodState>();
      const pods = new PodStore();
      const changes = new PodChanges(pods);
      const claims = new IdentityClaims();
      let ms = modelServing("vllm:v2", 3, 0);
      let revisions: RevisionsByName = new Map([[rev1.name, rev1]]);
      const index = new SubjectIndex(ms, revisions, []);
      let settled = new Map<string, SettledParts>();
      let lastPlaced: PlacedPod[] = [];
      for (let round = 0; round < 500; round++) {
        for (let count = rng.int(1, 4); count > 0; count--) step(rng, states, pods);
        if (round === 100)
          revisions = new Map([
            [rev1.name, rev1],
            [rev2.name, rev2],
            [rev2Renamed.name, rev2Renamed],
          ]);
        if (round === 200) ms = modelServing("vllm:v2", 2, 1);
        // Revisions read again (another map of the same revisions): what was settled under the old one is checked again.
        if (round === 250 || round === 450) revisions = new Map(revisions);
        if (round === 300) ms = modelServing("vllm:v2", 3, 0);
        // The update revision changes alone: answers cached per instance must follow it.
        if (round === 350) ms = modelServing("vllm:v2", 3, 0, "m-rev1");
        if (round === 400) ms = modelServing("vllm:v2", 3, 0);
        // Successions move pods between positions (`status.ordinals`): groups 0 and 3 swap, then
        // decode instances 0 and 2 of group position 1 too, then group 2 is retired, then none.
        if (round === 410 || round === 490) ms = modelServing("vllm:v2", 3, 0, "m-rev2", SWAPPED_GROUPS);
        if (round === 420) ms = modelServing("vllm:v2", 3, 0, "m-rev2", [...SWAPPED_GROUPS, ...SWAPPED_INSTANCES]);
        if (round === 430) ms = modelServing("vllm:v2", 3, 0, "m-rev2", [...SWAPPED_INSTANCES, RETIRED_GROUP]);
        if (round === 440) ms = modelServing("vllm:v2", 3, 0);
        const stored = listing(pods);
        for (const change of changes.take()) {
          claims.apply(change);
          index.podChanged(change);
        }
        // Settling pod objects that were replaced since must not settle their new versions.
        index.settled(lastPlaced);
        index.observe(ms, revisions);
        const placed = placedPods(ms, stored);
        // The claims are counted exactly: the stored pods are listed when, and only when, two pods claim one identity.
        let listed = false;
        const duplicates = noDuplicatePods(stored);
        assert.deepEqual(
          claims.violations(() => ((listed = true), stored)),
          duplicates,
        );
        assert.equal(listed, duplicates.length > 0);
        assert.deepEqual(
          sortedEntries(index.counts()),
          sortedEntries(availableCounts(ms, podsByInstance(placed), revisions)),
        );
        assert.deepEqual(
          sortedEntries(index.keptCounts()),
          sortedEntries(availableCounts(ms, podsByInstance(placed), revisions, surgeLimits(ms))),
        );
        assert.deepEqual(index.surgeBound(), surgeBound(ms, placed));
        assert.deepEqual(index.partitionedUnits(), partitionedUnits(ms, placed, revisions));
        // Every reason, not only the first five that a report shows.
        const available = availablePending(ms, placed, revisions, EVERY_REASON);
        assert.deepEqual(index.availablePending(EVERY_REASON), available);
        assert.deepEqual(index.availablePending(), availablePending(ms, placed, revisions));
        assert.deepEqual(index.availablePending(1), available.slice(0, 1));
        const rollout = rolloutPending(ms, placed, revisions, EVERY_REASON);
        assert.deepEqual(index.rolloutPending(EVERY_REASON), rollout);
        assert.deepEqual(index.rolloutPending(), rolloutPending(ms, placed, revisions));
        assert.deepEqual(
          index.rolloutPending(1),
          rollout.slice(0, 1),
          "a limit of 1: the first reason, none exactly when none is left",
        );
        // Unverified: the pods not settled as they are, nor in a version the spec check judges
        // alike under the same revisions; in stored order.
        const unverified = index.unverified();
        assert.deepEqual(
          unverified,
          placed.filter(
            (entry) => !stillSettled(settled.get(entry.pod.metadata.uid ?? ""), settledParts(entry, revisions)),
          ),
        );
        index.settled(unverified);
        const verified = new Set(unverified.map((entry) => entry.pod));
        settled = new Map(
          placed.map((entry) => {
            const was = settled.get(entry.pod.metadata.uid ?? "");
            return [
              entry.pod.metadata.uid ?? "",
              verified.has(entry.pod) || was === undefined
                ? settledParts(entry, revisions)
                : { ...was, pod: entry.pod },
            ];
          }),
        );
        lastPlaced = placed;
      }
    });
  }

  it("IdentityClaims counts each claim exactly across versions that keep it and ones that drop it", () => {
    const pods = new PodStore();
    const changes = new PodChanges(pods);
    const claims = new IdentityClaims();
    /** How many identities are claimed twice, checking that the stored pods are listed only then. */
    const duplicated = (): number => {
      for (const change of changes.take()) claims.apply(change);
      const stored = listing(pods);
      const duplicates = noDuplicatePods(stored);
      let listed = false;
      assert.deepEqual(
        claims.violations(() => ((listed = true), stored)),
        duplicates,
      );
      assert.equal(listed, duplicates.length > 0);
      return duplicates.length;
    };
    const slot = "0/decode/0/0";
    const state: PodState = {
      revision: rev1,
      ready: false,
      draining: false,
      patched: false,
      rehashed: false,
      terminating: false,
      bound: false,
      impostor: false,
      orphan: false,
      generation: 1,
    };
    pods.set(slot, podOf(slot, state));
    pods.set(`${slot}!`, podOf(slot, state, true));
    assert.equal(duplicated(), 1);
    // Each step changes the pod only, in one way; the impostor keeps claiming the identity.
    const steps: [Partial<PodState>, number][] = [
      [{ ready: true }, 1],
      [{ terminating: true }, 0],
      [{ ready: false }, 0],
      [{ terminating: false }, 1],
      [{ bound: true }, 1],
      [{ draining: true }, 1],
    ];
    for (const [change, expected] of steps) {
      Object.assign(state, change);
      pods.set(slot, podOf(slot, state));
      assert.equal(duplicated(), expected, JSON.stringify(change));
    }
    pods.delete(`${slot}!`);
    assert.equal(duplicated(), 0);
  });

  it("the two revisions build the decode role differently (its role hash tells them apart)", () => {
    assert.notEqual(roleHash(rev1.data, "decode"), roleHash(rev2.data, "decode"));
  });
});

describe("PodChanges", () => {
  it("tells created, changed, re-created and gone pods since the last look, in stored order", () => {
    const pod = (name: string, uid: string): Pod =>
      deepFreeze({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name, namespace: "default", uid },
        spec: { containers: [] },
      });
    const a = pod("a", "1");
    const b = pod("b", "2");
    const c = pod("c", "3");
    const pods = new PodStore();
    pods.set("b", b).set("a", a);
    const changes = new PodChanges(pods);
    assert.deepEqual(changes.take(), [
      { before: undefined, after: a },
      { before: undefined, after: b },
    ]);
    assert.deepEqual(changes.take(), []);
    const b2 = pod("b", "2");
    pods.set("c", c).set("b", b2).delete("a");
    pods.set("d", pod("d", "5")).delete("d");
    assert.deepEqual(changes.take(), [
      { before: a, after: undefined },
      { before: b, after: b2 },
      { before: undefined, after: c },
    ]);
    const b3 = pod("b", "4");
    pods.delete("b");
    pods.set("b", pod("b", "4-old")).set("b", b3).delete("c");
    assert.deepEqual(changes.take(), [
      { before: b2, after: b3 },
      { before: c, after: undefined },
    ]);
  });
});
