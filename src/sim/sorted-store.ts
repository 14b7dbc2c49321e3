/**
 * A keyed set of objects kept in (namespace, name) order as they change, so reading them in that
 * order costs no sort: the API server's per-kind store and the informer's caches. Insertion and
 * removal are a binary search and one splice; replacing an object under the same key keeps its
 * place. Objects are stored as given (callers store frozen objects).
 */
import type { KubeObject } from "../engine/ports.ts";

/** One stored object with its position key. Internal: `object` is replaced in place. */
interface Entry {
  /** `namespace \0 name`: ascending order is (namespace, name), as Kubernetes lists. */
  readonly sortKey: string;
  object: KubeObject;
}

export class SortedStore {
  readonly #byKey = new Map<string, Entry>();
  /** Every entry, ascending by `sortKey`. */
  readonly #sorted: Entry[] = [];
  /**
   * `values()` as last built, frozen, until the next change: callers read the whole store many
   * times between changes. A change drops it (never edits it), so an array handed out stays true
   * to the moment it was read.
   */
  #values: readonly KubeObject[] | undefined;

  get size(): number {
    return this.#byKey.size;
  }

  get(key: string): KubeObject | undefined {
    return this.#byKey.get(key)?.object;
  }

  /** Stores `object` under `key` (unique per namespace and name), replacing what was there. */
  set(key: string, object: KubeObject): void {
    this.#values = undefined;
    const old = this.#byKey.get(key);
    if (old !== undefined) {
      old.object = object;
      return;
    }
    const entry: Entry = { sortKey: sortKeyOf(object), object };
    this.#byKey.set(key, entry);
    this.#sorted.splice(lowerBound(this.#sorted, entry.sortKey), 0, entry);
  }

  /** Removes the object under `key`; returns whether there was one. */
  delete(key: string): boolean {
    const old = this.#byKey.get(key);
    if (old === undefined) return false;
    this.#values = undefined;
    this.#byKey.delete(key);
    const index = lowerBound(this.#sorted, old.sortKey);
    if (this.#sorted[index] === old) this.#sorted.splice(index, 1);
    return true;
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

function sortKeyOf(object: KubeObject): string {
  return `${object.metadata.namespace ?? ""}\u0000${object.metadata.name}`;
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
