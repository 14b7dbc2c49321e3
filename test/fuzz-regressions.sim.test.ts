/**
 * Scenarios a randomized scenario fuzz found failing in the simulator (2026-11-30), now fixed:
 * each runs to completion with every invariant held. Before its fix, each failed.
 *
 * - Budgets changed mid-rollout (a lower group or role `maxUnavailable`, a switch from
 *   InPlaceUpdate to RoleRollingUpdate) while disruptions are under way: the controller cannot
 *   undo those; the checker tolerates them until they recover (`UnderWay` in
 *   src/core/invariants.ts) and still catches any new disruption beyond the new budget.
 * - A new update while groups serve only through surge instances of the previous one: those are
 *   held at their revision (`holdSurge` in src/core/rollout.ts) instead of being replaced in every
 *   group at once, also in a group the group partition has just covered, where the surge that
 *   stands in for desired instances stays too (`keepSurgeBelowPartition`). Under a group strategy
 *   the same for a surge group that stands in for groups being replaced (`holdSurgeGroups`).
 * - Surge scaled down while it carries capacity: existing surge stays as far as the role's floor
 *   needs it (`surgeCount`), and scaling it down below the role's desired count is a disruption
 *   that needs the group budget (`planRoleSurge`) — also beyond a maxSurge lowered mid-rollout,
 *   and under a group strategy switched to mid-rollout (`roleSurgeKept`); the checker tolerates
 *   the surge pods beyond the new bound that were there at the change until they go, and no new
 *   one (`trackSurgeKept` in src/sim/checker.ts).
 * - A switch to a group strategy after a RoleRollingUpdate: pods of roles it left unchanged keep
 *   their older revision label but run what the current revision builds; they are neither being
 *   replaced nor outdated until a permit moves their group (`computeState` in
 *   src/core/instances.ts), instead of being replaced in every group at once.
 * - A checker fix: a pod deleted in the instant a role is scaled down, while the controller's view
 *   does not show the deletion yet. The fault window closed at once because an instance above the
 *   new count (bound to go) kept the group available; it now counts only capacity within the
 *   surge limits (`allGroupsAvailable` in src/sim/checker.ts).
 * - Every replacement waiting for capacity below the floor while a surge unit still starts: only
 *   surge that serves carries the floor (`surgeCount`), so the starting one is freed; kept, it took
 *   the replacements' GPUs for good once Ready (a deadlock).
 * - A partition raised over units whose move is under way: a move that can still be undone (a
 *   drain, pods deleted while others of the unit still run) is withdrawn, and the unit stays on
 *   the revision it runs (`withdrawPermitsBelowPartition`); one that cannot (patched in place, a
 *   group with an instance already rebuilt) finishes at its record, which the checker accepts for
 *   a unit whose move was under way when the partition came, and it judges a pod patched in place
 *   by the revision it runs, not by its label (`runningRoleHash`).
 * - Surge for the floor counts only surge that serves: a group above a lowered replicas that
 *   serves nothing under the new shape (its roles scaled up) is scaled down, not rebuilt and built
 *   up beyond the bound (`surgeCount`).
 * - A switch to ServingGroupRollingUpdate alone after a RoleRollingUpdate: pods of roles it left
 *   unchanged are relabelled at the revision they run (`relabelUnchanged` in src/core/lifecycle.ts);
 *   with their older label the rollout never looked complete.
 * - Checker fixes (2026-12-01 sweep of generator seeds 520-4999): a fault window stays open until
 *   every instance the fault hit is available again (or, not desired, gone): a pod deleted from an
 *   instance already down (a replacement still starting) or from a serving surge instance made
 *   nothing look unavailable at once, but the controller's recovery (ServingGroupRecreate: the
 *   whole group) or its plan from a view without the fault took more down (`hitRecovered` in
 *   src/sim/checker.ts). A scale of the groups changes the group floor: disruptions under way then
 *   are tolerated until they recover (`budgetKey`).
 * - Under a group strategy, a role surge instance a RoleRollingUpdate re-recorded at a newer update
 *   that left its role alone, its pods at the older label, is at its record, not being replaced
 *   (`computeState`): counted as being replaced, every group it carried looked unavailable and got
 *   a free permit at once.
 * - A replacement waiting for capacity frees surge units still starting and stops new surge, also
 *   while old units wait for their permits (`surgeCount`): in an exactly full cluster the starting
 *   surge units had taken its GPUs for good; found with faults too (a node outage, then
 *   replacements and a surge group each placed in part without gang placement), and with
 *   coordination (a serving surge decode kept for an old decode whose permit maxSkew withheld
 *   until the starved replacement progressed). GPUs are one pool: a replacement starved in one
 *   group frees the surge of every group (`starvedAnywhere`).
 * - A role partition raised (by a switch from InPlaceUpdate to RoleRollingUpdate) over instances
 *   already patched in place: they finish at their record (`withdrawInstancePermit`), not rebuilt
 *   at the revision their label still names.
 * - Crash images (`npm run fuzz -- --crash`, 2026-12-01): under ServingGroupRecreate, a
 *   replacement or surge instance crashing on the update's image rebuilt its whole group, taking
 *   the group's other roles down beyond their budgets on every crash, and the rebuilt old
 *   instances moved to the crashing revision on free permits, so the crash spread to every group.
 *   An instance the rollout in progress moved is now rebuilt alone (`movedByRollout` in
 *   src/core/lifecycle.ts), and the rollout stalls. With coordination, an unavailable instance
 *   left at a crashing revision after a rollback never got a start while serving surge counted as
 *   its role's full progress; it is now moved without one, as an available one is
 *   (`planRoleInGroup` in src/core/rollout.ts). A unit record outlived its unit while the unit's
 *   pods terminated, and governed the unit a scale-up then created at that ordinal (`compact`).
 * - The full fuzz (`--faults --coordination --crash --gang`, 2026-12-01, generator seeds
 *   601-1000): an update back to the current revision right after an in-place rollback, with a
 *   switch to RoleRollingUpdate, left a group record at the rolled-back revision; the permits and
 *   the surge instance at the current revision were dropped as redundant, so the group stayed at
 *   the old revision for good while the status said Converged (`compact`, `promote`). Under API
 *   faults, a relabel whose write failed for a worker while its entry's went through was never
 *   retried: the instance was judged by its entry's label (`relabelUnchanged`). Under
 *   ServingGroupRecreate, an instance an update since rolled back had moved, crashing while its
 *   move back waited, rebuilt its whole group (`movedByRollout`). A write that timed out after it was applied left no
 *   expectation, so the next plan ran on a cache without it (`orUnknown` in src/engine/executor.ts).
 * - Fuzz of 2026-12-02 (generator seeds 918100-918139): a role scaled up while a unit a surge
 *   unit had succeeded was still retired left the new desired position without a unit and the
 *   retired one waiting for a floor it was needed for; it now takes that position
 *   (`restoreRetired` in src/core/ordinals.ts).
 * - Fuzz of 2026-12-03 (generator seed 388, faults with coordination, crash and gang): a role
 *   scaled down (prefill 3 → 1, maxUnavailable 0) while the instance it kept was being rebuilt
 *   drained both serving instances beyond the spec at once, so the group served no prefill until
 *   the rebuilt one was Ready; a scale-down now keeps as many serving unwanted instances as the
 *   kept ones lack (`scaleDownRoles` in src/core/lifecycle.ts).
 * - Fuzz of 2026-12-04 (generator seed 920450, all modes with faults), a checker fix: a rollback
 *   under InPlaceUpdate was patching group 0 back when a partition over it arrived; the move under
 *   way finished one pod at a time, and partitionHolds took the instance's two role hashes for a
 *   violation before asking what it may run. Each pod's hash is now held to the hashes the
 *   instance may run (`partitionHashes` in src/sim/checker.ts), as pauseHolds holds them.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import type { ModelServingStatus } from "../src/api/schema.ts";
import { plan as corePlan } from "../src/core/plan.ts";
import type { PlanFunction } from "../src/engine/reconciler.ts";
import { fuzzChaos, fuzzScenario } from "../src/sim/fuzz.ts";
import type { FuzzOptions } from "../src/sim/fuzz.ts";
import type { SimCluster } from "../src/sim/cluster.ts";
import { runScenario } from "../src/sim/runner.ts";
import { parseScenario } from "../src/sim/scenario.ts";
import type { Scenario } from "../src/sim/scenario.ts";

const DIR = join(import.meta.dirname, "fuzz-regressions");

function load(file: string): Scenario {
  const parsed = parseScenario(JSON.parse(readFileSync(join(DIR, file), "utf8")) as unknown);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
  return parsed.scenario;
}

/** The core plan shown `change` over the stored group rollingUpdateConfiguration: a controller with a stale or wrong view. */
function showingGroupConfig(change: Record<string, unknown>): PlanFunction {
  return (observed, nowMs) => {
    const stored = observed.modelServing as {
      spec: { rolloutStrategy: { rollingUpdateConfiguration: Record<string, unknown> } };
    };
    const strategy = stored.spec.rolloutStrategy;
    const spec = {
      ...stored.spec,
      rolloutStrategy: {
        ...strategy,
        rollingUpdateConfiguration: { ...strategy.rollingUpdateConfiguration, ...change },
      },
    };
    return corePlan({ ...observed, modelServing: { ...stored, spec } }, nowMs);
  };
}

const SCENARIOS: Readonly<Record<string, string>> = {
  "group-budget-lowered.json": "the group maxUnavailable lowered from 2 to 1 while two groups are being replaced",
  "role-budget-lowered.json": "a role's maxUnavailable lowered while its instances are being replaced",
  "inplace-to-role-rolling.json": "InPlaceUpdate → RoleRollingUpdate while an in-place restart is under way",
  "inplace-to-role-rolling-scale-up.json": "as above, with two more groups in the same change",
  "surge-carries-groups-new-update.json":
    "v3 while every group serves decode only through its v2 surge instance (group maxUnavailable 2, 4 groups)",
  "surge-carries-groups-new-update-workers.json": "as above, then a workerReplicas change while the v3 surge serves",
  "held-surge-below-group-partition.json":
    "a group partition raised over a group whose decode serves only through a held surge instance",
  "group-partition-raised-over-surge-carried-groups.json":
    "a group partition raised (paused, then resumed) over three groups whose decode serves through surge instances mid-update",
  "surge-kept-for-floor-below-role-partition.json":
    "a role partition raised while the desired instances below it recover and a surge instance carries the floor",
  "starved-surge-drop-needs-group-budget.json":
    "a tight cluster: a surge instance freed for a starved replacement would take its group down while another group is disrupted",
  "pod-deleted-during-scale-down.json":
    "a pod of group 0 deleted in the instant decode is scaled from 3 to 2 with a new image, the controller seeing the patch first (scenario seed 2)",
  "surge-group-carries-groups-new-update.json":
    "ServingGroupRollingUpdate: a new update while the last one's surge group stands in for two groups being replaced (group maxUnavailable 1, maxSurge 1)",
  "surge-group-carries-group-max-unavailable-0.json":
    "as above with maxUnavailable 0 and 2 groups: the surge group stands in for group 0 being replaced",
  "role-max-surge-removed-while-surge-carries-floor.json":
    "a role's maxSurge removed while its surge instances carry the floor (failed at scenario seed 2)",
  "role-max-surge-removed-while-surge-carries-groups.json":
    "a role's maxSurge removed (its maxUnavailable raised from 0 to 2) while groups serve through its surge instances (the 2026-12-01 baseline's fuzz-10)",
  "role-max-surge-lowered-while-surge-serves.json":
    "a role's maxSurge lowered from 2 to 1 (and the group maxUnavailable from 2 to 1) while its second surge instance serves",
  "switch-to-inplace-while-role-surge-serves.json":
    "RoleRollingUpdate → InPlaceUpdate (the role's maxSurge back to 0) while role surge instances stand in for desired ones",
  "switch-to-group-rolling-while-role-surge-serves.json":
    "RoleRollingUpdate → ServingGroupRollingUpdate with a new template while role surge instances stand in for desired ones",
  "switch-to-group-rolling-after-prefill-only-update.json":
    "RoleRollingUpdate of prefill only, then ServingGroupRollingUpdate: the decode pods keep their older label",
  "switch-to-group-rolling-paused-after-prefill-only-update.json": "as above, paused across the switch and resumed",
  "switch-to-inplace-after-prefill-only-update.json":
    "RoleRollingUpdate of prefill only, a decode update, then InPlaceUpdate with pod deletions: the decode pods keep their older label (the new generator's fuzz-201)",
  "starved-replacements-free-starting-surge-group.json":
    "a tight cluster, InPlaceUpdate → ServingGroupRollingUpdate with maxSurge 1 after a pod deletion: both desired groups wait for the GPUs the surge group took while it still starts",
  "partition-raised-over-draining-group.json":
    "a group partition raised (with a new update) over a group whose replacement is still draining",
  "partition-raised-over-group-patched-in-place.json":
    "a group partition raised in place over a group already patched, not yet verified",
  "role-partition-raised-over-draining-instance.json":
    "a role partition raised under RoleRollingUpdate over an instance whose replacement is still draining",
  "group-above-lowered-replicas-scaled-up-in-place.json":
    "InPlaceUpdate, 4 groups, a pod deleted, then in one instant a new image, replicas 3 and decode scaled from 1 to 3: group 3, serving nothing under the new shape, is scaled down, not built up beyond replicas (the 2026-12-01 generator's fuzz-390)",
  "switch-to-group-rolling-alone-after-decode-only-update.json":
    "RoleRollingUpdate of decode only (workers), prefill scaled up, then a switch to ServingGroupRollingUpdate alone: the prefill pods, at an older label with the same role spec, are relabelled (fuzz-409)",
  "partition-raised-over-group-moved-in-part.json":
    "a group partition raised (with router traffic) over a group whose prefill is already rebuilt at the update revision while its decode still drains (hand-made, not fuzz-found)",
  "surge-group-placed-in-part-after-node-outage.json":
    "a tight cluster, ServingGroupRollingUpdate maxUnavailable 2 maxSurge 1: a node outage, then a new image as it recovers; two replacements and the surge group each get 2 of 3 GPUs (fuzz-faults-53)",
  "pod-of-starting-instance-deleted-group-recreated.json":
    "ServingGroupRecreate, RoleRollingUpdate with coordination: a pod of a decode replacement still starting is deleted, with a decode scale-up and new image in the same instant, while surge decode serves; group 0 is rebuilt whole (fuzz-faults-coordinated-235)",
  "surge-in-one-group-starves-replacement-in-another.json":
    "an exactly full cluster, RoleRollingUpdate with prefill maxSurge 2 and coordination, after a node outage and pod deletions: serving prefill surge in groups 1-2 held the GPUs group 3's permitted replacements waited for (fuzz-faults-coordinated-34)",
  "coordinated-surge-serving-while-replacement-starves.json":
    "a full cluster (12 GPUs), RoleRollingUpdate, decode maxSurge 1 with maxSkew 25% and decode dependsOn prefill: the decode replacements starve (gang of 2) while a surge decode serves and the old decode waits for the skew quota (fuzz-coordinated-69)",
  "pod-deleted-from-starting-replacement-group-recreate.json":
    "ServingGroupRecreate under RoleRollingUpdate: a pod deleted from a decode instance whose replacement still starts, its group kept available by a surge instance; the controller recreated the whole group, prefill included (fuzz-811), and now rebuilds only the decode instance, which the rollout moved",
  "pod-deleted-from-starting-replacement-group-recreate-workers.json":
    "as above, the deleted pod a worker of a prefill instance still starting (fuzz-771, failed only at scenario seed 2); likewise only that instance is rebuilt now",
  "pod-deleted-while-role-scaled-down-within-max-surge.json":
    "a pod of group 0 deleted in the instant prefill is scaled from 2 to 1 (maxSurge 1) with a new image, the controller seeing the patch first and retiring two other groups (fuzz-1153)",
  "pod-deleted-from-serving-surge-as-rollout-resumes.json":
    "a paused RoleRollingUpdate resumed in the instant the serving prefill surge instance of group 0 is deleted, the controller seeing the resume first and retiring the desired prefill the surge backed (fuzz-4171, failed only at scenario seed 2)",
  "groups-scaled-up-while-group-retires.json":
    "ServingGroupRollingUpdate with maxUnavailable 0 and maxSurge 2: replicas raised from 4 to 5 while group 2, backed by a surge group, is already being deleted (fuzz-1066 with 8 nodes instead of 7, where the rollout waits for capacity)",
  "switch-to-inplace-while-re-recorded-role-surge-serves.json":
    "RoleRollingUpdate of decode then of prefill (decode's surge instances re-recorded at the second update, their pods keeping the first's label), then InPlaceUpdate with the group maxUnavailable 1 while those surge instances carry every group (fuzz-2180)",
  "replacement-starved-by-starting-surge-groups.json":
    "ServingGroupRollingUpdate with maxUnavailable 1 and maxSurge 2 in a cluster exactly full: the permitted group's replacement waits for the GPUs two surge groups still starting took, while old groups wait for their permits (fuzz-4145)",
  "role-partition-raised-over-instances-patched-in-place.json":
    "InPlaceUpdate of prefill whose pods are patched, not yet verified, when a switch to RoleRollingUpdate raises prefill's partition over them (fuzz-10979)",
  "crashing-replacement-group-recreate.json":
    "ServingGroupRecreate under RoleRollingUpdate (prefill maxUnavailable 0): decode moved to an image that crashes, then patched back; each crash of a replacement rebuilt its whole group, prefill included (fuzz-crash-38)",
  "crashing-surge-group-recreate.json":
    "ServingGroupRecreate under RoleRollingUpdate, 3 groups, group maxUnavailable 1, decode maxSurge 1: the surge decode of every group crashes, then a rollback; each crash rebuilt its whole group, and the rebuilt old instances took the crashing revision on free permits (fuzz-crash-30)",
  "crash-surge-record-outlives-terminating-pods.json":
    "a canary crash (group partition 3 of 4, decode maxUnavailable 0 and maxSurge 1) rolled back while group 3's crashing surge decode-1 terminated; its record of the crash revision was kept for its terminating pods, and a paused scale-up of decode to 2 rebuilt decode-1 on the crash image until unpaused (fuzz-crash-gang-435, cut after the wait that failed; the full run ends in a capacity wait)",
  "update-back-to-current-after-in-place-rollback.json":
    "InPlaceUpdate rolled back (decode d:v2 → d:v1, group 0 recorded at the rollback's revision) and, in the instant its pods are relabelled, patched back to d:v2 with a switch to RoleRollingUpdate (decode maxSurge 1), then a node outage; the group stayed on d:v1 behind its record while the status said Converged (fuzz-faults-coordinated-crash-gang-925, without API faults)",
  "crashing-instance-behind-surge-full-progress.json":
    "RoleRollingUpdate with coordination (maxSkew 10%, decode dependsOn prefill), prefill maxUnavailable 0 and maxSurge 1: mid-update, both roles moved to images that crash, then a rollback; prefill-2, moved to the crash while it was down, kept crashing there: the coordinator counted the serving surge as prefill's full progress and never gave it a start (fuzz-faults-coordinated-crash-gang-157)",
  "role-scaled-up-over-retired-unit.json":
    "RoleRollingUpdate, prefill maxUnavailable 0 and maxSurge 1: prefill scaled from 1 to 2 with the group partition raised to 3 while groups 0-2 each still held the prefill unit a surge unit had succeeded; the retired unit waited for the floor of 2, the floor for the position it held, while the status said Converged (fuzz-918128; a retired unit now goes back to a desired position that has none: `restoreRetired` in src/core/ordinals.ts)",
};

/**
 * Fault fuzz runs (`npm run fuzz -- --faults`) that failed, run as the generator makes them today,
 * API errors and watch drops included. A generator change can make a seed another scenario: the
 * one that failed first is then kept as a file in SCENARIOS (without the API faults).
 */
const FAULT_RUNS: readonly {
  readonly generatorSeed: number;
  readonly seed: number;
  readonly modes?: Omit<FuzzOptions, "faults">;
  /** The run ends in this wait, which its Progressing message names (the scenario cannot finish). */
  readonly waits?: RegExp;
  readonly what: string;
}[] = [
  {
    generatorSeed: 53,
    seed: 1,
    what: "after a node outage, two surge groups each placed in part, neither able to start (maxSurge 2, room for one; first found as replacements and a surge group placed in part, before router traffic joined the generator: surge-group-placed-in-part-after-node-outage.json)",
  },
  {
    generatorSeed: 920,
    seed: 1,
    modes: { coordination: true, crash: true, gang: true },
    what: "ServingGroupRollingUpdate, a prefill crash rolled back: the decode pods, relabelled at the crash revision and back, lost the worker's relabel to an API error while the entry's went through, and kept the crash revision's label for good (also fuzz-faults-coordinated-crash-gang-637)",
  },
  {
    generatorSeed: 2229,
    seed: 4,
    modes: { coordination: true, crash: true, gang: true },
    what: "ServingGroupRecreate, RoleRollingUpdate with decode dependsOn prefill: a decode canary on a crashing image rolled back; its surge decode, still crashing while the dependency gate held its move back, failed, and the whole group was rebuilt, decode's last available instance with it (roleBudget)",
  },
  {
    generatorSeed: 242,
    seed: 5,
    modes: { coordination: true, crash: true, gang: true },
    waits:
      /maxUnavailable 0: waiting for updated units to become Ready or for surge capacity \(maxSurge 1\); 4 pod\(s\) of group\(s\) 1 cannot be scheduled: add capacity for them/,
    what: "one full node, ServingGroupRollingUpdate switched to maxUnavailable 0 as the last pod's gate opens: the gate write timed out after it was applied, the next plan saw the pod not serving and replaced the whole group for free (groupBudget); now it waits for room for the surge group",
  },
  {
    generatorSeed: 740182,
    seed: 2,
    modes: { coordination: true, crash: true, gang: true },
    what: "a paused rollout with a new image and a lower replicas after a node outage: a group left above the new replicas counted as existing surge and was rebuilt at the update revision while paused, below the partition (partitionHolds; the issue's pause-scale reproduction is test/paused.sim.test.ts)",
  },
  {
    generatorSeed: 810262,
    seed: 2,
    what: "ServingGroupRollingUpdate with maxUnavailable 0, one group: the group, down with its node, got a free permit for a new image, served again before its pod could go (the finalizer's release before the deletion failed under API faults), and was replaced while the surge group still started (groupBudget); its permit now lapses until the budget allows it",
  },
  {
    generatorSeed: 820059,
    seed: 2,
    what: "a checker fix: paused while a surge group (at the update revision) served; it was scaled down, and a scale-up while still paused rebuilt group 2 as a desired group at the current revision, which pauseHolds took for a move (a unit without live pods is now forgotten and held to its record at the pause)",
  },
  {
    generatorSeed: 830135,
    seed: 1,
    modes: { crash: true, gang: true },
    what: "ServingGroupRecreate, a decode instance of 2 pods being replaced (its first pod already deleted by the controller) when a rollback undid its move: the half-deleted instance counted as failed and its whole group was rebuilt below the role budget (roleBudget); an instance the controller emptied itself is now rebuilt alone, only a failed or lost pod rebuilds the group",
  },
  {
    generatorSeed: 840168,
    seed: 2,
    what: "a checker fix: InPlaceUpdate paused while a decode instance was mid-patch (its worker patched, its entry not yet): pauseHolds took the instance's two role hashes for a violation; it now holds each pod to what it ran at the pause or the move its record named then",
  },
  {
    generatorSeed: 910001,
    seed: 1,
    what: "a harness fix: ServingGroupRollingUpdate with maxSurge 1, an update rolled back; the surge group 2 had succeeded group 0 (group position 0 carried ordinal 2), so the generator's deletion by tandem.dev/group=0 matched no pod; it now names the first group by position (groupPosition 0)",
  },
  {
    generatorSeed: 910035,
    seed: 1,
    what: "RoleRecreate, prefill maxUnavailable 0: after a node outage a prefill pod restarted; its recovery's release went through and its deletion failed under API faults, and the retry, planned on a cache that lagged the pod becoming Ready, deleted it 31 ms after it served again (roleBudget); a recovery deletion now requires the resourceVersion its verdict saw",
  },
  {
    generatorSeed: 920450,
    seed: 1,
    modes: { coordination: true, crash: true, gang: true },
    what: "a checker fix: InPlaceUpdate, a rollback patching group 0's decode back (worker first) when a partition over groups 0-2 arrived; the move under way finished, and partitionHolds took the instance's two role hashes for a violation; it now holds each hash to what the instance may run (what it ran, or the move its record named then)",
  },
  {
    generatorSeed: 388,
    seed: 1,
    modes: { coordination: true, crash: true, gang: true },
    what: "ServingGroupRollingUpdate, maxUnavailable 0 and maxSurge 2: prefill scaled 3 → 1 while group 3's prefill-0 was being rebuilt by the rollout; prefill-1 and prefill-2, both serving, were drained at once and the group had no Ready prefill (groupBudget); the scale-down now keeps one until prefill-0 is Ready",
  },
];

describe("fuzz-found scenarios, fixed", () => {
  for (const [file, what] of Object.entries(SCENARIOS)) {
    it(`${what}: the rollout completes and every invariant holds (${file})`, async () => {
      // At the scenario's own seed (1 unless the file says otherwise): some failed only at another.
      const report = await runScenario(load(file));
      assert.deepEqual(
        report.invariants.filter((result) => result.violations > 0),
        [],
      );
      assert.equal(report.verdict, "pass", JSON.stringify(report.steps.filter((step) => !step.ok)));
    });
  }

  for (const { generatorSeed, seed, modes, waits, what } of FAULT_RUNS) {
    const ends = waits === undefined ? "the rollout completes" : "it ends in the wait its status names";
    it(`with faults, ${what}: ${ends} and every invariant holds (generator seed ${generatorSeed}${modes === undefined ? "" : ` with ${Object.keys(modes).join(", ")}`}, seed ${seed})`, async () => {
      const parsed = parseScenario(fuzzScenario(generatorSeed, { ...modes, faults: true }));
      assert.ok(parsed.ok);
      const report = await runScenario(parsed.scenario, { seed, chaos: fuzzChaos(parsed.scenario) });
      assert.deepEqual(
        report.invariants.filter((result) => result.violations > 0),
        [],
      );
      if (waits === undefined) {
        assert.equal(report.verdict, "pass", JSON.stringify(report.steps.filter((step) => !step.ok)));
      } else {
        const conditions = (report.final.status as ModelServingStatus | null)?.conditions ?? [];
        assert.match(conditions.find((condition) => condition.type === "Progressing")?.message ?? "", waits);
      }
    });
  }

  it("while the moved decode instances crash, the status says the rollout waits for them, names the crash loop and says to fix the image or roll back (crashing-replacement-group-recreate.json)", async () => {
    let cluster: SimCluster | undefined;
    const conditions: Record<string, string>[] = [];
    await runScenario(load("crashing-replacement-group-recreate.json"), {
      observer: {
        attach: (attached) => (cluster = attached),
        stepEnded: (record) => {
          // Step 3 is the wait of 180 s on the crashing image.
          const stored = cluster?.server.peek({ kind: "ModelServing", namespace: "default", name: "m" }) as
            { status?: { conditions?: Record<string, string>[] } } | undefined;
          if (record.index === 3) conditions.push(...(stored?.status?.conditions ?? []));
        },
      },
    });
    const progressing = conditions.find((condition) => condition["type"] === "Progressing");
    assert.equal(progressing?.["status"], "True");
    assert.match(
      progressing["message"] ?? "",
      /decode-0 of group 0: m-0-decode-0-0 CrashLoopBackOff; decode-0 of group 1: m-1-decode-0-0 CrashLoopBackOff\. A pod keeps crashing \(CrashLoopBackOff\): fix its image or configuration, or roll back if an update brought it \(tandem rollout undo\)\.$/,
    );
  });

  it("paces a rollout by its 5 s drain timeout, not the 30 s resync: the controller's clock gives timers due times it can compare with now", async () => {
    // Regression: due times counted from virtual 0 and now from the epoch, so the work queue never
    // saw a requeue as sooner than one already pending, and each drain ended at the next resync.
    const report = await runScenario(load("role-partition-raised-over-draining-instance.json"));
    const deletedAtSeconds = [
      ...new Set(report.events.filter((event) => event.type === "PodDeleted").map((event) => event.t)),
    ];
    const gapsSeconds = deletedAtSeconds.slice(1).map((t, index) => t - (deletedAtSeconds[index] ?? t));
    assert.ok(
      gapsSeconds.length >= 4 && gapsSeconds.every((gap) => gap < 20),
      `seconds between deletions: ${gapsSeconds.join(", ")}`,
    );
  });

  it("catches a controller blind to a partition raised mid-rollout: the group ends on neither the revision it ran nor the one its record named then", async () => {
    // The controller is shown partition 0 throughout: group 0, whose move to v2 was under way when
    // the partition came (with v3), is moved on to v3.
    const report = await runScenario(load("partition-raised-over-draining-group.json"), {
      seed: 1,
      plan: showingGroupConfig({ partition: 0 }),
    });
    const partition = report.invariants.find((result) => result.name === "partitionHolds");
    assert.ok((partition?.violations ?? 0) > 0);
    assert.match(
      partition?.first?.message ?? "",
      /^m 0\/decode-0 is below the partition and ran role hash \w+ \(or, finishing the move under way when the partition came, \w+\), now \w+$/,
    );
  });

  it("catches a controller that keeps planning with the budget it had before the change", async () => {
    // The controller is shown maxUnavailable 2 throughout: after the change to 1 it goes on
    // replacing two groups at a time, beyond what was under way at the change.
    const report = await runScenario(load("group-budget-lowered.json"), {
      seed: 1,
      plan: showingGroupConfig({ maxUnavailable: 2 }),
    });
    assert.equal(report.verdict, "fail");
    const budget = report.invariants.find((result) => result.name === "groupBudget");
    assert.ok((budget?.violations ?? 0) > 0);
    assert.match(
      budget?.first?.message ?? "",
      /^m: 2 ServingGroup\(s\) unavailable \(groups \d, \d\) with maxUnavailable 1$/,
    );
  });

  it("catches a controller that keeps surging with the maxSurge it had before the change", async () => {
    // The controller is shown prefill maxSurge 1 throughout: after its removal it goes on creating
    // surge instances, beyond those that were there at the change (which are tolerated).
    const stale: PlanFunction = (observed, nowMs) => {
      const stored = observed.modelServing as { spec: { template: { roles: Record<string, unknown>[] } } };
      const roles = stored.spec.template.roles.map((role) =>
        role["name"] === "prefill" ? { ...role, maxSurge: 1 } : role,
      );
      return corePlan(
        {
          ...observed,
          modelServing: { ...stored, spec: { ...stored.spec, template: { ...stored.spec.template, roles } } },
        },
        nowMs,
      );
    };
    const report = await runScenario(load("role-max-surge-removed-while-surge-carries-floor.json"), {
      seed: 1,
      plan: stale,
    });
    const surge = report.invariants.find((result) => result.name === "surgeBound");
    assert.ok((surge?.violations ?? 0) > 0, JSON.stringify(report.invariants));
    assert.match(surge?.first?.message ?? "", /^m: prefill-3 of group \d exists beyond replicas \+ maxSurge = 3$/);
  });
});
