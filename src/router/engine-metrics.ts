/**
 * Counts from a Prometheus `/metrics` page (text exposition format 0.0.4, `parseCounts`): an
 * engine's queue, for selection (DESIGN §7) and the drain confirmation (DESIGN §3), and the
 * routers' request counters, for the dashboard. Pure.
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
  String.raw`^([a-zA-Z_:][a-zA-Z0-9_:]*)[ \t]*(${LABELS})?[ \t]+(\S+)(?:[ \t]+-?[0-9]+)?[ \t]*$`,
);
const FLOAT = /^[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[iI]nf|NaN)$/;
/** One label of a well-formed label set: name and escaped value. */
const LABEL_PAIR = /([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\\n]|\\.)*)"/g;
/** `# TYPE <name> <type>`: the families a page declares. */
const TYPE_LINE = /^#[ \t]+TYPE[ \t]+([a-zA-Z_:][a-zA-Z0-9_:]*)[ \t]/;

/** One sample of a count: its metric name, labels (unescaped) and value (finite, ≥ 0). */
export interface CountSample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export type CountsRead =
  | {
      readonly ok: true;
      /** The samples of the wanted names, in page order. */
      readonly samples: readonly CountSample[];
      /** Every family a `# TYPE` line declares (a family with no series yet is declared, has no sample). */
      readonly declared: ReadonlySet<string>;
    }
  | { readonly ok: false; readonly reason: string };

/**
 * The samples of `names` on a page, each a count. Refused, with the line number, when a line is
 * not a comment, blank or a sample, or when a sample of `names` is not a finite count ≥ 0.
 */
export function parseCounts(text: string, names: ReadonlySet<string>): CountsRead {
  const samples: CountSample[] = [];
  const declared = new Set<string>();
  const lines = text.split("\n");
  for (let index = 0; index < lines.length; index++) {
    const line = (lines[index] ?? "").trimEnd();
    const typed = TYPE_LINE.exec(line)?.[1];
    if (typed !== undefined) declared.add(typed);
    if (line === "" || line.startsWith("#")) continue;
    const match = SAMPLE.exec(line);
    const [, name = "", labelText = "", valueText = ""] = match ?? [];
    if (match === null || !FLOAT.test(valueText))
      return {
        ok: false,
        reason: `line ${index + 1} is not a Prometheus sample: ${JSON.stringify(line.slice(0, 120))}`,
      };
    if (!names.has(name)) continue;
    const value = Number(valueText);
    if (!Number.isFinite(value) || value < 0)
      return { ok: false, reason: `${name} is ${valueText} on line ${index + 1}, not a count` };
    samples.push({ name, labels: labelsOf(labelText), value });
  }
  return { ok: true, samples, declared };
}

function labelsOf(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const [, name = "", value = ""] of text.matchAll(LABEL_PAIR))
    labels[name] = value.replace(/\\(.)/g, (_escape, char: string) => (char === "n" ? "\n" : char));
  return labels;
}

/**
 * Running and waiting requests of `engine`, each the sum over every label set of its metric
 * (vLLM reports one series per engine core or model). Refused, with the line number, when a line
 * is not a sample; refused when a metric is absent or a value is not a finite count ≥ 0 — an
 * absent metric is not zero, and the drain confirmation must never read it as zero.
 */
export function parseEngineQueue(text: string, engine: EngineKind): EngineQueue {
  const names = ENGINE_METRICS[engine];
  const read = parseCounts(text, new Set([names.running, names.waiting]));
  if (!read.ok) return read;
  const sum = (name: string): number | undefined => {
    const values = read.samples.filter((sample) => sample.name === name).map((sample) => sample.value);
    return values.length === 0 ? undefined : values.reduce((total, value) => total + value, 0);
  };
  const running = sum(names.running);
  const waiting = sum(names.waiting);
  if (running === undefined || waiting === undefined) {
    const missing = [running === undefined ? names.running : "", waiting === undefined ? names.waiting : ""];
    return { ok: false, reason: `no ${missing.filter((name) => name !== "").join(" or ")} on the page` };
  }
  return { ok: true, running, waiting };
}
