/**
 * A set of objects keyed by (namespace, name), kept in that order as they change, so reading them
 * in order costs no sort: the API server's per-kind stores and the informer's caches. Insertion
 * and removal are a binary search and one splice; replacing an object under the same key keeps
 * its place. Objects are stored as given (callers store frozen objects).
 *
 * Lookups go by namespace, then name, through the objects' own strings: no key string is built
 * per lookup (a new string is hashed anew each time, which costs more than the lookups it keys).
 * A cluster-scoped object's namespace is "" here, as it is absent on the object.
 */
import type { KubeObject } from "../engine/ports.ts";
import { getOrCreate } from "../core/maps.ts";

/** One stored object with its position key. Internal: `object` is replaced in place. */
interface Entry {
  /** `namespace \0 name`: ascending order is (namespace, name), as Kubernetes lists. */
  readonly sortKey: string;
  object: KubeObject;
}

export class SortedStore {
  /** Entries by namespace ("" for none), then name. */
  readonly #byNamespace = new Map<string, Map<string, Entry>>();
  /** Every entry, ascending by `sortKey`. */
  readonly #sorted: Entry[] = [];
  /**
   * `values()` as last built, frozen, until the next change: callers read the whole store many
   * times between changes. A change drops it (never edits it), so an array handed out stays true
   * to the moment it was read.
   */
  #values: readonly KubeObject[] | undefined;

  get size(): number {
    return this.#sorted.length;
  }

  get(namespace: string | undefined, name: string): KubeObject | undefined {
    return this.#byNamespace.get(namespace ?? "")?.get(name)?.object;
  }

  /** Stores `object` under its namespace and name, replacing what was there; returns the object it replaced, if any. */
  set(object: KubeObject): KubeObject | undefined {
    this.#values = undefined;
    const namespace = object.metadata.namespace ?? "";
    const byName = getOrCreate(this.#byNamespace, namespace, () => new Map<string, Entry>());
    const old = byName.get(object.metadata.name);
    if (old !== undefined) {
      const replaced = old.object;
      old.object = object;
      return replaced;
    }
    const entry: Entry = { sortKey: `${namespace}\u0000${object.metadata.name}`, object };
    byName.set(object.metadata.name, entry);
    this.#sorted.splice(lowerBound(this.#sorted, entry.sortKey), 0, entry);
    return undefined;
  }

  /** Removes the object under `namespace` and `name`; returns it, or undefined when there was none. */
  delete(namespace: string | undefined, name: string): KubeObject | undefined {
    const byName = this.#byNamespace.get(namespace ?? "");
    const old = byName?.get(name);
    if (byName === undefined || old === undefined) return undefined;
    this.#values = undefined;
    byName.delete(name);
    const index = lowerBound(this.#sorted, old.sortKey);
    if (this.#sorted[index] === old) this.#sorted.splice(index, 1);
    return old.object;
  }

  /** Every object in (namespace, name) order, in a frozen array shared until the store changes. */
  values(): readonly KubeObject[] {
    this.#values ??= Object.freeze(this.#sorted.map((entry) => entry.object));
    return this.#values;
  }

  /** Calls `visit` on every object in (namespace, name) order. */
  forEach(visit: (object: KubeObject) => void): void {
    for (const entry of this.#sorted) visit(entry.object);
  }
}

/** The index of the first entry of ascending `entries` whose sortKey is not below `sortKey`. */
function lowerBound(entries: readonly Entry[], sortKey: string): number {
  let low = 0;
  let high = entries.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if ((entries[middle]?.sortKey ?? "") < sortKey) low = middle + 1;
    else high = middle;
  }
  return low;
}
