/**
 * Background garbage collection through ownerReferences, as Kubernetes' garbage collector does it
 * with the default (background) propagation: once none of an object's owners exists — an owner
 * "exists" when an object of its kind and name has its uid — the object is deleted like any other
 * (pods gracefully). An object that keeps at least one owner only loses its dangling references.
 *
 * Collection runs `delayMs` after an owner disappears or after an object is created pointing at
 * owners that are gone. Not modelled: foreground deletion (the owner waiting for its dependents)
 * and orphaning; owners of kinds the simulator does not know are assumed to exist.
 */
import { KINDS, isKind } from "../engine/ports.ts";
import type { Clock, KubeObject, OwnerReference } from "../engine/ports.ts";
import type { ApiServer } from "./apiserver.ts";
import { isDeleting, refOf } from "./objects.ts";

export class GarbageCollector {
  readonly #server: ApiServer;
  readonly #clock: Clock;
  readonly #delayMs: number;
  /**
   * Per owner uid, how many ownerReferences of stored objects name it (absent when none): whether
   * a removed object owned anything, without scanning the store. Kept by `noteCommitted`.
   */
  readonly #referenceCountByOwnerUid = new Map<string, number>();

  constructor(server: ApiServer, clock: Clock, delayMs: number) {
    this.#server = server;
    this.#clock = clock;
    this.#delayMs = delayMs;
  }

  /** Schedules a collection when `object` was created with owners that are already gone. */
  noteCreated(object: KubeObject): void {
    const references = object.metadata.ownerReferences ?? [];
    if (references.some((reference) => !this.#ownerExists(object, reference))) this.#schedule();
  }

  /** Schedules a collection when a removed object owned anything. */
  noteRemoved(object: KubeObject): void {
    const uid = object.metadata.uid;
    if (uid !== undefined && this.#referenceCountByOwnerUid.has(uid)) this.#schedule();
  }

  /**
   * Every commit: `replaced` is the stored object a commit replaces or removes (undefined for a
   * creation), `stored` the one it stores (undefined for a removal).
   */
  noteCommitted(replaced: KubeObject | undefined, stored: KubeObject | undefined): void {
    // The same list (shared by copy on write): nothing to count again.
    if (replaced?.metadata.ownerReferences === stored?.metadata.ownerReferences) return;
    for (const reference of replaced?.metadata.ownerReferences ?? []) {
      const count = (this.#referenceCountByOwnerUid.get(reference.uid) ?? 0) - 1;
      if (count > 0) this.#referenceCountByOwnerUid.set(reference.uid, count);
      else this.#referenceCountByOwnerUid.delete(reference.uid);
    }
    for (const reference of stored?.metadata.ownerReferences ?? []) {
      this.#referenceCountByOwnerUid.set(reference.uid, (this.#referenceCountByOwnerUid.get(reference.uid) ?? 0) + 1);
    }
  }

  /** One pass over every stored object; returns how many it started deleting. */
  collect(): number {
    let deleted = 0;
    for (const object of this.#server.stored()) {
      const references = object.metadata.ownerReferences ?? [];
      if (references.length === 0 || isDeleting(object)) continue;
      const remaining = references.filter((reference) => this.#ownerExists(object, reference));
      if (remaining.length === references.length) continue;
      if (remaining.length > 0) {
        this.#server.setOwnerReferences(object, remaining);
        continue;
      }
      this.#server.delete(refOf(object), { uid: object.metadata.uid });
      deleted++;
    }
    return deleted;
  }

  #schedule(): void {
    this.#clock.setTimer(this.#delayMs, () => this.collect());
  }

  #ownerExists(dependent: KubeObject, reference: OwnerReference): boolean {
    if (!isKind(reference.kind)) return true;
    const namespace = KINDS[reference.kind].namespaced ? dependent.metadata.namespace : undefined;
    return this.#server.exists(reference.kind, namespace, reference.name, reference.uid);
  }
}
