import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseCounts, parseEngineQueue } from "./engine-metrics.ts";

// Shaped like vLLM's page (prometheus_client text format): several series per metric, histograms,
// counters with timestamps, an empty HELP, escapes in label values.
const VLLM_PAGE = `# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 1234.0 1700000000000
# HELP undocumented_metric 
# TYPE undocumented_metric gauge
undocumented_metric 1.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 2.0
vllm:num_requests_running{engine="1",model_name="m"} 1.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 3.0
vllm:num_requests_waiting{engine="1",model_name="m",} 0.0
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 5.0
vllm:e2e_request_latency_seconds_sum{model_name="m"} 1.5e+00
weird{a="x\\"y,z}",b="q\\\\"} NaN
`;

const SGLANG_PAGE = `# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",tp_rank="0"} 4.0
sglang:num_running_reqs{model_name="m",tp_rank="1"} 4.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m",tp_rank="0"} 7
`;

describe("parseEngineQueue", () => {
  it("vLLM: sums running and waiting over every label set", () => {
    assert.deepEqual(parseEngineQueue(VLLM_PAGE, "vllm"), { ok: true, running: 3, waiting: 3 });
  });

  it("SGLang: its own metric names", () => {
    assert.deepEqual(parseEngineQueue(SGLANG_PAGE, "sglang"), { ok: true, running: 8, waiting: 7 });
    assert.deepEqual(parseEngineQueue(SGLANG_PAGE, "vllm"), {
      ok: false,
      reason: "no vllm:num_requests_running or vllm:num_requests_waiting on the page",
    });
  });

  it("an absent metric is refused, never read as zero", () => {
    assert.deepEqual(parseEngineQueue("vllm:num_requests_running 0\n", "vllm"), {
      ok: false,
      reason: "no vllm:num_requests_waiting on the page",
    });
    assert.equal(parseEngineQueue("", "vllm").ok, false);
  });

  it("refuses a malformed line with its number, and a value that is not a count", () => {
    for (const bad of [
      "vllm:num_requests_running{engine=0} 1",
      "vllm:num_requests_running 1 2 3",
      'x{a="1" b="2"} 1',
      "x 1.2.3",
      "9x 1",
    ]) {
      const result = parseEngineQueue(`# ok\n${bad}\n`, "vllm");
      assert.ok(!result.ok, bad);
      assert.match(result.reason, /^line 2 is not a Prometheus sample/);
    }
    assert.deepEqual(parseEngineQueue("vllm:num_requests_running -1\nvllm:num_requests_waiting 0\n", "vllm"), {
      ok: false,
      reason: "vllm:num_requests_running is -1 on line 1, not a count",
    });
    assert.equal(parseEngineQueue("vllm:num_requests_running NaN\nvllm:num_requests_waiting 0\n", "vllm").ok, false);
  });

  it("accepts CRLF line ends and a trailing OpenMetrics # EOF", () => {
    assert.deepEqual(
      parseEngineQueue("vllm:num_requests_running 1\r\nvllm:num_requests_waiting 2\r\n# EOF\r\n", "vllm"),
      { ok: true, running: 1, waiting: 2 },
    );
  });
});

describe("parseCounts", () => {
  it("the wanted samples with their labels unescaped, and the families the page declares", () => {
    const read = parseCounts(VLLM_PAGE, new Set(["vllm:num_requests_waiting", "absent"]));
    assert.ok(read.ok);
    assert.deepEqual(read.samples.slice(0, 2), [
      { name: "vllm:num_requests_waiting", labels: { engine: "0", model_name: "m" }, value: 3 },
      { name: "vllm:num_requests_waiting", labels: { engine: "1", model_name: "m" }, value: 0 },
    ]);
    assert.equal(read.samples.length, 2);
    assert.equal(parseCounts(VLLM_PAGE, new Set(["weird"])).ok, false, "NaN is no count");
    assert.ok(read.declared.has("undocumented_metric") && read.declared.has("vllm:e2e_request_latency_seconds"));
    const escaped = parseCounts('x{a="q\\"\\\\\\n",b=""} 2\n', new Set(["x"]));
    assert.deepEqual(escaped.ok ? escaped.samples : escaped, [{ name: "x", labels: { a: 'q"\\\n', b: "" }, value: 2 }]);
  });
});
