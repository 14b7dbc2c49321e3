/**
 * What changed among the API server's stored pods since the last look, followed through the
 * server's change feed (`ApiServer.onCommit`): each commit records the pod's stored object before
 * and after it, so a look costs the pods that changed, not a pass over every stored pod. Several
 * commits to one pod between two looks make one change from the first object to the last.
 */
import type { Pod } from "../api/kube.ts";
import type { ApiServer } from "./apiserver.ts";
import { compareStrings, getOrCreate } from "../core/maps.ts";

/** A pod's stored object before and after: `before` undefined when created, `after` when gone. */
export interface PodChange {
  readonly before: Pod | undefined;
  readonly after: Pod | undefined;
}

export class PodChanges {
  /**
   * Per namespace, then name, the pod's change since the last `take`. Keyed by name, not uid: a
   * pod re-created under its name is one change from the old object to the new. Two levels, not
   * one joined key: no key string is built per commit.
   */
  #pending = new Map<string, Map<string, { before: Pod | undefined; after: Pod | undefined }>>();

  /** Follows `server`'s pods from now; the pods stored now count as created. */
  constructor(server: Pick<ApiServer, "stored" | "onCommit">) {
    for (const pod of server.stored("Pod")) this.#note(undefined, pod as unknown as Pod);
    server.onCommit("Pod", (before, after) => {
      this.#note(before as unknown as Pod | undefined, after as unknown as Pod | undefined);
    });
  }

  /**
   * The changes since the previous call (or since construction), in the server's stored order
   * (namespace, then name); a pod created and gone again in between is no change.
   */
  take(): PodChange[] {
    const pending = this.#pending;
    if (pending.size === 0) return [];
    this.#pending = new Map();
    const changes: PodChange[] = [];
    for (const namespace of [...pending.keys()].sort(compareStrings)) {
      const byName = pending.get(namespace);
      if (byName === undefined) continue;
      for (const name of [...byName.keys()].sort(compareStrings)) {
        const change = byName.get(name);
        if (change !== undefined && change.before !== change.after) changes.push(change);
      }
    }
    return changes;
  }

  #note(before: Pod | undefined, after: Pod | undefined): void {
    const pod = after ?? before;
    if (pod === undefined) return;
    const namespace = pod.metadata.namespace ?? "";
    const byName = getOrCreate(
      this.#pending,
      namespace,
      () => new Map<string, { before: Pod | undefined; after: Pod | undefined }>(),
    );
    const change = byName.get(pod.metadata.name);
    if (change === undefined) byName.set(pod.metadata.name, { before, after });
    else change.after = after;
  }
}

/** What `compareStored` reads of an object: a Pod, or any stored object. */
interface Named {
  readonly metadata: { readonly namespace?: string | undefined; readonly name: string };
}

/** The API server's listing order (`ApiServer.stored`): namespace, then name. */
export function compareStored(a: Named, b: Named): number {
  return (
    compareStrings(a.metadata.namespace ?? "", b.metadata.namespace ?? "") ||
    compareStrings(a.metadata.name, b.metadata.name)
  );
}
