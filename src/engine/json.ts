/**
 * JSON helpers for the engine: copies into the ports' JSON types, equality, and the merge patch
 * that turns one object into another.
 */
import type { JsonObject, JsonValue } from "./ports.ts";

/** Nesting deeper than this is a bug in the caller; refusing keeps every recursion bounded. */
const MAX_DEPTH = 64;

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * A deep copy of a JSON-shaped object (typed core values such as a Pod or a status) as the ports'
 * JsonObject; `undefined` properties vanish as they would on the wire.
 */
export function toJsonObject(value: object): JsonObject {
  const copy: unknown = JSON.parse(JSON.stringify(value));
  if (!isJsonObject(copy)) throw new Error("expected a JSON object");
  return copy;
}

/** Structural equality; key order does not matter. */
export function jsonEqual(a: JsonValue | undefined, b: JsonValue | undefined, depth = 0): boolean {
  if (depth > MAX_DEPTH) throw new Error(`jsonEqual: nested deeper than ${MAX_DEPTH}`);
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((item, i) => jsonEqual(item, b[i], depth + 1));
  }
  if (!isJsonObject(a) || !isJsonObject(b)) return false;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && jsonEqual(a[key], b[key], depth + 1));
}

/**
 * The JSON merge patch (RFC 7386) that turns `from` into `to`: keys only in `from` become `null`
 * (removed), changed objects are diffed key by key, and any other changed value (arrays included,
 * which a merge patch can only replace) is sent whole. Unchanged keys are left out, so equal
 * objects give `{}`. `to` must hold no `null`, which a merge patch would read as a removal.
 */
export function mergePatchBetween(from: JsonObject, to: JsonObject, depth = 0): JsonObject {
  if (depth > MAX_DEPTH) throw new Error(`mergePatchBetween: nested deeper than ${MAX_DEPTH}`);
  const patch: JsonObject = {};
  for (const key of Object.keys(from)) {
    if (!Object.hasOwn(to, key)) setKey(patch, key, null);
  }
  for (const [key, value] of Object.entries(to)) {
    const old = Object.hasOwn(from, key) ? from[key] : undefined;
    if (isJsonObject(old) && isJsonObject(value)) {
      const nested = mergePatchBetween(old, value, depth + 1);
      if (Object.keys(nested).length > 0) setKey(patch, key, nested);
    } else if (!jsonEqual(old, value)) {
      setKey(patch, key, value);
    }
  }
  return patch;
}

/** Sets an own property; unlike assignment, a key named "__proto__" stays data. */
function setKey(object: JsonObject, key: string, value: JsonValue): void {
  Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
}
