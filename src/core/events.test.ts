import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ModelServingStatus } from "../api/schema.ts";
import type { Action } from "./actions.ts";
import { EVENT_TYPES, rolloutEvents } from "./events.ts";
import { plan } from "./plan.ts";
import { apply, converge, deleteByOthers, idealCluster, observe } from "../../test/ideal-cluster.ts";
import type { IdealCluster } from "../../test/ideal-cluster.ts";

const NOW = Date.parse("2026-11-30T01:00:00Z");

const pod = (image: string) => ({ spec: { containers: [{ name: "vllm", image }] } });

function manifest(spec: Record<string, unknown> = {}) {
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "llm" },
    spec: {
      replicas: 2,
      drain: { timeoutSeconds: 60 },
      template: {
        roles: [
          {
            name: "decode",
            replicas: 1,
            workerReplicas: 1,
            entryTemplate: pod("vllm:v1"),
            workerTemplate: pod("vllm:v1"),
          },
        ],
      },
      ...spec,
    },
  };
}

type Event = Extract<Action, { type: "RecordEvent" }>;
const eventsOf = (actions: readonly Action[]): Event[] => actions.filter((a): a is Event => a.type === "RecordEvent");
const reasons = (actions: readonly Action[]) => eventsOf(actions).map((event) => event.reason);

/** Plans and applies one round at `nowMs`, the router first acking every marked entry when `ack`. */
function round(cluster: IdealCluster, nowMs: number, ack = true): readonly Action[] {
  if (ack) {
    for (const p of cluster.pods.values()) {
      const annotations = p.metadata.annotations ?? {};
      if (annotations["tandem.dev/draining"] !== undefined && p.metadata.labels?.["tandem.dev/entry"] === "true")
        p.metadata.annotations = { ...annotations, "drained.tandem.dev/router-a": "true" };
    }
  }
  const { actions } = plan(observe(cluster), nowMs);
  apply(cluster, actions);
  return actions;
}

/** Rounds one second apart until a plan is empty; every action. */
function settle(cluster: IdealCluster, startMs: number, ack = true): Action[] {
  const all: Action[] = [];
  for (let i = 0; i < 60; i++) {
    const actions = round(cluster, startMs + i * 1000, ack);
    if (actions.length === 0) return all;
    all.push(...actions);
  }
  throw new Error("no convergence");
}

/** Converged, with router-a (and `routers`) live throughout, scope `*`. */
function converged(spec: Record<string, unknown> = {}, routers: readonly string[] = ["router-a"]): IdealCluster {
  const cluster = idealCluster(manifest(spec));
  cluster.routers = routers.map((id) => ({ id, scope: { all: true }, liveUntilMs: Infinity }));
  converge(cluster, NOW);
  return cluster;
}

function bump(cluster: IdealCluster): void {
  cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
}

function setImage(cluster: IdealCluster, image: string): void {
  const role = cluster.modelServing.spec.template.roles[0];
  role.entryTemplate = pod(image);
  role.workerTemplate = pod(image);
  bump(cluster);
}

describe("events: one per controller action, on transitions only", () => {
  it("every reason has one fixed type; DrainTimeout, InPlaceVerifyFailed, Recovering and RecreateRejected are Warnings", () => {
    assert.deepEqual(
      Object.entries(EVENT_TYPES)
        .filter(([, type]) => type === "Warning")
        .map(([reason]) => reason),
      ["DrainTimeout", "InPlaceVerifyFailed", "Recovering", "RecreateRejected"],
    );
    for (const event of eventsOf(settle(idealCluster(manifest()), NOW)))
      assert.equal(event.eventType, EVENT_TYPES[event.reason]);
  });

  it("a new ModelServing: one InstanceCreated per instance (scale-up), no rollout event; a converged plan, none", () => {
    const cluster = idealCluster(manifest());
    const first = plan(observe(cluster), NOW).actions;
    const created = first.find((a) => a.type === "CreateRevision");
    assert.ok(created?.type === "CreateRevision");
    const revision = created.revision.metadata.name;
    assert.deepEqual(
      eventsOf(first).map((e) => e.message),
      [
        `Creating decode-0 of group 0 at revision ${revision} (scale-up).`,
        `Creating decode-0 of group 1 at revision ${revision} (scale-up).`,
      ],
    );
    apply(cluster, first);
    converge(cluster, NOW);
    assert.deepEqual(
      plan(observe(cluster), NOW + 3_600_000).actions,
      [],
      "a restarted controller over a converged system: no write, no event",
    );
  });

  it("scale-down with the router's confirmation: DrainStarted, then DrainConfirmed and InstanceDeleted once", () => {
    const cluster = converged();
    cluster.modelServing.spec.replicas = 1;
    bump(cluster);
    const start = round(cluster, NOW, false);
    assert.deepEqual(reasons(start), ["DrainStarted"]);
    assert.match(
      eventsOf(start)[0]!.message,
      /^Draining group 1 \(scale-down\): pod\(s\) llm-1-decode-0-0, llm-1-decode-0-1 out of traffic; waiting up to 60s for router\(s\) router-a to confirm before deleting\.$/,
    );
    assert.deepEqual(reasons(round(cluster, NOW + 1_000, false)), [], "waiting is no event");
    const done = round(cluster, NOW + 2_000);
    assert.deepEqual(reasons(done), ["DrainConfirmed", "InstanceDeleted"]);
    assert.equal(
      eventsOf(done)[0]!.message,
      "Drained group 1 (scale-down): router(s) router-a confirmed pod(s) llm-1-decode-0-0; deleting.",
    );
    assert.match(
      eventsOf(done)[1]!.message,
      /^Deleting group 1 \(scale-down\): pod\(s\) llm-1-decode-0-0, llm-1-decode-0-1\.$/,
    );
    assert.deepEqual(reasons(settle(cluster, NOW + 3_000)), []);
  });

  it("a drain nobody confirms: DrainTimeout (a Warning naming the pods) with the deletion", () => {
    const cluster = converged();
    cluster.modelServing.spec.replicas = 1;
    bump(cluster);
    round(cluster, NOW, false);
    const late = round(cluster, NOW + 60_000, false);
    assert.deepEqual(reasons(late), ["DrainTimeout", "InstanceDeleted"]);
    assert.equal(eventsOf(late)[0]!.eventType, "Warning");
    assert.match(
      eventsOf(late)[0]!.message,
      /^Drain of group 1 \(scale-down\) timed out after 60s: router\(s\) router-a did not confirm pod\(s\) llm-1-decode-0-0; deleting anyway/,
    );
  });

  it("names the routers that did not confirm when the drain times out, not those that did", () => {
    const cluster = converged({}, ["router-a", "router-b"]);
    cluster.modelServing.spec.replicas = 1;
    bump(cluster);
    round(cluster, NOW, false);
    const entry = cluster.pods.get("llm-1-decode-0-0")!;
    entry.metadata.annotations = { ...entry.metadata.annotations, "drained.tandem.dev/router-b": "true" };
    assert.deepEqual(reasons(round(cluster, NOW + 30_000, false)), [], "router-a has not confirmed");
    assert.match(
      eventsOf(round(cluster, NOW + 60_000, false))[0]!.message,
      /timed out after 60s: router\(s\) router-a did not confirm pod\(s\) llm-1-decode-0-0;/,
    );
  });

  it("no live router: the settle is the whole wait, and DrainConfirmed says so", () => {
    const cluster = converged({}, []);
    cluster.modelServing.spec.replicas = 1;
    bump(cluster);
    assert.match(
      eventsOf(round(cluster, NOW, false))[0]!.message,
      /out of traffic; no live router routes its namespace: waiting 2s before deleting\.$/,
    );
    assert.deepEqual(reasons(round(cluster, NOW + 1_999, false)), []);
    const done = round(cluster, NOW + 2_000, false);
    assert.deepEqual(reasons(done), ["DrainConfirmed", "InstanceDeleted"]);
    assert.equal(
      eventsOf(done)[0]!.message,
      "Drained group 1 (scale-down): no live router routes its namespace, and the settle after the mark is over; deleting.",
    );
  });

  it("no drain (timeoutSeconds 0): only InstanceDeleted", () => {
    const cluster = converged({ drain: { timeoutSeconds: 0 } });
    cluster.modelServing.spec.replicas = 1;
    bump(cluster);
    assert.deepEqual(reasons(round(cluster, NOW)), ["InstanceDeleted"]);
  });

  it("a rolling update: RolloutStarted once, each group drained, deleted and created for the rollout, RolloutCompleted once", () => {
    const cluster = converged();
    const from = cluster.modelServing.status.currentRevision;
    setImage(cluster, "vllm:v2");
    const events = eventsOf(settle(cluster, NOW));
    const to = cluster.modelServing.status.updateRevision;
    assert.deepEqual(
      events.map((e) => e.reason),
      [
        "RolloutStarted",
        "DrainStarted",
        "DrainConfirmed",
        "InstanceDeleted",
        "InstanceCreated",
        "DrainStarted",
        "DrainConfirmed",
        "InstanceDeleted",
        "InstanceCreated",
        "RolloutCompleted",
      ],
    );
    assert.equal(events[0]!.message, `Rolling out revision ${to} (current revision ${from}).`);
    assert.match(events[3]!.message, new RegExp(`^Deleting decode-0 of group 1 \\(replacing ${from} with ${to}\\)`));
    assert.equal(
      events[4]!.message,
      `Creating decode-0 of group 1 at revision ${to} (replacement for the rollout to ${to}).`,
    );
    assert.equal(
      events.at(-1)!.message,
      `Every unit runs revision ${to}; it is now the current revision (was ${from}).`,
    );
    assert.deepEqual(plan(observe(cluster), NOW + 3_600_000).actions, []);
  });

  it("with maxSurge: the surge group is created as surge, and the group it succeeds is deleted as such", () => {
    const cluster = converged({ rolloutStrategy: { rollingUpdateConfiguration: { maxSurge: 1, maxUnavailable: 0 } } });
    setImage(cluster, "vllm:v2");
    const messages = eventsOf(settle(cluster, NOW)).map((e) => `${e.reason}: ${e.message}`);
    assert.ok(
      messages.some((m) =>
        /^InstanceCreated: Creating decode-0 of group 2 at revision \S+ \(surge for the rollout to \S+\)\.$/.test(m),
      ),
      messages.join("\n"),
    );
    assert.ok(
      // The surge group succeeds an old one; the old one goes as surplus (docs/design/succession.md).
      messages.some((m) => /^InstanceDeleted: Deleting group [01] \(succeeded by a surge group\)/.test(m)),
      messages.join("\n"),
    );
  });

  it("tandem rollout undo (the spec back to an older revision): RolledBack, not RolloutStarted", () => {
    const cluster = converged();
    const first = cluster.modelServing.status.currentRevision;
    setImage(cluster, "vllm:v2");
    settle(cluster, NOW);
    setImage(cluster, "vllm:v1");
    const events = eventsOf(settle(cluster, NOW + 100_000));
    assert.equal(events[0]!.reason, "RolledBack");
    assert.match(
      events[0]!.message,
      new RegExp(`^Rolling back to the spec of revision ${first} \\(now number 3\\) from `),
    );
    assert.ok(!events.some((e) => e.reason === "RolloutStarted"));
    assert.equal(events.at(-1)!.reason, "RolloutCompleted");
  });

  it("a paused rollout announces the pause once: a recovery while paused brings the reason back without a second RolloutPaused", () => {
    const cluster = converged();
    cluster.modelServing.spec.rolloutStrategy = { paused: true };
    setImage(cluster, "vllm:v2");
    assert.deepEqual(
      reasons(settle(cluster, NOW + 100_000)).filter((r) => r.startsWith("Rollout")),
      ["RolloutStarted", "RolloutPaused"],
    );
    deleteByOthers(cluster, "llm-1-decode-0-1");
    const recovery = reasons(settle(cluster, NOW + 200_000));
    assert.ok(recovery.includes("Recovering"), recovery.join(", "));
    assert.deepEqual(
      recovery.filter((r) => r.startsWith("Rollout")),
      [],
      "still the same pause: nothing to announce",
    );
    const progressing = cluster.modelServing.status.conditions.find((c: any) => c.type === "Progressing");
    assert.equal(progressing.reason, "RolloutPaused", "the status shows the pause again");
  });

  it("recovery names its policy; the rebuilt instance is created for want of its pods", () => {
    const cluster = converged({ recoveryPolicy: "RoleRecreate" });
    cluster.pods.delete("llm-1-decode-0-0");
    const actions = settle(cluster, NOW);
    const events = eventsOf(actions);
    assert.deepEqual(
      events.map((e) => e.reason),
      ["Recovering", "InstanceCreated"],
    );
    assert.equal(events[0]!.eventType, "Warning");
    assert.equal(
      events[0]!.message,
      "recoveryPolicy RoleRecreate: decode-0 of group 1 failed (lost pod 0); rebuilding the instance; deleting pod(s) llm-1-decode-0-1.",
    );
    assert.match(
      events[1]!.message,
      /^Creating decode-0 of group 1 at revision \S+ \(its earlier pods are gone: lost, recovered, or replaced by a rollout back to this revision\)\.$/,
    );
  });

  it("ServingGroupRecreate says so", () => {
    const cluster = converged({ recoveryPolicy: "ServingGroupRecreate" });
    // Deleted by someone else: the tracking finalizer keeps it, terminating (lost).
    cluster.pods.get("llm-0-decode-0-1")!.metadata.deletionTimestamp = "2026-11-30T00:59:00Z";
    assert.match(
      eventsOf(round(cluster, NOW))[0]!.message,
      /^recoveryPolicy ServingGroupRecreate: group 0 failed \(decode-0: lost llm-0-decode-0-1\); rebuilding the group; deleting pod\(s\) llm-0-decode-0-0\.$/,
    );
  });
});

describe("events: in place", () => {
  it("InPlacePatched, InPlaceUpdated; a bad image InPlaceVerifyFailed once; a new image over it InPlaceTakeover", () => {
    const cluster = converged({ replicas: 1, rolloutStrategy: { type: "InPlaceUpdate" } });
    setImage(cluster, "vllm:v2");
    const good = eventsOf(settle(cluster, NOW));
    assert.deepEqual(
      good.map((e) => e.reason),
      ["RolloutStarted", "DrainStarted", "DrainConfirmed", "InPlacePatched", "InPlaceUpdated", "RolloutCompleted"],
    );
    assert.match(
      good[3]!.message,
      /^Patching decode-0 of group 0 in place to revision \S+: pod\(s\) llm-0-decode-0-0, llm-0-decode-0-1 \(vllm=vllm:v2\); verifying/,
    );
    assert.match(
      good[4]!.message,
      /^Updated decode-0 of group 0 in place to revision \S+: pod\(s\) llm-0-decode-0-0, llm-0-decode-0-1 verified on the new images; back in traffic\.$/,
    );
    cluster.badImages.add("vllm:bad");
    setImage(cluster, "vllm:bad");
    const bad = eventsOf(settle(cluster, NOW + 100_000));
    assert.deepEqual(
      bad.map((e) => e.reason),
      [
        "RolloutStarted",
        "DrainStarted",
        "DrainConfirmed",
        "InPlacePatched",
        "InPlaceVerifyFailed",
        "InPlaceVerifyFailed",
      ],
    );
    assert.deepEqual(
      bad.slice(-2).map((e) => e.pod),
      ["llm-0-decode-0-0", "llm-0-decode-0-1"],
      "regarding each stalled pod",
    );
    setImage(cluster, "vllm:v3");
    const fixed = eventsOf(settle(cluster, NOW + 200_000));
    assert.deepEqual(
      fixed.map((e) => e.reason),
      ["RolloutStarted", "InPlaceTakeover", "InPlaceUpdated", "RolloutCompleted"],
    );
    assert.match(
      fixed[1]!.message,
      /^Patching decode-0 of group 0 in place again, to revision \S+, taking over from the update to \S+ \(Stalled\): /,
    );
  });
});

describe("events: rollout transitions from the stored status", () => {
  const progressing = (reason: string) => ({ type: "Progressing", status: "True" as const, reason, message: "" });
  const status = (current: string, update: string, reason = "Reconciling"): ModelServingStatus => ({
    currentRevision: current,
    updateRevision: update,
    conditions: [progressing(reason)],
  });
  const none = { paused: false, rolledBack: undefined };
  const of = (actions: readonly Action[]) => reasons(actions);

  it("paused and resumed follow the Progressing condition's RolloutPaused reason, once each", () => {
    assert.deepEqual(
      of(rolloutEvents(status("a", "b"), status("a", "b", "RolloutPaused"), { ...none, paused: true })),
      ["RolloutPaused"],
    );
    assert.deepEqual(
      of(
        rolloutEvents(status("a", "b", "RolloutPaused"), status("a", "b", "RolloutPaused"), { ...none, paused: true }),
      ),
      [],
      "paused is a state: no event while it lasts",
    );
    assert.deepEqual(of(rolloutEvents(status("a", "b", "RolloutPaused"), status("a", "b"), none)), ["RolloutResumed"]);
    assert.deepEqual(
      of(rolloutEvents(status("a", "b", "RolloutPaused"), status("a", "b", "Converged"), { ...none, paused: true })),
      [],
      "still paused in the spec: not resumed",
    );
  });

  it("a pause is announced once: work done while paused (a recovery) gives the reason back without a second RolloutPaused", () => {
    const at = (generation: number, current: string, update: string, reason: string): ModelServingStatus => ({
      ...status(current, update, reason),
      observedGeneration: generation,
    });
    const paused = { ...none, paused: true };
    assert.deepEqual(of(rolloutEvents(at(2, "a", "b", "RolloutPaused"), at(2, "a", "b", "Reconciling"), paused)), []);
    assert.deepEqual(
      of(rolloutEvents(at(2, "a", "b", "Reconciling"), at(2, "a", "b", "RolloutPaused"), paused)),
      [],
      "the same paused spec (generation, update revision) as the status before: the pause was announced when it began",
    );
    assert.deepEqual(
      of(rolloutEvents(at(1, "a", "a", "Converged"), at(2, "a", "b", "Reconciling"), paused)),
      ["RolloutStarted", "RolloutPaused"],
      "a paused spec first observed while other work runs: the pause begins there",
    );
    assert.deepEqual(
      of(rolloutEvents(at(1, "a", "b", "RolloutPaused"), at(2, "a", "b", "RolloutPaused"), paused)),
      [],
      "still shown paused: no event",
    );
    assert.deepEqual(
      of(rolloutEvents(at(1, "a", "a", "Converged"), at(2, "a", "a", "Converged"), paused)),
      [],
      "paused with nothing to roll out: nothing to announce",
    );
  });

  it("started, superseded and completed follow the revisions; equal statuses give nothing", () => {
    assert.deepEqual(of(rolloutEvents(status("a", "a"), status("a", "a"), none)), []);
    assert.deepEqual(of(rolloutEvents({}, status("a", "a"), none)), [], "a new ModelServing starts no rollout");
    const superseded = rolloutEvents(status("a", "b"), status("a", "c"), none);
    assert.deepEqual(of(superseded), ["RolloutStarted"]);
    assert.match(eventsOf(superseded)[0]!.message, /replaces the rollout to b, which had not completed/);
    assert.deepEqual(of(rolloutEvents(status("a", "b"), status("b", "b"), none)), ["RolloutCompleted"]);
    assert.deepEqual(
      of(rolloutEvents(status("a", "b"), status("a", "a"), { paused: false, rolledBack: { name: "a", revision: 3 } })),
      ["RolledBack"],
    );
  });
});
