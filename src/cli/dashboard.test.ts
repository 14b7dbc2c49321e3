import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseRouterMetricsUrl } from "./dashboard.ts";

describe("--router-metrics", () => {
  it("an http(s) URL; /metrics when it names no path", () => {
    assert.equal(parseRouterMetricsUrl("http://127.0.0.1:9090"), "http://127.0.0.1:9090/metrics");
    assert.equal(parseRouterMetricsUrl("http://[::1]:8000/metrics"), "http://[::1]:8000/metrics");
    assert.equal(parseRouterMetricsUrl("https://router.example/x/metrics"), "https://router.example/x/metrics");
  });

  it("anything else is refused, naming the flag and the value", () => {
    for (const bad of ["127.0.0.1:9090", "ftp://h/metrics", "", "http://"])
      assert.throws(() => parseRouterMetricsUrl(bad), /--router-metrics.*must be a router's metrics URL/, bad);
  });
});
