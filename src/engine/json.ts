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
 * JsonObject; `undefined` properties vanish as they would on the wire. The copy is exactly
 * `JSON.parse(JSON.stringify(value))`.
 */
export function toJsonObject(value: object): JsonObject {
  const plain = plainCopy(value, 0);
  // Anything the plain walk does not handle takes the long way, with the same result and errors.
  const copy: unknown = plain === NOT_PLAIN ? JSON.parse(JSON.stringify(value)) : plain;
  if (!isJsonObject(copy)) throw new Error("expected a JSON object");
  return copy;
}

/** `plainCopy`'s answer for a value it leaves to `JSON.stringify`. */
const NOT_PLAIN: unique symbol = Symbol("not plain JSON");

/**
 * `JSON.parse(JSON.stringify(value))` for the values core builds: plain objects and arrays of
 * strings, booleans, null and finite numbers, `undefined` properties dropped. Returns NOT_PLAIN
 * for anything else (and beyond MAX_DEPTH, where a cycle would be), which `JSON.stringify` decides.
 */
function plainCopy(value: unknown, depth: number): unknown {
  if (value === null || typeof value === "string" || typeof value === "boolean") return value;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) return NOT_PLAIN;
    // JSON has no negative zero: -0 is written as 0.
    return value === 0 ? 0 : value;
  }
  if (typeof value !== "object" || depth > MAX_DEPTH) return NOT_PLAIN;
  if (typeof (value as { toJSON?: unknown }).toJSON === "function") return NOT_PLAIN;
  const prototype: unknown = Object.getPrototypeOf(value);
  if (Array.isArray(value)) {
    if (prototype !== Array.prototype) return NOT_PLAIN;
    const copy: unknown[] = new Array<unknown>(value.length);
    for (let index = 0; index < value.length; index++) {
      const item: unknown = value[index];
      // JSON.stringify writes an undefined element (or a hole) as null.
      const child = item === undefined ? null : plainCopy(item, depth + 1);
      if (child === NOT_PLAIN) return NOT_PLAIN;
      copy[index] = child;
    }
    return copy;
  }
  if (prototype !== Object.prototype && prototype !== null) return NOT_PLAIN;
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    const item: unknown = (value as Record<string, unknown>)[key];
    if (item === undefined) continue;
    const child = plainCopy(item, depth + 1);
    if (child === NOT_PLAIN) return NOT_PLAIN;
    // As JSON.parse does, "__proto__" becomes an ordinary own key.
    if (key === "__proto__") setKey(copy as JsonObject, key, child as JsonValue);
    else copy[key] = child;
  }
  return copy;
}

/** Structural equality of JSON values; key order does not matter, `undefined` equals absent. */
export function jsonEqual(a: unknown, b: unknown, depth = 0): boolean {
  if (depth > MAX_DEPTH) throw new Error(`jsonEqual: nested deeper than ${MAX_DEPTH}`);
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) return arraysEqual(a, b, depth);
  const recordA = a as Record<string, unknown>;
  const recordB = b as Record<string, unknown>;
  const keysA = Object.keys(recordA);
  // Counted before any comparison: objects with different numbers of defined keys differ.
  if (definedCount(recordA, keysA) !== definedCount(recordB, Object.keys(recordB))) return false;
  for (const key of keysA) {
    const value = recordA[key];
    if (value !== undefined && !jsonEqual(value, recordB[key], depth + 1)) return false;
  }
  return true;
}

function arraysEqual(a: readonly unknown[], b: readonly unknown[], depth: number): boolean {
  if (a.length !== b.length) return false;
  for (let index = 0; index < a.length; index++) {
    // A hole in `a` is skipped, as `every` skips it.
    if (index in a && !jsonEqual(a[index], b[index], depth + 1)) return false;
  }
  return true;
}

/** How many of `record`'s `keys` hold a value other than undefined. */
function definedCount(record: Record<string, unknown>, keys: readonly string[]): number {
  let count = 0;
  for (const key of keys) if (record[key] !== undefined) count++;
  return count;
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
