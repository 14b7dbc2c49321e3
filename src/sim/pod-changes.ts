/**
 * What changed among the API server's stored pods since the last look. The server lists stored
 * pods in (namespace, name) order and freezes every object it stores, replacing it on each write
 * (`ApiServer.#commit`), so two listings compare like a merge of two sorted lists: where both
 * hold the same object nothing changed (a pointer comparison, no pod is read); only where they
 * differ are names compared, to tell a changed pod from one created or gone.
 */
import type { Pod } from "../api/kube.ts";

/** A pod's stored object before and after: `before` undefined when created, `after` when gone. */
export interface PodChange {
  readonly before: Pod | undefined;
  readonly after: Pod | undefined;
}

export class PodChanges {
  /** The listing the last `diff` was given, copied. */
  #last: Pod[] = [];

  /**
   * The changes since the previous call (every pod is created at the first). `pods` must be all
   * stored pods as the server lists them (`ApiServer.stored("Pod")`: stored objects, in stored
   * order). A pod re-created under its name between two calls is one change from the old object
   * to the new.
   */
  diff(listing: readonly Pod[]): PodChange[] {
    const last = this.#last;
    // A plain copy: the listing may be frozen, and V8 reads frozen arrays' items several times slower.
    const pods = [...listing];
    this.#last = pods;
    const changes: PodChange[] = [];
    let now = 0;
    let before = 0;
    while (now < pods.length || before < last.length) {
      const after = pods[now];
      const old = last[before];
      if (after !== undefined && after === old) {
        now++;
        before++;
        continue;
      }
      const order = after === undefined ? 1 : old === undefined ? -1 : compareStored(after, old);
      if (order === 0) changes.push({ before: last[before++], after: pods[now++] });
      else if (order < 0) changes.push({ before: undefined, after: pods[now++] });
      else changes.push({ before: last[before++], after: undefined });
    }
    return changes;
  }
}

/** The API server's listing order (`ApiServer.stored`): namespace, then name. */
export function compareStored(a: Pod, b: Pod): number {
  return compare(a.metadata.namespace ?? "", b.metadata.namespace ?? "") || compare(a.metadata.name, b.metadata.name);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
