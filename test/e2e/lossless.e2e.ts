/**
 * Lossless rollouts on real HTTP (issue "Lossless rollouts end to end"): the controller in-process
 * as its ServiceAccount, two `tandem router` processes as the router's ServiceAccount (each with its
 * own Lease and drain confirmations), KWOK nodes with the real scheduler and controller-manager, and
 * an engine-mock behind every entry pod (test/e2e/engine-pods.ts: pod IPs from the nodes' loopback
 * pod CIDRs, an engine stops the moment its pod starts terminating), under a bounded load of
 * streaming requests through both routers.
 *
 * - Decode rolling updates with the drain: every request ok (none failed, none cut), and every
 *   deleted entry pod carried both routers' confirmations when its deletion began.
 * - The same with `drain.timeoutSeconds: 0`: requests are cut (the mechanism is what saves them).
 * - Prefill and decode updated together with a KV format change: `SameRevision` pairs new with new
 *   and old with old (no request refused by a decode); `SameGroup` pairs across the formats and the
 *   engine-mock refuses them (HTTP 400 "kv format mismatch").
 *
 * Needs the binaries from `bash hack/kube-testenv/build.sh`. Run: node --test test/e2e/lossless.e2e.ts
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { request } from "undici";
import { drainedAnnotation } from "../../src/api/router-lease.ts";
import { type Cluster, CONTROLLER_NAMESPACE, freePorts, START_DELAY_ANNOTATION, startCluster } from "./cluster.ts";
import { type KubeClient, MODEL_ROUTES, MODEL_SERVINGS } from "./client.ts";
import { startEnginePods, type EnginePods } from "./engine-pods.ts";
import {
  ensureNamespace,
  installCrd,
  installRbac,
  startTandem,
  startTestController,
  type TandemProcess,
  type TestController,
} from "./env.ts";
import { type Load, type LoadCounts, startLoad } from "../../src/router/proxy/load.ts";
import { setRoleImage, waitUntil } from "./observe.ts";
import { waitFor } from "./wait.ts";

const CLUSTER_START_TIMEOUT_MS = 180_000;
/** 10,000 requests take ~150 s on a busy 2-core machine; 300 s ran out once at load average 24 beside a cold Go build. */
const TEST_TIMEOUT_MS = 420_000;
const ROLLOUT_TIMEOUT_MS = 120_000;
const NAMESPACE = "lossless";
const MODEL = "pd-model";
const ROUTER_IDS = ["router-a", "router-b"] as const;
/** Bounded load: the acceptance's 10,000 requests through the drained rollouts, fewer elsewhere. */
const DRAINED_REQUESTS = 10_000;
const UNDRAINED_REQUESTS = 3_000;
const PAIRING_REQUESTS = 10_000;
const CONCURRENCY = 24;
/** Each request: ~20 ms to the first token, then 24 tokens at 5 ms. */
const LATENCY = { ttftMs: 20, tpotMs: 5 } as const;
const MAX_TOKENS = 24;
const LONG_MAX_TOKENS = 200;

/**
 * 3 groups of two prefill and two decode instances, updated role by role, one group at a time and
 * one instance of each role at a time within it (the roles' default budget): so during an update of
 * both roles a group runs new and old instances of each side by side.
 */
function modelServing(name: string, drainTimeoutSeconds: number): any {
  const role = (roleName: string): any => ({
    name: roleName,
    replicas: 2,
    entryTemplate: {
      spec: {
        containers: [{ name: "engine", image: `engine:${roleName}-1`, env: [{ name: "KV_FORMAT", value: "v1" }] }],
      },
    },
  });
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name, namespace: NAMESPACE },
    spec: {
      replicas: 3,
      drain: { timeoutSeconds: drainTimeoutSeconds },
      rolloutStrategy: { type: "RoleRollingUpdate", rollingUpdateConfiguration: { maxUnavailable: 1 } },
      template: { roles: [role("prefill"), role("decode")] },
    },
  };
}

function modelRoute(name: string, pairing: "SameGroup" | "SameRevision", port: number): any {
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelRoute",
    metadata: { name, namespace: NAMESPACE },
    spec: {
      model: MODEL,
      modelServing: name,
      engine: "vllm",
      port,
      roles: { prefill: "prefill", decode: "decode" },
      pairing,
    },
  };
}

/**
 * Both roles to KV format `format` in one spec change (images `engine:<role>-<format>`): one new
 * revision. Its decode pods start 3 s late (KWOK's pod-ready stage reads the annotation), so a group
 * runs its new prefill beside its old decode for a while: the window in which pairing decides
 * whether a request meets a decode of the other format.
 */
async function setRoles(admin: KubeClient, name: string, format: string): Promise<void> {
  const object = await admin.get(MODEL_SERVINGS, name, NAMESPACE);
  for (const role of object.spec.template.roles) {
    role.entryTemplate.spec.containers[0].image = `engine:${role.name}-${format}`;
    role.entryTemplate.spec.containers[0].env = [{ name: "KV_FORMAT", value: format }];
    if (role.name === "decode")
      role.entryTemplate.metadata = { annotations: { [START_DELAY_ANNOTATION]: SLOW_NEW_DECODE } };
  }
  await admin.replace(MODEL_SERVINGS, object);
}
const SLOW_NEW_DECODE = "3s";

interface RouterProcess {
  readonly id: string;
  readonly url: string;
  readonly process: TandemProcess;
}

async function startRouters(cluster: Cluster): Promise<RouterProcess[]> {
  const ports = await freePorts(ROUTER_IDS.length);
  return ROUTER_IDS.map((id, index) => {
    const url = `http://127.0.0.1:${ports[index]}`;
    const args = [
      "router",
      "--kubeconfig",
      cluster.kubeconfigs.router,
      "--namespace",
      NAMESPACE,
      "--listen",
      url.slice("http://".length),
      "--id",
      id,
      "--log-level",
      "warn",
    ];
    return { id, url, process: startTandem(args, { POD_NAME: id, POD_NAMESPACE: CONTROLLER_NAMESPACE }) };
  });
}

/** Until one request through every router is answered 200 (its Lease, caches and endpoints are up). */
async function waitServing(routers: readonly RouterProcess[]): Promise<void> {
  for (const router of routers) {
    await waitFor(
      async () => {
        const body = JSON.stringify({ model: MODEL, prompt: "ping", max_tokens: 1 });
        const response = await request(`${router.url}/v1/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
        }).catch(() => undefined);
        await response?.body.dump();
        return response?.statusCode === 200 ? true : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 200, what: `router ${router.id} serving ${MODEL}` },
    ).catch((error: unknown) => {
      throw new Error(`${String(error)}; router output:\n${router.process.output().slice(-3000)}`);
    });
  }
}

function describeCounts(counts: LoadCounts): string {
  return `${counts.sent} sent, ${counts.ok} ok, ${counts.failed} failed ${JSON.stringify(counts.failedByStatus)}, ${counts.cut} cut; samples: ${counts.samples.join(" | ")}`;
}

/** Runs `rollout` once the load is under way, and checks the load still ran when the rollout ended. */
async function underLoad(load: Load, total: number, rollout: () => Promise<void>): Promise<void> {
  await waitFor(() => Promise.resolve(load.counts.sent > 200 ? true : undefined), {
    timeoutMs: 30_000,
    intervalMs: 20,
    what: "the load to start",
  });
  await rollout();
  assert.ok(load.counts.sent < total, `the rollout ended while the load ran (${load.counts.sent} of ${total} sent)`);
}

describe(
  "lossless rollouts on real HTTP (two routers, engine-mocks, the controller)",
  { timeout: CLUSTER_START_TIMEOUT_MS + 4 * TEST_TIMEOUT_MS },
  () => {
    let cluster: Cluster | undefined;
    let engines: EnginePods | undefined;
    let controller: TestController | undefined;
    let routers: RouterProcess[] = [];
    let enginePort = 0;
    const admin = (): KubeClient => {
      if (cluster === undefined) throw new Error("cluster not started");
      return cluster.admin;
    };

    before(async () => {
      cluster = await startCluster({ startTimeoutMs: CLUSTER_START_TIMEOUT_MS, nodes: { count: 4, gpusPerNode: 8 } });
      await installCrd(cluster.admin);
      await installRbac(cluster.admin);
      await ensureNamespace(cluster.admin, NAMESPACE);
      [enginePort] = (await freePorts(1)) as [number];
      engines = startEnginePods(cluster.admin, NAMESPACE, enginePort, LATENCY);
      controller = await startTestController(cluster);
      routers = await startRouters(cluster);
    });

    after(async () => {
      for (const router of routers) router.process.child.kill("SIGTERM");
      await Promise.all(routers.map((router) => router.process.exited));
      await controller?.running.stop();
      await engines?.close();
      await cluster?.stop();
    });

    test(
      "decode rolling updates with the drain: 10,000 requests, none failed or cut; every deleted pod had both routers' confirmations",
      { timeout: TEST_TIMEOUT_MS },
      async () => {
        await admin().create(MODEL_SERVINGS, modelServing("pd", 60));
        await admin().create(MODEL_ROUTES, modelRoute("pd", "SameRevision", enginePort));
        await waitUntil(admin(), NAMESPACE, "pd", "Available", ROLLOUT_TIMEOUT_MS);
        await waitServing(routers);
        const load = startLoad({
          routers: routers.map((router) => router.url),
          model: MODEL,
          total: DRAINED_REQUESTS,
          concurrency: CONCURRENCY,
          maxTokens: MAX_TOKENS,
          requestTimeoutMs: 30_000,
        });
        await underLoad(load, DRAINED_REQUESTS, async () => {
          for (const image of ["engine:decode-2", "engine:decode-3"]) {
            await setRoleImage(admin(), NAMESPACE, "pd", "decode", image);
            await waitUntil(admin(), NAMESPACE, "pd", "RolloutComplete", ROLLOUT_TIMEOUT_MS);
          }
        });
        await load.done;
        assert.equal(load.counts.failed + load.counts.cut, 0, describeCounts(load.counts));
        assert.equal(load.counts.ok, DRAINED_REQUESTS, describeCounts(load.counts));
        const deleted = engines?.deleted() ?? [];
        assert.ok(
          deleted.length === 12 && deleted.every((pod) => pod.role === "decode"),
          `two updates of 6 decode pods, no prefill touched: ${deleted.map((pod) => pod.name).join(", ")}`,
        );
        for (const pod of deleted) {
          const missing = ROUTER_IDS.filter((id) => pod.annotations[drainedAnnotation(id)] !== "true");
          assert.deepEqual(
            missing,
            [],
            `${pod.name} was deleted without the confirmation of ${missing.join(", ")}: ${JSON.stringify(pod.annotations)}`,
          );
        }
      },
    );

    test("the same update with drain.timeoutSeconds 0: requests are cut", { timeout: TEST_TIMEOUT_MS }, async () => {
      await admin().mergePatch(
        MODEL_SERVINGS,
        { namespace: NAMESPACE, name: "pd" },
        { spec: { drain: { timeoutSeconds: 0 } } },
      );
      // Longer answers (1 s of tokens) than elsewhere: a pod deleted at once must have some mid-stream.
      const load = startLoad({
        routers: routers.map((router) => router.url),
        model: MODEL,
        total: UNDRAINED_REQUESTS,
        concurrency: CONCURRENCY,
        maxTokens: LONG_MAX_TOKENS,
        requestTimeoutMs: 30_000,
      });
      await underLoad(load, UNDRAINED_REQUESTS, async () => {
        await setRoleImage(admin(), NAMESPACE, "pd", "decode", "engine:decode-4");
        await waitUntil(admin(), NAMESPACE, "pd", "RolloutComplete", ROLLOUT_TIMEOUT_MS);
      });
      load.stop();
      await load.done;
      assert.ok(load.counts.cut > 0, `without the drain some requests are cut: ${describeCounts(load.counts)}`);
    });

    test(
      "prefill and decode change KV format together: SameRevision pairs none across it, SameGroup does and the decode refuses",
      { timeout: 2 * TEST_TIMEOUT_MS },
      async (t) => {
        for (const [pairing, format] of [
          ["SameRevision", "v2"],
          ["SameGroup", "v3"],
        ] as const) {
          await admin().mergePatch(MODEL_ROUTES, { namespace: NAMESPACE, name: "pd" }, { spec: { pairing } });
          await admin().mergePatch(
            MODEL_SERVINGS,
            { namespace: NAMESPACE, name: "pd" },
            { spec: { drain: { timeoutSeconds: 60 } } },
          );
          await waitServing(routers);
          const load = startLoad({
            routers: routers.map((router) => router.url),
            model: MODEL,
            total: PAIRING_REQUESTS,
            concurrency: CONCURRENCY,
            maxTokens: MAX_TOKENS,
            requestTimeoutMs: 30_000,
          });
          await underLoad(load, PAIRING_REQUESTS, async () => {
            await setRoles(admin(), "pd", format);
            await waitUntil(admin(), NAMESPACE, "pd", "RolloutComplete", ROLLOUT_TIMEOUT_MS);
          });
          load.stop();
          await load.done;
          t.diagnostic(`${pairing}: ${describeCounts(load.counts)}`);
          if (pairing === "SameRevision") {
            assert.equal(load.counts.failed + load.counts.cut, 0, `SameRevision: ${describeCounts(load.counts)}`);
          } else {
            assert.ok(
              load.counts.kvMismatch > 0,
              `SameGroup pairs a new prefill with an old decode, which refuses it: ${describeCounts(load.counts)}`,
            );
          }
        }
      },
    );
  },
);
