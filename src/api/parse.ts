/**
 * The one entry point from untrusted input to a ModelServing: structural checks and defaulting
 * (zod), then the semantic rules of `validate.ts`. Input is never modified.
 */
import { ModelServing } from "./schema.ts";
import type { Problem } from "./problems.ts";
import { problemsFromZod } from "./problems.ts";
import { validateModelServing } from "./validate.ts";

export type ParseResult =
  | { readonly ok: true; readonly value: ModelServing }
  | { readonly ok: false; readonly problems: readonly Problem[] };

/**
 * Parses, defaults and validates a ModelServing. Defaulting is idempotent: parsing the `value` of a
 * successful result again yields an equal value. Problems are ordered as found (schema first).
 */
export function parseModelServing(input: unknown): ParseResult {
  const parsed = ModelServing.safeParse(input, { reportInput: true });
  if (!parsed.success) return { ok: false, problems: problemsFromZod(parsed.error.issues) };
  const problems = validateModelServing(parsed.data);
  return problems.length === 0 ? { ok: true, value: parsed.data } : { ok: false, problems };
}
