import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { silentLogger } from "../../engine/logger.ts";
import { ROUTER_PERMISSIONS } from "../../kube/resources.ts";
import { fakeSend, jsonResponse, permissionOf, until, watchResponse } from "../../kube/test-fakes.ts";
import type { Recorded } from "../../kube/test-fakes.ts";
import { KubeTransport } from "../../kube/transport.ts";
import type { HttpResponse } from "../../kube/transport.ts";
import { KubeWriter } from "../../kube/writer.ts";
import { VirtualClock } from "../../sim/clock.ts";
import { DrainConfirmer } from "../confirmer.ts";
import type { EngineProbe } from "../confirmer.ts";
import { InFlight } from "../proxy/inflight.ts";
import { RouterRegistration } from "../registration.ts";
import { aPod } from "../test-fixtures.ts";
import { KubeDiscovery } from "./discovery.ts";
import { RouteStatusSync } from "./status-sync.ts";

const route = (name: string, model: string, extra: Record<string, unknown> = {}) => ({
  apiVersion: "tandem.dev/v1alpha1",
  kind: "ModelRoute",
  metadata: { name, namespace: "ns", resourceVersion: "5", generation: 1, creationTimestamp: "2026-01-01T00:00:00Z" },
  spec: { model, modelServing: "ms", engine: "vllm", port: 9000, roles: { serve: "serve" }, ...extra },
});
const modelServing = {
  apiVersion: "tandem.dev/v1alpha1",
  kind: "ModelServing",
  metadata: { name: "ms", namespace: "ns", resourceVersion: "2" },
  spec: { template: { roles: [{ name: "serve" }, { name: "extra" }] } },
};

interface World {
  routes: object[];
  pods: object[];
  /** Holds back the ControllerRevision list until it resolves. */
  revisionsListed?: Promise<void>;
  /** Answers a status patch; default 200 with the patched object. */
  patch?: (request: Recorded) => HttpResponse;
}

/** A fake API server for the four kinds: lists from `world`, watches that stay open. */
function apiServer(world: World) {
  return fakeSend(async (request) => {
    if (request.path.includes("/controllerrevisions?") && !request.path.includes("watch=true"))
      await world.revisionsListed;
    if (request.method === "POST") return jsonResponse(201, request.json);
    if (request.method === "DELETE") return jsonResponse(200, { kind: "Status", status: "Success" });
    if (request.method === "PATCH" && !request.path.includes("/modelroutes/")) return jsonResponse(200, request.json);
    if (request.method === "PATCH")
      return (
        world.patch?.(request) ??
        jsonResponse(200, { ...route("r", "m"), status: (request.json as { status: unknown }).status })
      );
    if (request.path.includes("watch=true")) return watchResponse([], request.signal);
    const items = request.path.includes("/modelroutes")
      ? world.routes
      : request.path.includes("/pods")
        ? world.pods
        : request.path.includes("/modelservings")
          ? [modelServing]
          : [];
    return jsonResponse(200, { metadata: { resourceVersion: "10" }, items });
  });
}

const started: KubeDiscovery[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((discovery) => discovery.stop()));
});

async function startDiscovery(world: World, synced = true) {
  const { send, requests } = apiServer(world);
  const clock = new VirtualClock();
  const transport = new KubeTransport(send, { permissions: ROUTER_PERMISSIONS });
  const discovery = new KubeDiscovery({ transport, clock, logger: silentLogger, namespace: "ns" });
  discovery.start();
  started.push(discovery);
  if (synced) await until(clock, "the caches synced", () => discovery.hasSynced());
  return { discovery, requests, clock, transport };
}

describe("KubeDiscovery", () => {
  it("serves the parsed routes, the entry pods of each route's ModelServing at podIP:port, and keeps an invalid route for its status", async () => {
    const pods = [
      aPod({ name: "a", host: "10.0.0.1" }).pod,
      aPod({ name: "b", host: "10.0.0.2" }).pod,
      aPod({ name: "other", modelServing: "x" }).pod,
      aPod({ name: "worker", entry: false }).pod,
    ];
    const { discovery, requests } = await startDiscovery({
      routes: [route("r", "m"), route("bad", "m2", { roles: {} })],
      pods,
    });
    assert.deepEqual(
      discovery.routes().map((served) => [served.name, served.model, served.port, served.kvConnector]),
      [["r", "m", 9000, "nixl"]],
    );
    const [served] = discovery.routes();
    assert.ok(served);
    assert.deepEqual(
      discovery.pods(served).map(({ pod, address }) => [pod.metadata.name, address?.host, address?.port]),
      [
        ["a", "10.0.0.1", 9000],
        ["b", "10.0.0.2", 9000],
      ],
    );
    assert.equal(discovery.pods(served), discovery.pods(served), "memoized until the next pod event");
    const invalid = discovery.storedRoutes().find((stored) => stored.object.metadata.name === "bad");
    assert.equal(invalid?.parsed.ok, false);
    assert.deepEqual(discovery.modelServingRoles("ns", "ms"), ["serve", "extra"]);
    assert.equal(discovery.modelServingRoles("ns", "gone"), undefined);
    assert.equal(discovery.revision("ns", "ms-rev1"), undefined, "an unknown revision");
    assert.ok(
      requests.every((request) => request.path.includes("/namespaces/ns/")),
      "only the one namespace is read",
    );
    const podQueries = requests
      .filter((request) => request.path.includes("/pods?"))
      .map((request) => new URLSearchParams(request.path.split("?")[1]).get("labelSelector"));
    assert.deepEqual(
      podQueries,
      ["tandem.dev/entry=true", "tandem.dev/entry=true"],
      "entry pods only, listed and watched",
    );
  });
});

describe("RouteStatusSync", () => {
  it("writes a changed status once, as a merge patch of the status subresource carrying the resourceVersion it was computed from", async () => {
    const { discovery, requests, clock, transport } = await startDiscovery({
      routes: [route("r", "m")],
      pods: [aPod({ name: "a" }).pod],
    });
    const sync = new RouteStatusSync({ discovery, writer: new KubeWriter(transport), clock, logger: silentLogger });
    assert.deepEqual(await sync.sync(), { written: 1, conflicts: 0, failed: 0 });
    const patches = requests.filter((request) => request.method === "PATCH");
    assert.equal(patches.length, 1);
    const [patch] = patches;
    assert.ok(patch);
    assert.match(patch.path, /^\/apis\/tandem\.dev\/v1alpha1\/namespaces\/ns\/modelroutes\/r\/status\?/);
    assert.equal(patch.headers["content-type"], "application/merge-patch+json");
    const body = patch.json as {
      metadata: { resourceVersion: string };
      status: { mode: string; endpoints: { ready: number }[]; conditions: { type: string; status: string }[] };
    };
    assert.equal(body.metadata.resourceVersion, "5");
    assert.equal(body.status.mode, "Aggregated");
    assert.equal(body.status.endpoints[0]?.ready, 1);
    assert.deepEqual(
      body.status.conditions.map((condition) => `${condition.type}=${condition.status}`),
      ["Accepted=True", "Ready=True"],
    );
  });

  it("writes nothing when the stored status is the one it computes (another replica wrote it)", async () => {
    const world: World = { routes: [route("r", "m")], pods: [aPod({ name: "a" }).pod] };
    const first = await startDiscovery(world);
    const sync = new RouteStatusSync({
      discovery: first.discovery,
      writer: new KubeWriter(first.transport),
      clock: first.clock,
      logger: silentLogger,
    });
    await sync.sync();
    const written = (first.requests.find((request) => request.method === "PATCH")?.json as { status: object }).status;
    // A second replica whose cache holds the route with that status.
    const second = await startDiscovery({ ...world, routes: [{ ...route("r", "m"), status: written }] });
    const again = new RouteStatusSync({
      discovery: second.discovery,
      writer: new KubeWriter(second.transport),
      clock: second.clock,
      logger: silentLogger,
    });
    assert.deepEqual(await again.sync(), { written: 0, conflicts: 0, failed: 0 });
    assert.equal(second.requests.filter((request) => request.method === "PATCH").length, 0);
  });

  it("started before the caches synced, it writes once they have, though the last kind synced brought no event", async () => {
    let release: () => void = () => undefined;
    const revisionsListed = new Promise<void>((resolve) => {
      release = resolve;
    });
    const { discovery, requests, clock, transport } = await startDiscovery(
      { routes: [route("r", "m")], pods: [], revisionsListed },
      false,
    );
    const sync = new RouteStatusSync({
      discovery,
      writer: new KubeWriter(transport),
      clock,
      logger: silentLogger,
      delayMs: 10,
    });
    sync.start();
    await until(
      clock,
      "routes, pods and servings listed",
      () => requests.filter((request) => !request.path.includes("watch=true")).length >= 3,
    );
    // The sync the first events scheduled comes due while ControllerRevisions are still listing.
    clock.advance(20);
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(discovery.hasSynced(), false);
    release();
    await until(clock, "the status written", () => requests.some((request) => request.method === "PATCH"));
    await sync.stop();
  });

  it("a 409 (the route changed since the cache saw it) is a conflict, not an error: counted, logged nowhere, retried on the next change", async () => {
    const conflict = jsonResponse(409, {
      kind: "Status",
      code: 409,
      reason: "Conflict",
      message: "the object has been modified",
    });
    const { discovery, clock, transport } = await startDiscovery({
      routes: [route("r", "m")],
      pods: [],
      patch: () => conflict,
    });
    const sync = new RouteStatusSync({ discovery, writer: new KubeWriter(transport), clock, logger: silentLogger });
    assert.deepEqual(await sync.sync(), { written: 0, conflicts: 1, failed: 0 });
  });

  it("the older route keeps a conflicting model; the newer one is not Accepted (ModelConflict)", async () => {
    const newer = {
      ...route("newer", "m"),
      metadata: { ...route("newer", "m").metadata, creationTimestamp: "2026-02-01T00:00:00Z" },
    };
    const { discovery, requests, clock, transport } = await startDiscovery({
      routes: [route("r", "m"), newer],
      pods: [],
    });
    await new RouteStatusSync({ discovery, writer: new KubeWriter(transport), clock, logger: silentLogger }).sync();
    const accepted = Object.fromEntries(
      requests
        .filter((request) => request.method === "PATCH")
        .map((request) => {
          const status = (request.json as { status: { conditions: { type: string; reason: string }[] } }).status;
          return [
            request.path.split("/")[7],
            status.conditions.find((condition) => condition.type === "Accepted")?.reason,
          ];
        }),
    );
    assert.deepEqual(accepted, { r: "Accepted", newer: "ModelConflict" });
  });
});

it("the router's requests — discovery, route status, its Lease, drain confirmations — use exactly ROUTER_PERMISSIONS (least privilege, both ways)", async () => {
  const marked = aPod({ name: "a", draining: true });
  const pod = { ...marked.pod, metadata: { ...marked.pod.metadata, uid: "uid-a" } };
  const { discovery, requests, clock, transport } = await startDiscovery({ routes: [route("r", "m")], pods: [pod] });
  const writer = new KubeWriter(transport);
  await new RouteStatusSync({ discovery, writer, clock, logger: silentLogger }).sync();
  const registration = new RouterRegistration({
    id: "r1",
    namespace: "ns",
    scope: { all: true },
    writer,
    clock,
    logger: silentLogger,
  });
  registration.start();
  await until(
    clock,
    "a renewal",
    () => requests.filter((request) => request.path.includes("/leases/r1") && request.method === "PATCH").length > 0,
  );
  const idle: EngineProbe = {
    sequence: () => 0,
    queueAfter: () => ({ ok: true, running: 0, waiting: 0 }),
    scrapeSoon: () => 0,
    onScrape: () => () => undefined,
  };
  const confirmed: string[] = [];
  const confirmer = new DrainConfirmer({
    routerId: "r1",
    discovery,
    legs: new InFlight(),
    engine: idle,
    writer,
    clock,
    logger: silentLogger,
    onConfirmed: (confirmedPod) => confirmed.push(confirmedPod.metadata.name),
  });
  confirmer.start();
  await until(clock, "the confirmation", () => confirmed.length === 1);
  await confirmer.stop();
  await registration.stop();
  const used = new Set(requests.map(permissionOf));
  const granted = new Set(
    ROUTER_PERMISSIONS.flatMap((permission) =>
      permission.verbs.map((verb) => `${permission.group} ${permission.resource} ${verb}`),
    ),
  );
  assert.deepEqual([...used].sort(), [...granted].sort());
});
