/**
 * JSON helpers for the simulated API server: copies that cut every reference into server state,
 * structural equality, and JSON merge patch (RFC 7386).
 */
import { ApiError } from "../engine/ports.ts";
import type { JsonObject, JsonValue } from "../engine/ports.ts";

/** Nesting deeper than this is refused, keeping every recursion here bounded. */
const MAX_DEPTH = 64;

/**
 * A deep copy with JSON semantics: `undefined` properties vanish, as they would on the wire.
 * Throws ApiError(Invalid) for values JSON cannot carry (functions, NaN, cycles, too deep).
 */
export function jsonCopy<T>(value: T): T {
  assertJson(value, 0, "object");
  return JSON.parse(JSON.stringify(value)) as T;
}

/**
 * A deep copy of a value already known to be JSON — the server's stored objects, checked when they
 * were written — without `jsonCopy`'s check. The copy is the same as `jsonCopy`'s.
 */
export function trustedCopy<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

function assertJson(value: unknown, depth: number, path: string): void {
  if (depth > MAX_DEPTH) throw new ApiError("Invalid", `${path}: nested deeper than ${MAX_DEPTH}`);
  if (value === null || value === undefined || typeof value === "string" || typeof value === "boolean") return;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new ApiError("Invalid", `${path}: ${value} is not a JSON number`);
    return;
  }
  if (typeof value !== "object") throw new ApiError("Invalid", `${path}: a ${typeof value} is not JSON`);
  for (const [key, child] of Object.entries(value)) assertJson(child, depth + 1, `${path}.${key}`);
}

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Structural equality of JSON values; key order does not matter, `undefined` equals absent. */
export function jsonEqual(a: unknown, b: unknown, depth = 0): boolean {
  if (depth > MAX_DEPTH) throw new Error(`jsonEqual: nested deeper than ${MAX_DEPTH}`);
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((item, i) => jsonEqual(item, b[i], depth + 1));
  }
  const keysA = definedKeys(a);
  const keysB = definedKeys(b);
  if (keysA.length !== keysB.length) return false;
  const recordA = a as Record<string, unknown>;
  const recordB = b as Record<string, unknown>;
  return keysA.every((key) => jsonEqual(recordA[key], recordB[key], depth + 1));
}

function definedKeys(value: object): string[] {
  return Object.entries(value)
    .filter(([, child]) => child !== undefined)
    .map(([key]) => key);
}

/**
 * RFC 7386 JSON merge patch: an object patch merges key by key, `null` removes a key, and any
 * other value (arrays included) replaces the target. Neither argument is modified. The objects
 * on the patch's paths are new and the patch's values are copied (and checked as JSON); the rest
 * of `target` is shared with the result, not copied — callers pass a target they do not mutate
 * (the server's frozen objects) or copy the result.
 */
export function mergePatch(target: JsonValue | undefined, patch: JsonValue, depth = 0): JsonValue {
  if (depth > MAX_DEPTH) throw new ApiError("Invalid", `merge patch nested deeper than ${MAX_DEPTH}`);
  if (!isJsonObject(patch)) return jsonCopy(patch);
  // Spread defines own data properties, so a key named "__proto__" stays data.
  const result: JsonObject = isJsonObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) {
      // `delete` on an own property is safe for every key, "__proto__" included.
      Reflect.deleteProperty(result, key);
    } else {
      // defineProperty, not assignment: assigning to "__proto__" would change the prototype.
      Object.defineProperty(result, key, {
        value: mergePatch(Object.hasOwn(result, key) ? result[key] : undefined, value, depth + 1),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
  }
  return result;
}
