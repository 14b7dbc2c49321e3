/**
 * Frozen values and the memos keyed on them. A memo of a pure function may only be keyed on an
 * object that cannot change: everything the engine's caches hand out is deep-frozen (the
 * simulator's API server and informer, the Kubernetes reader), and so is revision data when it is
 * built. A mutable object passed in (a unit test's fixture) is simply not memoized.
 */

/**
 * Freezes `value` and everything reachable from it; returns it. A frozen object met on the way is
 * taken as deep-frozen already. Iterative (an explicit stack), so an object of any depth — the
 * Kubernetes API server accepts JSON thousands of levels deep — is frozen (and refused later by
 * the parse) instead of overflowing the stack where it is read.
 */
export function deepFreeze<T>(value: T): T {
  const pending: unknown[] = [value];
  for (let next = pending.pop(); next !== undefined || pending.length > 0; next = pending.pop()) {
    if (typeof next !== "object" || next === null || Object.isFrozen(next)) continue;
    // Frozen before its members: freezing does not change what they are, and each is pushed once.
    Object.freeze(next);
    // Loops rather than Object.values: no array built per object (the same own values).
    if (Array.isArray(next)) {
      for (let index = 0; index < next.length; index++) pending.push(next[index]);
    } else {
      for (const key in next) if (Object.hasOwn(next, key)) pending.push((next as Record<string, unknown>)[key]);
    }
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
