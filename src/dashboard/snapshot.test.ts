import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { runScenario } from "../sim/runner.ts";
import { parseScenarioText } from "../sim/scenario.ts";
import { dashboardScenario } from "./fixtures.ts";
import { SimFeed } from "./sim-feed.ts";
import type { DashboardState } from "./state.ts";
import type { InstanceCell, ModelServingView } from "./snapshot.ts";

/** Plays the fixture, keeping every state and the last state at the end of each step. */
async function play(): Promise<{ states: DashboardState[]; afterStep: DashboardState[] }> {
  const states: DashboardState[] = [];
  const afterStep: DashboardState[] = [];
  const feed = new SimFeed({
    title: "test",
    publish: (state) => states.push(state),
    describe: (step) => step.kind,
  });
  const observer = {
    attach: feed.attach.bind(feed),
    stepStarted: feed.stepStarted.bind(feed),
    stepEnded: (record: Parameters<SimFeed["stepEnded"]>[0]) => {
      feed.stepEnded(record);
      afterStep.push(states.at(-1)!);
    },
  };
  const report = await runScenario(dashboardScenario(), { observer });
  assert.equal(report.verdict, "pass");
  return { states, afterStep };
}

const played = play();

function only(state: DashboardState): ModelServingView {
  assert.equal(state.snapshot.modelServings.length, 1);
  return state.snapshot.modelServings[0]!;
}

function cells(view: ModelServingView, role: string): InstanceCell[] {
  return view.groups.flatMap((row) => row.roles[role] ?? []);
}

describe("dashboard snapshot", () => {
  it("once Available: 3 groups × (2 prefill + 1 decode) instances, all ready at revision 1", async () => {
    const view = only((await played).afterStep[1]!);
    assert.equal(view.groups.length, 3);
    assert.deepEqual(
      view.groups.map((row) => [row.roles["prefill"]!.length, row.roles["decode"]!.length]),
      [
        [2, 1],
        [2, 1],
        [2, 1],
      ],
    );
    for (const cell of [...cells(view, "prefill"), ...cells(view, "decode")]) {
      assert.equal(cell.state, "ready");
      assert.equal(cell.revisionNumber, 1);
      assert.equal(cell.updated, true);
      assert.equal(cell.surge, false);
    }
    assert.equal(view.servingGroups, 3);
    assert.equal(view.floorGroups, 2);
    assert.deepEqual(view.conditions.find((condition) => condition.type === "Available")?.status, "True");
  });

  it("after the decode-only update: decode at revision 2, prefill untouched at revision 1 yet updated", async () => {
    const view = only((await played).afterStep[4]!);
    assert.ok(cells(view, "decode").every((cell) => cell.revisionNumber === 2 && cell.state === "ready"));
    assert.ok(cells(view, "prefill").every((cell) => cell.revisionNumber === 1 && cell.updated));
    assert.deepEqual(
      view.roles.map((role) => [role.name, role.updated, role.total]),
      [
        ["prefill", 6, 6],
        ["decode", 3, 3],
      ],
    );
    assert.deepEqual(
      view.revisions.map((entry) => [entry.number, entry.current, entry.update, entry.changes]),
      [
        [1, false, false, []],
        [2, true, true, ["decode: image vllm:v1 → vllm:v2"]],
      ],
    );
  });

  it("during the update a decode instance drains (awaiting the router) and capacity never drops below the floor", async () => {
    const { states } = await played;
    const draining = states
      .filter((state) => state.snapshot.modelServings.length === 1)
      .flatMap((state) => cells(only(state), "decode"))
      .filter((cell) => cell.state === "draining");
    assert.ok(draining.length > 0, "some state shows a draining decode");
    assert.ok(draining.some((cell) => cell.revisionNumber === 1 && !cell.updated));
    assert.ok(
      draining.some((cell) => cell.awaitingRouters.length > 0),
      "a drain waits for a router",
    );
    const last = states.at(-1)!;
    assert.ok(last.timeline.points.length > 10);
    const updateStartT = last.timeline.marks.find((mark) => mark.label === "patch")!.t;
    const during = last.timeline.points.filter((point) => point.t >= updateStartT);
    assert.ok(during.length > 5);
    assert.ok(during.every((point) => point.serving >= point.floor && point.floor === 2));
    assert.ok(
      during.some((point) => point.serving === 2),
      "one group at a time is disrupted",
    );
    assert.ok(last.timeline.marks.some((mark) => mark.label === "pd: update revision 2"));
    assert.ok(last.timeline.points.some((point) => (point.requests?.ok ?? 0) > 0));
  });
});

/** Every state the feed publishes while `file` (a shipped scenario) plays, with the step it was in. */
async function statesOf(file: string): Promise<{ step: number; view: ModelServingView }[]> {
  const text = readFileSync(join(import.meta.dirname, "../../deploy/examples/scenarios", file), "utf8");
  const parsed = parseScenarioText(text);
  assert.ok(parsed.ok);
  const seen: { step: number; view: ModelServingView }[] = [];
  let step = -1;
  const feed = new SimFeed({
    title: file,
    describe: (value) => value.kind,
    publish: (state) => {
      const view = state.snapshot.modelServings[0];
      if (view !== undefined) seen.push({ step, view });
    },
    beforeStep: (index) => {
      step = index;
      return Promise.resolve();
    },
  });
  assert.equal((await runScenario(parsed.scenario, { observer: feed })).verdict, "pass");
  return seen;
}

describe("dashboard snapshot: surge and partitions", () => {
  it("a surge decode instance (maxUnavailable 0, maxSurge 1) shows as a surge cell beside the old one", async () => {
    const cells = (await statesOf("decode-image-update.yaml")).flatMap(({ view }) =>
      view.groups.flatMap((row) => row.roles["decode"] ?? []),
    );
    const surge = cells.filter((cell) => cell.surge);
    assert.ok(surge.length > 0, "some state shows a surge decode");
    assert.ok(surge.every((cell) => cell.instance === 1));
    // Once Ready it succeeds the old one at once (docs/design/succession.md) and shows as a desired cell.
    assert.ok(surge.some((cell) => cell.updated));
    assert.ok(cells.some((cell) => !cell.surge && cell.updated && cell.instance === 1 && cell.state === "ready"));
  });

  it("a group whose old decode drains while its successor serves still counts as serving, as the budgets count it", async () => {
    const states = await statesOf("decode-image-update.yaml");
    // Step 4 is the wait for RolloutComplete: decode maxUnavailable 0 keeps every group available.
    const rollout = states.filter(({ step }) => step === 4).map(({ view }) => view);
    assert.ok(rollout.length > 0);
    for (const view of rollout) assert.equal(view.servingGroups, view.replicas);
  });

  it("groups below the partition are held at the old revision, and released once it drops", async () => {
    const states = await statesOf("partition-canary.yaml");
    // Step 3 is the wait for RolloutComplete behind partition 3.
    const behind = states.filter(({ step }) => step === 3).at(-1)!.view;
    const cells = behind.groups.map((row) => row.roles["server"]![0]!);
    assert.deepEqual(
      cells.map((cell) => [cell.revisionNumber, cell.held]),
      [
        [1, true],
        [1, true],
        [1, true],
        [2, false],
      ],
    );
    assert.deepEqual(
      behind.groups.map((row) => row.partitioned),
      [true, true, true, false],
    );
    // Step 9 is the wait for RolloutComplete once the partition dropped to 0.
    const released = states.filter(({ step }) => step === 9).at(-1)!.view;
    for (const row of released.groups) {
      const cell = row.roles["server"]![0]!;
      assert.deepEqual([cell.revisionNumber, cell.held, row.partitioned], [2, false, false]);
    }
  });
});
