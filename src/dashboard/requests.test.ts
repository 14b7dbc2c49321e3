import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { STALE_MS, meterRequests, ratesBetween, routerRequestTotals } from "./requests.ts";
import type { RequestMeter, RequestReading } from "./requests.ts";

const PAGE = `# HELP tandem_router_requests_total Completion requests by model, answering role and HTTP status.
# TYPE tandem_router_requests_total counter
tandem_router_requests_total{model="m",role="decode",code="200"} 10
tandem_router_requests_total{model="n",role="server",code="200"} 5
tandem_router_requests_total{model="m",role="",code="503"} 2
tandem_router_requests_total{model="m",role="",code="400"} 1
tandem_router_requests_total{model="m",role="",code="0"} 3
# TYPE tandem_router_requests_cut_total counter
tandem_router_requests_cut_total{model="m",role="decode",code="200"} 4
tandem_router_requests_cut_total{model="m",role="",code="0"} 3
# TYPE nodejs_heap_size_total_bytes gauge
nodejs_heap_size_total_bytes 123456
`;

const reading = (atMs: number, ok: number, failed = 0, cut = 0): RequestReading => ({
  atMs,
  totals: { ok, failed, cut },
});

describe("routerRequestTotals", () => {
  it("ok: 2xx sent whole; cut: 2xx cut short or code 0; failed: any other status — over every model and role", () => {
    assert.deepEqual(routerRequestTotals(PAGE), { ok: true, totals: { ok: 11, failed: 3, cut: 7 } });
  });

  it("a router that has answered nothing yet declares the counter with no series: zero, not refused", () => {
    assert.deepEqual(routerRequestTotals("# TYPE tandem_router_requests_total counter\n"), {
      ok: true,
      totals: { ok: 0, failed: 0, cut: 0 },
    });
  });

  it("refuses a page that is not a Tandem router's, or not a Prometheus page", () => {
    assert.deepEqual(routerRequestTotals("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n"), {
      ok: false,
      reason: "no tandem_router_requests_total on the page: not a Tandem router's /metrics",
    });
    const html = routerRequestTotals("<html>not found</html>\n");
    assert.ok(!html.ok && html.reason.startsWith("line 1 is not a Prometheus sample"));
  });
});

describe("ratesBetween", () => {
  it("per second between two readings", () => {
    assert.deepEqual(ratesBetween(reading(1_000, 10, 2, 0), reading(3_000, 30, 4, 1)), { ok: 10, failed: 1, cut: 0.5 });
  });

  it("a counter that went down (the router restarted) counts from zero: never negative", () => {
    assert.deepEqual(ratesBetween(reading(1_000, 500, 7, 3), reading(2_000, 4, 0, 0)), { ok: 4, failed: 0, cut: 0 });
  });
});

describe("meterRequests", () => {
  it("sums the rates of several routers, each differenced against its own previous reading", () => {
    const first = meterRequests({}, { a: reading(0, 100), b: reading(0, 50) }, 0);
    assert.equal(first.rates, undefined, "a first reading gives no rate: a gap, not a zero");
    assert.deepEqual([first.reporting, first.known], [0, 2]);
    const second = meterRequests(first.meter, { a: reading(1_000, 110), b: reading(1_000, 53, 1) }, 1_000);
    assert.deepEqual(second.rates, { ok: 13, failed: 1, cut: 0 });
    assert.deepEqual([second.reporting, second.known], [2, 2]);
  });

  it("a sample between two scrapes keeps the last rate while the reading is fresh, then leaves it out (a gap)", () => {
    let meter: RequestMeter = meterRequests({}, { a: reading(0, 0) }, 0).meter;
    meter = meterRequests(meter, { a: reading(1_000, 5) }, 1_000).meter;
    const between = meterRequests(meter, { a: reading(1_000, 5) }, 1_500);
    assert.deepEqual(between.rates, { ok: 5, failed: 0, cut: 0 });
    const stale = meterRequests(between.meter, { a: reading(1_000, 5) }, 1_000 + STALE_MS + 1);
    assert.equal(stale.rates, undefined);
    assert.deepEqual([stale.reporting, stale.known], [0, 1]);
  });

  it("one router down: the others' rates, and it counts as known but not reporting; back, it gives the average over its silence", () => {
    let meter = meterRequests({}, { a: reading(0, 0), b: reading(0, 0) }, 0).meter;
    meter = meterRequests(meter, { a: reading(1_000, 10), b: reading(1_000, 1) }, 1_000).meter;
    const down = meterRequests(meter, { a: reading(7_000, 70), b: reading(1_000, 1) }, 7_000);
    assert.deepEqual([down.rates, down.reporting, down.known], [{ ok: 10, failed: 0, cut: 0 }, 1, 2]);
    const back = meterRequests(down.meter, { a: reading(8_000, 80), b: reading(8_000, 8) }, 8_000);
    assert.deepEqual(back.rates, { ok: 11, failed: 0, cut: 0 });
  });

  it("a router not read yet is known, and one gone is forgotten", () => {
    const first = meterRequests({}, { a: reading(0, 0), b: undefined }, 0);
    assert.deepEqual([first.known, Object.keys(first.meter)], [2, ["a"]]);
    assert.deepEqual(Object.keys(meterRequests(first.meter, {}, 1_000).meter), []);
  });
});
