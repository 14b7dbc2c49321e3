import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, describe, it } from "node:test";
import type { JsonObject, KubeObject } from "../engine/ports.ts";
import { RouterScraper, routerTargets } from "./router-scraper.ts";

const routerPod = (name: string, status: JsonObject, extra: Partial<KubeObject> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "tandem-system" },
  spec: {
    containers: [
      {
        name: "router",
        ports: [
          { name: "http", containerPort: 8000 },
          { name: "metrics", containerPort: 9090 },
        ],
      },
    ],
  },
  status,
  ...extra,
});

describe("routerTargets", () => {
  it("the metrics port of every running router pod with an IP, sorted; IPv6 in brackets", () => {
    const pods = [
      routerPod("r-b", { phase: "Running", podIP: "fd00::5" }),
      routerPod("r-a", { phase: "Running", podIP: "10.0.0.7" }),
      routerPod("r-pending", { phase: "Pending" }),
      routerPod(
        "r-going",
        { phase: "Running", podIP: "10.0.0.8" },
        { metadata: { name: "r-going", namespace: "tandem-system", deletionTimestamp: "2026-12-02T00:00:00Z" } },
      ),
      { ...routerPod("r-no-metrics", { phase: "Running", podIP: "10.0.0.9" }), spec: { containers: [{ name: "x" }] } },
    ];
    assert.deepEqual(routerTargets(pods), [
      { key: "tandem-system/r-a", url: "http://10.0.0.7:9090/metrics" },
      { key: "tandem-system/r-b", url: "http://[fd00::5]:9090/metrics" },
    ]);
  });
});

describe("RouterScraper (real HTTP on 127.0.0.1)", () => {
  let answer = { status: 200, body: "" };
  const server = createServer((request, response) => {
    response.writeHead(request.url === "/metrics" ? answer.status : 404, { "content-type": "text/plain" });
    response.end(answer.body);
  });
  const listening = new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  after(() => server.close());
  const page = (ok: number): string =>
    `# TYPE tandem_router_requests_total counter\ntandem_router_requests_total{model="m",role="server",code="200"} ${ok}\n`;

  it("reads each target's counters; says once when one fails and once when it answers again; a failing one has no reading", async () => {
    await listening;
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;
    const lines: string[] = [];
    let nowMs = 0;
    const scraper = new RouterScraper({ nowMs: () => nowMs, log: (line) => lines.push(line), timeoutMs: 5_000 });
    const target = { key: url, url };
    assert.equal(scraper.readings(), undefined, "no targets: no router");
    answer = { status: 200, body: page(3) };
    await scraper.scrape([target]);
    assert.deepEqual(scraper.readings(), { [url]: { atMs: 0, totals: { ok: 3, failed: 0, cut: 0 } } });
    nowMs = 1_000;
    answer = { status: 500, body: "oops" };
    await scraper.scrape([target]);
    nowMs = 2_000;
    answer = { status: 200, body: "<html>a proxy's page</html>" };
    await scraper.scrape([target]);
    assert.deepEqual(scraper.readings(), { [url]: undefined });
    nowMs = 3_000;
    answer = { status: 200, body: page(9) };
    await scraper.scrape([target]);
    await scraper.scrape([target]);
    assert.deepEqual(scraper.readings(), { [url]: { atMs: 3_000, totals: { ok: 9, failed: 0, cut: 0 } } });
    assert.deepEqual(lines, [
      `router metrics ${url}: reading`,
      `router metrics ${url}: cannot read: GET answered 500 (its requests are left out of the timeline until it answers)`,
      `router metrics ${url}: answers again`,
    ]);
    const gone = { key: "tandem-system/r-x", url: `http://127.0.0.1:1/metrics` };
    await scraper.scrape([gone]);
    assert.deepEqual(scraper.readings(), { [gone.key]: undefined }, "a target no longer given is forgotten");
    assert.equal(lines.length, 4);
    assert.match(
      lines[3] ?? "",
      /^router metrics tandem-system\/r-x \(http:\/\/127\.0\.0\.1:1\/metrics\): cannot read: /,
    );
    await scraper.close();
  });
});
