import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Pod } from "../api/kube.ts";
import type { Action } from "./actions.ts";
import { DRAIN_SETTLE_MS, cancelDrain, planDrain } from "./drain.ts";
import type { DrainPolicy } from "./drain.ts";
import { podFacts } from "./health.ts";
import type { PodView } from "./model.ts";

const MARK_MS = Date.parse("2026-12-01T00:00:10Z");
const MARK = "2026-12-01T00:00:10.000Z";

/** A pod of decode-0 of group 1 that served; marked at MARK when `annotations` hold the mark. */
function view(
  index: number,
  annotations: Record<string, string>,
  gate: { status: "True" | "False"; reason: string } = { status: "False", reason: "Draining" },
): PodView {
  const pod: Pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: `m-1-decode-0-${index}`,
      namespace: "ns",
      uid: `uid-${index}`,
      resourceVersion: "7",
      annotations,
    },
    spec: { containers: [{ name: "c", image: "vllm:v1" }] },
    status: {
      conditions: [
        { type: "ContainersReady", status: "True" },
        { type: "tandem.dev/serving", ...gate },
      ],
    },
  };
  return {
    pod,
    id: { group: 1, role: "decode", instance: 0, index },
    uid: `uid-${index}`,
    revision: "m-1",
    facts: podFacts(pod),
  };
}

const marked = (confirmations: readonly string[] = []): PodView =>
  view(0, {
    "tandem.dev/draining": MARK,
    ...Object.fromEntries(confirmations.map((id) => [`drained.tandem.dev/${id}`, "true"])),
  });
const live = (id: string, liveUntilMs = Infinity) => ({ id, liveUntilMs });
const policy = (routers: DrainPolicy["routers"], timeoutSeconds = 60): DrainPolicy => ({ timeoutSeconds, routers });
const UNIT = { unitLabel: "decode-0 of group 1 (scale-down)", next: "deleting" } as const;
const events = (actions: readonly Action[]) =>
  actions.flatMap((action) => (action.type === "RecordEvent" ? [`${action.reason}: ${action.message}`] : []));

describe("drain: when an entry that served may be disrupted (DESIGN §3.5)", () => {
  it("a table of routers, confirmations and instants", () => {
    const table: [string, PodView, DrainPolicy, number, boolean, number | undefined][] = [
      // [why, entry, policy, now, drained, recheck]
      [
        "no router: the settle is the whole wait",
        marked(),
        policy([]),
        MARK_MS + 1_999,
        false,
        MARK_MS + DRAIN_SETTLE_MS,
      ],
      ["no router, the settle over", marked(), policy([]), MARK_MS + 2_000, true, undefined],
      [
        "one live router, not confirmed: wait until the timeout",
        marked(),
        policy([live("a")]),
        MARK_MS + 30_000,
        false,
        MARK_MS + 60_000,
      ],
      [
        "one live router confirmed, within the settle",
        marked(["a"]),
        policy([live("a")]),
        MARK_MS + 1_000,
        false,
        MARK_MS + DRAIN_SETTLE_MS,
      ],
      [
        "one live router confirmed, the settle over",
        marked(["a"]),
        policy([live("a")]),
        MARK_MS + 2_000,
        true,
        undefined,
      ],
      [
        "two routers, one confirmed: wait",
        marked(["a"]),
        policy([live("a"), live("b")]),
        MARK_MS + 5_000,
        false,
        MARK_MS + 60_000,
      ],
      [
        "two routers, both confirmed",
        marked(["a", "b"]),
        policy([live("a"), live("b")]),
        MARK_MS + 5_000,
        true,
        undefined,
      ],
      [
        "a router that expires is waited for until its liveUntilMs, then looked at again",
        marked(),
        policy([live("a", MARK_MS + 9_000)]),
        MARK_MS + 5_000,
        false,
        MARK_MS + 9_000,
      ],
      [
        "an expired router is not waited for",
        marked(),
        policy([live("a", MARK_MS + 9_000)]),
        MARK_MS + 9_000,
        true,
        undefined,
      ],
      ["the timeout ends the wait", marked(["a"]), policy([live("a"), live("b")]), MARK_MS + 60_000, true, undefined],
      ["a timeout shorter than the settle ends it first", marked(), policy([], 1), MARK_MS + 1_000, true, undefined],
      ["timeout 0: no wait at all, no settle", marked(), policy([live("a")], 0), MARK_MS, true, undefined],
      [
        "a confirmation of a router no longer live counts for nothing, and harms nothing",
        marked(["old"]),
        policy([live("a")]),
        MARK_MS + 3_000,
        false,
        MARK_MS + 60_000,
      ],
    ];
    for (const [why, entry, drain, nowMs, drained, recheckAtMs] of table) {
      const step = planDrain([entry], drain, UNIT, nowMs);
      assert.equal(step.drained, drained, why);
      assert.equal(step.recheckAtMs, recheckAtMs, why);
    }
  });

  it("routers out of scope are not waited for (the model keeps only those covering the namespace)", async () => {
    const { buildModel } = await import("./model.ts");
    const routers = [
      { id: "a", scope: { all: false, namespaces: ["other"] }, liveUntilMs: 1 },
      { id: "b", scope: { all: false, namespaces: ["ns", "x"] }, liveUntilMs: 5 },
      { id: "b", scope: { all: true }, liveUntilMs: 9 },
      { id: "c", scope: { all: true }, liveUntilMs: 3 },
    ] as const;
    const modelServing = {
      apiVersion: "tandem.dev/v1alpha1",
      kind: "ModelServing",
      metadata: { name: "m", namespace: "ns", uid: "u", generation: 1 },
      spec: {
        replicas: 1,
        template: {
          roles: [
            { name: "decode", replicas: 1, entryTemplate: { spec: { containers: [{ name: "c", image: "vllm:v1" }] } } },
          ],
        },
      },
    };
    const built = buildModel({ modelServing, pods: [], services: [], revisions: [], routers });
    assert.ok(built.ok);
    assert.deepEqual(
      built.model.drain.routers,
      [
        { id: "b", liveUntilMs: 9 },
        { id: "c", liveUntilMs: 3 },
      ],
      "one per id, live while any of its Leases is",
    );
  });

  it("marks with millisecond precision, clearing confirmations left from an earlier drain; DrainStarted names the live routers", () => {
    const stale = view(0, { "drained.tandem.dev/a": "true" }, { status: "True", reason: "ContainersReady" });
    const step = planDrain(
      [stale, view(1, {}, { status: "True", reason: "ContainersReady" })],
      policy([live("a"), live("gone", MARK_MS)]),
      UNIT,
      MARK_MS + 123,
    );
    const annotate = step.actions.find((action) => action.type === "AnnotatePod" && action.name === "m-1-decode-0-0");
    assert.deepEqual(annotate?.type === "AnnotatePod" ? annotate.annotations : undefined, {
      "drained.tandem.dev/a": null,
      "tandem.dev/draining": "2026-12-01T00:00:10.123Z",
    });
    assert.deepEqual(events(step.actions), [
      "DrainStarted: Draining decode-0 of group 1 (scale-down): pod(s) m-1-decode-0-0, m-1-decode-0-1 out of traffic; waiting up to 60s for router(s) a to confirm before deleting.",
    ]);
    assert.equal(step.drained, false);
    assert.deepEqual(step.wait, {
      unitLabel: UNIT.unitLabel,
      pods: ["m-1-decode-0-0"],
      routers: ["a"],
      timeoutAtMs: MARK_MS + 123 + 60_000,
    });
  });

  it("DrainConfirmed names the routers that confirmed; DrainTimeout those that did not, and the pods", () => {
    assert.deepEqual(
      events(planDrain([marked(["a", "b"])], policy([live("a"), live("b")]), UNIT, MARK_MS + 4_000).actions),
      [
        "DrainConfirmed: Drained decode-0 of group 1 (scale-down): router(s) a, b confirmed pod(s) m-1-decode-0-0; deleting.",
      ],
    );
    assert.deepEqual(
      events(planDrain([marked(["a"])], policy([live("a"), live("b"), live("c")]), UNIT, MARK_MS + 60_000).actions),
      [
        "DrainTimeout: Drain of decode-0 of group 1 (scale-down) timed out after 60s: router(s) b, c did not confirm pod(s) m-1-decode-0-0; deleting anyway, requests still running on them are cut.",
      ],
    );
  });

  it("cancel removes the mark and every confirmation, and reopens the gate", () => {
    const pod = view(0, {
      "tandem.dev/draining": MARK,
      "drained.tandem.dev/a": "true",
      "drained.tandem.dev/b": "false",
      "other.example/keep": "x",
    });
    const actions = cancelDrain(pod, MARK_MS + 5_000);
    assert.deepEqual(
      actions.map((action) => action.type),
      ["AnnotatePod"],
    );
    const annotate = actions[0];
    assert.equal(
      annotate?.type === "AnnotatePod" ? annotate.gate?.condition.status : undefined,
      "True",
      "in one write",
    );
    assert.deepEqual(annotate?.type === "AnnotatePod" ? annotate.annotations : undefined, {
      "tandem.dev/draining": null,
      "drained.tandem.dev/a": null,
      "drained.tandem.dev/b": null,
    });
    assert.deepEqual(
      cancelDrain(
        view(0, { "drained.tandem.dev/a": "true" }, { status: "True", reason: "ContainersReady" }),
        MARK_MS,
      ).flatMap((action) => (action.type === "AnnotatePod" ? [action.annotations] : [])),
      [{ "drained.tandem.dev/a": null }],
      "a stray confirmation alone is removed too",
    );
  });
});
