/**
 * Frozen values and the memos keyed on them. A memo of a pure function may only be keyed on an
 * object that cannot change: everything the engine's caches hand out is deep-frozen (the
 * simulator's API server and informer, the Kubernetes reader), and so is revision data when it is
 * built. A mutable object passed in (a unit test's fixture) is simply not memoized.
 */

/** Freezes `value` and everything reachable from it; returns it. JSON values only (no cycles). */
export function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    // Loops rather than Object.values: no array built per object (the same own values).
    if (Array.isArray(value)) {
      for (let index = 0; index < value.length; index++) deepFreeze(value[index]);
    } else {
      for (const key in value) if (Object.hasOwn(value, key)) deepFreeze(value[key]);
    }
    Object.freeze(value);
  }
  return value;
}

/**
 * `compute(key)`, memoized in `memo` when `key` is a frozen object. Frozen means deep-frozen here:
 * every object handed to a memo is frozen deeply where it is built (stored objects, revision
 * data), so a frozen top level cannot hide a changed part.
 */
export function onFrozen<K, V>(memo: WeakMap<object, V>, key: K, compute: (key: K) => V): V {
  if (typeof key !== "object" || key === null || !Object.isFrozen(key)) return compute(key);
  const cached = memo.get(key);
  if (cached !== undefined) return cached;
  const computed = compute(key);
  memo.set(key, computed);
  return computed;
}
