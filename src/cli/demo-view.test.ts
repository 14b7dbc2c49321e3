import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../engine/ports.ts";
import { podGlyph, renderFrame } from "./demo-view.ts";

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

  it("renders the groups × roles grid, progress bars and events as plain text", () => {
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
        "  prefill ████████████████████ 100% new",
        "  decode  ████████████████████ 100% new",
        "",
        "  requests  ok 10  failed 0  cut 1",
        "",
        "  events",
        "    00:01:02 PodReady m-0-decode-0-0",
      ].join("\n"),
    );
  });
});
