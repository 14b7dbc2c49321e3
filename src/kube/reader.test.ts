import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { WatchEvent } from "../engine/ports.ts";
import { VirtualClock } from "../sim/clock.ts";
import { KubeReader } from "./reader.ts";
import { fakeSend, jsonResponse, until, watchResponse } from "./test-fakes.ts";
import type { Recorded } from "./test-fakes.ts";
import { KubeTransport } from "./transport.ts";
import type { HttpResponse } from "./transport.ts";

const pod = (name: string, resourceVersion: string): object => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "ns", resourceVersion, labels: { app: "x" } },
});
const list = (resourceVersion: string, ...items: object[]): object => ({
  apiVersion: "v1",
  kind: "PodList",
  metadata: { resourceVersion },
  items: items.map((item) => ({ ...item, kind: undefined, apiVersion: undefined })),
});

/** Readers started by the current test; stopped after it even when it failed. */
const started: KubeReader[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((reader) => reader.stop()));
});

/** A reader of pods only, on `handler`; resolves with it started, plus the recorded requests and delivered events. */
function podReader(handler: (request: Recorded, watchIndex: number) => HttpResponse, watchdogMs = 5_000) {
  let watches = 0;
  const { send, requests } = fakeSend((request) =>
    handler(request, request.path.includes("watch=true") ? watches++ : -1),
  );
  const clock = new VirtualClock();
  // A fixed jitter draw: backoff delays are the same on every run.
  const reader = new KubeReader({
    transport: new KubeTransport(send),
    clock,
    kinds: ["Pod"],
    namespace: "ns",
    reflector: { watchdogMs, baseDelayMs: 10, maxDelayMs: 40, random: () => 0.5 },
  });
  const events: string[] = [];
  reader.subscribe((event: WatchEvent) =>
    events.push(`${event.type} ${event.object.metadata.name}@${event.object.metadata.resourceVersion ?? ""}`),
  );
  reader.start();
  started.push(reader);
  const watchQueries = (): URLSearchParams[] =>
    requests
      .filter((request) => request.path.includes("watch=true"))
      .map((request) => new URLSearchParams(request.path.split("?")[1]));
  return { reader, clock, requests, events, watchQueries };
}

describe("KubeReader", () => {
  it("lists, then watches from the list's resourceVersion with bookmarks; events arrive in order", async () => {
    const { reader, clock, events, watchQueries } = podReader((request, watch) => {
      if (watch === -1) return jsonResponse(200, list("10", pod("a", "5"), pod("b", "6")));
      return watchResponse(
        watch === 0
          ? [
              { type: "ADDED", object: pod("c", "11") },
              { type: "MODIFIED", object: pod("a", "12") },
            ]
          : [],
        request.signal,
      );
    });
    await until(clock, "4 events", () => events.length === 4);
    assert.deepEqual(events, ["ADDED a@5", "ADDED b@6", "ADDED c@11", "MODIFIED a@12"]);
    assert.equal(reader.hasSynced(), true);
    const query = watchQueries()[0];
    assert.deepEqual(
      [query?.get("resourceVersion"), query?.get("allowWatchBookmarks"), query?.get("watch")],
      ["10", "true", "true"],
    );
    assert.equal(reader.get("Pod", "ns", "a")?.metadata.resourceVersion, "12");
    assert.deepEqual(
      reader.list("Pod", { labelSelector: "app=x" }).map((object) => object.metadata.name),
      ["a", "b", "c"],
    );
  });

  it("keeps objects without metadata.managedFields, from lists and watch events alike", async () => {
    const managed = (name: string, resourceVersion: string): object => {
      const object = pod(name, resourceVersion) as { metadata: object };
      return {
        ...object,
        metadata: { ...object.metadata, managedFields: [{ manager: "kubelet", operation: "Update" }] },
      };
    };
    const { reader, clock, events } = podReader((request, watch) => {
      if (watch === -1) return jsonResponse(200, list("10", managed("a", "5")));
      return watchResponse(watch === 0 ? [{ type: "ADDED", object: managed("b", "11") }] : [], request.signal);
    });
    await until(clock, "2 events", () => events.length === 2);
    for (const name of ["a", "b"]) {
      const metadata: Record<string, unknown> = { ...reader.get("Pod", "ns", name)?.metadata };
      assert.equal(metadata["resourceVersion"], name === "a" ? "5" : "11");
      assert.equal("managedFields" in metadata, false, name);
    }
  });

  it("on 410 Gone relists and delivers the difference: vanished objects DELETED, changed MODIFIED, new ADDED", async () => {
    let lists = 0;
    const { reader, clock, events, watchQueries } = podReader((request, watch) => {
      if (watch === -1)
        return jsonResponse(
          200,
          lists++ === 0 ? list("10", pod("a", "5"), pod("b", "6")) : list("30", pod("a", "25"), pod("c", "26")),
        );
      return watchResponse(
        watch === 0
          ? [
              {
                type: "ERROR",
                object: { kind: "Status", code: 410, reason: "Expired", message: "too old resource version" },
              },
            ]
          : [],
        request.signal,
      );
    });
    await until(clock, "the relist's events", () => events.length === 5);
    assert.deepEqual(events, ["ADDED a@5", "ADDED b@6", "DELETED b@6", "MODIFIED a@25", "ADDED c@26"]);
    await until(clock, "a watch from the new list", () => watchQueries().length === 2);
    assert.equal(watchQueries()[1]?.get("resourceVersion"), "30");
    assert.equal(reader.listCounts().Pod, 2);
  });

  it("a watch silent for the watchdog period is aborted and re-opened from the last resourceVersion, without a relist", async () => {
    const { reader, clock, watchQueries } = podReader((request, watch) => {
      if (watch === -1) return jsonResponse(200, list("10"));
      return watchResponse(
        watch === 0 ? [{ type: "BOOKMARK", object: { kind: "Pod", metadata: { resourceVersion: "15" } } }] : [],
        request.signal,
      );
    }, 50);
    await until(clock, "a second watch", () => watchQueries().length >= 2);
    assert.equal(clock.nowMs(), 50, "the watch was re-opened before the watchdog period passed");
    assert.equal(watchQueries()[1]?.get("resourceVersion"), "15", "the bookmark did not advance the resourceVersion");
    assert.equal(reader.listCounts().Pod, 1);
  });

  it("keeps retrying with backoff after errors (HTTP 500, network) and never stops on its own", async () => {
    let listCalls = 0;
    const { clock, events } = podReader((request, watch) => {
      if (watch === -1)
        return ++listCalls < 3
          ? jsonResponse(500, { kind: "Status", code: 500, reason: "InternalError" })
          : jsonResponse(200, list("10", pod("a", "5")));
      if (watch < 2) throw new TypeError("fetch failed");
      return watchResponse([{ type: "ADDED", object: pod("b", "11") }], request.signal);
    });
    await until(clock, "recovery", () => events.length === 2);
    assert.deepEqual(events, ["ADDED a@5", "ADDED b@11"]);
    assert.equal(listCalls, 3);
  });

  it("a clean end of the stream (server timeout) re-watches from the last event's resourceVersion", async () => {
    const { reader, clock, watchQueries } = podReader((request, watch) => {
      if (watch === -1) return jsonResponse(200, list("10"));
      return watchResponse(watch === 0 ? [{ type: "ADDED", object: pod("a", "12") }] : [], request.signal, watch === 0);
    });
    await until(clock, "a second watch", () => watchQueries().length >= 2);
    assert.equal(watchQueries()[1]?.get("resourceVersion"), "12");
    assert.equal(reader.listCounts().Pod, 1);
  });
});

describe("KubeReader: kinds watched in every namespace", () => {
  it("lists and watches a clusterWideKinds kind in every namespace, with its label selector, while the others stay in the namespace", async () => {
    const { send, requests } = fakeSend((request) =>
      request.path.includes("watch=true") ? watchResponse([], request.signal) : jsonResponse(200, list("1")),
    );
    const clock = new VirtualClock();
    const reader = new KubeReader({
      transport: new KubeTransport(send),
      clock,
      kinds: ["Pod", "Lease"],
      namespace: "ns",
      clusterWideKinds: ["Lease"],
      labelSelectors: { Lease: "tandem.dev/router=true" },
      reflector: { random: () => 0.5 },
    });
    reader.start();
    started.push(reader);
    await until(clock, "both synced", () => reader.hasSynced());
    const lists = requests
      .filter((request) => !request.path.includes("watch=true"))
      .map((request) => decodeURIComponent(request.path))
      .sort();
    assert.equal(lists.length, 2);
    assert.match(lists[0] ?? "", /^\/api\/v1\/namespaces\/ns\/pods\?/);
    assert.match(
      lists[1] ?? "",
      /^\/apis\/coordination\.k8s\.io\/v1\/leases\?.*labelSelector=tandem\.dev\/router=true/,
    );
  });
});
