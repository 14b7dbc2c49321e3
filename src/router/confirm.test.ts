import { test } from "node:test";
import assert from "node:assert/strict";
import type { Pod } from "../api/kube.ts";
import { confirmDrain, confirmationPatch } from "./confirm.ts";

function pod(
  annotations: Record<string, string>,
  extra: { entry?: boolean; deleting?: boolean; containersReady?: "True" | "False" } = {},
): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: "p",
      namespace: "ns",
      uid: "u-1",
      labels: { "tandem.dev/entry": extra.entry === false ? "false" : "true" },
      annotations,
      ...(extra.deleting === true ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
    },
    spec: { containers: [] },
    status: { conditions: [{ type: "ContainersReady", status: extra.containersReady ?? "True" }] },
  } as unknown as Pod;
}

const MARK = { "tandem.dev/draining": "2026-01-01T00:00:00.000Z" };
const IDLE = { ok: true, running: 0, waiting: 0 } as const;

test("confirms a marked entry pod once nothing of ours is in flight and the engine is idle", () => {
  assert.deepEqual(confirmDrain({ pod: pod(MARK), routerId: "r", inFlight: 0, engine: IDLE }), { confirm: true });
});

test("each reason not to confirm is named", () => {
  const cases: [Parameters<typeof confirmDrain>[0], RegExp][] = [
    [{ pod: pod({}), routerId: "r", inFlight: 0, engine: IDLE }, /not marked/],
    [{ pod: pod(MARK, { entry: false }), routerId: "r", inFlight: 0, engine: IDLE }, /not an entry/],
    [{ pod: pod(MARK, { deleting: true }), routerId: "r", inFlight: 0, engine: IDLE }, /being deleted/],
    [
      { pod: pod({ ...MARK, "drained.tandem.dev/r": "true" }), routerId: "r", inFlight: 0, engine: IDLE },
      /already confirmed/,
    ],
    [{ pod: pod(MARK), routerId: "r", inFlight: 2, engine: IDLE }, /2 request leg\(s\)/],
    [{ pod: pod(MARK), routerId: "r", inFlight: 0, engine: undefined }, /no engine metrics/],
    [{ pod: pod(MARK), routerId: "r", inFlight: 0, engine: { ok: false, reason: "HTTP 500" } }, /unreadable: HTTP 500/],
    [
      { pod: pod(MARK), routerId: "r", inFlight: 0, engine: { ok: true, running: 1, waiting: 2 } },
      /1 running and 2 waiting/,
    ],
  ];
  for (const [input, reason] of cases) {
    const decision = confirmDrain(input);
    assert.ok(!decision.confirm);
    assert.match(decision.reason, reason);
  }
});

test("another router's confirmation is not ours; an engine whose containers are down holds nothing", () => {
  assert.deepEqual(
    confirmDrain({
      pod: pod({ ...MARK, "drained.tandem.dev/other": "true" }),
      routerId: "r",
      inFlight: 0,
      engine: IDLE,
    }),
    { confirm: true },
  );
  assert.deepEqual(
    confirmDrain({ pod: pod(MARK, { containersReady: "False" }), routerId: "r", inFlight: 0, engine: undefined }),
    { confirm: true },
  );
  assert.deepEqual(confirmationPatch(pod(MARK), "r"), {
    metadata: { uid: "u-1", annotations: { "drained.tandem.dev/r": "true" } },
  });
});
