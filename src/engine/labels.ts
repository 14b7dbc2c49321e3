/**
 * Kubernetes labels: validation of keys and values, and label selectors in their string form
 * (`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`, `a`, `!a`, joined by commas, all of which
 * must hold). Pure; shared by the simulator's API server and any cache that filters locally, so
 * both sides of the ClusterReader port agree on what a selector means.
 *
 * Not supported: the numeric `a > 1` / `a < 1` operators (rejected as Invalid).
 */
import { ApiError } from "./ports.ts";

export type Operator = "=" | "!=" | "in" | "notin" | "exists" | "!exists";

export interface Requirement {
  readonly key: string;
  readonly operator: Operator;
  /** One value for `=`/`!=`, at least one for `in`/`notin`, none for `exists`/`!exists`. */
  readonly values: readonly string[];
}

/** All requirements must hold; an empty selector matches every object. */
export interface LabelSelector {
  readonly requirements: readonly Requirement[];
}

const NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** Longer selectors are refused rather than parsed, keeping parsing bounded. */
const MAX_SELECTOR_LENGTH = 4096;

/** Why `key` is not a valid label key (`[prefix/]name`), or undefined when it is. */
export function labelKeyProblem(key: string): string | undefined {
  const slash = key.indexOf("/");
  const prefix = slash === -1 ? undefined : key.slice(0, slash);
  const name = slash === -1 ? key : key.slice(slash + 1);
  if (prefix !== undefined && (prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix))) {
    return `label key "${key}": prefix must be a DNS subdomain of at most 253 characters`;
  }
  if (name.length > 63 || !NAME.test(name)) {
    return `label key "${key}": name must be 1-63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric`;
  }
  return undefined;
}

/** Why `value` is not a valid label value, or undefined when it is (empty is valid). */
export function labelValueProblem(value: string): string | undefined {
  if (value === "" || (value.length <= 63 && NAME.test(value))) return undefined;
  return `label value "${value}": must be at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric`;
}

/** The problems of a label map, in key order; empty when all keys and values are valid. */
export function labelProblems(labels: Readonly<Record<string, string>>): string[] {
  const problems: string[] = [];
  for (const key of Object.keys(labels).sort()) {
    const keyProblem = labelKeyProblem(key);
    if (keyProblem !== undefined) problems.push(keyProblem);
    const valueProblem = labelValueProblem(labels[key] ?? "");
    if (valueProblem !== undefined) problems.push(valueProblem);
  }
  return problems;
}

/** True when `labels` (absent = none) satisfy every requirement of `selector`. */
export function matchesSelector(
  selector: LabelSelector,
  labels: Readonly<Record<string, string>> | undefined,
): boolean {
  return selector.requirements.every((requirement) => matchesRequirement(requirement, labels ?? {}));
}

function matchesRequirement(requirement: Requirement, labels: Readonly<Record<string, string>>): boolean {
  const has = Object.hasOwn(labels, requirement.key);
  const value = labels[requirement.key];
  switch (requirement.operator) {
    case "exists":
      return has;
    case "!exists":
      return !has;
    case "=":
    case "in":
      return has && requirement.values.includes(value ?? "");
    // A missing key satisfies != and notin, as in Kubernetes.
    case "!=":
    case "notin":
      return !has || !requirement.values.includes(value ?? "");
  }
}

/** Parses the string form of a label selector. Throws ApiError(Invalid) naming the problem. */
export function parseSelector(text: string): LabelSelector {
  if (text.length > MAX_SELECTOR_LENGTH) invalid(text, `longer than ${MAX_SELECTOR_LENGTH} characters`);
  const tokens = tokenize(text);
  const requirements: Requirement[] = [];
  let position = 0;
  // Each pass consumes at least one token, so the loop ends within tokens.length passes.
  while (position < tokens.length) {
    const parsed = parseRequirement(text, tokens, position);
    requirements.push(parsed.requirement);
    position = parsed.next;
    if (position < tokens.length) {
      expect(text, tokens, position, ",");
      position++;
      if (position === tokens.length) invalid(text, "trailing comma");
    }
  }
  return { requirements };
}

type Token = { readonly kind: "word"; readonly text: string } | { readonly kind: "symbol"; readonly text: string };

const SYMBOLS = ["==", "!=", "=", "!", "(", ")", ","];
const WORD_CHAR = /[A-Za-z0-9._/-]/;

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const char = text.charAt(i);
    if (char === " " || char === "\t") {
      i++;
      continue;
    }
    const symbol = SYMBOLS.find((candidate) => text.startsWith(candidate, i));
    if (symbol !== undefined) {
      tokens.push({ kind: "symbol", text: symbol });
      i += symbol.length;
      continue;
    }
    if (!WORD_CHAR.test(char)) invalid(text, `unexpected character "${char}" at ${i}`);
    let end = i;
    while (end < text.length && WORD_CHAR.test(text.charAt(end))) end++;
    tokens.push({ kind: "word", text: text.slice(i, end) });
    i = end;
  }
  return tokens;
}

function parseRequirement(
  text: string,
  tokens: readonly Token[],
  start: number,
): { requirement: Requirement; next: number } {
  if (tokens[start]?.text === "!") {
    const key = word(text, tokens, start + 1, "a key after '!'");
    return { requirement: requirement(key, "!exists", []), next: start + 2 };
  }
  const key = word(text, tokens, start, "a key");
  const operator = tokens[start + 1];
  if (operator === undefined || operator.text === ",")
    return { requirement: requirement(key, "exists", []), next: start + 1 };
  if (operator.kind === "symbol" && ["=", "==", "!="].includes(operator.text)) {
    // An empty value (`a=`) is valid: the next token is a comma or the end.
    const next = tokens[start + 2];
    const value = next?.kind === "word" ? next.text : "";
    const op = operator.text === "!=" ? "!=" : "=";
    return { requirement: requirement(key, op, [value]), next: start + (next?.kind === "word" ? 3 : 2) };
  }
  if (operator.kind === "word" && (operator.text === "in" || operator.text === "notin")) {
    const set = parseValueSet(text, tokens, start + 2);
    return { requirement: requirement(key, operator.text, set.values), next: set.next };
  }
  return invalid(text, `unsupported operator "${operator.text}" after "${key}"`);
}

function parseValueSet(text: string, tokens: readonly Token[], start: number): { values: string[]; next: number } {
  expect(text, tokens, start, "(");
  const values: string[] = [];
  let position = start + 1;
  while (position < tokens.length) {
    values.push(word(text, tokens, position, "a value"));
    position++;
    if (tokens[position]?.text === ")") return { values, next: position + 1 };
    expect(text, tokens, position, ",");
    position++;
  }
  return invalid(text, "unclosed '('");
}

function requirement(key: string, operator: Operator, values: string[]): Requirement {
  const keyProblem = labelKeyProblem(key);
  if (keyProblem !== undefined) invalid(key, keyProblem);
  for (const value of values) {
    const valueProblem = labelValueProblem(value);
    if (valueProblem !== undefined) invalid(value, valueProblem);
  }
  return { key, operator, values };
}

function word(text: string, tokens: readonly Token[], position: number, what: string): string {
  const token = tokens[position];
  if (token?.kind !== "word")
    return invalid(text, `expected ${what}, found ${token === undefined ? "the end" : `"${token.text}"`}`);
  return token.text;
}

function expect(text: string, tokens: readonly Token[], position: number, symbol: string): void {
  const token = tokens[position];
  if (token?.kind !== "symbol" || token.text !== symbol) {
    invalid(text, `expected "${symbol}", found ${token === undefined ? "the end" : `"${token.text}"`}`);
  }
}

function invalid(text: string, why: string): never {
  throw new ApiError("Invalid", `label selector "${text}": ${why}`);
}
