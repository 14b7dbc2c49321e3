/**
 * An engine's queue from its Prometheus `/metrics` page (text exposition format 0.0.4), for
 * selection (DESIGN §7) and the drain confirmation (DESIGN §3). Pure.
 *
 * A small strict parser rather than a library: the npm candidates either reject valid pages (an
 * empty `# HELP` line, which Python's prometheus_client writes for a metric without a docstring,
 * makes `parse-prometheus-text-format` throw for the whole page) or do not read metric names with
 * colons (`prom2javascript` returns nothing for `vllm:*`). Only samples are read; every line
 * must be a comment, blank or a well-formed sample, so a page this parser does not understand is
 * refused whole (the router then falls back to its own in-flight count) instead of half-read.
 */
import type { EngineKind } from "./route.ts";

/** The metric families holding each engine's running and waiting requests. */
export const ENGINE_METRICS: Readonly<Record<EngineKind, { readonly running: string; readonly waiting: string }>> = {
  vllm: { running: "vllm:num_requests_running", waiting: "vllm:num_requests_waiting" },
  sglang: { running: "sglang:num_running_reqs", waiting: "sglang:num_queue_reqs" },
};

export type EngineQueue =
  | { readonly ok: true; readonly running: number; readonly waiting: number }
  | { readonly ok: false; readonly reason: string };

const LABEL = String.raw`[a-zA-Z_][a-zA-Z0-9_]*[ \t]*=[ \t]*"(?:[^"\\\n]|\\.)*"`;
const LABELS = String.raw`\{[ \t]*(?:${LABEL}(?:[ \t]*,[ \t]*${LABEL})*[ \t]*,?[ \t]*)?\}`;
/** name, optional label set, value, optional integer timestamp (milliseconds). */
const SAMPLE = new RegExp(
  String.raw`^([a-zA-Z_:][a-zA-Z0-9_:]*)[ \t]*(?:${LABELS})?[ \t]+(\S+)(?:[ \t]+-?[0-9]+)?[ \t]*$`,
);
const FLOAT = /^[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[iI]nf|NaN)$/;

/**
 * Running and waiting requests of `engine`, each the sum over every label set of its metric
 * (vLLM reports one series per engine core or model). Refused, with the line number, when a line
 * is not a sample; refused when a metric is absent or a value is not a finite count ≥ 0 — an
 * absent metric is not zero, and the drain confirmation must never read it as zero.
 */
export function parseEngineQueue(text: string, engine: EngineKind): EngineQueue {
  const names = ENGINE_METRICS[engine];
  const sums = new Map<string, number>([
    [names.running, 0],
    [names.waiting, 0],
  ]);
  const seen = new Set<string>();
  const lines = text.split("\n");
  for (let index = 0; index < lines.length; index++) {
    const line = (lines[index] ?? "").trimEnd();
    if (line === "" || line.startsWith("#")) continue;
    const match = SAMPLE.exec(line);
    const [, name = "", valueText = ""] = match ?? [];
    if (match === null || !FLOAT.test(valueText))
      return {
        ok: false,
        reason: `line ${index + 1} is not a Prometheus sample: ${JSON.stringify(line.slice(0, 120))}`,
      };
    const sum = sums.get(name);
    if (sum === undefined) continue;
    const value = Number(valueText);
    if (!Number.isFinite(value) || value < 0)
      return { ok: false, reason: `${name} is ${valueText} on line ${index + 1}, not a count` };
    sums.set(name, sum + value);
    seen.add(name);
  }
  const missing = [names.running, names.waiting].filter((name) => !seen.has(name));
  if (missing.length > 0) return { ok: false, reason: `no ${missing.join(" or ")} on the page` };
  return { ok: true, running: sums.get(names.running) ?? 0, waiting: sums.get(names.waiting) ?? 0 };
}
