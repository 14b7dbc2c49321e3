import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { Agent, request } from "undici";
import type { Pod } from "../api/kube.ts";
import type { KubeObject } from "../engine/ports.ts";
import type { SimCluster } from "../sim/cluster.ts";
import type { RunObserver } from "../sim/runner.ts";
import { parseScenarioText } from "../sim/scenario.ts";
import type { Scenario, Step } from "../sim/scenario.ts";
import { DEFAULT_SERVE_SCENARIO } from "./demo.ts";
import { kvFormatOf } from "../router/kv-format.ts";
import { emptyTotals, formatTotals, runServe, SERVE_ROUTER_ID } from "./demo-serve.ts";

const SCENARIO_PATH = join(import.meta.dirname, "../../deploy/examples/scenarios", DEFAULT_SERVE_SCENARIO);
/** Simulated seconds per wall second in tests: the shipped scenario (~200 s) in a few seconds. */
const TEST_SPEED = 100;
/** Bound on the requests sent while the rollout runs. */
const MAX_ROLLOUT_REQUESTS = 200;

const client = new Agent();
after(() => client.close());

async function defaultScenario(): Promise<Scenario> {
  const parsed = parseScenarioText(await readFile(SCENARIO_PATH, "utf8"));
  if (!parsed.ok) assert.fail(JSON.stringify(parsed.problems));
  return parsed.scenario;
}

async function chat(
  url: string,
  body: Record<string, unknown>,
): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  const response = await request(`${url}/v1/chat/completions`, {
    dispatcher: client,
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "llama", messages: [{ role: "user", content: "hello" }], max_tokens: 3, ...body }),
  });
  return { status: response.statusCode, headers: response.headers, text: await response.body.text() };
}

/** A view that hands each step to `onStep` (its promise is awaited: the simulation waits for it). */
function testView(
  onStep: (index: number, step: Step, cluster: SimCluster | undefined) => Promise<void> | void,
  onEnd: (index: number) => void = () => undefined,
): RunObserver & { cluster: SimCluster | undefined } {
  const view = {
    cluster: undefined as SimCluster | undefined,
    attach(cluster: SimCluster) {
      view.cluster = cluster;
    },
    stepStarted: (index: number, step: Step) => onStep(index, step, view.cluster),
    stepEnded: (record: { index: number }) => {
      onEnd(record.index);
    },
  };
  return view;
}

/** The router's Lease as stored, if any. */
function routerLease(cluster: SimCluster | undefined): KubeObject | undefined {
  return cluster?.server.stored("Lease").find((lease) => lease.metadata.name === SERVE_ROUTER_ID);
}

function entryPodNames(cluster: SimCluster | undefined): string[] {
  return ((cluster?.server.stored("Pod") ?? []) as unknown as Pod[])
    .filter((pod) => pod.metadata.labels?.["tandem.dev/entry"] === "true")
    .map((pod) => pod.metadata.name);
}

describe("tandem demo --serve", () => {
  it(
    "serves /v1/models and JSON and streaming chat from the engine-mocks of simulated pods, through a rollout, and prints the totals",
    { timeout: 120_000 },
    async () => {
      const scenario = await defaultScenario();
      let out = "";
      let url = "";
      const checks: Promise<void>[] = [];
      let rolloutDone = false;
      const rollout: { status: number; revision: unknown }[] = [];
      const servedBy = new Set<string>();
      const renewTimes: unknown[] = [];
      const view = testView(
        (index, step, cluster) => {
          const lease = routerLease(cluster);
          if (index >= 3) renewTimes.push(lease?.spec?.["renewTime"]);
          if (index === 3)
            assert.deepEqual(
              [lease?.metadata.labels, lease?.metadata.annotations, lease?.spec?.["holderIdentity"]],
              [{ "tandem.dev/router": "true" }, { "tandem.dev/scope": "*" }, SERVE_ROUTER_ID],
            );
          // Steady state, the simulation held while we ask (the step waits for this promise).
          if (step.kind === "advance" && index === 3) return steadyState(url, cluster, servedBy);
          // The rollout: requests one after another while the simulation runs on, until the wait ends.
          if (step.kind === "wait" && step.value.for === "RolloutComplete") {
            checks.push(
              (async () => {
                for (let sent = 0; !rolloutDone && sent < MAX_ROLLOUT_REQUESTS; sent++) {
                  const answer = await chat(url, {});
                  rollout.push({ status: answer.status, revision: answer.headers["x-tandem-revision"] });
                }
              })(),
            );
          }
        },
        (index) => {
          if (index === 5) rolloutDone = true;
        },
      );
      const code = await runServe({
        scenario,
        port: 0,
        speed: TEST_SPEED,
        ttftMs: 0,
        tpotMs: 0,
        view,
        write: (text) => (out += text),
        signal: new AbortController().signal,
        onListening: (bound) => (url = bound),
      });
      await Promise.all(checks);
      assert.equal(code, 0, out);
      assert.match(out, /^router: http:\/\/127\.0\.0\.1:\d+\n/m);
      assert.ok(servedBy.size > 0);
      assert.ok(
        renewTimes.every((time) => typeof time === "string") && new Set(renewTimes).size > 2,
        `the Lease is renewed: ${renewTimes.join(", ")}`,
      );
      assert.equal(routerLease(view.cluster), undefined, "the Lease is deleted once the router stopped");
      assert.ok(rollout.length > 0, "no request ran during the rollout");
      assert.deepEqual(
        rollout.filter((answer) => answer.status !== 200),
        [],
        "every request during the rollout succeeded",
      );
      // Drains were confirmed by the router (nothing of ours in flight), not left to time out.
      const events = (view.cluster?.server.stored("Event") ?? []).map((event) => event["reason"]);
      assert.ok(events.includes("DrainConfirmed") && !events.includes("DrainTimeout"), `events: ${events.join(", ")}`);
      assert.match(
        out,
        new RegExp(
          `router requests: ${rollout.length + 3} total, ${rollout.length + 3} ok, 0 failed, 0 aborted by the client`,
        ),
      );
    },
  );

  it(
    "with built-in clients, requests stream through the rollout from the first wait on, and none fails",
    { timeout: 120_000 },
    async () => {
      const scenario = await defaultScenario();
      let out = "";
      // The dashboard's timeline reads the totals as they are counted (demo --serve --ui).
      const counted = emptyTotals();
      const code = await runServe({
        scenario,
        port: 0,
        speed: TEST_SPEED,
        ttftMs: 0,
        tpotMs: 1,
        clients: { count: 3, model: "llama" },
        totals: counted,
        view: testView(() => undefined),
        write: (text) => (out += text),
        signal: new AbortController().signal,
      });
      assert.equal(code, 0, out);
      assert.match(out, /^clients: 3 streaming chat completions of llama from now to the end$/m);
      const totals = /^router requests: (\d+) total, (\d+) ok, 0 failed, 0 aborted by the client$/m.exec(out);
      // Every client got through, and none failed; how many depends on the machine's speed.
      assert.ok(totals !== null && Number(totals[1]) >= 3 && totals[1] === totals[2], out);
      assert.equal(String(counted.ok), totals[2]);
    },
  );

  it("stops on its signal between two instants, prints the totals and returns 0", { timeout: 60_000 }, async () => {
    const scenario = await defaultScenario();
    const stop = new AbortController();
    let out = "";
    const view = testView((_index, step) => {
      if (step.kind === "advance") stop.abort();
    });
    const code = await runServe({
      scenario,
      port: 0,
      speed: TEST_SPEED,
      view,
      write: (text) => (out += text),
      signal: stop.signal,
    });
    assert.equal(code, 0, out);
    assert.match(
      out,
      /stopped after \d+s simulated\nrouter requests: 0 total, 0 ok, 0 failed, 0 aborted by the client\n$/,
    );
  });

  it("says which port it cannot listen on, and returns 1", { timeout: 60_000 }, async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const { port } = taken.address() as AddressInfo;
    let out = "";
    try {
      const code = await runServe({
        scenario: await defaultScenario(),
        port,
        speed: TEST_SPEED,
        view: testView(() => undefined),
        write: (text) => (out += text),
        signal: new AbortController().signal,
      });
      assert.equal(code, 1);
      assert.equal(
        out,
        `--port ${port}: cannot listen on 127.0.0.1:${port}: address already in use (another process listens there: stop it, or choose another --port; 0 picks a free one)\n`,
      );
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });

  it("formats totals by status, and reads KV_FORMAT from the first container", () => {
    assert.equal(
      formatTotals({ ok: 3, failedByStatus: { 503: 2, 404: 1 }, aborted: 1 }),
      "7 total, 3 ok, 3 failed (404: 1, 503: 2), 1 aborted by the client",
    );
    const pod = (env?: { name: string; value: string }[]) =>
      ({ spec: { containers: [{ name: "a", image: "i", ...(env === undefined ? {} : { env }) }] } }) as unknown as Pod;
    assert.equal(kvFormatOf(pod([{ name: "KV_FORMAT", value: "fp8" }])), "fp8");
    assert.equal(kvFormatOf(pod()), "v1");
  });
});

/** /v1/models, a JSON chat and a streamed chat, each answered by simulated pods' engine-mocks. */
async function steadyState(url: string, cluster: SimCluster | undefined, servedBy: Set<string>): Promise<void> {
  const models = await request(`${url}/v1/models`, { dispatcher: client });
  assert.equal(models.statusCode, 200);
  assert.deepEqual(
    ((await models.body.json()) as { data: { id: string }[] }).data.map((model) => model.id),
    ["llama"],
  );
  const pods = entryPodNames(cluster);
  const json = await chat(url, {});
  assert.equal(json.status, 200, json.text);
  assert.equal((JSON.parse(json.text) as { object: string }).object, "chat.completion");
  for (const header of ["x-tandem-prefill", "x-tandem-decode"]) {
    const pod = json.headers[header];
    assert.ok(
      typeof pod === "string" && pods.includes(pod),
      `${header}: ${String(pod)} is not a simulated entry pod (${pods.join(", ")})`,
    );
    servedBy.add(pod);
  }
  const streamed = await chat(url, { stream: true });
  assert.equal(streamed.status, 200, streamed.text);
  assert.match(String(streamed.headers["content-type"]), /^text\/event-stream/);
  assert.match(streamed.text, /^data: \{.*"chat\.completion\.chunk"/);
  assert.match(streamed.text, /data: \[DONE\]\n\n$/);
}
