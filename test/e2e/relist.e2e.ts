/**
 * The informer cache after etcd compaction: its watch is cut, changes happen meanwhile, etcd is
 * compacted past the cache's resourceVersion, and the re-watch is answered 410 Gone. The cache
 * must relist and deliver exactly the difference (DELETED, MODIFIED, ADDED), never stop.
 *
 * The API server runs with `--watch-cache=false`, so watches are served by etcd itself and a
 * compacted revision is refused as it would be after a long disconnection in production.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { WatchEvent } from "../../src/engine/ports.ts";
import { silentLogger } from "../../src/engine/logger.ts";
import { WallClock } from "../../src/kube/clock.ts";
import { loadKubeConfig } from "../../src/kube/config.ts";
import { KubeReader } from "../../src/kube/reader.ts";
import { clientNodeSend, KubeTransport } from "../../src/kube/transport.ts";
import type { Send } from "../../src/kube/transport.ts";
import { type Cluster, startCluster } from "./cluster.ts";
import { ensureNamespace, installCrd, installRbac } from "./env.ts";
import { PODS } from "./observe.ts";
import { waitFor } from "./wait.ts";

const NAMESPACE = "e2e-relist";

/** A Send whose watch requests can be cut (aborted) and held back until `open()`. */
function gatedSend(inner: Send): { send: Send; cut(): void; close(): void; open(): void } {
  const live = new Set<AbortController>();
  let gate: { promise: Promise<void>; release: () => void } | undefined;
  const send: Send = async (request) => {
    if (!request.path.includes("watch=true")) return inner(request);
    await gate?.promise;
    // Kept until the stream ends (the request's signal aborts), not just until headers arrive.
    const controller = new AbortController();
    live.add(controller);
    const signal = AbortSignal.any([request.signal, controller.signal]);
    signal.addEventListener(
      "abort",
      () => {
        live.delete(controller);
      },
      { once: true },
    );
    return inner({ ...request, signal });
  };
  return {
    send,
    cut: () => {
      for (const controller of live) controller.abort();
    },
    close: () => {
      let release = (): void => undefined;
      const promise = new Promise<void>((resolve) => {
        release = resolve;
      });
      gate = { promise, release };
    },
    open: () => {
      gate?.release();
      gate = undefined;
    },
  };
}

/** Compacts etcd at its current revision (physically), so every older revision is gone. */
async function compactEtcd(etcdUrl: string): Promise<number> {
  const range = await fetch(`${etcdUrl}/v3/kv/range`, {
    method: "POST",
    body: JSON.stringify({ key: Buffer.from("/").toString("base64") }),
  });
  const revision = Number(((await range.json()) as { header: { revision: string } }).header.revision);
  const compaction = await fetch(`${etcdUrl}/v3/kv/compaction`, {
    method: "POST",
    body: JSON.stringify({ revision: String(revision), physical: true }),
  });
  assert.equal(compaction.status, 200, await compaction.text());
  return revision;
}

const pod = (name: string): any => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: NAMESPACE, labels: { app: "relist" } },
  spec: { containers: [{ name: "c", image: "x" }] },
});

describe("informer relist after etcd compaction", { timeout: 300_000 }, () => {
  let cluster: Cluster;
  before(
    async () => {
      cluster = await startCluster({ startTimeoutMs: 180_000, extraApiServerArgs: ["--watch-cache=false"] });
      await installCrd(cluster.admin);
      await installRbac(cluster.admin);
      await ensureNamespace(cluster.admin, NAMESPACE);
    },
    { timeout: 240_000 },
  );

  after(async () => {
    await cluster.stop();
  });

  test("a watch refused with 410 relists and delivers the difference", { timeout: 60_000 }, async () => {
    await cluster.admin.create(PODS, pod("a"));
    await cluster.admin.create(PODS, pod("b"));
    const gate = gatedSend(clientNodeSend(loadKubeConfig(cluster.kubeconfigs.controller)));
    const reader = new KubeReader({
      transport: new KubeTransport(gate.send),
      clock: new WallClock(),
      kinds: ["Pod"],
      namespace: NAMESPACE,
      logger: silentLogger,
      reflector: { baseDelayMs: 50, maxDelayMs: 200 },
    });
    const events: string[] = [];
    reader.subscribe((event: WatchEvent) => events.push(`${event.type} ${event.object.metadata.name}`));
    reader.start();
    try {
      await waitFor(() => Promise.resolve(reader.hasSynced() && events.length === 2 ? true : undefined), {
        timeoutMs: 20_000,
        what: "the initial list",
      });
      gate.close();
      gate.cut();
      await cluster.admin.delete(PODS, "b", NAMESPACE);
      await cluster.admin.create(PODS, pod("c"));
      await cluster.admin.mergePatch(
        PODS,
        { namespace: NAMESPACE, name: "a" },
        { metadata: { labels: { changed: "yes" } } },
      );
      await compactEtcd(cluster.etcdUrl);
      gate.open();
      await waitFor(() => Promise.resolve(reader.listCounts().Pod === 2 && events.length === 5 ? true : undefined), {
        timeoutMs: 20_000,
        what: "a relist and its events",
      }).catch((error: unknown) => {
        throw new Error(
          `${String(error)}; events ${JSON.stringify(events)}, lists ${JSON.stringify(reader.listCounts())}`,
        );
      });
      assert.deepEqual(events.slice(2).sort(), ["ADDED c", "DELETED b", "MODIFIED a"]);
      assert.deepEqual(
        reader.list("Pod").map((object) => object.metadata.name),
        ["a", "c"],
      );
      assert.equal(reader.get("Pod", NAMESPACE, "a")?.metadata.labels?.["changed"], "yes");
      // And it keeps watching after the relist.
      await cluster.admin.create(PODS, pod("d"));
      await waitFor(() => Promise.resolve(events.includes("ADDED d") ? true : undefined), {
        timeoutMs: 20_000,
        what: "a watch event after the relist",
      });
    } finally {
      gate.open();
      await reader.stop();
    }
  });
});
