/**
 * The router registry (DESIGN §3.1): which router replicas are live, judged on the controller's
 * own clock from the Leases labelled `tandem.dev/router: "true"` it observes. A router is live
 * while `nowMs < changedAtMs + leaseDurationSeconds·1000`, where `changedAtMs` is when this
 * registry last saw its `renewTime` change (or first saw the Lease): the stored times are compared
 * with each other for change only, never with a clock, so clock skew between machines does not
 * matter. After a restart (a new registry) every Lease counts as live from when it is first seen.
 *
 * `apply` says which scopes the live set changed in (a Lease added, deleted, its scope, holder or
 * duration changed, an expired one renewed again), so the controller re-plans the ModelServings
 * there; a plain renewal of a live router changes nothing. An expiry needs no event: the core
 * plans a recheck at the `liveUntilMs` of every router a drain waits on.
 */
import { parseRouterLease, scopeCovers } from "../api/router-lease.ts";
import { compareStrings } from "../core/maps.ts";
import type { RouterLease, RouterScope } from "../api/router-lease.ts";
import type { ObservedRouter } from "../core/observed.ts";
import type { KubeObject, WatchEventType } from "./ports.ts";

/** A router as the registry tracks it. */
export interface TrackedRouter extends ObservedRouter {
  /** Since when it has been live without a gap (first sight, or a renewal after it expired). */
  readonly liveSinceMs: number;
}

interface Entry {
  readonly lease: RouterLease;
  readonly changedAtMs: number;
  readonly liveSinceMs: number;
}

export class RouterRegistry {
  /** By the Lease's namespace and name. */
  readonly #entries = new Map<string, Entry>();
  #routers: readonly TrackedRouter[] | undefined = [];

  /**
   * Applies one watch event on a Lease, observed at `nowMs`. Returns the scopes whose set of live
   * routers changed (old and new scope when one changed), empty when nothing a plan reads did.
   */
  apply(type: WatchEventType, lease: KubeObject, nowMs: number): RouterScope[] {
    const key = `${lease.metadata.namespace ?? ""}/${lease.metadata.name}`;
    const old = this.#entries.get(key);
    const parsed = type === "DELETED" ? undefined : parseRouterLease(lease);
    const wasLive = old !== undefined && nowMs < liveUntilMs(old);
    if (parsed === undefined) {
      if (old === undefined) return [];
      this.#set(key, undefined);
      return wasLive ? [old.lease.scope] : [];
    }
    if (old === undefined) {
      this.#set(key, { lease: parsed, changedAtMs: nowMs, liveSinceMs: nowMs });
      return [parsed.scope];
    }
    const renewed = parsed.renewTime !== old.lease.renewTime;
    const reshaped =
      parsed.id !== old.lease.id ||
      parsed.leaseDurationSeconds !== old.lease.leaseDurationSeconds ||
      !sameScope(parsed.scope, old.lease.scope);
    if (!renewed && !reshaped) return [];
    this.#set(key, {
      lease: parsed,
      changedAtMs: renewed ? nowMs : old.changedAtMs,
      liveSinceMs: renewed && !wasLive ? nowMs : old.liveSinceMs,
    });
    if (reshaped) return [old.lease.scope, parsed.scope];
    // Renewed: news only when it had expired.
    return wasLive ? [] : [parsed.scope];
  }

  /** Every tracked router, live or not, sorted by id (then Lease). */
  routers(): readonly TrackedRouter[] {
    this.#routers ??= [...this.#entries]
      .sort(([keyA, a], [keyB, b]) => compareStrings(a.lease.id, b.lease.id) || compareStrings(keyA, keyB))
      .map(([, entry]) => ({
        id: entry.lease.id,
        scope: entry.lease.scope,
        liveUntilMs: liveUntilMs(entry),
        liveSinceMs: entry.liveSinceMs,
      }));
    return this.#routers;
  }

  #set(key: string, entry: Entry | undefined): void {
    if (entry === undefined) this.#entries.delete(key);
    else this.#entries.set(key, entry);
    this.#routers = undefined;
  }
}

function liveUntilMs(entry: Entry): number {
  return entry.changedAtMs + entry.lease.leaseDurationSeconds * 1000;
}

function sameScope(a: RouterScope, b: RouterScope): boolean {
  if (a.all || b.all) return a.all === b.all;
  return a.namespaces.join(",") === b.namespaces.join(",");
}

/** Some scope of `scopes` covers `namespace`. */
export function anyScopeCovers(scopes: readonly RouterScope[], namespace: string): boolean {
  return scopes.some((scope) => scopeCovers(scope, namespace));
}
