/**
 * Canonical JSON for revision identity (DESIGN §2.6): what counts as "empty", how empty values are
 * dropped, and the one byte serialization that is hashed and stored. These rules are part of
 * revision format 1 (docs/design/revision-identity.md): changing them changes every hash.
 */

/** A JSON value as this module produces it. */
export type JsonValue = null | boolean | number | string | readonly JsonValue[] | { readonly [key: string]: JsonValue };

/**
 * Keys whose value is a string→string map of user data (not struct fields): an entry with an empty
 * value is meaningful there (`labels: {canary: ""}` differs from no label), so such entries are kept.
 */
const STRING_MAP_KEYS: ReadonlySet<string> = new Set(["labels", "annotations", "nodeSelector", "matchLabels"]);

/**
 * Drops empty values recursively and returns `undefined` when `value` itself is empty.
 *
 * Empty, as an object member: `undefined`, `null`, `""`, a non-finite number (JSON cannot carry it),
 * `[]`, and an object left with no members once its own members are pruned. This mirrors Go's
 * `omitempty`, so a field that a Kubernetes client or a newer controller writes as empty is the same
 * declaration as an absent one. Not empty: `0` and `false` (in pod templates they can differ from
 * absent, e.g. `automountServiceAccountToken: false`).
 *
 * Arrays keep every element in place (`args: ["--x", ""]` means what it says): elements are
 * normalized but never dropped, and an element that prunes to nothing keeps its empty form.
 * Entries of the string maps in `STRING_MAP_KEYS` keep empty-string values.
 */
export function pruneEmpty(value: unknown): JsonValue | undefined {
  if (value === null || value === undefined || value === "") return undefined;
  if (typeof value === "string" || typeof value === "boolean") return value;
  if (typeof value === "number") return Number.isFinite(value) ? value : undefined;
  if (Array.isArray(value)) return value.length === 0 ? undefined : value.map(pruneElement);
  if (typeof value === "object") return pruneObject(value as Record<string, unknown>);
  return undefined; // functions, symbols, bigints: not JSON, so never part of a declaration
}

function pruneElement(element: unknown): JsonValue {
  const pruned = pruneEmpty(element);
  if (pruned !== undefined) return pruned;
  if (typeof element === "string") return "";
  if (Array.isArray(element)) return [];
  if (element !== null && typeof element === "object") return {};
  return null;
}

function pruneObject(object: Record<string, unknown>): { readonly [key: string]: JsonValue } | undefined {
  const out: Record<string, JsonValue> = {};
  for (const [key, member] of Object.entries(object)) {
    const pruned = STRING_MAP_KEYS.has(key) ? pruneStringMap(member) : pruneEmpty(member);
    if (pruned !== undefined) out[key] = pruned;
  }
  return Object.keys(out).length === 0 ? undefined : out;
}

/** A string map keeps `""` values; anything that is not a plain object is pruned as usual. */
function pruneStringMap(map: unknown): JsonValue | undefined {
  if (map === null || typeof map !== "object" || Array.isArray(map)) return pruneEmpty(map);
  const out: Record<string, JsonValue> = {};
  for (const [key, member] of Object.entries(map as Record<string, unknown>)) {
    const pruned = member === "" ? "" : pruneEmpty(member);
    if (pruned !== undefined) out[key] = pruned;
  }
  return Object.keys(out).length === 0 ? undefined : out;
}

/**
 * The canonical serialization: JSON with object keys sorted at every level (by UTF-16 code units,
 * JavaScript's default string order, which equals byte order for ASCII keys), no whitespace,
 * strings and numbers as `JSON.stringify` writes them. Array order is kept. Input must be JSON
 * (the output of `pruneEmpty`, or data read back from the API server).
 */
export function canonicalJson(value: JsonValue): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${(value as readonly JsonValue[]).map(canonicalJson).join(",")}]`;
  const object = value as { readonly [key: string]: JsonValue };
  const members = Object.keys(object)
    .sort()
    .map((key) => `${JSON.stringify(key)}:${canonicalJson(object[key] as JsonValue)}`);
  return `{${members.join(",")}}`;
}

/**
 * `canonicalJson(a) === canonicalJson(b)`, decided without serializing: members compared by key
 * whatever their order, primitives as `JSON.stringify` writes them (so `NaN` equals `null`, as
 * both serialize to `null`), and stops at the first difference.
 */
export function sameCanonicalJson(a: JsonValue, b: JsonValue): boolean {
  if (a === b) return true;
  const aIsObject = a !== null && typeof a === "object";
  const bIsObject = b !== null && typeof b === "object";
  if (!aIsObject || !bIsObject) return !aIsObject && !bIsObject && JSON.stringify(a) === JSON.stringify(b);
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b)) return false;
    // Rare, and not always unequal: `[undefined]` serializes as `[]`.
    if (a.length !== b.length) return canonicalJson(a) === canonicalJson(b);
    // Indices, not `every`: a hole serializes (as "") and must be compared too.
    for (let index = 0; index < a.length; index++)
      if (!sameCanonicalJson(a[index] as JsonValue, b[index] as JsonValue)) return false;
    return true;
  }
  const aObject = a as { readonly [key: string]: JsonValue };
  const bObject = b as { readonly [key: string]: JsonValue };
  const keys = Object.keys(aObject);
  if (keys.length !== Object.keys(bObject).length) return false;
  return keys.every(
    (key) =>
      Object.prototype.propertyIsEnumerable.call(bObject, key) &&
      sameCanonicalJson(aObject[key] as JsonValue, bObject[key] as JsonValue),
  );
}

/** True when `value` is JSON all the way down: what `canonicalJson` can serialize faithfully. */
export function isJsonValue(value: unknown): value is JsonValue {
  if (value === null || typeof value === "string" || typeof value === "boolean") return true;
  if (typeof value === "number") return Number.isFinite(value);
  if (Array.isArray(value)) return value.every(isJsonValue);
  if (typeof value !== "object") return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  // Only plain objects: a Date or Map would serialize as something other than its members.
  return (prototype === Object.prototype || prototype === null) && Object.values(value).every(isJsonValue);
}
