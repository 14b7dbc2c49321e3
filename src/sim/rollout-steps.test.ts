import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { resolveGroupBudget, resolveRoleBudget } from "../api/budgets.ts";
import { parseModelServing } from "../api/parse.ts";
import type { ModelServing } from "../api/schema.ts";
import { rolloutBound } from "./rollout-bound.ts";
import { CHANGE_STEP, idealCluster, playRollout, rolloutScenario } from "./rollout-preview.ts";
import { StepRecorder, rolloutSteps } from "./rollout-steps.ts";
import type { RolloutStep } from "./rollout-steps.ts";
import { runScenario } from "./runner.ts";

const STRATEGIES = ["ServingGroupRollingUpdate", "RoleRollingUpdate", "InPlaceUpdate"] as const;

interface Shape {
  readonly strategy: (typeof STRATEGIES)[number];
  readonly replicas: number;
  /** Under RoleRollingUpdate with two roles: coordinated, maxSkew 50%. */
  readonly coordinated: boolean;
  readonly group: { readonly maxUnavailable: number; readonly maxSurge: number; readonly partition: number };
  readonly roles: readonly {
    readonly replicas: number;
    readonly workers: number;
    readonly maxUnavailable: number;
    readonly maxSurge: number;
    readonly partition: number;
  }[];
}

const container = (image: string) => ({
  spec: { containers: [{ name: "vllm", image, resources: { limits: { "nvidia.com/gpu": "1" } } }] },
});

/** The shape's ModelServing with every image `image`; undefined when validation refuses the shape. */
function modelServing(shape: Shape, image: string): ModelServing | undefined {
  const byRole = shape.strategy === "RoleRollingUpdate";
  const { maxSurge, maxUnavailable } = shape.group;
  // Partitions below the counts, so that something always moves.
  const rest = { maxUnavailable, partition: Math.min(shape.group.partition, shape.replicas - 1) };
  const parsed = parseModelServing({
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "m" },
    spec: {
      replicas: shape.replicas,
      drain: { timeoutSeconds: 0 },
      rolloutStrategy: {
        type: shape.strategy,
        rollingUpdateConfiguration: shape.strategy === "InPlaceUpdate" ? rest : { ...rest, maxSurge },
        ...(byRole && shape.coordinated && shape.roles.length > 1 ? { coordination: { maxSkew: "50%" } } : {}),
      },
      template: {
        roles: shape.roles.map((role, index) => ({
          name: `r${index}`,
          replicas: role.replicas,
          workerReplicas: role.workers,
          entryTemplate: container(image),
          ...(role.workers > 0 ? { workerTemplate: container(image) } : {}),
          ...(byRole
            ? {
                maxUnavailable: role.maxUnavailable,
                maxSurge: role.maxSurge,
                partition: Math.min(role.partition, role.replicas - 1),
              }
            : {}),
        })),
      },
    },
  });
  return parsed.ok ? parsed.value : undefined;
}

const budget = (most: number) => fc.integer({ min: 0, max: most });
const SHAPES: fc.Arbitrary<Shape> = fc.record({
  strategy: fc.constantFrom(...STRATEGIES),
  replicas: fc.integer({ min: 1, max: 4 }),
  coordinated: fc.boolean(),
  group: fc.record({ maxUnavailable: budget(2), maxSurge: budget(1), partition: budget(2) }),
  roles: fc.array(
    fc.record({
      replicas: fc.integer({ min: 1, max: 3 }),
      workers: budget(1),
      maxUnavailable: budget(2),
      maxSurge: budget(1),
      partition: budget(1),
    }),
    { minLength: 1, maxLength: 2 },
  ),
});

/** Always among the cases: a coordinated pair, one role surging, the other replaced in place of its old units. */
const COORDINATED: Shape = {
  strategy: "RoleRollingUpdate",
  replicas: 2,
  coordinated: true,
  group: { maxUnavailable: 1, maxSurge: 0, partition: 0 },
  roles: [
    { replicas: 3, workers: 0, maxUnavailable: 1, maxSurge: 0, partition: 0 },
    { replicas: 2, workers: 1, maxUnavailable: 0, maxSurge: 1, partition: 0 },
  ],
};

/** `<group>/<instance>` of every unit the spec lets the rollout change: at or above the partitions. */
function changedUnits(ms: ModelServing): Set<string> {
  const byRole = ms.spec.rolloutStrategy.type === "RoleRollingUpdate";
  const units = new Set<string>();
  for (let group = resolveGroupBudget(ms.spec).partition; group < ms.spec.replicas; group++)
    for (const role of ms.spec.template.roles)
      for (let j = byRole ? resolveRoleBudget(role).partition : 0; j < role.replicas; j++)
        units.add(`${group}/${role.name}-${j}`);
  return units;
}

const keyOf = (unit: { group: number; instance: string }) => `${unit.group}/${unit.instance}`;

/**
 * The table against the spec: every changed unit is moved exactly once (rebuilt or moved in place,
 * or removed for good when a surge unit took its place), nothing below a partition is touched,
 * and capacity never falls below the budgets' floors.
 */
function checkAgainstSpec(ms: ModelServing, steps: readonly RolloutStep[]): void {
  const moved = steps.flatMap((step) => [
    ...step.starts.filter((start) => start.kind === "recreate" || start.kind === "in-place").map(keyOf),
    ...step.retired.filter((unit) => !unit.surge).map(keyOf),
  ]);
  assert.deepEqual([...moved].sort(), [...changedUnits(ms)].sort(), "each changed unit moves once, no other");
  const group = resolveGroupBudget(ms.spec);
  const byRole = ms.spec.rolloutStrategy.type === "RoleRollingUpdate";
  for (const [index, step] of steps.entries()) {
    const where = `step ${index + 1}`;
    assert.ok(step.floor.groups >= ms.spec.replicas - group.maxUnavailable, `${where}: groups ${step.floor.groups}`);
    if (!byRole) {
      assert.ok(step.surgeGroups <= group.maxSurge, `${where}: surge groups ${step.surgeGroups}`);
      continue;
    }
    for (const role of ms.spec.template.roles) {
      const floor = ms.spec.replicas * (role.replicas - resolveRoleBudget(role).maxUnavailable);
      assert.ok((step.floor.roles[role.name] ?? 0) >= floor, `${where}: ${role.name} ${step.floor.roles[role.name]}`);
    }
  }
}

/**
 * The table against the simulator's own record of the same run (`tandem simulate`'s report): the
 * units created after the change, at the instants they were created, are exactly the recreate,
 * surge and new starts; the units whose pods changed revision without being deleted, the in-place
 * ones.
 */
async function checkAgainstReport(before: ModelServing, after: ModelServing): Promise<RolloutStep[]> {
  const recorder = new StepRecorder(CHANGE_STEP, after.metadata.name);
  const report = await runScenario(rolloutScenario(before, after, idealCluster(before, after)), {
    podSpecs: false,
    observer: recorder,
    jitterPercent: 0,
  });
  assert.equal(report.verdict, "pass", JSON.stringify(report.steps.at(-1)));
  const changeAt = recorder.changeAt;
  assert.ok(changeAt !== undefined);
  const steps = rolloutSteps(report.events, changeAt, recorder.samples, after);
  const created = new Set(
    report.events
      .slice(changeAt.event)
      .filter((event) => event.type === "PodCreated")
      .map((event) => `${event.t - changeAt.seconds}@${event.group}/${event.instance}`),
  );
  const starts = (kind: (start: RolloutStep["starts"][number]) => boolean) =>
    steps.flatMap((step) => step.starts.filter(kind).map((start) => `${step.atSeconds}@${keyOf(start)}`));
  assert.deepEqual(
    starts((start) => start.kind !== "in-place").sort(),
    [...created].map((entry) => entry.replace(/^[^@]*/, (t) => String(Math.round(Number(t) * 1000) / 1000))).sort(),
  );
  const inPlace = new Set(
    report.final.pods
      .filter((pod) =>
        report.events.some(
          (event) => event.pod === pod.name && event.type === "PodCreated" && event.t < changeAt.seconds,
        ),
      )
      .filter(
        (pod) =>
          !report.events.slice(changeAt.event).some((event) => event.pod === pod.name && event.type === "PodDeleted"),
      )
      .filter((pod) => pod.revision !== report.events.find((event) => event.pod === pod.name)?.revision)
      .map((pod) => `${pod.group}/${pod.instance}`),
  );
  const inPlaceStarts = steps.flatMap((step) => step.starts.filter((start) => start.kind === "in-place").map(keyOf));
  assert.deepEqual(inPlaceStarts.sort(), [...inPlace].sort());
  return steps;
}

describe("rollout steps recorded from the simulator", () => {
  it("match the simulator's own event record and the spec's budgets and partitions, for every strategy", async () => {
    await fc.assert(
      fc.asyncProperty(SHAPES, async (shape) => {
        const before = modelServing(shape, "vllm:v1");
        const after = modelServing(shape, "vllm:v2");
        fc.pre(before !== undefined && after !== undefined);
        const steps = await checkAgainstReport(before, after);
        checkAgainstSpec(after, steps);
        const played = await playRollout(before, after);
        assert.deepEqual(played.steps, steps, "playRollout records the same steps");
        assert.equal(played.complete, true);
        const bound = rolloutBound(before, after, idealCluster(before, after)).boundSeconds;
        assert.ok(bound <= played.makespanSeconds, `bound ${bound} s above the makespan ${played.makespanSeconds} s`);
      }),
      { numRuns: 16, seed: 21, endOnFailure: true, examples: [[COORDINATED]] },
    );
  });

  /** Two roles under RoleRollingUpdate, one group below the partition. */
  const twoRoles: Shape = {
    ...COORDINATED,
    replicas: 4,
    coordinated: false,
    group: { ...COORDINATED.group, partition: 1 },
    roles: [
      { replicas: 2, workers: 0, maxUnavailable: 1, maxSurge: 0, partition: 0 },
      { replicas: 3, workers: 1, maxUnavailable: 0, maxSurge: 1, partition: 1 },
    ],
  };

  it("the bound: per changed role, ⌈changed ÷ at once⌉ steps priced by the move; the slowest role decides", () => {
    const shape = twoRoles;
    const before = modelServing(shape, "vllm:v1");
    const after = modelServing(shape, "vllm:v2");
    assert.ok(before !== undefined && after !== undefined);
    const cluster = {
      timing: { scheduleSeconds: 1, pullSeconds: 20, startSeconds: 60, terminationSeconds: 5 },
      images: { "vllm:v2": { startSeconds: 90 } },
    };
    const timing = { scheduleSeconds: 1, startSeconds: 90, pullSeconds: 20, terminationSeconds: 5 };
    // 3 groups above the partition. r0: 2 instances each, one at a time in one group (group
    // budget 1): 6 steps of termination + start. r1: 2 above its partition, its surge instance in
    // all 3 groups at once: 2 steps of a start, one termination at the end. Both pull vllm:v2 once.
    const bound = rolloutBound(before, after, cluster);
    const r0 = { role: "r0", changedUnits: 6, unitsAtOnce: 1, move: "delete-first", timing, steps: 6 } as const;
    assert.deepEqual(bound, {
      unit: "instance",
      roles: ["r0", "r1"],
      lanes: [
        { ...r0, seconds: 6 * (5 + 91) + 20 },
        { role: "r1", changedUnits: 6, unitsAtOnce: 3, move: "surge", timing, steps: 2, seconds: 2 * 91 + 20 + 5 },
      ],
      changedUnits: 12,
      atOnce: 4,
      stages: 1,
      decidedBy: { lane: { ...r0, seconds: 596 }, stageFloor: false },
      boundSeconds: 596,
    });
    // In place: the groups, one at a time; a container restart, no scheduling, no termination.
    const inPlace = (image: string) => modelServing({ ...shape, strategy: "InPlaceUpdate" }, image);
    const groups = rolloutBound(inPlace("vllm:v1") ?? before, inPlace("vllm:v2") ?? after, cluster);
    assert.deepEqual(
      groups.lanes.map(({ role, changedUnits, unitsAtOnce, move, steps, seconds }) => ({
        role,
        changedUnits,
        unitsAtOnce,
        move,
        steps,
        seconds,
      })),
      [{ role: undefined, changedUnits: 3, unitsAtOnce: 1, move: "in-place", steps: 3, seconds: 3 * 90 + 20 }],
    );
    // An image the old pods already ran (r0's, unchanged) is not pulled again: only r1 moves.
    assert.equal(rolloutBound(after, after, cluster).boundSeconds, 0);
    const [r0After, r1Before] = [after.spec.template.roles[0], before.spec.template.roles[1]];
    assert.ok(r0After !== undefined && r1Before !== undefined);
    const r0Updated = {
      ...before,
      spec: { ...before.spec, template: { ...before.spec.template, roles: [r0After, r1Before] } },
    };
    const r1Only = rolloutBound(r0Updated, after, cluster);
    assert.deepEqual(r1Only.roles, ["r1"]);
    assert.equal(r1Only.lanes[0]?.timing.pullSeconds, 0);
    assert.equal(r1Only.boundSeconds, 2 * 91 + 5);
  });

  /** The bound of an image update of `shape` with r1 depending on r0 (maxSkew 50%), 81 s unit start, 5 s termination. */
  function chainBound(shape: Shape): ReturnType<typeof rolloutBound> {
    const chained = (image: string): ModelServing => {
      const ms = modelServing(shape, image);
      assert.ok(ms !== undefined);
      const coordination = { maxSkew: "50%", dependencies: [{ role: "r1", dependsOn: ["r0"] }] };
      return { ...ms, spec: { ...ms.spec, rolloutStrategy: { ...ms.spec.rolloutStrategy, coordination } } };
    };
    const cluster = { timing: { scheduleSeconds: 1, pullSeconds: 0, startSeconds: 80, terminationSeconds: 5 } };
    return rolloutBound(chained("vllm:v1"), chained("vllm:v2"), cluster);
  }

  it("the bound of a coordinated chain takes at least one step per changed stage", () => {
    // One group; each role surges both its instances at once.
    const surging = { replicas: 2, workers: 0, maxUnavailable: 0, maxSurge: 2, partition: 0 };
    const shape: Shape = { ...twoRoles, replicas: 1, coordinated: true, roles: [surging, surging] };
    const bound = chainBound(shape);
    // Each role alone: 1 surge step (86 s); the chain: 2 of them, r1 after r0 has new capacity.
    assert.deepEqual(
      bound.lanes.map((lane) => lane.seconds),
      [86, 86],
    );
    assert.equal(bound.stages, 2);
    assert.equal(bound.decidedBy?.stageFloor, true);
    assert.equal(bound.boundSeconds, 2 * 81 + 5);
  });

  it("without surge, the outermost role of a chain waits for a dependency's start in each batch of groups (the gate)", () => {
    // Two groups, one at a time; each role replaces one of its two instances at a time, old first.
    const replacing = { replicas: 2, workers: 0, maxUnavailable: 1, maxSurge: 0, partition: 0 };
    const shape: Shape = {
      ...twoRoles,
      replicas: 2,
      coordinated: true,
      group: { maxUnavailable: 1, maxSurge: 0, partition: 0 },
      roles: [replacing, replacing],
    };
    const bound = chainBound(shape);
    // Each lane: 4 instances, 1 at a time, 86 s a step; r1 also waits one r0 start (86 s) per group.
    assert.deepEqual(
      bound.lanes.map(({ role, steps, seconds, gate }) => ({ role, steps, seconds, gate })),
      [
        { role: "r0", steps: 4, seconds: 4 * 86, gate: undefined },
        { role: "r1", steps: 4, seconds: 6 * 86, gate: { waits: 2, seconds: 86 } },
      ],
    );
    assert.equal(bound.decidedBy?.lane.role, "r1");
    assert.equal(bound.boundSeconds, 6 * 86);
  });
});
