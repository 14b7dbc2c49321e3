import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { stripVTControlCharacters } from "node:util";
import fc from "fast-check";
import type { KubeObject } from "../engine/ports.ts";
import { groupRows, podGlyph, renderFrame } from "./demo-view.ts";
import type { FrameInput } from "./demo-view.ts";

function pod(
  name: string,
  group: number,
  role: string,
  instance: string,
  state: { ready?: boolean; phase?: string; revision?: string; draining?: boolean },
): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      labels: {
        "tandem.dev/group": String(group),
        "tandem.dev/role": role,
        "tandem.dev/instance": instance,
        "tandem.dev/role-hash": state.revision === "m-v2" ? "h2" : "h1",
      },
      ...(state.draining === true ? { annotations: { "tandem.dev/draining": "2026-11-30T00:00:00Z" } } : {}),
    },
    spec: {},
    status: {
      phase: state.phase ?? "Running",
      conditions: [{ type: "Ready", status: state.ready === true ? "True" : "False" }],
    },
  };
}

describe("demo view", () => {
  it("shows each pod's state as a glyph", () => {
    assert.equal(podGlyph(pod("a", 0, "r", "r-0", { ready: true }), { r: "h1" }).color, "cyan");
    assert.equal(podGlyph(pod("a", 0, "r", "r-0", { ready: true }), { r: "h2" }).color, "green");
    assert.equal(podGlyph(pod("a", 0, "r", "r-0", { draining: true, ready: true }), { r: "h2" }).char, "↓");
    assert.equal(podGlyph(pod("a", 0, "r", "r-0", { phase: "Pending" }), { r: "h2" }).char, "○");
    assert.equal(podGlyph(pod("a", 0, "r", "r-0", {}), { r: "h2" }).char, "◐");
  });

  it("renders the groups × roles grid, progress bars (a role the update does not change says so) and events as plain text", () => {
    const pods = [
      pod("m-0-decode-0-0", 0, "decode", "decode-0", { ready: true, revision: "m-v2" }),
      pod("m-0-decode-0-1", 0, "decode", "decode-0", { ready: true, revision: "m-v2" }),
      pod("m-0-prefill-0-0", 0, "prefill", "prefill-0", { ready: true }),
      pod("m-0-prefill-1-0", 0, "prefill", "prefill-1", { ready: true }),
      pod("m-1-decode-0-0", 1, "decode", "decode-0", { draining: true }),
      pod("m-1-decode-0-1", 1, "decode", "decode-0", {}),
      pod("m-1-prefill-0-0", 1, "prefill", "prefill-0", { ready: true }),
      pod("m-1-prefill-1-0", 1, "prefill", "prefill-1", { phase: "Pending" }),
    ];
    const frame = renderFrame({
      title: "Tandem demo",
      seconds: 3725,
      step: "Decode-only image update",
      roles: ["prefill", "decode"],
      groups: 2,
      pods,
      updateRoleHashes: { prefill: "h1", decode: "h2" },
      previousRoleHashes: { prefill: "h1", decode: "h1" },
      requests: { ok: 10, failed: 0, cut: 1 },
      events: ["00:01:02 PodReady m-0-decode-0-0"],
      color: false,
    });
    assert.equal(
      frame,
      [
        "Tandem demo · t=01:02:05 (simulated) · Decode-only image update",
        "",
        "  group  prefill   decode",
        "  0      ● ●       ●●    ",
        "  1      ● ○       ↓◐    ",
        "  ● Ready  ◐ starting  ○ pending  ↓ draining  ✕ failing  (new revision in cyan)",
        "",
        "  update progress",
        "  prefill unchanged by this update",
        "  decode  ████████████████████ 100% new",
        "",
        "  requests  ok 10  failed 0  cut 1",
        "",
        "  events",
        "    00:01:02 PodReady m-0-decode-0-0",
      ].join("\n"),
    );
  });

  it("without an earlier revision (the first rollout) every role shows its progress", () => {
    const pods = [pod("m-0-decode-0-0", 0, "decode", "decode-0", { ready: true })];
    const frame = renderFrame(frameOf({ groups: 1, pods, previousRoleHashes: {} }));
    assert.match(frame, /\n {2}prefill ░{20} {3}0% new\n {2}decode {2}█{20} 100% new\n/);
  });

  it("fits a 20-row terminal: the newest events that fit, nothing past row 19 (the demo's newline takes row 20)", () => {
    const input = frameOf({
      groups: 2,
      events: Array.from({ length: 6 }, (_, index) => `00:0${index} PodReady p-${index}`),
    });
    assert.equal(renderFrame(input).split("\n").length, 20, "the full frame: one line too many for 20 rows");
    const lines = renderFrame(input, { rows: 20, columns: 80 }).split("\n");
    assert.equal(lines.length, 19);
    assert.deepEqual(lines.slice(-6), [
      "  events",
      "    00:01 PodReady p-1",
      "    00:02 PodReady p-2",
      "    00:03 PodReady p-3",
      "    00:04 PodReady p-4",
      "    00:05 PodReady p-5",
    ]);
  });

  it("shows the ServingGroups that fit and '… N more ServingGroup(s)' when there are more than rows", () => {
    const lines = renderFrame(frameOf({ groups: 30, events: ["00:01 PodReady p"] }), { rows: 20, columns: 80 }).split(
      "\n",
    );
    assert.equal(lines.length, 19);
    assert.deepEqual(lines.slice(0, 2), [
      "Tandem demo · t=00:00:10 (simulated) · Rolling",
      "  group  prefill   decode",
    ]);
    assert.equal(lines[2], "  0      ○ ○       ○○    ");
    assert.equal(lines[15], "  … 17 more ServingGroup(s)");
    assert.deepEqual(lines.slice(16), [
      "  prefill ░░░░░░░░░░░░░░░░░░░░   0% new",
      "  decode  ░░░░░░░░░░░░░░░░░░░░   0% new",
      "  requests  ok 1  failed 0  cut 0",
    ]);
  });

  it("cuts lines wider than the terminal with '…', keeping color codes whole", () => {
    const pods = [pod("m-0-decode-0-0", 0, "decode", "decode-0", { ready: true })];
    const lines = renderFrame(frameOf({ groups: 1, pods, color: true }), { rows: 40, columns: 21 }).split("\n");
    assert.equal(lines[0], "Tandem demo · t=00:0…");
    assert.equal(lines[3], `  0${" ".repeat(16)}\x1b[36m●\x1b[0m…\x1b[0m`, "the decode glyph whole, in cyan");
    for (const line of lines) assert.ok(stripVTControlCharacters(line).length <= 21, line);
  });

  it("any frame fits any terminal: at most rows - 1 lines (at least 1) of at most columns characters", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 0, max: 6 }),
        fc.integer({ min: 1, max: 60 }),
        fc.integer({ min: 1, max: 200 }),
        fc.boolean(),
        (groups, events, rows, columns, color) => {
          const frame = renderFrame(
            frameOf({
              groups,
              color,
              events: Array.from({ length: events }, (_, index) => `00:0${index} PodReady p-${index}`),
            }),
            { rows, columns },
          );
          const lines = frame.split("\n");
          assert.ok(lines.length <= Math.max(1, rows - 1), `${lines.length} lines for ${rows} rows`);
          for (const line of lines)
            assert.ok(
              stripVTControlCharacters(line).length <= columns,
              `${JSON.stringify(line)} is wider than ${columns}`,
            );
        },
      ),
    );
  });
});

describe("demo grid rows", () => {
  it("lists the group ordinals the pods carry, sparse ones included (a surge group that succeeded group 0), filled up to the desired count", () => {
    const pods = [1, 2].map((group) => pod(`m-${group}-prefill-0-0`, group, "prefill", "prefill-0", { ready: true }));
    assert.deepEqual(groupRows({ groups: 2, pods }), [1, 2]);
    assert.deepEqual(groupRows({ groups: 3, pods }), [0, 1, 2]);
    assert.deepEqual(groupRows({ groups: 2, pods: [] }), [0, 1]);
    const frame = renderFrame(frameOf({ groups: 2, pods }));
    assert.match(frame, /^ {2}2 /m, "group 2 has a row");
  });
});

/** A frame of two roles with 2 prefill instances and 1 decode instance (entry + worker) per group, every pod pending unless `pods` says otherwise. */
function frameOf(options: {
  groups: number;
  pods?: KubeObject[];
  events?: string[];
  previousRoleHashes?: Record<string, string>;
  color?: boolean;
}): FrameInput {
  const pending = Array.from({ length: options.groups }, (_, group) => [
    pod(`m-${group}-prefill-0-0`, group, "prefill", "prefill-0", { phase: "Pending" }),
    pod(`m-${group}-prefill-1-0`, group, "prefill", "prefill-1", { phase: "Pending" }),
    pod(`m-${group}-decode-0-0`, group, "decode", "decode-0", { phase: "Pending" }),
    pod(`m-${group}-decode-0-1`, group, "decode", "decode-0", { phase: "Pending" }),
  ]).flat();
  const pods = options.pods ?? pending;
  return {
    title: "Tandem demo",
    seconds: 10,
    step: "Rolling",
    roles: ["prefill", "decode"],
    groups: options.groups,
    pods,
    updateRoleHashes: { prefill: "h2", decode: "h1" },
    previousRoleHashes: options.previousRoleHashes ?? { prefill: "h1", decode: "h0" },
    requests: { ok: 1, failed: 0, cut: 0 },
    events: options.events ?? [],
    color: options.color ?? false,
  };
}
