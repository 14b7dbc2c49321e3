/**
 * JSON helpers for the simulated API server: copies that cut every reference into server state,
 * structural equality (the engine's, re-exported for the simulator), and JSON merge patch (RFC 7386).
 */
import { ApiError } from "../engine/ports.ts";
import type { JsonObject, JsonValue } from "../engine/ports.ts";
import { deepFreeze } from "../core/frozen.ts";
import { isJsonObject, jsonEqual } from "../engine/json.ts";

export { isJsonObject, jsonEqual };

/** Nesting deeper than this is refused, keeping every recursion here bounded. */
const MAX_DEPTH = 64;

/**
 * A deep copy with JSON semantics: `undefined` properties vanish, as they would on the wire.
 * Throws ApiError(Invalid) for values JSON cannot carry (functions, NaN, cycles, too deep).
 * With `freeze`, the copy is deeply frozen, as what the server stores is.
 *
 * One walk copies plain JSON (the shape every request has); a value holding anything else (a
 * class instance, a `toJSON` method, extra array properties, or what JSON cannot carry) is checked
 * and copied the long way, through `JSON.stringify`, so the result and the error are the same.
 */
export function jsonCopy<T>(value: T, freeze = false): T {
  // JSON.stringify(undefined) is undefined, which JSON.parse refuses: the same SyntaxError as ever.
  if (value === undefined) return JSON.parse(JSON.stringify(value)) as T;
  const copy = copyPlainJson(value, undefined, freeze, 0);
  if (copy !== NOT_PLAIN) return copy as T;
  // Everything the walk passed before it stopped is JSON, so assertJson, walking in the same
  // order, throws for the problem the walk stopped at, if that was one.
  assertJson(value, 0, "object");
  const parsed = JSON.parse(JSON.stringify(value)) as T;
  return freeze ? deepFreeze(parsed) : parsed;
}

/**
 * A deep copy of a value already known to be JSON — the server's stored objects, checked when they
 * were written — without `jsonCopy`'s check. The copy is the same as `jsonCopy`'s.
 */
export function trustedCopy<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

/** `copyPlainJson`'s answer for a value it leaves to `jsonCopy`'s long way. */
const NOT_PLAIN: unique symbol = Symbol("not plain JSON");

/**
 * `JSON.parse(JSON.stringify(value))` for plain JSON: plain objects and arrays of strings,
 * booleans, null and finite numbers, `undefined` properties dropped. Returns NOT_PLAIN, in the
 * walk's order (`assertJson`'s), at anything else: a value JSON cannot carry, nesting beyond
 * MAX_DEPTH (where a cycle would be), or one `JSON.stringify` writes its own way (a `toJSON`
 * method, a class instance, extra array properties).
 *
 * Each part of the copy that is the same JSON text as `previous`'s part at the same place is
 * `previous`'s part (the whole is `previous` when all of it is); a part that is `previous`'s own
 * is JSON already (a stored object's) and is kept unwalked. No copy is made of a part until it is
 * found to differ. With `freeze`, the parts the copy makes are frozen.
 */
function copyPlainJson(value: unknown, previous: JsonValue | undefined, freeze: boolean, depth: number): unknown {
  if (value === previous) return previous;
  if (value === null || value === undefined || typeof value === "string" || typeof value === "boolean") return value;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) return NOT_PLAIN;
    // JSON has no negative zero: -0 is written as 0.
    return value === 0 ? 0 : value;
  }
  if (typeof value !== "object" || depth >= MAX_DEPTH) return NOT_PLAIN;
  if (typeof (value as { toJSON?: unknown }).toJSON === "function") return NOT_PLAIN;
  const prototype: unknown = Object.getPrototypeOf(value);
  if (Array.isArray(value)) {
    if (prototype !== Array.prototype) return NOT_PLAIN;
    return copyPlainArray(value, Array.isArray(previous) ? previous : undefined, freeze, depth);
  }
  if (prototype !== Object.prototype && prototype !== null) return NOT_PLAIN;
  return copyPlainObject(
    value as Record<string, unknown>,
    isJsonObject(previous) ? previous : undefined,
    freeze,
    depth,
  );
}

function copyPlainObject(
  value: Record<string, unknown>,
  before: JsonObject | undefined,
  freeze: boolean,
  depth: number,
): unknown {
  const beforeKeys = before === undefined ? NO_KEYS : Object.keys(before);
  // Undefined while the copy so far is `before`'s first `count` keys, each with `before`'s value.
  let copy: JsonObject | undefined = before === undefined ? {} : undefined;
  let count = 0;
  for (const key of Object.keys(value)) {
    // `before` is JSON: a key in the same place is its own.
    const old =
      beforeKeys[count] === key
        ? (before as JsonObject)[key]
        : before !== undefined && Object.hasOwn(before, key)
          ? before[key]
          : undefined;
    const child = copyPlainJson(value[key], old, freeze, depth + 1);
    if (child === NOT_PLAIN) return NOT_PLAIN;
    if (child === undefined) continue;
    if (copy === undefined && (child !== old || beforeKeys[count] !== key))
      copy = prefixOf(before as JsonObject, beforeKeys, count);
    // As JSON.parse does, "__proto__" becomes an ordinary own key.
    if (copy !== undefined) setOwnKey(copy, key, child as JsonValue);
    count++;
  }
  if (copy === undefined) {
    if (count === beforeKeys.length) return before;
    copy = prefixOf(before as JsonObject, beforeKeys, count);
  }
  return freeze ? Object.freeze(copy) : copy;
}

function copyPlainArray(
  value: readonly unknown[],
  before: readonly JsonValue[] | undefined,
  freeze: boolean,
  depth: number,
): unknown {
  // Properties besides the indices are checked by assertJson but not written by JSON.stringify.
  if (Object.keys(value).length > value.length) return NOT_PLAIN;
  // Undefined while the copy so far is `before`'s first elements; elements share with `before`'s
  // at the same index even when the lengths differ.
  let copy: JsonValue[] | undefined = before?.length === value.length ? undefined : [];
  for (let index = 0; index < value.length; index++) {
    const old = before?.[index];
    const child = copyPlainJson(value[index], old, freeze, depth + 1);
    if (child === NOT_PLAIN) return NOT_PLAIN;
    // JSON.stringify writes an undefined element (or a hole) as null.
    const element = child === undefined ? null : (child as JsonValue);
    if (copy === undefined && element !== old) copy = prefixOfArray(before as readonly JsonValue[], index);
    copy?.push(element);
  }
  if (copy === undefined) return before;
  return freeze ? Object.freeze(copy) : copy;
}

/** A new object with the first `count` of `keys` of `object`, in order. */
function prefixOf(object: JsonObject, keys: readonly string[], count: number): JsonObject {
  const prefix: JsonObject = {};
  for (let index = 0; index < count; index++) {
    const key = keys[index] as string;
    setOwnKey(prefix, key, object[key] as JsonValue);
  }
  return prefix;
}

/** `array.slice(0, count)`, which is slow on a frozen array. */
function prefixOfArray(array: readonly JsonValue[], count: number): JsonValue[] {
  const prefix: JsonValue[] = [];
  for (let index = 0; index < count; index++) prefix.push(array[index] as JsonValue);
  return prefix;
}

const NO_KEYS: readonly string[] = Object.freeze([]);

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

/** True when `a` and `b` are the same JSON text: equal values, and object keys in the same order. */
export function sameJsonText(a: JsonValue | undefined, b: JsonValue | undefined, depth = 0): boolean {
  if (depth > MAX_DEPTH) throw new Error(`sameJsonText: nested deeper than ${MAX_DEPTH}`);
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    for (let index = 0; index < a.length; index++) if (!sameJsonText(a[index], b[index], depth + 1)) return false;
    return true;
  }
  const keysA = Object.keys(a);
  const keysB = Object.keys(b);
  if (keysA.length !== keysB.length) return false;
  for (let index = 0; index < keysA.length; index++) {
    const key = keysA[index] ?? "";
    if (key !== keysB[index] || !sameJsonText(a[key], b[key], depth + 1)) return false;
  }
  return true;
}

/**
 * RFC 7386 JSON merge patch: an object patch merges key by key, `null` removes a key, and any
 * other value (arrays included) replaces the target. Neither argument is modified. `target` must
 * be JSON (the server's stored objects, or a value read from them); callers do not mutate it.
 *
 * The result shares with `target` every part that keeps its JSON text (same keys in the same
 * order, same values): `target`'s untouched parts, and each part of a patch value that is the same
 * JSON as `target`'s part at that place. A merge that changes nothing returns `target` itself, so
 * a stored object's next version is its previous one wherever it did not change. The rest of the
 * patch's values is copied (and checked as JSON). What a merge makes is frozen, so the result of
 * a merge into a deeply frozen target (a stored object) is deeply frozen too: the server stores it
 * without another walk. An undefined patch (a property set to undefined) is refused as `jsonCopy`
 * refuses it.
 */
export function mergePatch(target: JsonValue | undefined, patch: JsonValue | undefined, depth = 0): JsonValue {
  if (depth > MAX_DEPTH) throw new ApiError("Invalid", `merge patch nested deeper than ${MAX_DEPTH}`);
  if (!isJsonObject(patch)) return sharedCopy(patch, target);
  const base = isJsonObject(target) ? target : undefined;
  // Made (from `base`) once a key changes: a merge that changes nothing allocates nothing.
  let result: JsonObject | undefined = base === undefined ? {} : undefined;
  let changed = false;
  for (const key of Object.keys(patch)) {
    const value = patch[key];
    // A patch names each key once, so `result` still holds `base`'s value under it.
    const owned = base !== undefined && Object.hasOwn(base, key);
    const old = owned ? base[key] : undefined;
    if (value === null) {
      if (!owned) continue;
      result ??= { ...base };
      // `delete` on an own property is safe for every key, "__proto__" included.
      Reflect.deleteProperty(result, key);
      if (old !== undefined) changed = true;
    } else {
      const merged = mergePatch(old, value, depth + 1);
      if (merged !== old) {
        // Spread defines own data properties, so a key named "__proto__" stays data.
        result ??= { ...base };
        setOwnKey(result, key, merged);
        changed = true;
      }
    }
  }
  return changed || base === undefined ? Object.freeze(result as JsonObject) : base;
}

/**
 * `jsonCopy(value)` with its parts that are the same JSON text as `previous`'s part at the same
 * place replaced by `previous`'s (all of it when the whole is), new parts frozen: what a merge
 * patch stores for a non-object patch value over `previous`, a part of a JSON target.
 */
function sharedCopy(value: unknown, previous: JsonValue | undefined): JsonValue {
  const copy = value === undefined ? NOT_PLAIN : copyPlainJson(value, previous, true, 0);
  // Anything else is jsonCopy's to copy or refuse, with its errors (undefined included: JSON.parse
  // refuses what JSON.stringify makes of it). Its copy is not shared (no request needs it to be).
  return copy === NOT_PLAIN ? jsonCopy(value as JsonValue, true) : (copy as JsonValue);
}

/**
 * True when `mergePatch(target, patch)` would be `jsonEqual` to `target`: the patch changes
 * nothing. Decided without building the result or copying the patch's values.
 */
export function mergePatchIsNoop(target: JsonValue | undefined, patch: JsonValue | undefined, depth = 0): boolean {
  if (depth > MAX_DEPTH) throw new ApiError("Invalid", `merge patch nested deeper than ${MAX_DEPTH}`);
  if (!isJsonObject(patch)) return jsonEqual(patch, target);
  // Merging an object patch into anything but an object makes an object: a change.
  if (!isJsonObject(target)) return false;
  for (const key of Object.keys(patch)) {
    const value = patch[key];
    const old = Object.hasOwn(target, key) ? target[key] : undefined;
    const unchanged = value === null ? old === undefined : mergePatchIsNoop(old, value, depth + 1);
    if (!unchanged) return false;
  }
  return true;
}

/**
 * Makes the new, unfrozen object `next` share each part equal to the part at the same place in
 * `previous` — same keys in the same order, same values, so the same JSON text — by putting
 * `previous`'s part in its place. `next` itself stays, and so does its value under `keep`, which
 * the caller goes on changing. Frozen parts of `next` are left as they are. Used on a stored
 * object's next version: unchanged parts are then the old version's, already frozen, and compare
 * equal by identity.
 */
export function shareEqualParts(next: JsonObject, previous: JsonObject, keep?: string): void {
  for (const key of Object.keys(next)) {
    if (key === keep) continue;
    const value = next[key] as JsonValue;
    const shared = sharedPart(value, Object.hasOwn(previous, key) ? previous[key] : undefined);
    if (shared !== value) setOwnKey(next, key, shared);
  }
}

/** `value` with its unfrozen parts shared with `previous` (see `shareEqualParts`), or `previous` when they are the same JSON. */
function sharedPart(value: JsonValue, previous: JsonValue | undefined): JsonValue {
  if (value === previous || typeof value !== "object" || value === null || Object.isFrozen(value)) return value;
  if (Array.isArray(value)) {
    const before = Array.isArray(previous) ? previous : undefined;
    let same = before?.length === value.length;
    for (let index = 0; index < value.length; index++) {
      const old = before?.[index];
      const shared = sharedPart(value[index] as JsonValue, old);
      value[index] = shared;
      if (shared !== old) same = false;
    }
    return same && before !== undefined ? before : value;
  }
  const before = isJsonObject(previous) ? previous : undefined;
  const keys = Object.keys(value);
  const beforeKeys = before === undefined ? [] : Object.keys(before);
  let same = before !== undefined && beforeKeys.length === keys.length;
  for (const [index, key] of keys.entries()) {
    const old = before !== undefined && Object.hasOwn(before, key) ? before[key] : undefined;
    const shared = sharedPart(value[key] as JsonValue, old);
    if (shared !== value[key]) setOwnKey(value, key, shared);
    if (shared !== old || beforeKeys[index] !== key) same = false;
  }
  return same && before !== undefined ? before : value;
}

/** Sets an own property; unlike assignment, a key named "__proto__" stays data. */
export function setOwnKey(object: JsonObject, key: string, value: JsonValue): void {
  if (key === "__proto__")
    Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
  else object[key] = value;
}
