/**
 * The one entry point from untrusted input to a ModelServing: structural checks and defaulting
 * (zod), then the semantic rules of `validate.ts`. Input is never modified.
 */
import { z } from "zod";
import { nestingProblem } from "./nesting.ts";
import { ModelServing, ModelServingSpec, ModelServingStatus, UnitRecord } from "./schema.ts";
import type { Problem } from "./problems.ts";
import { problem, problemsFromZod } from "./problems.ts";
import { validateModelServing } from "./validate.ts";
import { ModelRoute } from "./route.ts";
import { validateModelRoute } from "./validate-route.ts";

export type ParseResult<T = ModelServing> =
  { readonly ok: true; readonly value: T } | { readonly ok: false; readonly problems: readonly Problem[] };

/**
 * Parses, defaults and validates a ModelServing. Defaulting is idempotent: parsing the `value` of a
 * successful result again yields an equal value. Problems are ordered as found (schema first).
 * Input nested deeper than `MAX_NESTING_DEPTH` is refused before anything else reads it, with the
 * one problem that says where.
 *
 * Stored objects are parsed once (a frozen input's result is remembered, `RESULT_MEMO`), and a
 * stored spec or unit record once across the versions that share it (`SPEC_MEMO`, `UNIT_MEMO`;
 * "frozen" means deep-frozen, as stored objects are). A remembered result, and the spec and unit
 * records of a value built from remembered parts, are shared by every caller: read-only, like the
 * frozen input they come from. The results are always exactly those of a whole parse.
 */
export function parseModelServing(input: unknown): ParseResult {
  if (!isFrozenObject(input)) return parseParts(input);
  let result = RESULT_MEMO.get(input);
  if (result === undefined) {
    result = parseParts(input);
    RESULT_MEMO.set(input, result);
  }
  return result;
}

/**
 * Per frozen input object (a WeakMap: freed with it), its result. Safe because the result is a
 * function of the input alone and a frozen object cannot change.
 */
const RESULT_MEMO = new WeakMap<object, ParseResult>();

function parseParts(input: unknown): ParseResult {
  // First, so nothing deeper than the limit reaches a schema, a rule or a revision hash.
  const tooDeep = nestingProblem(input);
  if (tooDeep !== undefined) return { ok: false, problems: [tooDeep] };
  return parseByParts(input) ?? parseWhole(input);
}

function parseWhole(input: unknown): ParseResult {
  const parsed = ModelServing.safeParse(input, { reportInput: true });
  if (!parsed.success)
    return {
      ok: false,
      problems: [
        ...problemsFromZod(parsed.error.issues),
        ...rulesDespite(input, parsed.error.issues, ModelServing, validateModelServing),
      ],
    };
  return validated(parsed.data, validateModelServing(parsed.data));
}

/** Rounds of taking out what the schema refused before the rules are given up on. */
const MAX_SCHEMA_ROUNDS = 3;

/**
 * The semantic rules' problems with an input the schema refused, so one run reports every
 * problem (a user fixing the schema's would otherwise meet the rules' only on the next run).
 * The refused values are taken out of a copy (unknown keys dropped, bad values removed so their
 * defaults apply) and the copy parsed again; the rules then run on it, and what they say about the
 * removed values, or the objects holding them, is left out (it would be about the defaults). Nothing when the copy still does
 * not parse: a required field is missing, or an array item is refused (removing it would shift
 * the positions every later problem names).
 */
function rulesDespite<T>(
  input: unknown,
  issues: readonly z.core.$ZodIssue[],
  schema: z.ZodType<T>,
  rules: (value: T) => readonly Problem[],
): Problem[] {
  const copy: unknown = structuredClone(input);
  const removed: string[] = [];
  for (let round = 0, left = issues; round < MAX_SCHEMA_ROUNDS; round++) {
    for (const issue of left) {
      const paths = issue.code === "unrecognized_keys" ? issue.keys.map((key) => [...issue.path, key]) : [issue.path];
      for (const path of paths) if (!removeAt(copy, path)) return [];
      removed.push(...paths.map((path) => problem(path, "").path));
    }
    const parsed = schema.safeParse(copy);
    if (parsed.success)
      return rules(parsed.data).filter((found) => !removed.some((path) => onOnePath(found.path, path)));
    left = parsed.error.issues;
  }
  return [];
}

/** Whether one of two formatted paths is the other or inside it. */
function onOnePath(a: string, b: string): boolean {
  const inside = (inner: string, outer: string): boolean =>
    inner === outer || inner.startsWith(`${outer}.`) || inner.startsWith(`${outer}[`);
  return inside(a, b) || inside(b, a);
}

/** Deletes the object property at `path` of `root`; false when there is none to delete or it is an array item. */
function removeAt(root: unknown, path: readonly PropertyKey[]): boolean {
  const key = path.at(-1);
  let parent = root;
  for (const segment of path.slice(0, -1))
    parent =
      typeof parent === "object" && parent !== null ? (parent as Record<PropertyKey, unknown>)[segment] : undefined;
  if (
    key === undefined ||
    typeof key === "number" ||
    typeof parent !== "object" ||
    parent === null ||
    Array.isArray(parent) ||
    !Object.hasOwn(parent, key)
  )
    return false;
  return Reflect.deleteProperty(parent, key);
}

/**
 * Parses, defaults and validates a ModelRoute (`route.ts`, `validate-route.ts`); like
 * `parseModelServing`, input is never modified and defaulting is idempotent. Routes are few and
 * small, so nothing is remembered.
 */
export function parseModelRoute(input: unknown): ParseResult<ModelRoute> {
  const parsed = ModelRoute.safeParse(input, { reportInput: true });
  if (!parsed.success)
    return {
      ok: false,
      problems: [
        ...problemsFromZod(parsed.error.issues),
        ...rulesDespite(input, parsed.error.issues, ModelRoute, validateModelRoute),
      ],
    };
  return validated(parsed.data, validateModelRoute(parsed.data));
}

function validated<T>(value: T, problems: readonly Problem[]): ParseResult<T> {
  return problems.length === 0 ? { ok: true, value } : { ok: false, problems };
}

/**
 * `ModelServing` with the spec and the status's unit records taken as they are (unread): every
 * other field checked and defaulted as in a whole parse, and the output's keys in the same order.
 */
const UNREAD_PARTS = ModelServing.extend({
  spec: z.unknown(),
  status: ModelServingStatus.extend({ units: z.unknown().optional() }).optional(),
});

function isFrozenObject(value: unknown): value is object {
  return typeof value === "object" && value !== null && Object.isFrozen(value);
}

/** What is remembered of one frozen spec object. */
interface SpecParse {
  /** The spec parsed and defaulted; undefined when it does not parse. */
  readonly spec: ModelServingSpec | undefined;
  /** The semantic problems with this spec under the ModelServing name they were found for. */
  validation: { readonly name: string; readonly problems: readonly Problem[] } | undefined;
}

/**
 * Per frozen spec object (a WeakMap: freed with it), its parse and validation. Safe because a
 * frozen spec cannot change, zod checks and defaults the spec independently of the fields around
 * it, and the semantic rules read the spec and `metadata.name` only (the validation is kept with
 * the name it was found for).
 */
const SPEC_MEMO = new WeakMap<object, SpecParse>();

/**
 * Per frozen unit record of a status (a WeakMap), its parse: the server shares each unchanged
 * record between status versions, and a record parses alone as it does in its list.
 */
const UNIT_MEMO = new WeakMap<object, UnitRecord>();

/**
 * The parse from parts, the spec and unit records remembered (see `parseModelServing`); undefined
 * when the spec is not frozen or any part fails (the whole parse then says what, in its order).
 */
function parseByParts(input: unknown): ParseResult | undefined {
  const spec = typeof input === "object" && input !== null ? (input as { spec?: unknown }).spec : undefined;
  if (!isFrozenObject(spec)) return undefined;
  const memo = specParseOf(spec);
  if (memo.spec === undefined) return undefined;
  const rest = UNREAD_PARTS.safeParse(input);
  if (!rest.success) return undefined;
  // Parts are assigned to the keys zod already placed, so the value's keys keep the whole parse's order.
  const { status } = rest.data;
  if (status?.units !== undefined) {
    const units = parseUnits(status.units);
    if (units === null) return undefined;
    status.units = units;
  }
  const value = Object.assign(rest.data, { spec: memo.spec }) as ModelServing;
  if (memo.validation?.name !== value.metadata.name)
    memo.validation = { name: value.metadata.name, problems: validateModelServing(value) };
  return validated(value, memo.validation.problems);
}

function specParseOf(spec: object): SpecParse {
  let memo = SPEC_MEMO.get(spec);
  if (memo === undefined) {
    const parsed = ModelServingSpec.safeParse(spec);
    memo = { spec: parsed.success ? parsed.data : undefined, validation: undefined };
    SPEC_MEMO.set(spec, memo);
  }
  return memo;
}

/** `status.units` parsed record by record (frozen records remembered); null when any fails. */
function parseUnits(units: unknown): UnitRecord[] | null {
  if (!Array.isArray(units)) return null;
  const parsed: UnitRecord[] = [];
  for (const unit of units) {
    let record = isFrozenObject(unit) ? UNIT_MEMO.get(unit) : undefined;
    if (record === undefined) {
      const result = UnitRecord.safeParse(unit);
      if (!result.success) return null;
      record = result.data;
      if (isFrozenObject(unit)) UNIT_MEMO.set(unit, record);
    }
    parsed.push(record);
  }
  return parsed;
}
