import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { KubeObject } from "../engine/ports.ts";
import { SimCluster } from "./cluster.ts";
import { Prng } from "./prng.ts";
import { attachRouter, exponentialGapMs, servingSignature, targetRole } from "./router.ts";
import type { RouterEvent, RouterOptions, SimRouter } from "./router.ts";
import { aPod } from "./test-fixtures.ts";
import { CONFIRM_RETRY_BASE_MS } from "../router/confirmer.ts";

const SECOND = 1_000;
const DRAINING = "tandem.dev/draining";
/** The replica's own confirmation (DESIGN §3.4). */
const DRAINED = "drained.tandem.dev/router-0";
const SERVING = "tandem.dev/serving";

interface PodSpecOptions {
  role?: string;
  entry?: boolean;
  /** The serving gate stays unset (the controller opens it on every other pod): never Ready. */
  gated?: boolean;
  annotations?: Record<string, string>;
  /** The first container's env KV_FORMAT. */
  kvFormat?: string;
}

/** A pod of ModelServing "m" taking a whole 8-GPU node, so each pod has its own node. */
function servingPod(name: string, options: PodSpecOptions = {}): KubeObject<"Pod"> {
  const role = options.role ?? "decode";
  const labels: Record<string, string> = {
    "tandem.dev/modelserving": "m",
    "tandem.dev/group": "0",
    "tandem.dev/role": role,
    "tandem.dev/instance": `${role}-0`,
  };
  if (options.entry !== false) labels["tandem.dev/entry"] = "true";
  if (options.gated === true) labels["test/gated"] = "true";
  const env = options.kvFormat === undefined ? {} : { env: [{ name: "KV_FORMAT", value: options.kvFormat }] };
  const spec: Record<string, unknown> = {
    containers: [{ name: "main", image: "vllm:v1", ...env, resources: { limits: { "nvidia.com/gpu": 8 } } }],
    readinessGates: [{ conditionType: SERVING }],
  };
  const pod = aPod(name, labels, spec as never);
  if (options.annotations !== undefined) pod.metadata.annotations = options.annotations;
  return pod;
}

function modelServing(roles: readonly string[]): KubeObject<"ModelServing"> {
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "m", namespace: "default" },
    spec: { replicas: 1, template: { roles: roles.map((name) => ({ name, replicas: 1 })) } },
  };
}

/** ModelRoute "llama" to ModelServing "m" with `spec` (parsed and defaulted by the cache's reader). */
function modelRoute(spec: Record<string, unknown>): KubeObject {
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelRoute",
    metadata: { name: "llama", namespace: "default" },
    spec: { model: "llama", modelServing: "m", engine: "vllm", ...spec },
  } as unknown as KubeObject;
}

const DISAGGREGATED = { roles: { prefill: "prefill", decode: "decode" }, pairing: "Any" };

interface Setup {
  cluster: SimCluster;
  router: SimRouter;
  events: RouterEvent[];
}

/**
 * A cluster of `nodes` 8-GPU nodes (pods ready 3 s after creation), ModelServing "m" with `roles`,
 * `pods`, and a router at 20 requests/s of 2 s each unless `options` say otherwise.
 */
async function setup(
  pods: KubeObject<"Pod">[],
  options: Partial<RouterOptions> & {
    seed?: number;
    roles?: string[];
    nodes?: number;
    route?: Record<string, unknown>;
    beforeRouter?: (cluster: SimCluster) => void;
  } = {},
): Promise<Setup> {
  const cluster = new SimCluster({
    seed: options.seed ?? 1,
    nodes: [{ name: "gpu", count: options.nodes ?? 4, gpus: 8 }],
    timing: {
      scheduleSeconds: 1,
      pullSeconds: 1,
      startSeconds: 1,
      terminationSeconds: 5,
      nodeMonitorGraceSeconds: 40,
      podEvictionSeconds: 60,
    },
    jitterPercent: 0,
  });
  const client = cluster.writer("test");
  await client.create(modelServing(options.roles ?? ["prefill", "decode"]));
  if (options.route !== undefined) await client.create(modelRoute(options.route));
  for (const pod of pods) {
    await client.create(pod);
    // As the controller does for a pod whose drain is not under way: the router's eligibility needs it.
    const gated = pod.metadata.labels?.["test/gated"] === "true";
    if (!gated)
      await client.patchStatus(
        { kind: "Pod", namespace: "default", name: pod.metadata.name },
        { status: { conditions: [{ type: SERVING, status: "True" }] } },
      );
  }
  options.beforeRouter?.(cluster);
  const router = attachRouter(cluster, { requestsPerSecond: 20, requestSeconds: 2, ...options });
  const events: RouterEvent[] = [];
  router.subscribe((event) => events.push(event));
  return { cluster, router, events };
}

function annotate(cluster: SimCluster, name: string, annotations: Record<string, string | null>): Promise<unknown> {
  return cluster.writer("test").patch({ kind: "Pod", namespace: "default", name }, { metadata: { annotations } });
}

function annotationsOf(cluster: SimCluster, name: string): Record<string, string> {
  return cluster.server.get({ kind: "Pod", namespace: "default", name }).metadata.annotations ?? {};
}

function podsStarted(events: readonly RouterEvent[], sinceMs = 0): Set<string | undefined> {
  return new Set(
    events.filter((event) => event.type === "RequestStarted" && event.atMs >= sinceMs).map((event) => event.pod),
  );
}

describe("SimRouter: routing", () => {
  it("routes only to Ready, non-draining, non-terminating entry pods of the target role", async () => {
    const { cluster, router, events } = await setup(
      [
        servingPod("d0"),
        servingPod("d1"),
        servingPod("d-draining", { annotations: { [DRAINING]: "2026-01-01T00:00:00Z" } }),
        servingPod("d-gated", { gated: true }),
        servingPod("d-worker", { entry: false }),
        servingPod("p0", { role: "prefill" }),
      ],
      { nodes: 6 },
    );
    await cluster.advance(60 * SECOND);
    assert.deepEqual([...podsStarted(events)].sort(), ["d0", "d1"]);
    const metrics = router.metrics();
    assert.ok(metrics.total > 900 && metrics.total < 1500, `about 20/s for 57 s, got ${metrics.total}`);
    assert.deepEqual(Object.keys(metrics.byRole), ["decode"]);
    assert.equal(metrics.failed, 0, "no traffic before the model went live, and a candidate ever since");
    assert.equal(metrics.cut, 0);
    assert.equal(metrics.total, metrics.ok + metrics.inFlight);
  });

  it("sends no traffic before a candidate exists, and fails requests when none is left", async () => {
    const { cluster, router, events } = await setup([servingPod("d0"), servingPod("d1")]);
    await cluster.advance(2 * SECOND);
    assert.equal(router.metrics().total, 0, "pods not Ready yet: the model has not gone live");
    await cluster.advance(10 * SECOND);
    assert.equal(router.metrics().failed, 0);
    await annotate(cluster, "d0", { [DRAINING]: "2026-01-01T00:00:12Z" });
    await annotate(cluster, "d1", { [DRAINING]: "2026-01-01T00:00:12Z" });
    await cluster.advance(10 * SECOND);
    const failed = events.filter((event) => event.type === "RequestFailed");
    assert.ok(failed.length > 150, `about 20/s for 10 s, got ${failed.length}`);
    assert.ok(
      failed.every((event) => event.pod === undefined && event.role === "decode" && event.atMs >= 12 * SECOND + 100),
    );
    assert.equal(router.metrics().byRole["decode"]?.failed, failed.length);
  });

  it("targets the decode role when there is one, else the first role", () => {
    assert.equal(targetRole(["prefill", "decode"]), "decode");
    assert.equal(targetRole(["prefill", "decoder-x"]), "decoder-x");
    assert.equal(targetRole(["a", "b"]), "a");
    assert.equal(targetRole([]), undefined);
  });

  it("draws exponential gaps with the requested mean", () => {
    const rng = new Prng(3);
    let sumMs = 0;
    for (let i = 0; i < 10_000; i++) sumMs += exponentialGapMs(rng, 50);
    assert.ok(Math.abs(sumMs / 10_000 - 50) < 2, `mean ${sumMs / 10_000}`);
  });
});

describe("SimRouter: outcomes", () => {
  it("counts requests on a deleted pod as cut, at the instant it goes away", async () => {
    const { cluster, router, events } = await setup([servingPod("d0"), servingPod("d1")]);
    await cluster.advance(20 * SECOND);
    const inFlight = router.inFlightByPod()["d0"] ?? 0;
    assert.ok(inFlight > 5);
    await cluster.writer("test").delete({ kind: "Pod", namespace: "default", name: "d0" }, { gracePeriodSeconds: 0 });
    await cluster.advance(1);
    const cut = events.filter((event) => event.type === "RequestCut");
    assert.equal(cut.length, inFlight);
    assert.ok(cut.every((event) => event.pod === "d0" && event.atMs === 20 * SECOND));
    assert.equal(router.metrics().cut, inFlight);
    assert.equal(router.inFlightByPod()["d0"], undefined);
  });

  it("lets requests finish during a graceful termination and cuts those still running when containers stop", async () => {
    const { cluster, router, events } = await setup([servingPod("d0")], { requestSeconds: 8, jitterPercent: 0 });
    await cluster.advance(20 * SECOND);
    await cluster.writer("test").delete({ kind: "Pod", namespace: "default", name: "d0" });
    await cluster.advance(10 * SECOND);
    const onD0 = events.filter((event) => event.pod === "d0" && event.atMs >= 20 * SECOND);
    assert.ok(
      onD0.some((event) => event.type === "RequestOk" && event.atMs < 25 * SECOND),
      "requests ending within the 5 s grace are ok",
    );
    const cut = onD0.filter((event) => event.type === "RequestCut");
    assert.ok(
      cut.length > 0 && cut.every((event) => event.atMs === 25 * SECOND),
      "the rest are cut when containers stop",
    );
    assert.equal(router.metrics().cut, cut.length);
  });

  it("fails requests routed to a crashed node's pod and cuts those that were running on it", async () => {
    const { cluster, router, events } = await setup([servingPod("d0"), servingPod("d1")]);
    await cluster.advance(20 * SECOND);
    const node = cluster.server.get({ kind: "Pod", namespace: "default", name: "d0" }).spec?.["nodeName"] as string;
    const inFlight = router.inFlightByPod()["d0"] ?? 0;
    cluster.failNode(node);
    await cluster.advance(10 * SECOND);
    const after = events.filter((event) => event.pod === "d0" && event.atMs >= 20 * SECOND);
    assert.ok(!after.some((event) => event.type === "RequestOk" || event.type === "RequestStarted"));
    assert.equal(
      after.filter((event) => event.type === "RequestCut").length,
      inFlight,
      "cut when each would have ended",
    );
    assert.ok(
      after.filter((event) => event.type === "RequestFailed").length > 20,
      "the stale cache still routes there: refused",
    );
  });
  it("cuts the requests on a pod whose container restarts for an in-place image change", async () => {
    const { cluster, router, events } = await setup([servingPod("d0"), servingPod("d1")]);
    await cluster.advance(20 * SECOND);
    const inFlight = router.inFlightByPod()["d0"] ?? 0;
    assert.ok(inFlight > 0);
    const containers = [{ name: "main", image: "vllm:v2", resources: { limits: { "nvidia.com/gpu": 8 } } }];
    await cluster.writer("test").patch({ kind: "Pod", namespace: "default", name: "d0" }, { spec: { containers } });
    await cluster.advance(1);
    assert.equal(events.filter((event) => event.type === "RequestCut" && event.pod === "d0").length, inFlight);
  });

  it("survives lost watches: the cache relists, nothing is cut that was not", async () => {
    const { cluster, router } = await setup([servingPod("d0"), servingPod("d1")]);
    await cluster.advance(10 * SECOND);
    cluster.server.dropWatches("Pod");
    cluster.server.dropWatches("ModelServing");
    await cluster.advance(20 * SECOND);
    const metrics = router.metrics();
    assert.equal(metrics.cut, 0);
    assert.equal(metrics.failed, 0);
    assert.ok(metrics.ok > 300);
  });
});

describe("SimRouter: drain handshake", () => {
  it("stops routing to a draining pod and confirms only once its last leg has ended and the engine reads idle", async () => {
    const { cluster, router, events } = await setup([servingPod("d0"), servingPod("d1")]);
    await cluster.advance(20 * SECOND);
    assert.ok((router.inFlightByPod()["d0"] ?? 0) > 5);
    await annotate(cluster, "d0", { [DRAINING]: "2026-01-01T00:00:20Z" });
    let drainedAtMs = -1;
    const done = await cluster.waitFor(() => {
      if (annotationsOf(cluster, "d0")[DRAINED] === "true" && drainedAtMs < 0) drainedAtMs = cluster.clock.nowMs();
      return drainedAtMs >= 0;
    }, 30 * SECOND);
    assert.ok(done);
    const onD0 = events.filter((event) => event.pod === "d0");
    const lastEndMs = Math.max(...onD0.filter((event) => event.type === "RequestOk").map((event) => event.atMs));
    assert.ok(!podsStarted(events, 20 * SECOND + 100).has("d0"), "no new request once the cache shows draining");
    assert.ok(lastEndMs > 21 * SECOND, "requests kept running after the drain started");
    assert.ok(
      drainedAtMs > lastEndMs && drainedAtMs <= lastEndMs + SECOND,
      `confirmed at the first engine scrape (every second) after the last leg ended at ${lastEndMs}, not before: ${drainedAtMs}`,
    );
    assert.equal(onD0.filter((event) => event.type === "DrainAcked").length, 1);
    assert.equal(cluster.server.apiWrites({ client: "router-0", kind: "Pod" }), 1);
    assert.equal(router.metrics().cut, 0);
  });

  it("makes a pod a candidate again when its drain is cancelled, and acks a new drain anew", async () => {
    const { cluster, events } = await setup([servingPod("d0"), servingPod("d1")]);
    await cluster.advance(10 * SECOND);
    await annotate(cluster, "d0", { [DRAINING]: "2026-01-01T00:00:10Z" });
    await cluster.advance(10 * SECOND);
    assert.equal(annotationsOf(cluster, "d0")[DRAINED], "true");
    assert.ok(!podsStarted(events, 10 * SECOND + 100).has("d0"));
    await annotate(cluster, "d0", { [DRAINING]: null, [DRAINED]: null });
    await cluster.advance(10 * SECOND);
    assert.ok(podsStarted(events, 20 * SECOND).has("d0"), "routed to again");
    assert.equal(annotationsOf(cluster, "d0")[DRAINED], undefined, "the router clears and writes nothing on a cancel");
    await annotate(cluster, "d0", { [DRAINING]: "2026-01-01T00:00:30Z" });
    await cluster.advance(10 * SECOND);
    assert.equal(annotationsOf(cluster, "d0")[DRAINED], "true");
    assert.equal(events.filter((event) => event.type === "DrainAcked").length, 2);
  });

  it("acks draining entries of roles it sends no traffic to, and never a worker", async () => {
    const draining = { [DRAINING]: "2026-01-01T00:00:00Z" };
    const { cluster } = await setup([
      servingPod("d0"),
      servingPod("p0", { role: "prefill", annotations: draining }),
      servingPod("w0", { entry: false, annotations: draining }),
    ]);
    await cluster.advance(30 * SECOND);
    assert.equal(annotationsOf(cluster, "p0")[DRAINED], "true");
    assert.equal(annotationsOf(cluster, "w0")[DRAINED], undefined);
    assert.equal(cluster.server.apiWrites({ client: "router-0", kind: "Pod" }), 1);
  });

  it("retries an ack that meets a Conflict or a server error, with a doubling delay", async () => {
    const { cluster, events } = await setup([servingPod("d0"), servingPod("d1")], { requestsPerSecond: 1 });
    cluster.server.faults.failNth({ verb: "patch", kind: "Pod", client: "router-0" }, 1, { error: "Conflict" });
    // Every rule counts every matching request: the second write is this rule's second.
    cluster.server.faults.failNth({ verb: "patch", kind: "Pod", client: "router-0" }, 2, { error: "ServerError" });
    await cluster.advance(10 * SECOND);
    await annotate(cluster, "d1", { [DRAINING]: "2026-01-01T00:00:10Z" });
    await cluster.advance(30 * SECOND);
    assert.equal(annotationsOf(cluster, "d1")[DRAINED], "true");
    assert.equal(cluster.server.apiWrites({ client: "router-0", kind: "Pod", verb: "patch" }), 3);
    const acked = events.filter((event) => event.type === "DrainAcked");
    assert.equal(acked.length, 1);
    const lastEndMs = Math.max(
      10 * SECOND + 100,
      ...events.filter((event) => event.pod === "d1" && event.type === "RequestOk").map((event) => event.atMs),
    );
    // The first write at the first scrape after the pod went idle, the third 200 + 400 ms later
    // (the router's confirmer: CONFIRM_RETRY_BASE_MS, doubling).
    const delayMs = (acked[0]?.atMs ?? 0) - lastEndMs - 3 * CONFIRM_RETRY_BASE_MS;
    assert.ok(delayMs > 0 && delayMs <= SECOND, `${delayMs}`);
  });

  it("keeps retrying a confirmation the server keeps refusing, the delay doubling up to its cap", async () => {
    const { cluster } = await setup([servingPod("d0")], { requestsPerSecond: 1 });
    cluster.server.faults.failWithChance({ verb: "patch", kind: "Pod", client: "router-0" }, 1, 1, {
      error: "ServerError",
      stream: "always",
    });
    await cluster.advance(10 * SECOND);
    await annotate(cluster, "d0", { [DRAINING]: "2026-01-01T00:00:10Z" });
    await cluster.advance(60 * SECOND);
    // 0.2, 0.4, ... 6.4 s, then every 10 s: 11 writes within the minute, give or take the first scrape.
    const writes = cluster.server.apiWrites({ client: "router-0", kind: "Pod", verb: "patch" });
    assert.ok(writes >= 10 && writes <= 12, `${writes} writes`);
  });
});

describe("SimRouter: routes through the router's decisions", () => {
  it("sends a disaggregated request as a prefill leg, then a decode leg on the chosen pair, each counted by role", async () => {
    const { cluster, router, events } = await setup([servingPod("p0", { role: "prefill" }), servingPod("d0")], {
      route: DISAGGREGATED,
      requestSeconds: 2,
      jitterPercent: 0,
    });
    await cluster.advance(30 * SECOND);
    const metrics = router.metrics();
    const prefill = metrics.byRole["prefill"];
    const decode = metrics.byRole["decode"];
    assert.ok(prefill !== undefined && decode !== undefined && prefill.total > 400, JSON.stringify(metrics));
    assert.equal(metrics.failed + metrics.cut + metrics.incompatible, 0);
    assert.ok(
      prefill.total - decode.total >= 0 && prefill.total - decode.total <= 5,
      "a decode leg starts as its prefill leg ends",
    );
    const started = events.filter((event) => event.type === "RequestStarted");
    const firstPrefill = started.find((event) => event.role === "prefill");
    const firstDecode = started.find((event) => event.role === "decode");
    assert.equal(firstPrefill?.pod, "p0");
    assert.equal((firstDecode?.atMs ?? 0) - firstPrefill.atMs, 200, "the prefill leg is 10% of the request");
  });

  it("fails a request whose decode has another KV format than its prefill, counting it incompatible", async () => {
    const { cluster, router, events } = await setup(
      [servingPod("p0", { role: "prefill", kvFormat: "v2" }), servingPod("d0")],
      { route: DISAGGREGATED },
    );
    await cluster.advance(30 * SECOND);
    const metrics = router.metrics();
    assert.ok(metrics.incompatible > 400);
    assert.equal(metrics.byRole["decode"]?.failed, metrics.incompatible, "every decode refuses");
    assert.equal(metrics.byRole["prefill"]?.failed, 0, "the prefill leg ran");
    assert.match(
      events.find((event) => event.type === "RequestFailed")?.reason ?? "",
      /^kv format mismatch: prefill v2, decode v1$/,
    );
  });

  it("fails fast with the pairing's reason when no compatible pair exists, never another pairing", async () => {
    const { cluster, router, events } = await setup([servingPod("p0", { role: "prefill" }), servingPod("d0")], {
      route: { ...DISAGGREGATED, pairing: "SameRevision" },
    });
    await cluster.advance(10 * SECOND);
    assert.equal(router.metrics().total, 0, "pods without revisions never pair: the route never went live");
    assert.equal(events.length, 0);
  });
});

describe("SimRouter: replicas", () => {
  function lease(cluster: SimCluster, id: string): KubeObject | undefined {
    return cluster.server.stored("Lease").find((stored) => stored.metadata.name === id);
  }
  const renewTime = (stored: KubeObject | undefined): unknown =>
    (stored?.spec as { renewTime?: unknown } | undefined)?.renewTime;

  it("spreads arrivals over the replicas, each registered by its own Lease renewed every third of its duration", async () => {
    const { cluster, router, events } = await setup([servingPod("d0"), servingPod("d1")], { replicas: 3 });
    await cluster.advance(30 * SECOND);
    assert.deepEqual(router.replicaIds(), ["router-0", "router-1", "router-2"]);
    for (const id of router.replicaIds()) {
      const routed = events.filter((event) => event.type === "RequestStarted" && event.replica === id).length;
      assert.ok(routed > 100, `${id} routed ${routed}`);
      const stored = lease(cluster, id);
      assert.equal(stored?.metadata.labels?.["tandem.dev/router"], "true");
      assert.equal((stored.spec as { holderIdentity?: string }).holderIdentity, id);
      assert.equal(cluster.server.apiWrites({ client: id, kind: "Lease" }), 1 + 6, "created, then renewed every 5 s");
    }
  });

  it("routes nothing before its Lease is written: a failed create is tried again a second later", async () => {
    // The pods are Ready at about 3 s; the sixth create, at 5 s, is the first to succeed.
    const failFiveCreates = (cluster: SimCluster): void => {
      for (let nth = 1; nth <= 5; nth++)
        cluster.server.faults.failNth({ verb: "create", kind: "Lease", client: "router-0" }, nth, {
          error: "ServerError",
        });
    };
    const { cluster, events } = await setup([servingPod("d0")], { beforeRouter: failFiveCreates });
    await cluster.advance(10 * SECOND);
    assert.ok(
      events.length > 0 && events.every((event) => event.atMs >= 5 * SECOND),
      `first request at ${events[0]?.atMs}`,
    );
    assert.ok(cluster.server.stored("Lease").some((stored) => stored.metadata.name === "router-0"));
  });

  it("cuts a crashed replica's requests and stops renewing its Lease; restarted, it takes the Lease over and confirms what it has nothing on", async () => {
    const { cluster, router, events } = await setup([servingPod("d0"), servingPod("d1")], { replicas: 2 });
    await cluster.advance(20 * SECOND);
    const before = events.length;
    assert.equal(router.crashReplica(1), undefined);
    const cut = events.slice(before).filter((event) => event.type === "RequestCut");
    assert.ok(cut.length > 5 && cut.every((event) => event.replica === "router-1" && event.atMs === 20 * SECOND));
    assert.equal(router.crashReplica(1), "router replica 1 is already down");
    const frozen = renewTime(lease(cluster, "router-1"));
    await annotate(cluster, "d0", { [DRAINING]: "2026-01-01T00:00:20Z" });
    await cluster.advance(20 * SECOND);
    assert.equal(renewTime(lease(cluster, "router-1")), frozen, "the Lease stays, unrenewed");
    assert.ok(!events.slice(before).some((event) => event.type === "RequestStarted" && event.replica === "router-1"));
    assert.equal(annotationsOf(cluster, "d0")[DRAINED], "true", "router-0 confirmed");
    assert.equal(annotationsOf(cluster, "d0")["drained.tandem.dev/router-1"], undefined);
    assert.equal(router.restartReplica(1), undefined);
    await cluster.advance(5 * SECOND);
    assert.equal(
      annotationsOf(cluster, "d0")["drained.tandem.dev/router-1"],
      "true",
      "confirmed once synced and scraped",
    );
    assert.notEqual(renewTime(lease(cluster, "router-1")), frozen);
    assert.ok(
      events.some(
        (event) => event.type === "RequestStarted" && event.replica === "router-1" && event.atMs > 40 * SECOND,
      ),
    );
    assert.match(router.crashReplica(5) ?? "", /^no router replica 5; replicas are 0\.\.1$/);
  });

  it("restarts a running replica cleanly: no new request, none cut, its Lease deleted once idle, then taken again", async () => {
    const { cluster, router, events } = await setup([servingPod("d0"), servingPod("d1")], { replicas: 2 });
    await cluster.advance(20 * SECOND);
    const before = events.length;
    const inFlightBefore =
      events.filter((event) => event.type === "RequestStarted" && event.replica === "router-1").length -
      events.filter(
        (event) => (event.type === "RequestOk" || event.type === "RequestCut") && event.replica === "router-1",
      ).length;
    assert.ok(inFlightBefore > 0, "router-1 has requests in flight when it is asked to restart");
    let leaseGoneAtMs: number | undefined;
    cluster.server.onCommit("Lease", (before, after) => {
      if (after === undefined && before?.metadata.name === "router-1") leaseGoneAtMs = cluster.clock.nowMs();
    });
    assert.equal(router.restartReplica(1), undefined);
    assert.equal(router.replicaDown(1), false, "still up while its requests finish");
    await cluster.advance(20 * SECOND);
    const goneAtMs = leaseGoneAtMs ?? Number.NaN;
    assert.ok(goneAtMs > 20 * SECOND, "its Lease is deleted once it is idle, not before");
    const during = events.slice(before).filter((event) => event.atMs <= goneAtMs);
    assert.ok(
      !during.some((event) => event.type === "RequestStarted" && event.replica === "router-1"),
      "no new request while it stops",
    );
    assert.ok(!events.slice(before).some((event) => event.type === "RequestCut"), "nothing is cut");
    assert.ok(lease(cluster, "router-1") !== undefined, "registered again");
    assert.ok(
      events.some((event) => event.type === "RequestStarted" && event.replica === "router-1" && event.atMs > goneAtMs),
    );
  });
});

describe("SimRouter: determinism", () => {
  async function run(seed: number): Promise<string> {
    const { cluster, router, events } = await setup([servingPod("d0"), servingPod("d1"), servingPod("d2")], {
      seed,
      requestsPerSecond: 30,
      requestSeconds: 3,
    });
    await cluster.advance(15 * SECOND);
    await annotate(cluster, "d1", { [DRAINING]: "2026-01-01T00:00:15Z" });
    await cluster.writer("test").delete({ kind: "Pod", namespace: "default", name: "d2" }, { gracePeriodSeconds: 0 });
    await cluster.advance(15 * SECOND);
    return JSON.stringify({ metrics: router.metrics(), events });
  }

  it("gives the same metrics and events for the same seed, and others for another seed", async () => {
    const first = await run(7);
    assert.equal(await run(7), first);
    assert.notEqual(await run(8), first);
  });

  it("reads containers as serving only while every one runs", () => {
    const pod = servingPod("x");
    assert.equal(servingSignature(pod), undefined);
    pod.status = { containerStatuses: [{ name: "main", containerID: "sim://n/1", state: { running: {} } }] };
    assert.equal(servingSignature(pod), "sim://n/1");
    pod.status = {
      containerStatuses: [{ name: "main", containerID: "sim://n/1", state: { terminated: { exitCode: 0 } } }],
    };
    assert.equal(servingSignature(pod), undefined);
  });
});
