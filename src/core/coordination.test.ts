import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import type { CoordinationConfig, RoleProgress } from "./coordination.ts";
import { allowedStarts, baselineRole, dependencyGate, startPermits } from "./coordination.ts";
import type { PreviewRole } from "./coordination-preview.ts";
import { previewCoordinatedRollout } from "./coordination-preview.ts";

const SEED = 20261130;

function progress(role: string, eligible: number, readyNew = 0, extra: Partial<RoleProgress> = {}): RoleProgress {
  return {
    role,
    eligible,
    readyNew,
    inFlight: 0,
    newCapacity: readyNew,
    oldServing: eligible - readyNew,
    oldBelowPartition: 0,
    active: readyNew < eligible,
    maxSurge: 0,
    ...extra,
  };
}

const noDeps: CoordinationConfig = { maxSkewPercent: 10, dependsOn: new Map() };

describe("start permits", () => {
  it("the seed's example: from zero at 10%, roles of 100, 50 and 10 may start 10, 5 and 1", () => {
    const roles = [progress("a", 100), progress("b", 50), progress("c", 10)];
    const permits = startPermits(roles, noDeps);
    assert.deepEqual(
      [...permits.values()].map((permit) => permit.quota),
      [10, 5, 1],
    );
  });

  it("a small role's rounding does not inflate the others: T = 8, 4, 10 at 10% may each start 1", () => {
    const roles = [progress("a", 8), progress("b", 4), progress("c", 10)];
    assert.deepEqual(
      [...startPermits(roles, noDeps).values()].map((permit) => permit.quota),
      [1, 1, 1],
    );
  });

  it("the baseline is the least-progressed active role, compared without floats", () => {
    assert.equal(
      baselineRole([progress("a", 3, 1), progress("b", 7, 2), progress("c", 5, 0, { active: false })])?.role,
      "b",
    );
    assert.equal(baselineRole([progress("a", 2, 2, { active: false })]), undefined);
  });

  it("allowed starts: min(T, ceil((R_b/T_b + skew) · T))", () => {
    const baseline = progress("b", 50, 5);
    assert.equal(allowedStarts(progress("a", 100), baseline, 10), 20);
    assert.equal(allowedStarts(progress("c", 10), baseline, 10), 2);
    assert.equal(allowedStarts(progress("c", 10), baseline, 100), 10);
  });

  it("counts started work immediately, so one reconcile cannot over-admit", () => {
    const permits = startPermits([progress("a", 100, 0, { inFlight: 10 }), progress("b", 50)], noDeps);
    assert.equal(permits.get("a")?.quota, 0);
    assert.equal(permits.get("a")?.reason, "waiting for the least-progressed role a (maxSkew 10%)");
  });
});

describe("dependencies", () => {
  const chain: CoordinationConfig = {
    maxSkewPercent: 100,
    dependsOn: new Map([
      ["a", ["b"]],
      ["b", ["c"]],
    ]),
  };
  const byName = (roles: RoleProgress[]) => new Map(roles.map((role) => [role.role, role]));

  it("inner stages start first; the entry waits for new Ready capacity along its whole path", () => {
    const roles = [progress("a", 4), progress("b", 2), progress("c", 2)];
    assert.equal(dependencyGate(roles[2]!, byName(roles), chain), undefined, "c has no dependencies");
    assert.equal(dependencyGate(roles[1]!, byName(roles), chain), undefined, "b may prestart while a has not started");
    assert.equal(
      dependencyGate(roles[0]!, byName(roles), chain),
      "waiting for new Ready capacity in b, c (dependencies of a)",
    );
    const ready = [progress("a", 4), progress("b", 2, 1), progress("c", 2, 0, { newCapacity: 1 })];
    assert.equal(dependencyGate(ready[0]!, byName(ready), chain), undefined);
  });

  it("a dependency entirely below its partition: the entry waits, and is told which partition to lower (fuzz-coordinated-438)", () => {
    const pinned = [
      progress("a", 4),
      progress("b", 2, 1),
      progress("c", 0, 0, { oldServing: 2, oldBelowPartition: 2, active: false }),
    ];
    assert.equal(
      dependencyGate(pinned[0]!, byName(pinned), chain),
      "waiting for new Ready capacity in c (dependencies of a); every instance of c is below its partition: lower the partition of c, or remove the dependency on it, to update a",
    );
  });

  it("teardown in reverse: an old c stays while any old b or a exists; without surge a single c blocks with the fix named", () => {
    const permits = startPermits([progress("a", 4), progress("b", 2), progress("c", 1)], chain);
    assert.equal(permits.get("c")?.retireLimit, 0);
    assert.equal(permits.get("c")?.blocked, true);
    assert.match(permits.get("c")?.reason ?? "", /set maxSurge on role c/);
    const withSurge = startPermits([progress("a", 4), progress("b", 2), progress("c", 1, 0, { maxSurge: 1 })], chain);
    assert.equal(withSurge.get("c")?.blocked, false);
  });
});

describe("a kept old instance against the skew bound", () => {
  const prefillOnDecode = (maxSkewPercent: number): CoordinationConfig => ({
    maxSkewPercent,
    dependsOn: new Map([["prefill", ["decode"]]]),
  });
  const capped =
    "role prefill may start only 2 of its 3 instance(s) while role decode keeps an old instance for the roles that depend on it (decode reaches at most 1 of 2 without surge; maxSkew 10%), so neither finishes: set maxSurge on role decode (e.g. 1), raise maxSkew to at least 17%, or remove the dependency on role decode";

  it("decode (2, no surge) keeps 1 old for prefill, capping it at 1/2, so prefill (3) at 10% gets ceil(0.6·3) = 2 < 3: blocked from the start, with the smallest maxSkew", () => {
    const table = (prefillReady: number, decodeReady: number) =>
      [
        ...startPermits(
          [progress("prefill", 3, prefillReady), progress("decode", 2, decodeReady)],
          prefillOnDecode(10),
        ),
      ].map(([role, permit]) => [role, permit.quota, permit.blocked, permit.retireLimit, permit.reason]);
    // From zero: decode may start 1 (ceil(0.1·2)), prefill none (its gate), but it is already known short.
    assert.deepEqual(table(0, 0), [
      ["prefill", 0, true, undefined, capped],
      ["decode", 1, false, 1, undefined],
    ]);
    assert.deepEqual(table(0, 1), [
      ["prefill", 1, true, undefined, capped],
      ["decode", 0, false, 0, "waiting for the least-progressed role prefill (maxSkew 10%)"],
    ]);
    // Where the fuzz run ended: prefill 2/3 may start no more, decode may not retire its last old.
    assert.deepEqual(table(2, 1), [
      ["prefill", 0, true, undefined, capped],
      ["decode", 1, false, 0, undefined],
    ]);
  });

  it("the smallest maxSkew is exact: 16% is short (ceil(0.66·3) = 2), 17% is not (ceil(0.67·3) = 3)", () => {
    assert.match(
      startPermits([progress("prefill", 3, 2), progress("decode", 2, 1)], prefillOnDecode(16)).get("prefill")?.reason ??
        "",
      /maxSkew 16%.*at least 17%/,
    );
    const permits = startPermits([progress("prefill", 3, 2), progress("decode", 2, 1)], prefillOnDecode(17));
    assert.deepEqual(
      [...permits.values()].map((permit) => [permit.quota, permit.blocked, permit.reason]),
      [
        [1, false, undefined],
        [1, false, undefined],
      ],
    );
  });

  it("no block when decode can reach 2/2: with surge, or keeping an old instance below its partition instead", () => {
    for (const decode of [
      progress("decode", 2, 1, { maxSurge: 1 }),
      progress("decode", 2, 1, { oldServing: 2, oldBelowPartition: 1 }),
    ]) {
      const permits = startPermits([progress("prefill", 3, 2), decode], prefillOnDecode(10));
      assert.deepEqual(
        [...permits.values()].map((permit) => permit.blocked),
        [false, false],
      );
    }
  });

  it("a short role is no deadlock when the held role below it lets go first: c waits for b, not for d", () => {
    // b (2) held at 1/2 for a (2): a gets ceil(0.6·2) = 2 and finishes, so b lets go. d (10) held
    // at 9/10 for c (20): c gets ceil(0.6·20) = 12 against b, then ceil(1.0·20) = 20 against d.
    const config: CoordinationConfig = {
      maxSkewPercent: 10,
      dependsOn: new Map([
        ["a", ["b"]],
        ["c", ["d"]],
      ]),
    };
    const permits = startPermits([progress("a", 2), progress("b", 2), progress("c", 20), progress("d", 10)], config);
    assert.deepEqual(
      [...permits.values()].map((permit) => permit.blocked),
      [false, false, false, false],
    );
    const stuck = startPermits([progress("a", 3), progress("b", 2), progress("c", 20), progress("d", 10)], config);
    // a (3) gets 2 against b, so b never lets go: c (12 of 20) and d (6 of the 9 it may replace) stay short against it.
    assert.deepEqual(
      [...stuck.values()].map((permit) => permit.blocked),
      [true, false, true, true],
    );
    assert.match(
      stuck.get("c")?.reason ?? "",
      /role c may start only 12 of its 20 .* role b keeps an old instance .* at least 17%/,
    );
  });

  it("the preview stops where the controller does, with the same reason; at 17% it completes", () => {
    const roles: PreviewRole[] = [
      { role: "prefill", eligible: 3, protected: 0, maxUnavailable: 1, maxSurge: 0 },
      { role: "decode", eligible: 2, protected: 0, maxUnavailable: 1, maxSurge: 0 },
    ];
    const table = (preview: ReturnType<typeof previewCoordinatedRollout>) =>
      preview.steps.map((step) => [step.started.prefill, step.started.decode, step.old.prefill, step.old.decode]);
    const blocked = previewCoordinatedRollout(roles, prefillOnDecode(10));
    assert.deepEqual(table(blocked), [
      [0, 1, 3, 1],
      [1, 1, 2, 1],
      [2, 1, 1, 1],
    ]);
    assert.equal(blocked.blocked, capped);
    const done = previewCoordinatedRollout(roles, prefillOnDecode(17));
    assert.deepEqual(table(done), [
      [0, 1, 3, 1],
      [1, 1, 2, 1],
      [2, 1, 1, 1],
      [3, 1, 0, 1],
      [3, 2, 0, 0],
    ]);
    assert.equal(done.blocked, undefined);
  });

  it("a dependent's old instance below its partition holds decode's last old one (and its surge): a wait that names the partition", () => {
    // prefill 3 with partition 1: prefill-1, prefill-2 new, prefill-0 old for good. decode 1 with
    // its surge instance Ready: full progress, but its old decode-0 stays for prefill-0.
    const prefill = progress("prefill", 2, 2, { oldServing: 1, oldBelowPartition: 1, active: false });
    const decode = progress("decode", 1, 1, { oldServing: 1, active: true, maxSurge: 1 });
    const permits = startPermits([prefill, decode], prefillOnDecode(100));
    assert.deepEqual(permits.get("decode"), {
      quota: 0,
      fullProgress: true,
      retireLimit: 0,
      reason:
        "keeps its last old instance (and any surge instance beside it) while role(s) prefill that depend on it run old instances below their partition: lower the partition of prefill to finish the rollout, or remove the dependency on role decode",
      blocked: false,
    });
    assert.equal(permits.get("prefill")?.reason, undefined);
    assert.equal(
      startPermits([{ ...prefill, oldServing: 0, oldBelowPartition: 0 }, decode], prefillOnDecode(100)).get("decode")
        ?.reason,
      undefined,
      "partition lowered: decode may retire it",
    );
  });
});

describe("preview step tables", () => {
  const role = (name: string, eligible: number, maxUnavailable: number, maxSurge = 0): PreviewRole => ({
    role: name,
    eligible,
    protected: 0,
    maxUnavailable,
    maxSurge,
  });

  it("two roles, 10% skew: the large role never runs ahead of the small one by more than one step", () => {
    const preview = previewCoordinatedRollout([role("decode", 20, 4), role("prefill", 5, 1)], noDeps);
    assert.equal(preview.blocked, undefined);
    assert.deepEqual(
      preview.steps.map((step) => [step.started.decode, step.started.prefill]),
      [
        [2, 1],
        [4, 1],
        [6, 2],
        [8, 2],
        [10, 3],
        [12, 3],
        [14, 4],
        [16, 4],
        [18, 5],
        [20, 5],
      ],
    );
  });

  it("three roles in a chain, the innermost with one instance and surge", () => {
    const preview = previewCoordinatedRollout([role("a", 4, 1), role("b", 2, 1), role("c", 1, 1, 1)], {
      maxSkewPercent: 50,
      dependsOn: new Map([
        ["a", ["b"]],
        ["b", ["c"]],
      ]),
    });
    assert.equal(preview.blocked, undefined);
    assert.deepEqual(
      preview.steps.map((step) => [step.started.a, step.started.b, step.started.c, step.old.a, step.old.b, step.old.c]),
      [
        // b (inner) and c (its surge instance) start first; a waits for both to have new Ready capacity.
        [0, 1, 1, 4, 1, 1],
        [1, 1, 1, 3, 1, 1],
        [2, 1, 1, 2, 1, 1],
        [3, 1, 1, 1, 1, 1],
        [4, 1, 1, 0, 1, 1],
        // Old b goes only once no old a is left, old c only once no old b is left.
        [4, 2, 1, 0, 0, 1],
        [4, 2, 1, 0, 0, 0],
      ],
    );
  });

  it("without surge, the single innermost instance blocks with a reason", () => {
    const preview = previewCoordinatedRollout([role("a", 4, 1), role("b", 2, 1), role("c", 1, 1)], {
      maxSkewPercent: 50,
      dependsOn: new Map([
        ["a", ["b"]],
        ["b", ["c"]],
      ]),
    });
    assert.match(preview.blocked ?? "", /role c must keep an old instance .* set maxSurge on role c/);
  });
});

describe("preview properties over 2–6 roles, random sizes, budgets, surge and dependency DAGs", () => {
  const scenario = fc.integer({ min: 2, max: 6 }).chain((count) =>
    fc.record({
      roles: fc.tuple(
        ...Array.from({ length: count }, (_, index) =>
          fc
            .record({
              eligible: fc.integer({ min: 1, max: 30 }),
              protected: fc.integer({ min: 0, max: 2 }),
              maxUnavailable: fc.integer({ min: 1, max: 4 }),
              maxSurge: fc.integer({ min: 0, max: 2 }),
            })
            .map((r) => ({ role: `r${index}`, ...r })),
        ),
      ),
      // Edges only from higher to lower index: always a DAG.
      edges: fc.array(fc.tuple(fc.integer({ min: 1, max: count - 1 }), fc.integer({ min: 0, max: count - 2 })), {
        maxLength: count,
      }),
      skew: fc.integer({ min: 1, max: 100 }),
    }),
  );

  it("progress stays within maxSkew plus one step; dependencies and teardown order hold; it completes or says why not", () => {
    fc.assert(
      fc.property(scenario, ({ roles, edges, skew }) => {
        const dependsOn = new Map<string, string[]>();
        for (const [from, to] of edges)
          if (to < from) dependsOn.set(`r${from}`, [...new Set([...(dependsOn.get(`r${from}`) ?? []), `r${to}`])]);
        const preview = previewCoordinatedRollout(roles, { maxSkewPercent: skew, dependsOn });
        let previousReady: Record<string, number> = Object.fromEntries(roles.map((r) => [r.role, 0]));
        for (const step of preview.steps) {
          const active = roles.filter((r) => previousReady[r.role]! < r.eligible);
          for (const r of active) {
            for (const b of active) {
              // started_r/T_r ≤ ready_b/T_b + skew + 1/T_r, in integers (surge may add its own instance).
              const lhs = step.started[r.role]! * b.eligible * 100;
              const rhs =
                (previousReady[b.role]! * 100 + skew * b.eligible) * r.eligible + 100 * b.eligible * (1 + r.maxSurge);
              assert.ok(
                lhs <= rhs,
                `${r.role} started ${step.started[r.role]}/${r.eligible} vs ${b.role} ready ${previousReady[b.role]}/${b.eligible} at ${skew}%`,
              );
            }
          }
          for (const [from, targets] of dependsOn) {
            // A role whose old instances are all gone has passed its gate; a newly started one needs its closure Ready.
            if (step.started[from]! > 0 && previousReady[from] === 0 && (step.started[from] ?? 0) > 0) {
              const upstreamStarted = [...dependsOn].some(
                ([other, ts]) => ts.includes(from) && (step.started[other] ?? 0) > 0,
              );
              if (!upstreamStarted) continue;
            }
            for (const target of targets) {
              // Teardown in reverse: while `from` has old instances, `target` keeps an old one.
              if (step.old[from]! > 0)
                assert.ok(
                  step.old[target]! >= 1,
                  `${target} lost its last old instance while ${from} still has old ones`,
                );
            }
          }
          previousReady = { ...step.ready };
        }
        if (preview.blocked === undefined)
          assert.ok(roles.every((r) => preview.steps.at(-1)?.old[r.role] === r.protected));
        else assert.ok(preview.blocked.length > 0);
      }),
      { seed: SEED, numRuns: 300 },
    );
  });
});
