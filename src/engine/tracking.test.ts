/**
 * The engine's side of pod tracking (docs/design/pod-tracking.md): the executor releases the
 * recovery finalizer before a deletion and never deletes when the release failed; the pods of a
 * ModelServing that is gone are released, also by a controller started after it went.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { FINALIZER_RECOVERY } from "../api/wellknown.ts";
import type { Action } from "../core/actions.ts";
import { EventRecorder } from "./recorder.ts";
import { SimInformer } from "../sim/informer.ts";
import { aModelServing, aPod, ownedBy, settle, setupServer } from "../sim/test-fixtures.ts";
import { Controller } from "./controller.ts";
import { Executor } from "./executor.ts";
import { Expectations } from "./expectations.ts";
import { MemoryLogger } from "./logger.ts";
import type { KubeObject } from "./ports.ts";

const KINDS = ["ModelServing", "Pod", "Service", "ControllerRevision", "Lease"] as const;

async function setup() {
  const sim = setupServer({ gcDelayMs: 10 });
  const informer = new SimInformer(sim.server.client("informer"), sim.clock, { kinds: KINDS, lagMs: 0 });
  informer.start();
  const user = sim.server.client("user");
  const ms = await user.create(aModelServing("m"));
  const tracked = (name: string) =>
    user.create({
      ...aPod(name, { "tandem.dev/modelserving": "m" }),
      metadata: {
        ...aPod(name).metadata,
        labels: { "tandem.dev/modelserving": "m" },
        ownerReferences: [ownedBy(ms)],
        finalizers: [FINALIZER_RECOVERY, "example.com/other"],
      },
    });
  const recorder = new EventRecorder({
    writer: sim.server.client("events"),
    clock: sim.clock.onEpoch(),
    component: "tandem",
  });
  return { ...sim, informer, user, ms, tracked, recorder };
}

const release = (pod: KubeObject) => ({
  resourceVersion: pod.metadata.resourceVersion ?? "",
  finalizers: ["example.com/other"],
});

describe("executor: releasing the recovery finalizer", () => {
  it("releases before deleting: the pod's other finalizers kept, under the version the plan saw", async () => {
    const { server, informer, recorder, tracked } = await setup();
    const pod = await tracked("p0");
    const executor = new Executor(
      { writer: server.client("controller"), reader: informer, recorder },
      { expectations: new Expectations(server.clock, { logger: new MemoryLogger() }) },
    );
    const actions: Action[] = [
      { type: "DeletePod", name: "p0", uid: pod.metadata.uid ?? "", reason: "Recovery", release: release(pod) },
    ];
    const result = await executor.execute(
      {
        key: "default/m",
        namespace: "default",
        name: "m",
        uid: undefined,
        resourceVersion: undefined,
        status: undefined,
      },
      actions,
    );
    assert.deepEqual([result.applied, result.failed.length, result.conflicts.length], [1, 0, 0]);
    const stored = server.get({ kind: "Pod", namespace: "default", name: "p0" });
    assert.deepEqual(stored.metadata.finalizers, ["example.com/other"]);
    assert.ok(stored.metadata.deletionTimestamp !== undefined, "then deleted");
    assert.deepEqual(
      server
        .apiWriteCounts()
        .filter((row) => row.client === "controller")
        .map((row) => [row.verb, row.count]),
      [
        ["delete", 1],
        ["patch", 1],
      ],
    );
  });

  it("does not delete a pod whose release failed (a newer version): it would look lost", async () => {
    const { server, informer, recorder, tracked, user } = await setup();
    const pod = await tracked("p0");
    await user.patch(
      { kind: "Pod", namespace: "default", name: "p0" },
      { metadata: { annotations: { touched: "yes" } } },
    );
    const executor = new Executor({ writer: server.client("controller"), reader: informer, recorder });
    const result = await executor.execute(
      {
        key: "default/m",
        namespace: "default",
        name: "m",
        uid: undefined,
        resourceVersion: undefined,
        status: undefined,
      },
      [{ type: "DeletePod", name: "p0", uid: pod.metadata.uid ?? "", reason: "Recovery", release: release(pod) }],
    );
    assert.equal(result.conflicts.length, 1);
    const stored = server.get({ kind: "Pod", namespace: "default", name: "p0" });
    assert.equal(stored.metadata.deletionTimestamp, undefined);
    assert.deepEqual(stored.metadata.finalizers, [FINALIZER_RECOVERY, "example.com/other"]);
  });
});

describe("controller: pods of a ModelServing that is gone", () => {
  async function run(restartAfterDeletion: boolean) {
    const { server, clock, informer: first, user, ms, tracked, recorder } = await setup();
    for (const name of ["m-0", "m-1"]) await tracked(name);
    const logger = new MemoryLogger();
    const plan = () => ({ actions: [], requeueAfterMs: undefined });
    const start = (informer: SimInformer) => {
      const controller = new Controller(
        { reader: informer, writer: server.client("controller"), clock, recorder, logger },
        { plan },
      );
      controller.start();
      return controller;
    };
    let informer = first;
    let controller = start(informer);
    const runFor = async (ms: number) => {
      const targetMs = clock.nowMs() + ms;
      for (let i = 0; i < 10_000; i++) {
        await controller.idle();
        await settle();
        const nextMs = clock.nextDueMs();
        if (nextMs === undefined || nextMs > targetMs) break;
        clock.runUntil(nextMs);
      }
      clock.runUntil(targetMs);
      await controller.idle();
    };
    await runFor(1_000);
    if (restartAfterDeletion) await controller.stop();
    await user.delete({ kind: "ModelServing", namespace: "default", name: ms.metadata.name });
    await runFor(60_000);
    const heldWhileDown = server.list("Pod").items.length;
    if (restartAfterDeletion) {
      informer.stop();
      informer = new SimInformer(server.client("informer"), clock, { kinds: KINDS, lagMs: 0 });
      informer.start();
      controller = start(informer);
    }
    await runFor(60_000);
    await controller.stop();
    informer.stop();
    return { heldWhileDown, left: server.list("Pod").items.map((pod) => [pod.metadata.name, pod.metadata.finalizers]) };
  }

  it("releases its terminating pods, keeping others' finalizers: garbage collection does not hang", async () => {
    const { left } = await run(false);
    assert.deepEqual(
      left,
      [
        ["m-0", ["example.com/other"]],
        ["m-1", ["example.com/other"]],
      ],
      "only the other finalizer holds them now",
    );
  });

  it("a controller started after the ModelServing went releases them too", async () => {
    const { heldWhileDown, left } = await run(true);
    assert.equal(heldWhileDown, 2, "held while no controller ran");
    assert.deepEqual(left, [
      ["m-0", ["example.com/other"]],
      ["m-1", ["example.com/other"]],
    ]);
  });
});
