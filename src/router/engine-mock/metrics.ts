/**
 * The engine mock's `/metrics`, in the Prometheus text format with the engine's real metric names
 * and its `model_name` label, on a registry of its own (several mocks share one process in
 * `tandem demo --serve`):
 *
 * - vLLM: `vllm:num_requests_running`, `vllm:num_requests_waiting`, `vllm:kv_cache_usage_perc`
 *   (a fraction, as vLLM's), `vllm:prompt_tokens_total`, `vllm:generation_tokens_total`,
 *   `vllm:request_success_total{finished_reason=stop|length|abort}`;
 * - SGLang: `sglang:num_running_reqs`, `sglang:num_queue_reqs`, `sglang:token_usage`,
 *   `sglang:prompt_tokens_total`, `sglang:generation_tokens_total`;
 * - both: `engine_mock_requests_aborted_total`, the mock's own count of requests whose client went
 *   away (waiting or running), so a test sees a router's abort reach the engine.
 */
import { Counter, Gauge, Registry } from "prom-client";
import type { Engine } from "../../api/route.ts";

/** What the gauges read at each scrape. */
export interface EngineLoad {
  readonly running: () => number;
  readonly waiting: () => number;
  /** Fraction of the KV cache in use, 0..1. */
  readonly kvUsage: () => number;
}

export interface EngineMetrics {
  readonly registry: Registry;
  /** A request finished (`stop`, `length`) or was aborted, after `generatedTokens` tokens. */
  finished(reason: "stop" | "length" | "abort", promptTokens: number, generatedTokens: number): void;
}

const NAMES: Readonly<Record<Engine, { running: string; waiting: string; usage: string; usageHelp: string }>> = {
  vllm: {
    running: "vllm:num_requests_running",
    waiting: "vllm:num_requests_waiting",
    usage: "vllm:kv_cache_usage_perc",
    usageHelp: "KV-cache usage. 1 means 100 percent usage.",
  },
  sglang: {
    running: "sglang:num_running_reqs",
    waiting: "sglang:num_queue_reqs",
    usage: "sglang:token_usage",
    usageHelp: "The token usage.",
  },
};

export function engineMetrics(engine: Engine, modelName: string, load: EngineLoad): EngineMetrics {
  const registry = new Registry();
  const labels = { model_name: modelName };
  const names = NAMES[engine];
  const gauge = (name: string, help: string, read: () => number): void => {
    new Gauge({
      name,
      help,
      labelNames: ["model_name"],
      registers: [registry],
      collect() {
        this.set(labels, read());
      },
    });
  };
  gauge(names.running, "Number of requests running.", load.running);
  gauge(names.waiting, "Number of requests waiting to be processed.", load.waiting);
  gauge(names.usage, names.usageHelp, load.kvUsage);
  const counter = (name: string, help: string, labelNames: string[] = ["model_name"]): Counter =>
    new Counter({ name, help, labelNames, registers: [registry] });
  const promptTokens = counter(`${engine}:prompt_tokens_total`, "Number of prefill tokens processed.");
  const generationTokens = counter(`${engine}:generation_tokens_total`, "Number of generation tokens processed.");
  const success =
    engine === "vllm"
      ? counter("vllm:request_success_total", "Count of finished requests by finish reason.", [
          "model_name",
          "finished_reason",
        ])
      : undefined;
  const aborted = counter(
    "engine_mock_requests_aborted_total",
    "Requests whose client went away before the answer ended (engine mock only).",
  );
  // Initialised at 0, so a scrape before the first request already shows every series.
  for (const metric of [promptTokens, generationTokens, aborted]) metric.inc(labels, 0);
  for (const reason of ["stop", "length", "abort"]) success?.inc({ ...labels, finished_reason: reason }, 0);
  return {
    registry,
    finished(reason, prompt, generated) {
      promptTokens.inc(labels, prompt);
      generationTokens.inc(labels, generated);
      success?.inc({ ...labels, finished_reason: reason });
      if (reason === "abort") aborted.inc(labels);
    },
  };
}
