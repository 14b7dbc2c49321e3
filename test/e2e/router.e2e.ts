/**
 * `tandem router` on the real kube-apiserver: the router runs in-process under its own
 * ServiceAccount (the admin identity impersonating `system:serviceaccount:tandem-system:tandem-router`,
 * with the RBAC `tandem manifests` ships), over a ModelRoute and entry pods created by the test,
 * whose `status.podIP` (127.0.0.1 and 127.0.0.2) points at engine-mocks on one port, and a
 * disaggregated route over a prefill and a decode pod (127.0.0.3, 127.0.0.4). Checked: requests
 * are routed to both pods, NIXL legs go to the prefill then the decode, the route status shows the endpoints and the conditions
 * (ModelConflict, ModelServingNotFound, NoReadyEndpoints), a draining mark moves a pod from ready
 * to draining, the router's identity is refused everything its RBAC does not grant, and a
 * graceful shutdown lets a request in flight finish. The drain handshake (DESIGN §3): the
 * router's Lease exists before it is ready or routes, a marked pod with an idle engine gets the
 * router's confirmation, a pod with a request of the router in flight only once it has finished,
 * and the Lease is deleted on a clean stop.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Agent, request } from "undici";
import { parse } from "yaml";
import { drainedAnnotation } from "../../src/api/router-lease.ts";
import {
  ANNOTATION_DRAINING,
  LABEL_ENTRY,
  LABEL_GROUP,
  LABEL_MODEL_SERVING,
  LABEL_REVISION,
  LABEL_ROLE,
  LABEL_ROLE_HASH,
  SERVING_GATE,
} from "../../src/api/wellknown.ts";
import { MemoryLogger } from "../../src/engine/logger.ts";
import { loadKubeConfig } from "../../src/kube/config.ts";
import { DEFAULT_NAMESPACE, ROUTER_NAME } from "../../src/kube/install.ts";
import { KubeHttpError } from "../../src/kube/errors.ts";
import type { Permission } from "../../src/kube/resources.ts";
import { clientNodeSend, KubeTransport } from "../../src/kube/transport.ts";
import type { Access, Send } from "../../src/kube/transport.ts";
import { startEngineMock } from "../../src/router/engine-mock/server.ts";
import type { EngineMock } from "../../src/router/engine-mock/server.ts";
import { runRouter } from "../../src/router/kube/run.ts";
import type { RunningRouter } from "../../src/router/kube/run.ts";
import { type Cluster, freePorts, startCluster } from "./cluster.ts";
import { type KubeClient, MODEL_ROUTES, MODEL_SERVINGS } from "./client.ts";
import { ensureNamespace, forbiddenLines, installCrd, installRbac, startTandem } from "./env.ts";
import { PODS } from "./observe.ts";
import { waitFor } from "./wait.ts";

const REPO_ROOT = join(import.meta.dirname, "..", "..");
const CLUSTER_START_TIMEOUT_MS = 180_000;
const TEST_TIMEOUT_MS = 60_000;
const NAMESPACE = "serve";
const ROUTER_USER = `system:serviceaccount:${DEFAULT_NAMESPACE}:${ROUTER_NAME}`;
const HOSTS = ["127.0.0.1", "127.0.0.2"] as const;
const LEASES = { group: "coordination.k8s.io", version: "v1", plural: "leases", namespaced: true } as const;
/** The in-process router's `<router-id>`: its Lease (in DEFAULT_NAMESPACE) and its confirmations. */
const ROUTER_ID = "e2e";
const CONFIRMED = drainedAnnotation(ROUTER_ID);
/** The prefill and the decode engine of the disaggregated route. */
const PD_HOSTS = ["127.0.0.3", "127.0.0.4"] as const;

/** The admin's connection, every request impersonating `user` (RBAC decides as for `user`). */
function impersonating(cluster: Cluster, user: string): Send {
  const send = clientNodeSend(loadKubeConfig(cluster.kubeconfigs.admin));
  return (exchange) => send({ ...exchange, headers: { ...exchange.headers, "impersonate-user": user } });
}

/** Two engine-mocks on one port, at `hosts` (a pod's address is podIP:route.port). */
async function startEngines(hosts: readonly [string, string]): Promise<EngineMock[]> {
  for (let tries = 0; tries < 10; tries++) {
    const first = await startEngineMock({ host: hosts[0], ttftMs: 20, tpotMs: 5 });
    try {
      return [first, await startEngineMock({ host: hosts[1], port: first.port, ttftMs: 20, tpotMs: 5 })];
    } catch {
      await first.close();
    }
  }
  throw new Error(`no port free on both ${hosts.join(" and ")}`);
}

function entryPod(name: string, host: string, modelServing = "qwen-small", role = "server"): any {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: NAMESPACE,
      labels: {
        [LABEL_MODEL_SERVING]: modelServing,
        [LABEL_ROLE]: role,
        [LABEL_GROUP]: "0",
        [LABEL_REVISION]: `${modelServing}-rev1`,
        [LABEL_ROLE_HASH]: "0123456789",
        [LABEL_ENTRY]: "true",
      },
    },
    spec: {
      containers: [{ name: "engine", image: "engine-mock:1" }],
      readinessGates: [{ conditionType: SERVING_GATE }],
    },
    statusToBe: {
      phase: "Running",
      podIP: host,
      podIPs: [{ ip: host }],
      conditions: [
        { type: "Ready", status: "True" },
        { type: SERVING_GATE, status: "True" },
      ],
    },
  };
}

async function createRunningPod(admin: KubeClient, pod: any): Promise<void> {
  const { statusToBe, ...object } = pod;
  const created = await admin.create(PODS, object);
  await admin.replace(PODS, { ...created, status: statusToBe }, "status");
}

function route(name: string, model: string, port: number, modelServing = "qwen-small"): any {
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelRoute",
    metadata: { name, namespace: NAMESPACE },
    spec: { model, modelServing, engine: "vllm", port, roles: { serve: "server" } },
  };
}

const conditionOf = (object: any, type: string): any =>
  object?.status?.conditions?.find((condition: any) => condition.type === type);

describe("tandem router on kube-apiserver", { timeout: CLUSTER_START_TIMEOUT_MS + 10 * TEST_TIMEOUT_MS }, () => {
  let cluster: Cluster;
  let engines: EngineMock[] = [];
  let router: RunningRouter | undefined;
  const logger = new MemoryLogger();
  const client = new Agent();
  /** `namespace/name` of every route status the router wrote, in order. */
  const statusWrites: string[] = [];
  const admin = (): KubeClient => cluster.admin;
  const url = (path: string): string => `http://${router?.address ?? ""}${path}`;
  const complete = (model: string, extra: object = {}) =>
    request(url("/v1/completions"), {
      dispatcher: client,
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, prompt: "hello", max_tokens: 4, ...extra }),
    });
  const routeObject = (name: string): Promise<any> => admin().get(MODEL_ROUTES, name, NAMESPACE);
  const waitForRoute = (name: string, what: string, check: (object: any) => boolean): Promise<any> =>
    waitFor(
      async () => {
        const object = await routeObject(name);
        return check(object) ? object : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 100, what: `route ${name}: ${what}` },
    );
  const routerLease = (): Promise<any> =>
    admin()
      .get(LEASES, ROUTER_ID, DEFAULT_NAMESPACE)
      .catch(() => undefined);
  const podAnnotations = async (name: string): Promise<Record<string, string>> =>
    ((await admin().get(PODS, name, NAMESPACE)).metadata.annotations ?? {}) as Record<string, string>;
  const statusOf = async (path: string): Promise<number> =>
    request(url(path), { dispatcher: client }).then(async (response) => {
      await response.body.dump();
      return response.statusCode;
    });
  /** Holds the router's Lease create until opened (the first test checks the router waits for it). */
  let openLeaseGate: () => void = () => undefined;
  const leaseGate = new Promise<void>((resolve) => {
    openLeaseGate = resolve;
  });

  before(
    async () => {
      cluster = await startCluster({ startTimeoutMs: CLUSTER_START_TIMEOUT_MS });
      await installCrd(cluster.admin);
      await installRbac(cluster.admin);
      await ensureNamespace(cluster.admin, NAMESPACE);
      engines = [...(await startEngines(HOSTS)), ...(await startEngines(PD_HOSTS))];
      const servingExample = parse(readFileSync(join(REPO_ROOT, "deploy", "examples", "single-role.yaml"), "utf8"));
      servingExample.metadata.namespace = NAMESPACE;
      await admin().create(MODEL_SERVINGS, servingExample);
      await createRunningPod(admin(), entryPod("qwen-0", HOSTS[0]));
      await createRunningPod(admin(), entryPod("qwen-1", HOSTS[1]));
      await admin().create(MODEL_ROUTES, route("qwen", "Qwen/Qwen3-8B", engines[0]!.port));
      const send = impersonating(cluster, ROUTER_USER);
      const counting: Send = async (exchange) => {
        if (exchange.method === "POST" && exchange.path.includes("/leases")) await leaseGate;
        const response = await send(exchange);
        const written = /\/namespaces\/([^/]+)\/modelroutes\/([^/]+)\/status/.exec(exchange.path);
        if (exchange.method === "PATCH" && written !== null && response.status === 200)
          statusWrites.push(`${written[1]}/${written[2]}`);
        return response;
      };
      router = await runRouter({
        send: counting,
        logger,
        listen: "127.0.0.1:0",
        id: ROUTER_ID,
        leaseNamespace: DEFAULT_NAMESPACE,
        debugHeaders: true,
        statusDelayMs: 50,
      });
    },
    { timeout: CLUSTER_START_TIMEOUT_MS + TEST_TIMEOUT_MS },
  );

  after(async () => {
    await router?.shutdown(1_000);
    await Promise.all(engines.map((engine) => engine.close()));
    await client.close();
    await cluster.stop();
  });

  test(
    "not ready and routing nothing until its Lease exists (DESIGN §3.1); ready once it does and its caches have synced; /healthz and /metrics answer",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      await waitFor(() => Promise.resolve(router?.discovery.hasSynced() === true ? true : undefined), {
        timeoutMs: 30_000,
        intervalMs: 50,
        what: "the caches synced",
      });
      assert.equal(await statusOf("/readyz"), 503, "synced, but no Lease yet");
      assert.equal(await routerLease(), undefined);
      const refused = await complete("Qwen/Qwen3-8B");
      assert.equal(refused.statusCode, 503);
      assert.match(
        JSON.stringify(await refused.body.json()),
        /router e2e has not registered its Lease tandem-system\/e2e yet/,
      );
      openLeaseGate();
      await waitFor(async () => ((await statusOf("/readyz")) === 200 ? true : undefined), {
        timeoutMs: 30_000,
        intervalMs: 50,
        what: "/readyz 200",
      });
      const lease = await routerLease();
      assert.deepEqual(
        [
          lease?.metadata.labels,
          lease?.metadata.annotations,
          lease?.spec.holderIdentity,
          lease?.spec.leaseDurationSeconds,
        ],
        [{ "tandem.dev/router": "true" }, { "tandem.dev/scope": "*" }, ROUTER_ID, 15],
      );
      assert.match(String(lease?.spec.renewTime), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
      const health = await request(url("/healthz"), { dispatcher: client });
      assert.equal(health.statusCode, 200);
      await health.body.dump();
    },
  );

  test("requests for the route's model are routed to both entry pods", { timeout: TEST_TIMEOUT_MS }, async () => {
    const served = new Set<string>();
    for (let i = 0; i < 12; i++) {
      const response = await complete("Qwen/Qwen3-8B");
      const body = (await response.body.json()) as { choices?: unknown[] };
      assert.equal(response.statusCode, 200, JSON.stringify(body));
      assert.ok(Array.isArray(body.choices));
      served.add(String(response.headers["x-tandem-endpoint"]));
    }
    assert.deepEqual([...served].sort(), ["qwen-0", "qwen-1"]);
    assert.equal(engines[0]!.stats().completed + engines[1]!.stats().completed, 12);
    const metrics = await (await request(url("/metrics"), { dispatcher: client })).body.text();
    assert.match(metrics, /tandem_router_requests_total\{model="Qwen\/Qwen3-8B",role="server",code="200"\} 12/);
    assert.match(metrics, /tandem_router_lease_state\{state="registered"\} 1/);
    assert.ok(
      logger.lines().filter((line) => line.message === "request" && line.fields["model"] === "Qwen/Qwen3-8B").length >=
        12,
      "one access-log line per request",
    );
  });

  test(
    "a disaggregated route: the prefill leg on the prefill pod, then the decode leg, whose answer streams to the client",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const serving = parse(readFileSync(join(REPO_ROOT, "deploy", "examples", "prefill-decode-2p1d.yaml"), "utf8"));
      serving.metadata.namespace = NAMESPACE;
      await admin().create(MODEL_SERVINGS, serving);
      await createRunningPod(admin(), entryPod("llama-prefill-0", PD_HOSTS[0], "llama-pd", "prefill"));
      await createRunningPod(admin(), entryPod("llama-decode-0", PD_HOSTS[1], "llama-pd", "decode"));
      const pd = route("llama-pd", "llama", engines[2]!.port, "llama-pd");
      pd.spec.roles = { prefill: "prefill", decode: "decode" };
      await admin().create(MODEL_ROUTES, pd);
      const object = await waitForRoute(
        "llama-pd",
        "Ready True",
        (candidate) => conditionOf(candidate, "Ready")?.status === "True",
      );
      assert.equal(object.status.mode, "Disaggregated");
      assert.deepEqual(
        object.status.endpoints.map((role: any) => [role.role, role.ready]),
        [
          ["prefill", 1],
          ["decode", 1],
        ],
      );
      const response = await complete("llama", { stream: true });
      const text = await response.body.text();
      assert.equal(response.statusCode, 200, text);
      assert.deepEqual(
        [response.headers["x-tandem-prefill"], response.headers["x-tandem-decode"]],
        ["llama-prefill-0", "llama-decode-0"],
      );
      assert.match(text, /data: \[DONE\]/);
      assert.deepEqual([engines[2]!.stats().legs.prefill, engines[3]!.stats().legs.decode], [1, 1]);
    },
  );

  test(
    "the route status shows the endpoints per role and revision, Accepted and Ready",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const object = await waitForRoute(
        "qwen",
        "Ready True",
        (candidate) => conditionOf(candidate, "Ready")?.status === "True",
      );
      assert.equal(object.status.mode, "Aggregated");
      assert.deepEqual(object.status.endpoints, [
        { role: "server", ready: 2, draining: 0, revisions: [{ revision: "qwen-small-rev1", ready: 2, draining: 0 }] },
      ]);
      assert.equal(conditionOf(object, "Accepted").reason, "Accepted");
      assert.equal(object.status.observedGeneration, object.metadata.generation);
    },
  );

  test(
    "a draining mark moves a pod from ready to draining; requests avoid it",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      await admin().mergePatch(
        PODS,
        { name: "qwen-1", namespace: NAMESPACE },
        { metadata: { annotations: { [ANNOTATION_DRAINING]: new Date().toISOString() } } },
      );
      const object = await waitForRoute(
        "qwen",
        "1 ready, 1 draining",
        (candidate) => candidate.status?.endpoints?.[0]?.draining === 1,
      );
      assert.deepEqual(object.status.endpoints[0], {
        role: "server",
        ready: 1,
        draining: 1,
        revisions: [{ revision: "qwen-small-rev1", ready: 1, draining: 1 }],
      });
      for (let i = 0; i < 4; i++) {
        const response = await complete("Qwen/Qwen3-8B");
        await response.body.dump();
        assert.equal(response.headers["x-tandem-endpoint"], "qwen-0");
      }
    },
  );

  test(
    "the marked pod, nothing of the router's in flight and its engine idle, gets the router's confirmation drained.tandem.dev/e2e",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      await waitFor(async () => ((await podAnnotations("qwen-1"))[CONFIRMED] === "true" ? true : undefined), {
        timeoutMs: 30_000,
        intervalMs: 100,
        what: `qwen-1 ${CONFIRMED}`,
      });
      assert.ok(
        logger
          .lines()
          .some((line) => line.message === "drain confirmed" && line.fields["pod"] === `${NAMESPACE}/qwen-1`),
      );
    },
  );

  test(
    "a marked pod with a request of the router in flight is confirmed only once that request has finished",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      // Seconds of streaming (800 tokens at 5 ms each) on qwen-0, the only eligible pod.
      const streaming = await complete("Qwen/Qwen3-8B", { max_tokens: 800, stream: true });
      assert.equal(streaming.headers["x-tandem-endpoint"], "qwen-0");
      await admin().mergePatch(
        PODS,
        { name: "qwen-0", namespace: NAMESPACE },
        { metadata: { annotations: { [ANNOTATION_DRAINING]: new Date().toISOString() } } },
      );
      let endedFlag = false;
      const ended = (): boolean => endedFlag;
      const body = streaming.body.text().then((text) => {
        endedFlag = true;
        return text;
      });
      // The router has seen the mark (the route counts both pods draining) while the request streams on.
      await waitForRoute("qwen", "2 draining", (candidate) => candidate.status?.endpoints?.[0]?.draining === 2);
      assert.equal(ended(), false, "the request still streams once the router has seen the mark");
      while (!ended()) {
        const annotations = await podAnnotations("qwen-0");
        if (!ended())
          assert.equal(annotations[CONFIRMED], undefined, "confirmed while our request was still in flight");
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.match(await body, /data: \[DONE\]/);
      await waitFor(async () => ((await podAnnotations("qwen-0"))[CONFIRMED] === "true" ? true : undefined), {
        timeoutMs: 30_000,
        intervalMs: 100,
        what: `qwen-0 ${CONFIRMED}`,
      });
      const metrics = await (await request(url("/metrics"), { dispatcher: client })).body.text();
      assert.match(metrics, /tandem_router_drain_confirmations_total 2/);
      // The drains are cancelled (as the controller would): both pods serve again.
      for (const name of ["qwen-0", "qwen-1"])
        await admin().mergePatch(
          PODS,
          { name, namespace: NAMESPACE },
          { metadata: { annotations: { [ANNOTATION_DRAINING]: null, [CONFIRMED]: null } } },
        );
      await waitForRoute("qwen", "2 ready", (candidate) => candidate.status?.endpoints?.[0]?.ready === 2);
    },
  );

  test(
    "a newer route for the same model is not Accepted (ModelConflict); a route of a missing ModelServing or role says ModelServingNotFound or RoleNotFound",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      await admin().create(MODEL_ROUTES, route("qwen-again", "Qwen/Qwen3-8B", engines[0]!.port));
      await admin().create(MODEL_ROUTES, route("nowhere", "other-model", engines[0]!.port, "missing"));
      const conflict = await waitForRoute(
        "qwen-again",
        "Accepted False",
        (candidate) => conditionOf(candidate, "Accepted")?.status === "False",
      );
      assert.equal(conditionOf(conflict, "Accepted").reason, "ModelConflict");
      assert.match(conditionOf(conflict, "Accepted").message, /served by the older route serve\/qwen/);
      const missing = await waitForRoute(
        "nowhere",
        "Accepted False",
        (candidate) => conditionOf(candidate, "Accepted")?.status === "False",
      );
      assert.equal(conditionOf(missing, "Accepted").reason, "ModelServingNotFound");
      assert.equal(conditionOf(missing, "Ready").reason, "NotAccepted");
      const wrong = route("wrong-role", "third-model", engines[0]!.port);
      wrong.spec.roles = { serve: "decode" };
      await admin().create(MODEL_ROUTES, wrong);
      const wrongRole = await waitForRoute(
        "wrong-role",
        "Accepted False",
        (candidate) => conditionOf(candidate, "Accepted")?.status === "False",
      );
      assert.equal(conditionOf(wrongRole, "Accepted").reason, "RoleNotFound");
      assert.equal(
        conditionOf(wrongRole, "Accepted").message,
        "ModelServing serve/qwen-small has no role decode (its roles: server)",
      );
    },
  );

  test(
    "the status is written only when it changes: a change elsewhere costs one write, of the route it changed",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const before = await routeObject("qwen");
      const writesBefore = statusWrites.length;
      // Every cache event schedules a sync of every route: this one changes only the new route's status.
      await admin().create(MODEL_ROUTES, route("late", "late-model", engines[0]!.port));
      await waitForRoute("late", "a status", (candidate) => conditionOf(candidate, "Ready") !== undefined);
      const later = await routeObject("qwen");
      assert.equal(
        later.metadata.resourceVersion,
        before.metadata.resourceVersion,
        "the unchanged route was not written",
      );
      assert.deepEqual(statusWrites.slice(writesBefore), ["serve/late"]);
    },
  );

  test(
    "the router's ServiceAccount is refused everything its RBAC does not grant, and was never refused what it sent",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const everything: Permission[] = [
        {
          group: "tandem.dev",
          resource: "modelroutes",
          verbs: ["get", "create", "update", "patch", "delete"],
          scope: "cluster",
        },
        { group: "tandem.dev", resource: "modelservings", verbs: ["get", "create", "patch"], scope: "cluster" },
        { group: "tandem.dev", resource: "modelservings/status", verbs: ["patch"], scope: "cluster" },
        { group: "", resource: "pods", verbs: ["get", "create", "patch", "delete"], scope: "cluster" },
        { group: "", resource: "pods/status", verbs: ["patch"], scope: "cluster" },
        { group: "", resource: "services", verbs: ["list"], scope: "cluster" },
        { group: "", resource: "events", verbs: ["create"], scope: "cluster" },
        { group: "coordination.k8s.io", resource: "leases", verbs: ["get", "create"], scope: "cluster" },
        { group: "apps", resource: "controllerrevisions", verbs: ["create", "delete"], scope: "cluster" },
      ];
      const transport = new KubeTransport(impersonating(cluster, ROUTER_USER), { permissions: everything });
      const refused: Access[] = [
        { verb: "get", kind: "ModelRoute", target: { namespace: NAMESPACE, name: "qwen" } },
        { verb: "create", kind: "ModelRoute", target: { namespace: NAMESPACE }, body: route("mine", "mine", 8000) },
        {
          verb: "patch",
          kind: "ModelRoute",
          target: { namespace: NAMESPACE, name: "qwen" },
          body: { spec: { port: 1 } },
          contentType: "application/merge-patch+json",
        },
        { verb: "delete", kind: "ModelRoute", target: { namespace: NAMESPACE, name: "qwen" } },
        {
          verb: "patch",
          kind: "ModelServing",
          target: { namespace: NAMESPACE, name: "qwen-small" },
          body: { spec: {} },
          contentType: "application/merge-patch+json",
        },
        {
          verb: "patch",
          kind: "ModelServing",
          target: { namespace: NAMESPACE, name: "qwen-small", subresource: "status" },
          body: { status: {} },
          contentType: "application/merge-patch+json",
        },
        { verb: "get", kind: "Pod", target: { namespace: NAMESPACE, name: "qwen-0" } },
        { verb: "create", kind: "Pod", target: { namespace: NAMESPACE }, body: entryPod("rogue", HOSTS[0]) },
        {
          verb: "patch",
          kind: "Pod",
          target: { namespace: NAMESPACE, name: "qwen-0", subresource: "status" },
          body: { status: {} },
          contentType: "application/merge-patch+json",
        },
        { verb: "delete", kind: "Pod", target: { namespace: NAMESPACE, name: "qwen-0" } },
        { verb: "list", kind: "Service", target: {} },
        {
          verb: "create",
          kind: "Event",
          target: { namespace: NAMESPACE },
          body: { metadata: { name: "e" }, involvedObject: {} },
        },
        { verb: "get", kind: "Lease", target: { namespace: DEFAULT_NAMESPACE, name: "any" } },
        // Its Leases only in its own namespace.
        {
          verb: "create",
          kind: "Lease",
          target: { namespace: NAMESPACE },
          body: { metadata: { name: "elsewhere" }, spec: {} },
        },
        { verb: "delete", kind: "ControllerRevision", target: { namespace: NAMESPACE, name: "any" } },
      ];
      for (const access of refused) {
        const error = await transport.request(access).then(
          () => undefined,
          (failure: unknown) => failure,
        );
        assert.ok(
          error instanceof KubeHttpError && error.status === 403,
          `${access.verb} ${access.kind}${access.target.subresource === undefined ? "" : `/${access.target.subresource}`}: expected 403, got ${String(error)}`,
        );
      }
      assert.deepEqual(forbiddenLines(logger), [], "the router was refused by its own RBAC");
    },
  );

  test(
    "shutdown: not ready at once, a request in flight finishes, new connections are refused",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const running = router;
      assert.ok(running);
      const inFlight = complete("Qwen/Qwen3-8B", { max_tokens: 40, stream: true });
      await waitFor(
        () => Promise.resolve(engines[0]!.stats().running + engines[1]!.stats().running > 0 ? true : undefined),
        { timeoutMs: 10_000, intervalMs: 5, what: "the request running on an engine" },
      );
      const stopped = running.shutdown(10_000);
      assert.equal(running.isReady(), false);
      const response = await inFlight;
      const text = await response.body.text();
      assert.equal(response.statusCode, 200);
      assert.match(text, /data: \[DONE\]/);
      await stopped;
      await assert.rejects(request(url("/healthz")));
      assert.equal(await routerLease(), undefined, "the Lease is deleted on a clean stop");
      router = undefined;
    },
  );

  test(
    "tandem router as a process: ready, routes, JSON access log, exit 0 on SIGTERM",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const [port] = await freePorts(1);
      const {
        child,
        output: outputSoFar,
        exited,
      } = startTandem([
        "router",
        "--kubeconfig",
        cluster.kubeconfigs.admin,
        "--namespace",
        NAMESPACE,
        "--listen",
        `127.0.0.1:${port}`,
        "--id",
        "cli",
      ]);
      try {
        const base = `http://127.0.0.1:${port}`;
        await waitFor(
          async () => ((await fetch(`${base}/readyz`).catch(() => undefined))?.status === 200 ? true : undefined),
          { timeoutMs: 30_000, intervalMs: 100, what: "/readyz 200" },
        );
        const response = await fetch(`${base}/v1/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "Qwen/Qwen3-8B", prompt: "hi", max_tokens: 2 }),
        });
        assert.equal(response.status, 200, await response.text());
        child.kill("SIGTERM");
        const code = await exited;
        const output = outputSoFar();
        assert.equal(code, 0, output);
        const lines = output
          .trim()
          .split("\n")
          .map((line) => JSON.parse(line) as { msg: string; router?: string; status?: number });
        assert.ok(lines.some((line) => line.msg === "router started" && line.router === "cli"));
        assert.ok(lines.some((line) => line.msg === "request" && line.status === 200));
        assert.ok(lines.some((line) => line.msg === "router stopped"));
      } finally {
        if (child.exitCode === null) child.kill("SIGKILL");
      }
    },
  );
});
