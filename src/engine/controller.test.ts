import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Pod } from "../api/kube.ts";
import type { Action, Plan } from "../core/actions.ts";
import type { Observed } from "../core/observed.ts";
import { microTime, routerLeaseObject } from "../api/router-lease.ts";
import type { RouterScope } from "../api/router-lease.ts";
import { EventRecorder } from "./recorder.ts";
import type { VirtualClock } from "../sim/clock.ts";
import { SimInformer } from "../sim/informer.ts";
import { aModelServing, ownedBy, settle, setupServer } from "../sim/test-fixtures.ts";
import { Controller } from "./controller.ts";
import type { ReconcilePass } from "./controller.ts";
import type { ControllerOptions } from "./controller.ts";
import { MemoryLogger } from "./logger.ts";
import type { ClusterReader, ClusterWriter, DeleteOptions, JsonObject, Kind, KubeObject, ObjectRef } from "./ports.ts";
import { keyOfEvent } from "./reconciler.ts";
import type { PlanFunction } from "./reconciler.ts";

const KINDS = ["ModelServing", "Pod", "Service", "ControllerRevision", "Lease"] as const;
const msRef = { kind: "ModelServing", namespace: "default", name: "m" } as const;

/**
 * A stand-in for core's plan: pods `<ms>-<i>` for i < spec.replicas, created when missing and
 * deleted (UID precondition) beyond; status.replicas written when it differs from the pods seen.
 */
const replicasPlan: PlanFunction = (observed: Observed): Plan => {
  const ms = observed.modelServing as KubeObject<"ModelServing">;
  const replicas = Number(ms.spec?.["replicas"] ?? 0);
  const want = new Set(Array.from({ length: replicas }, (_, i) => `${ms.metadata.name}-${i}`));
  const have = new Set(observed.pods.map((pod) => pod.metadata.name));
  const actions: Action[] = [];
  for (const name of want) if (!have.has(name)) actions.push({ type: "CreatePod", pod: podFor(ms, name) });
  for (const pod of observed.pods) {
    if (!want.has(pod.metadata.name) && pod.metadata.deletionTimestamp === undefined) {
      actions.push({
        type: "DeletePod",
        name: pod.metadata.name,
        uid: pod.metadata.uid ?? "",
        reason: "ScaleDown",
        gracePeriodSeconds: 0,
      });
    }
  }
  if (ms.status?.["replicas"] !== observed.pods.length)
    actions.push({ type: "WriteStatus", status: { replicas: observed.pods.length }, barrier: false });
  return { actions, requeueAfterMs: undefined };
};

function podFor(ms: KubeObject<"ModelServing">, name: string): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: "default",
      labels: { "tandem.dev/modelserving": ms.metadata.name },
      ownerReferences: [ownedBy(ms)],
    },
    spec: { containers: [{ name: "main", image: "vllm:v1" }] },
  };
}

/**
 * A writer whose requests each take `latencyMs` of virtual time, tracking the requests in flight
 * per ModelServing (pods here are named `<ms>-<i>`).
 */
function slowWriter(inner: ClusterWriter, clock: VirtualClock, latencyMs: number) {
  const inFlight = new Map<string, number>();
  const owner = (kind: string, name: string) => (kind === "ModelServing" ? name : (name.split("-")[0] ?? name));
  const slow = <T>(kind: string, name: string, run: () => Promise<T>): Promise<T> => {
    const key = owner(kind, name);
    inFlight.set(key, (inFlight.get(key) ?? 0) + 1);
    const done = new Promise<T>((resolve, reject) => {
      clock.setTimer(latencyMs, () => {
        run().then(resolve, reject);
      });
    });
    return done.finally(() => inFlight.set(key, (inFlight.get(key) ?? 1) - 1));
  };
  const writer: ClusterWriter = {
    create: <K extends Kind>(object: KubeObject<K>) =>
      slow(object.kind, object.metadata.name, () => inner.create(object)),
    update: <K extends Kind>(object: KubeObject<K>) =>
      slow(object.kind, object.metadata.name, () => inner.update(object)),
    patch: <K extends Kind>(ref: ObjectRef<K>, patch: JsonObject) =>
      slow(ref.kind, ref.name, () => inner.patch(ref, patch)),
    patchStatus: <K extends Kind>(ref: ObjectRef<K>, patch: JsonObject) =>
      slow(ref.kind, ref.name, () => inner.patchStatus(ref, patch)),
    delete: (ref: ObjectRef, options?: DeleteOptions) => slow(ref.kind, ref.name, () => inner.delete(ref, options)),
  };
  return { writer, inFlight };
}

/** Counts the calls of `plan` and the keys it was called for, in order. */
function counting(plan: PlanFunction) {
  const calls: { name: string; nowMs: number }[] = [];
  const counted: PlanFunction = (observed, nowMs) => {
    calls.push({ name: (observed.modelServing as KubeObject).metadata.name, nowMs });
    return plan(observed, nowMs);
  };
  return { plan: counted, calls };
}

interface HarnessOptions {
  lagMs?: number;
  seed?: number;
  controller?: ControllerOptions;
  /** Wraps the informer (e.g. to delay hasSynced). */
  reader?: (informer: SimInformer) => ClusterReader;
  /** Wraps the controller's writer (e.g. to make requests take time). */
  writer?: (inner: ClusterWriter, clock: VirtualClock) => ClusterWriter;
}

function harness(options: HarnessOptions = {}) {
  const sim = setupServer({ gcDelayMs: 10 }, options.seed ?? 1);
  const logger = new MemoryLogger();
  const recorder = new EventRecorder({
    writer: sim.server.client("events"),
    clock: sim.clock.onEpoch(),
    component: "tandem",
  });
  let informer: SimInformer;
  let controller: Controller;
  /** Starts a controller (and its own cache) as a fresh process would. */
  const startController = () => {
    informer = new SimInformer(sim.server.client("informer"), sim.clock, {
      kinds: KINDS,
      ...(options.lagMs === undefined ? {} : { lagMs: options.lagMs }),
    });
    informer.start();
    const reader = options.reader?.(informer) ?? informer;
    const inner = sim.server.client("controller");
    const writer = options.writer?.(inner, sim.clock) ?? inner;
    controller = new Controller(
      { reader, writer, clock: sim.clock, recorder, logger },
      { plan: replicasPlan, ...options.controller },
    );
    controller.start();
  };
  startController();
  /**
   * Lets the controller finish what it can without the clock: until it is idle or, when a write
   * waits for virtual time (a slow writer), until the promise chains have settled.
   */
  const quiesce = () =>
    options.writer === undefined ? controller.idle() : Promise.race([controller.idle(), settle(500)]);
  /** Advances virtual time by `ms`, letting the controller work at every timer. */
  const runFor = async (ms: number) => {
    const targetMs = sim.clock.nowMs() + ms;
    await quiesce();
    for (let i = 0; i < 100_000; i++) {
      const nextMs = sim.clock.nextDueMs();
      if (nextMs === undefined || nextMs > targetMs) break;
      sim.clock.runUntil(nextMs);
      await quiesce();
    }
    sim.clock.runUntil(targetMs);
    await quiesce();
  };
  const restart = async () => {
    await controller.stop();
    informer.stop();
    startController();
  };
  const podNames = () => sim.server.list("Pod").items.map((pod) => pod.metadata.name);
  const writes = (filter: { kind?: "Pod" | "ModelServing"; verb?: "create" | "delete" | "patchStatus" } = {}) =>
    sim.server.apiWrites({ client: "controller", ...filter });
  // The user's requests, kept apart from the controller's in the write counts.
  const client = sim.server.client("user");
  return {
    ...sim,
    client,
    logger,
    runFor,
    restart,
    podNames,
    writes,
    controller: () => controller,
    informer: () => informer,
  };
}

describe("events to keys", () => {
  const object = (kind: KubeObject["kind"], name: string, labels?: Record<string, string>): KubeObject => ({
    apiVersion: "v1",
    kind,
    metadata: { name, namespace: "ns", ...(labels === undefined ? {} : { labels }) },
  });
  const owned = { "tandem.dev/modelserving": "m" };

  it("map a ModelServing to itself and its labelled children to it", () => {
    assert.equal(keyOfEvent({ type: "ADDED", object: object("ModelServing", "m") }), "ns/m");
    for (const kind of ["Pod", "Service", "ControllerRevision"] as const) {
      assert.equal(keyOfEvent({ type: "MODIFIED", object: object(kind, "x", owned) }), "ns/m", kind);
    }
  });

  it("ignore unlabelled objects and kinds the controller does not own", () => {
    assert.equal(keyOfEvent({ type: "ADDED", object: object("Pod", "x") }), undefined);
    assert.equal(keyOfEvent({ type: "ADDED", object: object("Event", "x", owned) }), undefined);
    const node: KubeObject = { apiVersion: "v1", kind: "Node", metadata: { name: "x", labels: owned } };
    assert.equal(keyOfEvent({ type: "ADDED", object: node }), undefined);
  });
});

describe("controller", () => {
  it("converges a ModelServing and follows scale changes, one plan per burst of events", async () => {
    const { plan, calls } = counting(replicasPlan);
    const { client, runFor, podNames, server, logger } = harness({ controller: { plan } });
    await client.create(aModelServing("m", 3));
    await runFor(1_000);
    assert.deepEqual(podNames(), ["m-0", "m-1", "m-2"]);
    assert.equal(server.get(msRef).status?.["replicas"], 3);
    // Create 3 pods and write replicas 0; see them (one burst of 4 events): write 3; see that: nothing.
    assert.equal(calls.length, 3);
    await client.patch(msRef, { spec: { replicas: 1 } });
    await runFor(1_000);
    assert.deepEqual(podNames(), ["m-0"]);
    assert.equal(server.get(msRef).status?.["replicas"], 1);
    assert.deepEqual(logger.lines(), []);
  });

  it("reports every pass to onReconciled with its duration and the queue depth", async () => {
    const passes: ReconcilePass[] = [];
    const { client, runFor } = harness({ controller: { onReconciled: (pass) => passes.push(pass) } });
    await client.create(aModelServing("m", 2));
    await runFor(1_000);
    assert.ok(passes.length >= 2);
    assert.ok(passes.every((pass) => pass.key === "default/m" && pass.durationMs >= 0 && pass.queueDepth >= 0));
  });

  it("does not create a pod twice while a lagging cache hides it", async () => {
    const requeueing: PlanFunction = (observed, nowMs) => ({ ...replicasPlan(observed, nowMs), requeueAfterMs: 10 });
    const { client, runFor, writes, podNames } = harness({ lagMs: 5_000, controller: { plan: requeueing } });
    await client.create(aModelServing("m", 3));
    await runFor(20_000);
    assert.deepEqual(podNames(), ["m-0", "m-1", "m-2"]);
    assert.equal(writes({ kind: "Pod", verb: "create" }), 3);
    assert.equal(writes({ kind: "ModelServing", verb: "patchStatus" }), 2, "replicas 0, then 3");

    // The same run with expectations that expire at once re-creates what the cache hides.
    const control = harness({ lagMs: 5_000, controller: { plan: requeueing, expectationTimeoutMs: 1 } });
    await control.client.create(aModelServing("m", 3));
    await control.runFor(20_000);
    assert.ok(control.writes({ kind: "Pod", verb: "create" }) > 3);
  });

  it("with minReconcileIntervalMs, coalesces events spread over the interval into one pass", async () => {
    const { plan, calls } = counting(replicasPlan);
    const { client, runFor, podNames, clock } = harness({ controller: { plan, minReconcileIntervalMs: 1_000 } });
    await client.create(aModelServing("m", 1));
    await runFor(5_000);
    assert.deepEqual(podNames(), ["m-0"]);
    const before = calls.length;
    // Three user changes 100 ms apart, each an event for the key: one pass, when the interval ends.
    const startMs = clock.nowMs();
    for (const replicas of [2, 3, 4]) {
      await client.patch(msRef, { spec: { replicas } });
      await runFor(100);
    }
    await runFor(2_000);
    assert.deepEqual(podNames(), ["m-0", "m-1", "m-2", "m-3"]);
    const passes = calls.slice(before);
    assert.equal(passes[0]?.nowMs, startMs, "the first event after a quiet interval is handled at once");
    assert.equal(passes[1]?.nowMs, startMs + 1_000, "the next two changes wait for the interval and make one pass");
    assert.ok(passes.length <= 4, `${passes.length} passes`);
    assert.ok(
      passes.every((call, i) => i === 0 || call.nowMs - (passes[i - 1]?.nowMs ?? 0) >= 1_000),
      "at most one pass per interval",
    );
  });

  it("rejects a negative or fractional minReconcileIntervalMs", () => {
    assert.throws(() => harness({ controller: { minReconcileIntervalMs: -1 } }), /minReconcileIntervalMs/);
    assert.throws(() => harness({ controller: { minReconcileIntervalMs: 0.5 } }), /minReconcileIntervalMs/);
  });

  it("plans again after requeueAfterMs, and only then, when nothing changes", async () => {
    const { plan, calls } = counting(() => ({ actions: [], requeueAfterMs: 1_000 }));
    const { client, runFor } = harness({ controller: { plan } });
    await client.create(aModelServing("m"));
    await runFor(3_500);
    assert.deepEqual(
      calls.map((call) => call.nowMs),
      [0, 1_000, 2_000, 3_000],
    );
  });

  it("reconciles nothing for a ModelServing that is gone; its pods go by garbage collection", async () => {
    const { plan, calls } = counting(replicasPlan);
    const { client, runFor, podNames, writes } = harness({ controller: { plan } });
    await client.create(aModelServing("m", 2));
    await runFor(1_000);
    const planned = calls.length;
    const written = writes();
    await client.delete(msRef);
    await runFor(1_000);
    assert.deepEqual(podNames(), []);
    assert.equal(calls.length, planned, "pod deletions map to a key whose ModelServing is gone");
    assert.equal(writes(), written);
  });

  it("waits for the cache to sync before planning", async () => {
    let synced = false;
    const { plan, calls } = counting(() => ({ actions: [], requeueAfterMs: undefined }));
    const delayed = (informer: SimInformer): ClusterReader => ({
      get: (kind, namespace, name) => informer.get(kind, namespace, name),
      list: (kind, options) => informer.list(kind, options),
      subscribe: (handler) => informer.subscribe(handler),
      hasSynced: () => synced && informer.hasSynced(),
    });
    const { client, runFor } = harness({ reader: delayed, controller: { plan, syncPollMs: 100 } });
    await client.create(aModelServing("m"));
    await runFor(1_000);
    assert.equal(calls.length, 0);
    synced = true;
    await runFor(100);
    assert.equal(calls.length, 1, "found by polling, without another event");
  });

  it("stop() leaves no timer behind and ends reconciling", async () => {
    const { plan, calls } = counting(() => ({ actions: [], requeueAfterMs: 60_000 }));
    const { client, runFor, clock, controller, informer } = harness({ controller: { plan } });
    await client.create(aModelServing("m"));
    await runFor(10);
    informer().stop();
    clock.advance(0);
    assert.equal(clock.pendingCount(), 1, "the requeue timer");
    await controller().stop();
    assert.equal(clock.pendingCount(), 0);
    await runFor(120_000);
    assert.equal(calls.length, 1);
  });

  it("never reconciles one key twice at once, while several workers share the keys", async () => {
    let slow: ReturnType<typeof slowWriter> | undefined;
    let overlaps = 0;
    let maxBusyKeys = 0;
    const watching: PlanFunction = (observed, nowMs) => {
      const inFlight = slow?.inFlight ?? new Map<string, number>();
      if ((inFlight.get((observed.modelServing as KubeObject).metadata.name) ?? 0) > 0) overlaps++;
      return replicasPlan(observed, nowMs);
    };
    const { client, runFor, podNames } = harness({
      controller: { plan: watching, workers: 3, maxParallelWrites: 2 },
      writer: (inner, virtualClock) => (slow = slowWriter(inner, virtualClock, 50)).writer,
    });
    for (const name of ["a", "b", "c"]) await client.create(aModelServing(name, 3));
    for (let step = 0; step < 40; step++) {
      // User edits arrive while the previous plans are still being applied.
      if (step % 10 === 5) await client.patch({ ...msRef, name: "b" }, { spec: { replicas: 1 + (step % 3) } });
      await runFor(10);
      maxBusyKeys = Math.max(maxBusyKeys, [...(slow?.inFlight.values() ?? [])].filter((count) => count > 0).length);
    }
    await runFor(10_000);
    assert.equal(overlaps, 0);
    assert.equal(maxBusyKeys, 3, "three keys were reconciled at once");
    assert.deepEqual(podNames(), ["a-0", "a-1", "a-2", "b-0", "b-1", "b-2", "c-0", "c-1", "c-2"]);
  });

  it("stop() lets running writes finish but starts no further batch", async () => {
    const { client, runFor, podNames, clock, controller } = harness({
      controller: { maxParallelWrites: 1 },
      writer: (inner, virtualClock) => slowWriter(inner, virtualClock, 50).writer,
    });
    await client.create(aModelServing("m", 5));
    await runFor(60);
    const stopping = controller().stop();
    clock.advance(50);
    await stopping;
    assert.deepEqual(podNames(), ["m-0", "m-1"]);
    clock.advance(60_000);
    assert.deepEqual(podNames(), ["m-0", "m-1"]);
  });

  it("requeues on a Conflict without logging an error", async () => {
    const { client, runFor, server, logger, podNames } = harness();
    server.faults.failNth({ verb: "patchStatus", client: "controller" }, 1, { error: "Conflict" });
    await client.create(aModelServing("m", 2));
    await runFor(1_000);
    assert.deepEqual(podNames(), ["m-0", "m-1"]);
    assert.equal(server.get(msRef).status?.["replicas"], 2);
    assert.deepEqual(logger.lines("error"), []);
    assert.equal(logger.lines("info").length, 1);
    assert.match(logger.lines("info")[0]?.message ?? "", /changed under the plan/);
  });

  it("logs failures, backs off, and recovers", async () => {
    const { client, runFor, server, logger, podNames } = harness();
    for (const n of [1, 2, 3])
      server.faults.failNth({ verb: "create", kind: "Pod", client: "controller" }, n, { error: "ServerError" });
    await client.create(aModelServing("m", 1));
    await runFor(1_000);
    assert.deepEqual(podNames(), ["m-0"]);
    assert.deepEqual(
      logger.lines("error").map((line) => line.fields["retryInMs"]),
      [5, 10, 20],
    );
  });

  it("logs a plan that throws and retries it with backoff", async () => {
    let throws = 2;
    const flaky: PlanFunction = (observed, nowMs) => {
      if (throws-- > 0) throw new Error("bug in the core");
      return replicasPlan(observed, nowMs);
    };
    const { client, runFor, logger, podNames } = harness({ controller: { plan: flaky } });
    await client.create(aModelServing("m", 1));
    await runFor(1_000);
    assert.deepEqual(podNames(), ["m-0"]);
    assert.equal(logger.lines("error").length, 2);
    assert.equal(logger.lines("error")[0]?.fields["error"], "bug in the core");
  });

  it("converges under random 409, 500 and timeouts, and a restart over the result writes nothing", async () => {
    const { client, runFor, server, podNames, writes, restart, logger } = harness({
      lagMs: 50,
      controller: { workers: 3 },
    });
    const match = { client: "controller" };
    server.faults.failWithChance(match, 1, 8, { error: "Conflict", stream: "conflict" });
    server.faults.failWithChance(match, 1, 8, { error: "ServerError", stream: "server" });
    server.faults.failWithChance(match, 1, 16, { error: "Timeout", applied: true, stream: "timeout-applied" });
    server.faults.failWithChance(match, 1, 16, { error: "Timeout", stream: "timeout" });
    for (const name of ["a", "b", "c"]) await client.create(aModelServing(name, 4));
    await runFor(60_000);
    await client.patch({ ...msRef, name: "b" }, { spec: { replicas: 2 } });
    await runFor(60_000);
    server.faults.clear();
    await runFor(60_000);
    assert.deepEqual(podNames(), ["a-0", "a-1", "a-2", "a-3", "b-0", "b-1", "c-0", "c-1", "c-2", "c-3"]);
    for (const [name, replicas] of [
      ["a", 4],
      ["b", 2],
      ["c", 4],
    ] as const) {
      assert.equal(server.get({ ...msRef, name }).status?.["replicas"], replicas, name);
    }
    assert.ok(logger.lines("error").length > 0, "the injected 500s were logged");

    const written = writes();
    await restart();
    await runFor(60_000);
    assert.equal(writes(), written, "a restarted controller over a converged system writes nothing");
  });

  it("runs the same way twice from the same seed", async () => {
    const run = async () => {
      const { client, runFor, server, logger } = harness({ lagMs: 20, seed: 42, controller: { workers: 2 } });
      server.faults.failWithChance({ client: "controller" }, 1, 4, { error: "ServerError", stream: "server" });
      for (const name of ["a", "b"]) await client.create(aModelServing(name, 3));
      await runFor(10_000);
      return { writes: server.apiWriteCounts(), logs: logger.lines() };
    };
    assert.deepEqual(await run(), await run());
  });
});

describe("controller: the router registry", () => {
  /** Router `id`'s Lease in namespace `routers`, renewed at `renewMs`. */
  const lease = (id: string, renewMs: number, scope: RouterScope = { all: true }) =>
    routerLeaseObject({
      id,
      namespace: "routers",
      scope,
      leaseDurationSeconds: 15,
      nowMs: renewMs,
    }) as unknown as KubeObject<"Lease">;

  it("plans see the routers with liveUntilMs on the controller's clock; only live-set changes re-plan, in scope", async () => {
    const seen: Observed["routers"][] = [];
    const { plan, calls } = counting((observed, nowMs) => {
      seen.push(observed.routers);
      return replicasPlan(observed, nowMs);
    });
    const { client, runFor, clock } = harness({ lagMs: 0, controller: { plan } });
    for (const name of ["other", "routers"])
      await client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name } });
    await client.create(aModelServing("m", 1));
    await client.create({ ...aModelServing("elsewhere", 0), metadata: { name: "elsewhere", namespace: "other" } });
    await runFor(1_000);
    const settled = calls.length;
    await client.create(lease("a", 0, { all: false, namespaces: ["default"] }));
    await runFor(1_000);
    assert.deepEqual(
      calls.slice(settled).map((call) => call.name),
      ["m"],
      "a new router re-plans the ModelServings in its scope only",
    );
    const registeredMs = calls.at(-1)?.nowMs ?? 0;
    assert.deepEqual(seen.at(-1), [
      {
        id: "a",
        scope: { all: false, namespaces: ["default"] },
        liveUntilMs: registeredMs + 15_000,
        liveSinceMs: registeredMs,
      },
    ]);
    for (let renewal = 1; renewal <= 3; renewal++) {
      await client.patch(
        { kind: "Lease", namespace: "routers", name: "a" },
        { spec: { renewTime: microTime(renewal * 5_000) } },
      );
      await runFor(5_000);
    }
    assert.equal(calls.length, settled + 1, "renewals of a live router re-plan nothing");
    await runFor(20_000);
    const expired = calls.length;
    await client.patch({ kind: "Lease", namespace: "routers", name: "a" }, { spec: { renewTime: microTime(99_000) } });
    await runFor(1_000);
    assert.deepEqual(
      calls.slice(expired).map((call) => call.name),
      ["m"],
      "an expired router renewed again re-plans",
    );
    assert.equal(seen.at(-1)?.[0]?.liveUntilMs, clock.nowMs() - 1_000 + 15_000);
    await client.delete({ kind: "Lease", namespace: "routers", name: "a" });
    await runFor(1_000);
    assert.deepEqual(
      calls.slice(expired + 1).map((call) => call.name),
      ["m"],
      "so does its deletion",
    );
    assert.deepEqual(seen.at(-1), []);
  });

  it("a restarted controller counts every Lease as live from when it first sees it", async () => {
    const seen: Observed["routers"][] = [];
    const { plan } = counting((observed, nowMs) => {
      seen.push(observed.routers);
      return replicasPlan(observed, nowMs);
    });
    const { client, runFor, restart, clock } = harness({ lagMs: 0, controller: { plan } });
    await client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "routers" } });
    await client.create(aModelServing("m", 1));
    await client.create(lease("a", 0));
    await runFor(60_000);
    await restart();
    await runFor(1_000);
    assert.equal(
      seen.at(-1)?.[0]?.liveUntilMs,
      clock.nowMs() - 1_000 + 15_000,
      "live for a full duration from the restart, though not renewed for 60 s",
    );
  });
});
