/**
 * `tandem dashboard` on a real kube-apiserver, run by a person bound to the `tandem-dashboard`
 * roles only (through deploy/dashboard-binding.example.yaml, as the README tells users): its stream
 * (and, with Chromium installed, its page) shows the ModelServing the controller runs — its cells
 * at revision 1, then at revision 2 after a decode update — and the requests per second a real
 * `tandem router` process counts. Everything on 127.0.0.1; every wait bounded.
 *
 * Needs the binaries from `bash hack/kube-testenv/build.sh`. Run: node --test test/e2e/dashboard.e2e.ts
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parse, parseAllDocuments } from "yaml";
import { chromium } from "playwright-core";
import type { DashboardState } from "../../src/dashboard/state.ts";
import { CONTROLLER_NAMESPACE, type Cluster, freePorts, startCluster } from "./cluster.ts";
import { MODEL_SERVINGS } from "./client.ts";
import { applyRbac, ensureNamespace, installCrd, installRbac, startTandem, startTestController } from "./env.ts";
import type { TandemProcess, TestController } from "./env.ts";
import { setRoleImage, waitUntil } from "./observe.ts";
import { waitFor } from "./wait.ts";

const REPO_ROOT = join(import.meta.dirname, "..", "..");
const CLUSTER_START_TIMEOUT_MS = 180_000;
const TEST_TIMEOUT_MS = 180_000;
const CONVERGE_MS = 90_000;
const NAMESPACE = "e2e-dashboard";

/** The state the stream sends first on a new connection (the latest one). */
async function firstState(url: string): Promise<DashboardState> {
  const controller = new AbortController();
  const response = await fetch(`${url}/events`, { signal: controller.signal });
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error("the stream ended before a state");
      buffered += value;
      const match = /event: state\ndata: (.*)\n\n/.exec(buffered);
      if (match?.[1] !== undefined) return JSON.parse(match[1]) as DashboardState;
    }
  } finally {
    controller.abort();
  }
}

/** Every cell of the one ModelServing, as `role:revisionNumber:state`, once `test` holds for them. */
async function cellsWhen(url: string, test: (cells: string[]) => boolean, what: string): Promise<string[]> {
  return waitFor(
    async () => {
      const view = (await firstState(url)).snapshot.modelServings[0];
      const cells = (view?.groups ?? []).flatMap((row) =>
        Object.entries(row.roles).flatMap(([role, instances]) =>
          instances.map((cell) => `${role}:${cell.revisionNumber}:${cell.state}`),
        ),
      );
      return test(cells) ? cells : undefined;
    },
    { timeoutMs: CONVERGE_MS, intervalMs: 500, what },
  );
}

/**
 * Requests for a model nobody serves (the router answers 404) show on the timeline as failed
 * requests per second, read from the router's /metrics, with the one router reporting.
 */
async function requestRatesShown(url: string, routerUrl: string): Promise<void> {
  await waitFor(
    async () => {
      const body = JSON.stringify({ model: "no-such-model", prompt: "ping", max_tokens: 1 });
      const sent = await fetch(`${routerUrl}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
        signal: AbortSignal.timeout(5_000),
      }).then(
        (response) => response.status,
        () => 0,
      );
      if (sent !== 404) return undefined;
      const { timeline } = await firstState(url);
      const failed = timeline.points.some((point) => (point.requests?.failed ?? 0) > 0);
      const reporting = timeline.requestSources?.reporting === 1 && timeline.requestSources.known === 1;
      return failed && reporting ? true : undefined;
    },
    {
      timeoutMs: CONVERGE_MS,
      intervalMs: 500,
      what: "the router's 404s as failed requests per second, 1 of 1 router reporting",
    },
  );
}

describe("tandem dashboard on kube-apiserver", { timeout: CLUSTER_START_TIMEOUT_MS + TEST_TIMEOUT_MS }, () => {
  let cluster: Cluster;
  let controller: TestController | undefined;
  let dashboard: TandemProcess | undefined;
  let router: TandemProcess | undefined;
  let routerUrl = "";

  before(
    async () => {
      // KWOK nodes run the 2P1D example's pods.
      cluster = await startCluster({ startTimeoutMs: CLUSTER_START_TIMEOUT_MS, nodes: { count: 4, gpusPerNode: 8 } });
      await installCrd(cluster.admin);
      await installRbac(cluster.admin);
      controller = await startTestController(cluster);
      await ensureNamespace(cluster.admin, NAMESPACE);
      // The README's way to let people look: the example binding, applied as it ships.
      const binding = readFileSync(join(REPO_ROOT, "deploy", "dashboard-binding.example.yaml"), "utf8");
      await applyRbac(
        cluster.admin,
        parseAllDocuments(binding).flatMap((document) => (document.contents === null ? [] : [document.toJS()])),
      );
      routerUrl = `http://127.0.0.1:${(await freePorts(1))[0]}`;
      const args = ["router", "--kubeconfig", cluster.kubeconfigs.router, "--listen", routerUrl.slice(7)];
      router = startTandem([...args, "--id", "e2e-dashboard", "--log-level", "warn"], {
        POD_NAME: "e2e-dashboard",
        POD_NAMESPACE: CONTROLLER_NAMESPACE,
      });
    },
    { timeout: CLUSTER_START_TIMEOUT_MS },
  );

  after(async () => {
    dashboard?.child.kill("SIGTERM");
    router?.child.kill("SIGTERM");
    await Promise.all([dashboard?.exited, router?.exited]);
    await controller?.running.stop();
    await cluster.stop();
  });

  test(
    "shows the cluster's ModelServing, then the decode update's revision, and the router's requests",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const object = parse(readFileSync(join(REPO_ROOT, "deploy/examples/prefill-decode-2p1d.yaml"), "utf8"));
      object.metadata.namespace = NAMESPACE;
      await cluster.admin.create(MODEL_SERVINGS, object);
      await waitUntil(cluster.admin, NAMESPACE, "llama-pd", "Available", CONVERGE_MS);
      const tandem = startTandem([
        "dashboard",
        "--kubeconfig",
        cluster.kubeconfigs.viewer,
        "--namespace",
        NAMESPACE,
        "--listen",
        "127.0.0.1:0",
        "--router-metrics",
        `${routerUrl}/metrics`,
      ]);
      dashboard = tandem;
      const url = await waitFor(
        () => Promise.resolve(/dashboard: (http:\/\/127\.0\.0\.1:\d+)/.exec(tandem.output())?.[1]),
        {
          timeoutMs: 30_000,
          what: "tandem dashboard prints its URL",
        },
      );
      const before = await cellsWhen(url, (cells) => cells.length === 6, "six cells");
      assert.deepEqual(before.sort(), [
        "decode:1:ready",
        "decode:1:ready",
        "prefill:1:ready",
        "prefill:1:ready",
        "prefill:1:ready",
        "prefill:1:ready",
      ]);
      await setRoleImage(cluster.admin, NAMESPACE, "llama-pd", "decode", "vllm/vllm-openai:v0.11.1");
      await cellsWhen(
        url,
        (cells) => cells.filter((cell) => cell === "decode:2:ready").length === 2,
        "both decode cells ready at revision 2",
      );
      await requestRatesShown(url, routerUrl);
      const executablePath = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((path) => existsSync(path));
      if (executablePath === undefined) return;
      const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"], headless: true });
      try {
        const page = await browser.newPage();
        page.setDefaultTimeout(30_000);
        await page.goto(url);
        await page.waitForFunction(
          `document.querySelectorAll('.cell[data-role="decode"][data-revision="2"][data-state="ready"]').length === 2`,
        );
        assert.equal(await page.locator('.cell[data-role="prefill"]').count(), 4);
      } finally {
        await browser.close();
      }
    },
  );
});
