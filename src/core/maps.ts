/** Small helpers for the nested maps planning indexes its inputs with, and the one string order. */

/** The value of `key` in `map`, created with `create` and stored first when absent. */
export function getOrCreate<K, V>(map: Map<K, V>, key: K, create: () => V): V {
  const existing = map.get(key);
  if (existing !== undefined) return existing;
  const created = create();
  map.set(key, created);
  return created;
}

/** Code-unit order, the same order `canonicalJson` sorts keys in; independent of locale. */
export function compareStrings(a: string, b: string): number {
  if (a === b) return 0;
  return a < b ? -1 : 1;
}
