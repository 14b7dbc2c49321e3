/**
 * The one place untrusted YAML text becomes plain data, for every command that reads a file
 * (manifests, scenarios, `tandem revision` output). It never throws: whatever the `yaml` library
 * reports or throws — syntax errors, duplicate keys, an alias bomb ("billion laughs"), an alias
 * without its anchor, nesting too deep for its parser — becomes the document's errors, one line
 * each, so a caller reports them per file and goes on with its other inputs.
 *
 * Values are JSON data only, as Kubernetes would store them: the YAML 1.2 core schema is used
 * whatever the document's `%YAML` directive says, and explicit tags beyond it (`!!binary`,
 * `!!timestamp`, `!!set`) are not resolved (the value stays a string or a mapping), so no `Date`,
 * byte array or `Set` reaches a schema or a revision hash. `<<` is an ordinary key.
 */
import type { Document } from "yaml";
import { parseAllDocuments, parseDocument } from "yaml";

/**
 * Most alias expansions a document may cause (the `yaml` library's measure: uses of an anchor
 * times the aliases inside it). Manifests rarely use aliases at all; a bomb needs millions.
 */
export const MAX_YAML_ALIAS_EXPANSIONS = 100;

/** A document's data, or why it has none (each error one line, with its position when known). */
export type YamlDocument =
  { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly errors: readonly string[] };

const OPTIONS = { schema: "core", resolveKnownTags: false, merge: false, uniqueKeys: true, logLevel: "error" } as const;

/** Every document of a multi-document YAML text, in order (none for empty text). */
export function parseYamlDocuments(text: string): YamlDocument[] {
  return parseAllDocuments(text, OPTIONS).map(toData);
}

/** The text as one YAML document; more than one is an error. */
export function parseYamlDocument(text: string): YamlDocument {
  return toData(parseDocument(text, OPTIONS));
}

function toData(document: Document.Parsed): YamlDocument {
  // The parser reports running out of stack once per level it unwinds: said once is enough.
  if (document.errors.length > 0)
    return {
      ok: false,
      errors: firstErrors([
        ...new Set(
          document.errors.map((error) => (error.code === "RESOURCE_EXHAUSTION" ? TOO_DEEP : firstLine(error.message))),
        ),
      ]),
    };
  let value: unknown;
  try {
    value = document.toJS({ maxAliasCount: MAX_YAML_ALIAS_EXPANSIONS });
  } catch (error) {
    return { ok: false, errors: [reasonOf(error)] };
  }
  // An alias inside the collection it names makes that collection contain itself: no JSON has that.
  if (hasCycle(value))
    return { ok: false, errors: ["an alias refers to a collection it is part of, so the data would be infinite"] };
  return { ok: true, value };
}

/**
 * Whether an object contains itself, directly or not. A depth-first walk with an explicit stack
 * (data of any depth) that visits each object once (aliases share objects, so a tree walk could
 * take exponential time).
 */
function hasCycle(value: unknown): boolean {
  const finished = new Set<object>();
  const onPath = new Set<object>();
  const walk: { readonly object: object; readonly children: Iterator<unknown> }[] = [];
  const enter = (child: unknown): boolean => {
    if (typeof child !== "object" || child === null || finished.has(child)) return false;
    if (onPath.has(child)) return true;
    onPath.add(child);
    walk.push({ object: child, children: Object.values(child).values() });
    return false;
  };
  if (enter(value)) return true;
  for (let top = walk.at(-1); top !== undefined; top = walk.at(-1)) {
    const next = top.children.next();
    if (next.done === true) {
      walk.pop();
      onPath.delete(top.object);
      finished.add(top.object);
    } else if (enter(next.value)) return true;
  }
  return false;
}

const TOO_DEEP = "collections are nested too deeply to parse";

/** Why building the data threw, in plain words (the library's own message otherwise). */
function reasonOf(error: unknown): string {
  if (error instanceof RangeError) return TOO_DEEP; // the call stack ran out
  const message = error instanceof Error ? error.message : String(error);
  if (message.startsWith("Excessive alias count"))
    return `too many aliases (expanding them would exceed ${MAX_YAML_ALIAS_EXPANSIONS} alias uses, as in a "billion laughs" attack)`;
  return firstLine(message);
}

/** Syntax errors reported per document: text that is not YAML at all has one per line or so. */
const MAX_SYNTAX_ERRORS = 10;
/** Characters of one error line: the library quotes the offending token whole, which may be megabytes. */
const MAX_ERROR_CHARACTERS = 200;

function firstErrors(errors: readonly string[]): string[] {
  if (errors.length <= MAX_SYNTAX_ERRORS) return [...errors];
  return [...errors.slice(0, MAX_SYNTAX_ERRORS), `and ${errors.length - MAX_SYNTAX_ERRORS} more syntax errors`];
}

/** The message's first line, at most MAX_ERROR_CHARACTERS long. */
function firstLine(message: string): string {
  const line = message.split("\n")[0] ?? message;
  return line.length <= MAX_ERROR_CHARACTERS
    ? line
    : `${line.slice(0, MAX_ERROR_CHARACTERS)}… (${line.length} characters)`;
}
