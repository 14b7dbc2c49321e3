import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Agent, request } from "undici";
import { StaticDiscovery } from "../discovery.ts";
import { eligibility } from "../endpoints.ts";
import type { Endpoint } from "../endpoints.ts";
import { loadScore } from "../select.ts";
import { aPod, aRoute, firstDraw } from "../test-fixtures.ts";
import { EngineScraper } from "./engine-scraper.ts";
import { RequestRouter } from "./router.ts";
import { FakeEngine } from "./test-engine.ts";
import { Upstreams } from "./upstream.ts";

const page = (running: number, waiting: number) => `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0"} ${running}
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0"} ${waiting}
`;

function endpointOn(name: string, port: number): Endpoint {
  const verdict = eligibility(aPod({ name, port }), aRoute(), "serve");
  assert.ok(verdict.ok);
  return verdict.endpoint;
}

describe("EngineScraper", () => {
  let engine: FakeEngine;
  let upstreams: Upstreams;
  before(async () => {
    engine = await FakeEngine.start();
    upstreams = new Upstreams({ connectTimeoutMs: 5_000 });
  });
  after(async () => {
    await upstreams.close();
    await engine.stop();
  });

  it("reads running and waiting with their age, scraping at most every interval", async () => {
    engine.metrics = page(2, 3);
    let nowMs = 10_000;
    const scraper = new EngineScraper({ upstreams, nowMs: () => nowMs });
    const endpoint = endpointOn("a", engine.port);
    const scrapes = engine.metricsScrapes;
    assert.equal(scraper.reading(endpoint, "vllm"), undefined); // starts the first scrape
    await scraper.refresh(endpoint, "vllm"); // joins it
    assert.equal(engine.metricsScrapes - scrapes, 1);
    nowMs += 400;
    assert.deepEqual(scraper.reading(endpoint, "vllm"), { running: 2, waiting: 3, ageMs: 400 });
    assert.equal(engine.metricsScrapes - scrapes, 1, "not due yet");
    nowMs += 600;
    engine.metrics = page(0, 1);
    scraper.reading(endpoint, "vllm");
    await scraper.refresh(endpoint, "vllm");
    assert.equal(engine.metricsScrapes - scrapes, 2);
    assert.deepEqual(scraper.reading(endpoint, "vllm"), { running: 0, waiting: 1, ageMs: 0 });
  });

  it("a failed scrape keeps the last reading, which then ages out of selection", async () => {
    engine.metrics = page(7, 0);
    let nowMs = 0;
    const scraper = new EngineScraper({ upstreams, nowMs: () => nowMs });
    const endpoint = endpointOn("a", engine.port);
    await scraper.refresh(endpoint, "vllm");
    engine.metrics = "not a page";
    nowMs = 6_000;
    await scraper.refresh(endpoint, "vllm");
    assert.match(scraper.lastError(endpoint.key) ?? "", /^line 1 is not a Prometheus sample/);
    const reading = scraper.reading(endpoint, "vllm");
    assert.deepEqual(reading, { running: 7, waiting: 0, ageMs: 6_000 });
    assert.equal(loadScore({ inFlight: 1, engine: reading }), 1);
  });

  it("for the drain confirmation: scrapes are numbered, asked for at most every interval, and told when done, failures included", async () => {
    engine.metrics = page(0, 0);
    let nowMs = 0;
    const scraper = new EngineScraper({ upstreams, nowMs: () => nowMs });
    const endpoint = endpointOn("a", engine.port);
    const done: string[] = [];
    scraper.onScrape((key) => done.push(key));
    await scraper.refresh(endpoint, "vllm");
    const seen = scraper.sequence();
    assert.equal(scraper.queueAfter(endpoint.key, seen), undefined, "the scrape before the look does not count");
    nowMs = 400;
    assert.equal(scraper.scrapeSoon(endpoint, "vllm"), 600, "not due for another 600 ms");
    nowMs = 1_000;
    assert.equal(scraper.scrapeSoon(endpoint, "vllm"), 0);
    assert.equal(scraper.scrapeSoon(endpoint, "vllm"), 0, "joins the scrape in flight");
    await scraper.refresh(endpoint, "vllm");
    assert.deepEqual(scraper.queueAfter(endpoint.key, seen), { ok: true, running: 0, waiting: 0 });
    engine.metrics = "garbage";
    nowMs = 2_000;
    await scraper.refresh(endpoint, "vllm");
    assert.deepEqual(scraper.queueAfter(endpoint.key, seen), {
      ok: false,
      reason: 'line 1 is not a Prometheus sample: "garbage"',
    });
    assert.deepEqual(done, ["ns/a", "ns/a", "ns/a"]);
  });

  it("the router's selection follows the readings: the busy engine is avoided", async () => {
    const busy = engine;
    const idle = await FakeEngine.start();
    busy.metrics = page(10, 0);
    idle.metrics = page(0, 0);
    const scraper = new EngineScraper({ upstreams, nowMs: () => 0 });
    const [a, b] = [endpointOn("a", busy.port), endpointOn("b", idle.port)];
    await Promise.all([scraper.refresh(a, "vllm"), scraper.refresh(b, "vllm")]);
    const router = new RequestRouter({
      discovery: new StaticDiscovery({
        routes: [aRoute()],
        pods: [aPod({ name: "a", port: busy.port }), aPod({ name: "b", port: idle.port })],
      }),
      rng: firstDraw(), // without readings, "a" would win the tie
      engineLoad: (endpoint, route) => scraper.reading(endpoint, route.engine),
      debugHeaders: true,
    });
    const { port } = await router.listen("127.0.0.1", 0);
    const client = new Agent();
    const response = await request(`http://127.0.0.1:${port}/v1/completions`, {
      dispatcher: client,
      method: "POST",
      body: JSON.stringify({ model: "m", prompt: "x" }),
    });
    await response.body.dump();
    assert.equal(response.headers["x-tandem-endpoint"], "b");
    await client.close();
    await router.close();
    await idle.stop();
  });
});
