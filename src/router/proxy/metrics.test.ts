import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { Agent, request } from "undici";
import { MemoryLogger } from "../../engine/logger.ts";
import { StaticDiscovery } from "../discovery.ts";
import { startEngineMock } from "../engine-mock/server.ts";
import { aPod, aRoute, firstDraw } from "../test-fixtures.ts";
import { InFlight } from "./inflight.ts";
import { accessLog, accessLogFields, createRouterMetrics } from "./metrics.ts";
import type { RequestRecord, RouterObserver } from "./observer.ts";
import { allObservers } from "./observer.ts";
import { RequestRouter } from "./router.ts";

const RECORD: RequestRecord = {
  id: "req-1",
  path: "/v1/completions",
  model: "m",
  status: 200,
  endpoints: ["p", "d"],
  role: "decode",
  revision: "ms-rev2",
  attempts: 2,
  durationMs: 123.4,
  ttftMs: 45.6,
  promptTokens: 7,
  completionTokens: 16,
  complete: true,
};

describe("access log", () => {
  it("one line per request with id, model, endpoints, status, attempts, TTFT, duration and tokens", () => {
    assert.deepEqual(accessLogFields(RECORD), {
      requestId: "req-1",
      path: "/v1/completions",
      model: "m",
      status: 200,
      endpoints: "p,d",
      attempts: 2,
      durationMs: 123,
      complete: true,
      role: "decode",
      revision: "ms-rev2",
      ttftMs: 46,
      promptTokens: 7,
      completionTokens: 16,
    });
  });

  it("leaves out what is not known, and logs a 5xx or a cut response as a warning", () => {
    const logger = new MemoryLogger();
    const log = accessLog({
      info: (fields, message) => {
        logger.info(fields, message);
      },
      warn: (fields, message) => {
        logger.warn(fields, message);
      },
    });
    log.requestDone({
      ...RECORD,
      status: 503,
      endpoints: [],
      role: "",
      revision: "",
      ttftMs: undefined,
      promptTokens: undefined,
      completionTokens: undefined,
    });
    log.requestDone(RECORD);
    assert.deepEqual(
      logger.lines().map((line) => line.level),
      ["warn", "info"],
    );
    assert.deepEqual(Object.keys(logger.lines()[0]?.fields ?? {}).sort(), [
      "attempts",
      "complete",
      "durationMs",
      "endpoints",
      "model",
      "path",
      "requestId",
      "status",
    ]);
  });
  it("with info off (--log-level warn) writes only the warnings and builds no info line", () => {
    const lines: string[] = [];
    const log = accessLog({
      info: () => {
        lines.push("info");
      },
      warn: () => {
        lines.push("warn");
      },
      isLevelEnabled: (level) => level !== "info",
    });
    log.requestDone(RECORD);
    log.requestDone({ ...RECORD, status: 502 });
    log.requestDone({ ...RECORD, complete: false });
    assert.deepEqual(lines, ["warn", "warn"]);
  });
});

describe("router metrics", () => {
  it("counts requests by model, role and code, the cut ones too; durations and TTFT; upstream errors by reason; retries; drain confirmations; in-flight, endpoint and Lease-state gauges read at scrape", async () => {
    const inFlight = new InFlight();
    inFlight.begin("ns/a");
    const route = aRoute();
    const metrics = createRouterMetrics({
      inFlight,
      endpoints: () => [{ route, roles: [{ role: "serve", ready: 2, draining: 1 }] }],
      leaseState: () => "fenced",
    });
    metrics.requestDone(RECORD);
    metrics.requestDone({ ...RECORD, complete: false });
    metrics.drainConfirmed();
    metrics.drainConfirmed();
    metrics.legFailed(route, "ns/a", {
      code: "upstream_error",
      message: "x",
      retryable: true,
      reason: "connect_failed",
    });
    metrics.retried(route);
    const text = await metrics.registry.metrics();
    for (const line of [
      'tandem_router_requests_total{model="m",role="decode",code="200"} 2',
      'tandem_router_requests_cut_total{model="m",role="decode",code="200"} 1',
      'tandem_router_request_duration_seconds_count{model="m"} 2',
      'tandem_router_time_to_first_token_seconds_count{model="m"} 2',
      'tandem_router_upstream_errors_total{model="m",reason="connect_failed"} 1',
      'tandem_router_retries_total{model="m"} 1',
      'tandem_router_inflight_requests{endpoint="ns/a"} 1',
      'tandem_router_endpoints{model="m",role="serve",state="ready"} 2',
      'tandem_router_endpoints{model="m",role="serve",state="draining"} 1',
      "tandem_router_drain_confirmations_total 2",
      'tandem_router_lease_state{state="fenced"} 1',
      'tandem_router_lease_state{state="registered"} 0',
    ])
      assert.ok(text.includes(line), `missing ${line}`);
  });
});

describe("the data plane's records", () => {
  const client = new Agent();
  after(() => client.close());

  it("a request through the router reports its id, endpoint, role, revision, status, TTFT and the engine's token counts", async () => {
    const engine = await startEngineMock({ ttftMs: 5, tpotMs: 1 });
    const records: RequestRecord[] = [];
    const seen: RouterObserver = {
      requestDone: (record) => records.push(record),
      legFailed: () => undefined,
      retried: () => undefined,
    };
    const discovery = new StaticDiscovery({
      routes: [aRoute()],
      pods: [aPod({ name: "a", port: engine.port, revision: "ms-rev7" })],
    });
    const router = new RequestRouter({
      discovery,
      rng: firstDraw(),
      newRequestId: () => "id-1",
      observer: allObservers([seen]),
    });
    const { port } = await router.listen("127.0.0.1", 0);
    try {
      const response = await request(`http://127.0.0.1:${port}/v1/completions`, {
        dispatcher: client,
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", prompt: "hi", max_tokens: 4 }),
      });
      await response.body.text();
      assert.equal(response.statusCode, 200);
      await until(() => records.length === 1);
      const [record] = records;
      assert.ok(record);
      assert.deepEqual(
        [
          record.id,
          record.model,
          record.status,
          record.endpoints,
          record.role,
          record.revision,
          record.attempts,
          record.complete,
        ],
        ["id-1", "m", 200, ["a"], "serve", "ms-rev7", 1, true],
      );
      assert.ok(record.ttftMs !== undefined && record.ttftMs <= record.durationMs);
      assert.equal(record.completionTokens, 4);
    } finally {
      await router.close();
      await engine.close();
    }
  });
});

/** Waits for `check` over event-loop turns (the record is reported when the response closes). */
async function until(check: () => boolean): Promise<void> {
  for (let turn = 0; turn < 1_000 && !check(); turn++) await new Promise((resolve) => setImmediate(resolve));
  assert.ok(check(), "not reached");
}
