import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Pod } from "../api/kube.ts";
import { parseModelServing } from "../api/parse.ts";
import type { ModelServing } from "../api/schema.ts";
import {
  availableCounts,
  availablePending,
  disruptionsUnderWay,
  drainViolation,
  groupBudget,
  noDuplicatePods,
  partitionedUnits,
  pauseBroken,
  placedPods,
  podsByInstance,
  podsMatchTheirRevision,
  roleBudget,
  rolloutPending,
  sameComparedSpec,
  stillUnderWay,
  surgeBound,
} from "./invariants.ts";
import { buildPod } from "./pods.ts";
import type { Revision } from "./pods.ts";
import { revisionData } from "./revision/projection.ts";

function modelServing(overrides: Record<string, unknown> = {}): ModelServing {
  const result = parseModelServing({
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "m", namespace: "default", uid: "u-1", generation: 1 },
    spec: {
      replicas: 2,
      rolloutStrategy: { type: "RoleRollingUpdate" },
      template: {
        roles: [
          {
            name: "decode",
            replicas: 2,
            maxUnavailable: 1,
            entryTemplate: { spec: { containers: [{ name: "c", image: "vllm:v1" }] } },
          },
        ],
      },
      ...overrides,
    },
  });
  if (!result.ok) throw new Error(JSON.stringify(result.problems));
  return result.value;
}

const ms = modelServing();
const revision: Revision = { name: "m-rev1", data: revisionData(ms) };
const revisions = new Map([[revision.name, revision]]);
const owner = { name: "m", namespace: "default", uid: "u-1" };

function pod(
  group: number,
  instance: number,
  state: { ready?: boolean; draining?: boolean; terminating?: boolean } = {},
): Pod {
  const built = buildPod(owner, revision, { group, role: "decode", instance, index: 0 });
  if (built === undefined) throw new Error("no pod");
  built.metadata.uid = `uid-${group}-${instance}`;
  if (state.draining === true) built.metadata.annotations = { "tandem.dev/draining": "2026-01-01T00:00:00Z" };
  if (state.terminating === true) built.metadata.deletionTimestamp = "2026-01-01T00:00:00Z";
  built.status = {
    phase: "Running",
    conditions: [{ type: "Ready", status: state.ready === false ? "False" : "True" }],
  };
  return built;
}

const all = (judged: number[]) => new Set(judged);

describe("invariants", () => {
  it("placedPods keeps only pods the ModelServing controls", () => {
    const stranger = pod(0, 0);
    stranger.metadata.ownerReferences = [{ apiVersion: "v1", kind: "X", name: "x", uid: "other", controller: true }];
    assert.deepEqual(
      placedPods(ms, [pod(0, 1), stranger]).map((entry) => entry.pod.metadata.name),
      ["m-0-decode-1-0"],
    );
  });

  it("noDuplicatePods: two live pods with one identity, whatever their names", () => {
    const copy = pod(0, 0);
    copy.metadata.name = "impostor";
    assert.deepEqual(noDuplicatePods([pod(0, 0), pod(0, 1)]), []);
    assert.deepEqual(noDuplicatePods([pod(0, 0), copy]), [
      "pods m-0-decode-0-0 and impostor are both live as default/m/0/decode-0/0",
    ]);
    assert.deepEqual(
      noDuplicatePods([
        pod(0, 0),
        { ...copy, metadata: { ...copy.metadata, deletionTimestamp: "2026-01-01T00:00:00Z" } },
      ]),
      [],
    );
  });

  it("podsMatchTheirRevision: the spec is what the revision builds, nodeName aside", () => {
    const scheduled = pod(0, 0);
    scheduled.spec.nodeName = "gpu-0";
    const edited = pod(0, 1);
    edited.spec.containers[0]!.image = "vllm:hacked";
    const violations = podsMatchTheirRevision(ms, placedPods(ms, [scheduled, edited]), revisions);
    assert.deepEqual(violations, ["pod m-0-decode-1-0: spec differs from what revision m-rev1 builds"]);
  });

  it("podsMatchTheirRevision compares specs as JSON: key order and undefined fields aside", () => {
    const reordered = pod(0, 0);
    const container = reordered.spec.containers[0]!;
    reordered.spec = {
      ...Object.fromEntries(Object.entries(reordered.spec).reverse()),
      containers: [Object.fromEntries(Object.entries(container).reverse()) as typeof container],
      nodeName: undefined,
    };
    assert.deepEqual(podsMatchTheirRevision(ms, placedPods(ms, [reordered]), revisions), []);
    const bound = { ...reordered, spec: { ...reordered.spec, nodeName: "gpu-1" } };
    assert.ok(sameComparedSpec(reordered, bound), "nodeName is not compared");
    assert.ok(
      !sameComparedSpec(reordered, {
        ...bound,
        spec: { ...bound.spec, containers: [{ ...container, image: "vllm:v9" }] },
      }),
    );
  });

  it("groupBudget and roleBudget count available instances, surge included, over judged units", () => {
    const pods = [
      pod(0, 0, { draining: true }),
      pod(0, 1, { ready: false }),
      pod(1, 0),
      pod(1, 1, { terminating: true }),
    ];
    const counts = availableCounts(ms, podsByInstance(placedPods(ms, pods)), revisions);
    assert.deepEqual(groupBudget(ms, counts, all([0, 1])), [
      "m: 2 ServingGroup(s) unavailable (groups 0, 1) with maxUnavailable 1",
    ]);
    assert.deepEqual(groupBudget(ms, counts, all([1])), [], "group 0 was never available: not judged");
    assert.deepEqual(roleBudget(ms, counts, new Set(["0/decode", "1/decode"])), [
      "m: group 0 role decode: 0 available instance(s), fewer than 1 (replicas 2 − maxUnavailable)",
    ]);
    const surged = availableCounts(
      ms,
      podsByInstance(placedPods(ms, [pod(0, 0, { draining: true }), pod(0, 1), pod(0, 2), pod(1, 0), pod(1, 1)])),
      revisions,
    );
    assert.deepEqual(groupBudget(ms, surged, all([0, 1])), []);
  });

  it("after a budget change, the budgets tolerate the disruptions under way then, and no new one", () => {
    const three = modelServing({ replicas: 3 });
    const judged = { groups: all([0, 1, 2]), roles: new Set(["0/decode", "1/decode", "2/decode"]) };
    const before = new Map([
      ["0/decode", 0],
      ["1/decode", 0],
      ["2/decode", 2],
    ]);
    assert.deepEqual(groupBudget(three, before, judged.groups), [
      "m: 2 ServingGroup(s) unavailable (groups 0, 1) with maxUnavailable 1",
    ]);
    const underWay = disruptionsUnderWay(three, before, judged);
    assert.deepEqual([...underWay.groups], [0, 1]);
    assert.deepEqual(groupBudget(three, before, judged.groups, underWay), []);
    assert.equal(stillUnderWay(three, before, underWay), underWay, "nothing recovered: the same record");
    // Group 0 recovers and group 2 goes in its place: group 1 is still tolerated, group 2 is new.
    const moved = new Map([
      ["0/decode", 2],
      ["1/decode", 0],
      ["2/decode", 0],
    ]);
    const later = stillUnderWay(three, moved, underWay);
    assert.deepEqual([...later.groups], [1]);
    assert.deepEqual(groupBudget(three, moved, judged.groups, later), [
      "m: 2 ServingGroup(s) unavailable (groups 1, 2) with maxUnavailable 1",
    ]);

    // A role floor of 2 (maxUnavailable 0): a pair below it keeps the most instances it has had since.
    const strict = modelServing({
      template: {
        roles: [
          {
            name: "decode",
            replicas: 2,
            maxUnavailable: 0,
            maxSurge: 1,
            entryTemplate: { spec: { containers: [{ name: "c", image: "vllm:v1" }] } },
          },
        ],
      },
    });
    const roles = new Set(["0/decode", "1/decode"]);
    const low = new Map([
      ["0/decode", 0],
      ["1/decode", 2],
    ]);
    const atChange = disruptionsUnderWay(strict, low, { groups: all([0, 1]), roles });
    assert.deepEqual([...atChange.roleFloors], [["0/decode", 0]]);
    assert.deepEqual(roleBudget(strict, low, roles, atChange), []);
    const oneBack = stillUnderWay(
      strict,
      new Map([
        ["0/decode", 1],
        ["1/decode", 2],
      ]),
      atChange,
    );
    assert.deepEqual([...oneBack.roleFloors], [["0/decode", 1]]);
    assert.deepEqual(roleBudget(strict, low, roles, oneBack), [
      "m: group 0 role decode: 0 available instance(s), fewer than the 1 available since the budget changed (floor 2)",
    ]);
    assert.deepEqual(
      [
        ...stillUnderWay(
          strict,
          new Map([
            ["0/decode", 2],
            ["1/decode", 2],
          ]),
          oneBack,
        ).roleFloors,
      ],
      [],
      "at its floor: no longer under way",
    );
    assert.deepEqual(roleBudget(strict, low, roles), [
      "m: group 0 role decode: 0 available instance(s), fewer than 2 (replicas 2 − maxUnavailable)",
    ]);
  });

  it("groupBudget is its rule over every group with capacity, whatever the counts and roles", () => {
    // The rule read plainly: every group index with capacity that is available counts, surge groups included.
    const rule = (
      spec: ModelServing,
      counts: ReadonlyMap<string, number>,
      judged: ReadonlySet<number>,
      maxUnavailable: number,
    ): string[] => {
      const groups = new Set([...counts.keys()].map((key) => Number(key.split("/")[0])));
      const available = [...groups].filter((group) =>
        spec.spec.template.roles.every((role) => (counts.get(`${group}/${role.name}`) ?? 0) >= role.replicas),
      );
      const missing = [...judged]
        .filter((group) => group < spec.spec.replicas && !available.includes(group))
        .sort((a, b) => a - b);
      const unavailable = Math.min(missing.length, spec.spec.replicas - Math.min(spec.spec.replicas, available.length));
      return unavailable <= maxUnavailable
        ? []
        : [
            `m: ${unavailable} ServingGroup(s) unavailable (groups ${missing.join(", ")}) with maxUnavailable ${maxUnavailable}`,
          ];
    };
    const entry = { spec: { containers: [{ name: "c", image: "vllm:v1" }] } };
    const shapes = [
      [{ name: "decode", replicas: 2, entryTemplate: entry }],
      [
        { name: "decode", replicas: 1, entryTemplate: entry },
        { name: "prefill", replicas: 0, entryTemplate: entry },
      ],
      [{ name: "prefill", replicas: 0, entryTemplate: entry }],
    ];
    let state = 7;
    const next = (bound: number): number => ((state = (Math.imul(state, 1103515245) + 12345) >>> 0) >>> 16) % bound;
    for (const [shape, roles] of shapes.entries()) {
      for (const maxUnavailable of [1, 2, 3]) {
        const spec = modelServing({
          replicas: 4,
          rolloutStrategy: { type: "RoleRollingUpdate", rollingUpdateConfiguration: { maxUnavailable } },
          template: { roles },
        });
        for (let round = 0; round < 50; round++) {
          // Counts over groups 0..5 (4 and 5 are surge groups), some roles absent, some not in the spec, more or less dense.
          const counts = new Map<string, number>();
          const density = next(4);
          for (let group = 0; group < 6; group++)
            for (const role of ["decode", "prefill", "gone"])
              if (next(4) < density) counts.set(`${group}/${role}`, next(3) + 1);
          const judged = new Set([0, 1, 2, 3, 4].filter(() => next(4) > 0));
          assert.deepEqual(
            groupBudget(spec, counts, judged),
            rule(spec, counts, judged, maxUnavailable),
            `shape ${shape} round ${round}`,
          );
        }
      }
    }
  });

  it("surgeBound: live, non-draining units beyond replicas + maxSurge", () => {
    const placed = placedPods(ms, [pod(0, 2), pod(2, 0), pod(0, 3, { draining: true })]);
    assert.deepEqual(surgeBound(ms, placed), [
      "m: decode-2 of group 0 exists beyond replicas + maxSurge = 2",
      "m: group 2 exists beyond replicas + maxSurge = 2",
    ]);
  });

  it("partitionedUnits: instances below the group or (RoleRollingUpdate) role partition", () => {
    const partitioned = modelServing({
      rolloutStrategy: { type: "RoleRollingUpdate", rollingUpdateConfiguration: { partition: 1 } },
    });
    // decode-2 of group 0 is a surge instance (replicas 2): temporary, never held by a partition.
    const units = partitionedUnits(
      partitioned,
      placedPods(partitioned, [pod(0, 0), pod(0, 1), pod(0, 2), pod(1, 0)]),
      revisions,
    );
    assert.deepEqual([...units.keys()], ["0/decode-0", "0/decode-1"]);
  });

  it("partitionedUnits: a pod patched in place runs its target's role spec, though its labels follow only at the finish", () => {
    const roles = (image: string) => ({
      roles: [{ name: "decode", replicas: 2, entryTemplate: { spec: { containers: [{ name: "c", image }] } } }],
    });
    const partitioned = modelServing({
      rolloutStrategy: { type: "InPlaceUpdate", rollingUpdateConfiguration: { partition: 1 } },
      template: roles("vllm:v1"),
    });
    const v2 = { name: "m-rev2", data: revisionData(modelServing({ template: roles("vllm:v2") })) };
    const both = new Map([...revisions, [v2.name, v2]]);
    const progress = (phase: string) =>
      JSON.stringify({ from: revision.name, to: v2.name, phase, containerIDs: { c: "" } });
    const marked = (phase: string) => {
      const built = pod(0, 0);
      built.metadata.annotations = {
        "tandem.dev/inplace": progress(phase),
        "tandem.dev/draining": "2026-01-01T00:00:00Z",
      };
      return built;
    };
    const hashOf = (p: Pod) =>
      partitionedUnits(partitioned, placedPods(partitioned, [p]), both).get("0/decode-0")?.hash;
    const v1Hash = pod(0, 0).metadata.labels?.["tandem.dev/role-hash"];
    assert.equal(hashOf(marked("Draining")), v1Hash, "only draining: it still runs its label's revision");
    assert.notEqual(hashOf(marked("Patched")), v1Hash);
    assert.equal(hashOf(marked("Patched")), hashOf(marked("Stalled")));
  });

  it("availablePending and rolloutPending say what is missing", () => {
    const progressing = {
      type: "Progressing",
      status: "False" as const,
      reason: "Converged",
      message: "Nothing to do",
      observedGeneration: 1,
    };
    const stored = {
      ...ms,
      status: {
        observedGeneration: 1,
        updateRevision: "m-rev1",
        currentRevision: "m-rev1",
        conditions: [
          { type: "Available", status: "True" as const, reason: "r", message: "x", observedGeneration: 1 },
          progressing,
        ],
      },
    };
    const complete = placedPods(ms, [pod(0, 0), pod(0, 1), pod(1, 0), pod(1, 1)]);
    assert.deepEqual(availablePending(stored, complete, revisions), []);
    assert.deepEqual(rolloutPending(stored, complete, revisions), []);
    const missing = placedPods(ms, [pod(0, 0), pod(0, 1), pod(1, 0), pod(1, 2)]);
    assert.deepEqual(availablePending(stored, missing, revisions), []);
    assert.deepEqual(rolloutPending(stored, missing, revisions), [
      "m: surge or extra pod m-1-decode-2-0 is still there",
      "m: decode-1 of group 1: not available (no pods)",
    ]);
    assert.deepEqual(
      rolloutPending({ ...stored, metadata: { ...stored.metadata, generation: 2 } }, complete, revisions),
      ["m: status.observedGeneration 1 is not generation 2"],
    );
  });

  it("rolloutPending waits for the status to agree once the pods are done (the update revision current, Progressing claiming no work)", () => {
    const complete = placedPods(ms, [pod(0, 0), pod(0, 1), pod(1, 0), pod(1, 1)]);
    const progressing = (status: "True" | "False", reason: string) => ({
      type: "Progressing",
      status,
      reason,
      message: "m",
      observedGeneration: 1,
    });
    const stored = (status: object) => ({
      ...ms,
      status: { observedGeneration: 1, updateRevision: "m-rev1", currentRevision: "m-rev1", ...status },
    });
    assert.deepEqual(
      rolloutPending(
        stored({ currentRevision: "m-rev0", conditions: [progressing("False", "Converged")] }),
        complete,
        revisions,
      ),
      ["m: status.currentRevision m-rev0 is not the update revision m-rev1 yet"],
    );
    assert.deepEqual(
      rolloutPending(stored({ conditions: [progressing("True", "Reconciling")] }), complete, revisions),
      ["m: condition Progressing still says Reconciling: m"],
    );
    assert.deepEqual(
      rolloutPending(
        stored({ conditions: [{ ...progressing("False", "Converged"), observedGeneration: 0 }] }),
        complete,
        revisions,
      ),
      ["m: condition Progressing is not computed for generation 1 yet"],
    );
    const partitioned = {
      ...stored({ currentRevision: "m-rev0", conditions: [progressing("True", "RolloutWaiting")] }),
      spec: {
        ...ms.spec,
        rolloutStrategy: {
          ...ms.spec.rolloutStrategy,
          rollingUpdateConfiguration: { ...ms.spec.rolloutStrategy.rollingUpdateConfiguration, partition: 1 },
        },
      },
    };
    assert.deepEqual(
      rolloutPending(partitioned, placedPods(partitioned, [pod(1, 0), pod(1, 1)]), revisions),
      [],
      "held by a partition: the current revision stays, and Progressing may say what it holds",
    );
    const draining = {
      ...partitioned,
      status: { ...partitioned.status, conditions: [progressing("True", "DrainWaiting")] },
    };
    assert.deepEqual(
      rolloutPending(draining, placedPods(draining, [pod(1, 0), pod(1, 1)]), revisions),
      ["m: condition Progressing still says DrainWaiting: m"],
      "held, but a drain still waits: work under way",
    );
  });
});

describe("pauseBroken (the runtime assert of pauseHolds on a plan)", () => {
  const stored = {
    currentRevision: "m-a",
    units: [
      { group: 1, revision: "m-b" },
      { group: 2, role: "decode", instance: 0, revision: "m-b" },
    ],
  };
  it("names every unit a paused plan would newly record at the update revision", () => {
    const planned = [
      { group: 1, revision: "m-b" },
      { group: 1, role: "decode", instance: 1, revision: "m-b" },
      { group: 2, role: "decode", instance: 0, revision: "m-b" },
      { group: 3, revision: "m-b" },
      { group: 4, role: "prefill", instance: 2, revision: "m-b" },
      { group: 5, revision: "m-a" },
    ];
    assert.deepEqual(pauseBroken(true, stored, { units: planned, update: "m-b" }), [
      "group 3 would be recorded at the update revision m-b while the rollout is paused",
      "prefill-2 of group 4 would be recorded at the update revision m-b while the rollout is paused",
    ]);
  });
  it("holds nothing unpaused, with no rollout, or before the first status", () => {
    const planned = [{ group: 3, revision: "m-b" }];
    assert.deepEqual(pauseBroken(false, stored, { units: planned, update: "m-b" }), []);
    assert.deepEqual(pauseBroken(true, { ...stored, currentRevision: "m-b" }, { units: planned, update: "m-b" }), []);
    assert.deepEqual(pauseBroken(true, {}, { units: planned, update: "m-b" }), []);
  });
});

describe("drainHonoured (drainViolation)", () => {
  const MARKED_MS = Date.parse("2026-12-01T00:00:10Z");
  /** An entry pod marked draining at 00:00:10 while it served, containers running. */
  function marked(
    change: {
      annotations?: Record<string, string>;
      gateReason?: string;
      containersReady?: "True" | "False";
      entry?: "true" | "false";
    } = {},
  ): Pod {
    return {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: "m-0-decode-0-0",
        namespace: "default",
        labels: { "tandem.dev/entry": change.entry ?? "true" },
        annotations: { "tandem.dev/draining": "2026-12-01T00:00:10Z", ...change.annotations },
      },
      spec: { containers: [{ name: "c", image: "vllm:v1" }] },
      status: {
        conditions: [
          { type: "tandem.dev/serving", status: "False", reason: change.gateReason ?? "Draining" },
          { type: "ContainersReady", status: change.containersReady ?? "True" },
        ],
      },
    };
  }
  const deleting = (pod: Pod): Pod => ({
    ...pod,
    metadata: { ...pod.metadata, deletionTimestamp: "2026-12-01T00:00:12Z" },
  });
  const image = (pod: Pod, to: string): Pod => ({
    ...pod,
    spec: { ...pod.spec, containers: [{ name: "c", image: to }] },
  });

  it("an entry that served is disrupted only after the settle and every live router's confirmation, or the drain timeout", () => {
    const ack = { annotations: { "drained.tandem.dev/router-a": "true" } };
    const table: [Pod, Pod | undefined, number, readonly string[], boolean, string][] = [
      [
        marked(),
        deleting(marked()),
        MARKED_MS + 2_000,
        ["router-a"],
        true,
        "deletion begun 2 s into a 30 s drain, router-a live and silent",
      ],
      [marked(), undefined, MARKED_MS + 2_000, ["router-a"], true, "removed outright 2 s into a 30 s drain"],
      [
        marked(),
        image(marked(), "vllm:v2"),
        MARKED_MS + 2_000,
        ["router-a"],
        true,
        "its image changed in place 2 s into the drain",
      ],
      [marked(), deleting(marked()), MARKED_MS + 30_000, ["router-a"], false, "the drain timed out"],
      [
        marked(ack),
        deleting(marked()),
        MARKED_MS + 2_000,
        ["router-a"],
        false,
        "router-a confirmed, the settle is over",
      ],
      [
        marked(ack),
        deleting(marked()),
        MARKED_MS + 1_999,
        ["router-a"],
        true,
        "router-a confirmed, but within the settle",
      ],
      [
        marked(ack),
        deleting(marked()),
        MARKED_MS + 2_000,
        ["router-a", "router-b"],
        true,
        "router-b has not confirmed",
      ],
      [marked(), deleting(marked()), MARKED_MS + 2_000, [], false, "no live router: the settle is the whole wait"],
      [marked(), deleting(marked()), MARKED_MS + 1_000, [], true, "no live router, within the settle"],
      [
        marked({ gateReason: "ContainersReady" }),
        deleting(marked()),
        MARKED_MS + 2_000,
        ["router-a"],
        false,
        "marked while not serving: nothing to wait for",
      ],
      [
        marked({ containersReady: "False" }),
        deleting(marked()),
        MARKED_MS + 2_000,
        ["router-a"],
        false,
        "its containers died: a dead pod serves nothing",
      ],
      [
        marked({ entry: "false" }),
        deleting(marked()),
        MARKED_MS + 2_000,
        ["router-a"],
        false,
        "a worker follows its entry",
      ],
      [
        deleting(marked()),
        undefined,
        MARKED_MS + 2_000,
        ["router-a"],
        false,
        "already being deleted: the kubelet's final removal",
      ],
      [marked(), marked(ack), MARKED_MS + 2_000, ["router-a"], false, "a write that disrupts nothing"],
    ];
    for (const [before, after, nowMs, mustConfirm, violated, why] of table) {
      const message = drainViolation(before, after, { timeoutSeconds: 30, mustConfirm }, nowMs);
      assert.equal(message !== undefined, violated, why);
    }
    assert.equal(
      drainViolation(marked(), deleting(marked()), { timeoutSeconds: 1, mustConfirm: ["router-a"] }, MARKED_MS + 1_000),
      undefined,
      "a timeout shorter than the settle ends the wait",
    );
    assert.equal(
      drainViolation(marked(), undefined, { timeoutSeconds: 30, mustConfirm: ["router-a"] }, MARKED_MS + 2_000),
      "m-0-decode-0-0 deleted 28s before its drain timed out (marked 2026-12-01T00:00:10Z, drain.timeoutSeconds 30): router(s) router-a had not confirmed",
    );
    assert.equal(
      drainViolation(marked(), undefined, { timeoutSeconds: 30, mustConfirm: [] }, MARKED_MS + 500),
      "m-0-decode-0-0 deleted 29.5s before its drain timed out (marked 2026-12-01T00:00:10Z, drain.timeoutSeconds 30): 0.5s after the mark, within the 2s settle",
    );
  });
});
