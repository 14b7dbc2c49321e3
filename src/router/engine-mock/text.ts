/**
 * The engine mock's deterministic "model": the text of a request is a pure function of its prompt,
 * so the same request gives the same tokens on every mock, and a disaggregated request (prefill on
 * one mock, decode on another) gives exactly the text an aggregated one would.
 *
 * Tokens are words of a small vocabulary, each with a leading space, chosen by a hash of the prompt
 * and the token's position. Token counts are words (whitespace-separated), not a real tokenizer's.
 */
import { createHash } from "node:crypto";

const VOCABULARY = [
  "the",
  "model",
  "serves",
  "tokens",
  "from",
  "a",
  "mock",
  "engine",
  "while",
  "prefill",
  "and",
  "decode",
  "share",
  "one",
  "request",
  "path",
  "through",
  "every",
  "rolling",
  "update",
  "without",
  "losing",
  "capacity",
  "or",
  "cache",
  "blocks",
  "in",
  "flight",
  "to",
  "its",
  "router",
  "group",
] as const;

/** Fewest tokens a prompt's answer has before it stops by itself (finish_reason "stop"). */
const MIN_NATURAL_TOKENS = 16;
/** Spread of natural answer lengths above the minimum: 16..63 tokens. */
const NATURAL_TOKENS_SPREAD = 48;

function digest(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

/** How many tokens the answer to `prompt` has when nothing caps it (16..63). */
export function naturalLength(prompt: string): number {
  return MIN_NATURAL_TOKENS + (digest(prompt).readUInt32BE(0) % NATURAL_TOKENS_SPREAD);
}

/** Token `index` (0-based) of the answer to `prompt`: a word with a leading space. */
export function tokenAt(prompt: string, index: number): string {
  const word = VOCABULARY[digest(`${index}\u0000${prompt}`).readUInt32BE(0) % VOCABULARY.length];
  return ` ${String(word)}`;
}

/** The prompt's token count: its whitespace-separated words, at least 1 (an empty prompt is one BOS token). */
export function countTokens(prompt: string): number {
  return Math.max(1, prompt.split(/\s+/).filter((word) => word !== "").length);
}
