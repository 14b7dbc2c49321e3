/**
 * A validation problem: where (a field path a person can paste into `kubectl explain` style
 * reasoning, e.g. `spec.template.roles[1].workerTemplate`) and why, in plain words.
 */
import type { z } from "zod";

export interface Problem {
  readonly path: string;
  readonly reason: string;
}

/** A path segment: an object key or an array index. */
export type PathSegment = string | number;

/** The most characters of an input string a message shows (`quote`). */
export const MAX_QUOTED_CHARACTERS = 80;

const PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Formats `["spec", "template", "roles", 1, "name"]` as `spec.template.roles[1].name`. */
export function formatPath(segments: readonly PropertyKey[]): string {
  let out = "";
  for (const segment of segments) {
    if (typeof segment === "number") out += `[${segment}]`;
    else if (typeof segment === "string" && segment.length <= MAX_QUOTED_CHARACTERS && PLAIN_KEY.test(segment))
      out += out === "" ? segment : `.${segment}`;
    else out += `[${quote(String(segment))}]`;
  }
  return out === "" ? "(root)" : out;
}

export function problem(segments: readonly PropertyKey[], reason: string): Problem {
  return { path: formatPath(segments), reason };
}

/** Converts zod issues to problems; one issue per unknown key so each names its own path. */
export function problemsFromZod(issues: readonly z.core.$ZodIssue[]): Problem[] {
  const problems: Problem[] = [];
  for (const issue of issues) {
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) problems.push(problem([...issue.path, key], "is not a known field"));
      continue;
    }
    problems.push(problem(issue.path, reasonOf(issue)));
  }
  return problems;
}

/** Plain-word reasons for zod's built-in issues; schema-specific messages pass through. */
function reasonOf(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case "invalid_type":
      return issue.input === undefined
        ? "is required"
        : `must be ${article(issue.expected)}, not ${describeValue(issue.input)}`;
    case "too_small":
      if (issue.origin === "array") return `must list at least ${count(issue.minimum, "item")}`;
      if (issue.origin === "string")
        return issue.minimum === 1 ? "must not be empty" : `must be at least ${count(issue.minimum, "character")}`;
      return isNumeric(issue.origin) ? `must be ${issue.minimum} or more` : issue.message;
    case "too_big":
      if (issue.origin === "array") return `must list at most ${count(issue.maximum, "item")}`;
      if (issue.origin === "string") return `must be at most ${count(issue.maximum, "character")}`;
      return isNumeric(issue.origin) ? `must be at most ${issue.maximum}` : issue.message;
    case "invalid_value":
      if (issue.values.length === 1) return `must be ${JSON.stringify(issue.values[0])}`;
      return `${issue.input === undefined ? "is required: " : ""}must be one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}`;
    default:
      return issue.message;
  }
}

function count(n: number | bigint, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}

function isNumeric(origin: string): boolean {
  return origin === "number" || origin === "int" || origin === "bigint";
}

function article(expected: string): string {
  // Every number in the ModelServing API is an integer, and zod reports non-numbers as "number".
  const noun = expected === "int" || expected === "number" ? "integer" : expected;
  return /^[aeiou]/.test(noun) ? `an ${noun}` : `a ${noun}`;
}

/**
 * `text` as a JSON string literal (so control characters, quotes and binary show escaped), cut to
 * its first `MAX_QUOTED_CHARACTERS` with its length said when longer: a message echoes at most a
 * line of what it was given, however large the input.
 */
export function quote(text: string): string {
  if (text.length <= MAX_QUOTED_CHARACTERS) return JSON.stringify(text);
  return `${JSON.stringify(text.slice(0, MAX_QUOTED_CHARACTERS))}… (${text.length} characters)`;
}

/**
 * A bad value in a message, e.g. `string "3"`, `number NaN`, `a list`: any JavaScript value,
 * never throwing (bigints, symbols, functions, circular objects included) and never long.
 */
export function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  switch (typeof value) {
    case "object":
      return "an object";
    case "string":
      return `string ${quote(value)}`;
    case "number":
    case "boolean":
      return `${typeof value} ${String(value)}`; // not JSON, which writes NaN and Infinity as null
    case "bigint": {
      const digits = String(value); // JSON.stringify throws on a bigint
      return `bigint ${digits.length <= MAX_QUOTED_CHARACTERS ? digits : `${digits.slice(0, MAX_QUOTED_CHARACTERS)}… (${digits.length} digits)`}`;
    }
    case "undefined":
      return "undefined";
    case "symbol":
      return "a symbol";
    default:
      return "a function";
  }
}
