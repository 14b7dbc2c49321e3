/**
 * Writes every ModelRoute's status (the status subresource) from the router's caches.
 *
 * Contract:
 * - a write only when the computed status differs from the stored one (`jsonEqual`), so a world
 *   that does not change costs no writes, however many replicas watch it;
 * - every write is a merge patch carrying the `resourceVersion` it was computed from: a replica
 *   whose cache lags gets 409 Conflict instead of overwriting a newer status, and tries again
 *   once its cache has moved (the stored status it then compares against is the other replica's,
 *   usually equal — `routeStatus` keeps transition times — so nothing more is written);
 * - changes are coalesced: the first change after a sync schedules the next one `delayMs` later,
 *   one sync runs at a time, and nothing is written before the caches have synced (a route
 *   would otherwise read its ModelServing as missing): until then the sync is put off again.
 */
import type { ModelRouteStatus } from "../../api/route.ts";
import { isApiError } from "../../engine/ports.ts";
import type { Clock, ClusterWriter, JsonObject, Timer } from "../../engine/ports.ts";
import { jsonEqual } from "../../engine/json.ts";
import type { Logger } from "../../engine/logger.ts";
import { routesByModel } from "../route.ts";
import { routeStatus } from "../status.ts";
import type { KubeDiscovery, StoredRoute } from "./discovery.ts";

export interface StatusSyncOptions {
  readonly discovery: KubeDiscovery;
  readonly writer: Pick<ClusterWriter, "patchStatus">;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Coalescing delay after a change. Default 500. */
  readonly delayMs?: number;
  /** Wait before retrying after a write failed for another reason than a conflict. Default 5 000. */
  readonly retryDelayMs?: number;
}

/** What one sync did. */
export interface SyncResult {
  readonly written: number;
  readonly conflicts: number;
  readonly failed: number;
}

export class RouteStatusSync {
  readonly #options: StatusSyncOptions;
  #timer: Timer | undefined;
  #running: Promise<SyncResult> | undefined;
  #again = false;
  #stopped = false;
  #unsubscribe: (() => void) | undefined;

  constructor(options: StatusSyncOptions) {
    this.#options = options;
  }

  /** Syncs after every change of the caches from now on. */
  start(): void {
    this.#unsubscribe = this.#options.discovery.onChange(() => {
      this.schedule();
    });
    this.schedule();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#unsubscribe?.();
    this.#timer?.cancel();
    await this.#running;
  }

  /** A sync `delayMs` from now, unless one is already due. */
  schedule(delayMs = this.#options.delayMs ?? 500): void {
    if (this.#stopped) return;
    if (this.#running !== undefined) {
      this.#again = true;
      return;
    }
    this.#timer ??= this.#options.clock.setTimer(delayMs, () => {
      this.#timer = undefined;
      void this.#run();
    });
  }

  async #run(): Promise<void> {
    // The last kind to sync may bring no objects, hence no event to schedule the first sync.
    if (!this.#options.discovery.hasSynced()) {
      this.schedule();
      return;
    }
    this.#running = this.sync();
    const result = await this.#running;
    this.#running = undefined;
    // A conflict means the cache is behind: its next event schedules the retry. Other failures
    // (403, 5xx) wait longer, so a broken write is not a write storm.
    const again = this.#again;
    this.#again = false;
    if (result.failed > 0) this.schedule(this.#options.retryDelayMs ?? 5_000);
    else if (again) this.schedule();
  }

  /** Computes every route's status and writes those that differ. Never rejects. */
  async sync(): Promise<SyncResult> {
    const { discovery } = this.#options;
    if (!discovery.hasSynced()) return { written: 0, conflicts: 0, failed: 0 };
    const stored = discovery.storedRoutes();
    const { winners } = routesByModel(discovery.routes());
    let written = 0;
    let conflicts = 0;
    let failed = 0;
    for (const route of stored) {
      const status = this.#desired(route, winners);
      const previous = route.object.status as ModelRouteStatus | undefined;
      if (jsonEqual(status, previous)) continue;
      const outcome = await this.#write(route, status);
      if (outcome === "written") written++;
      else if (outcome === "conflict") conflicts++;
      else failed++;
    }
    return { written, conflicts, failed };
  }

  #desired(route: StoredRoute, winners: ReadonlyMap<string, { namespace: string; name: string }>): ModelRouteStatus {
    const { discovery, clock } = this.#options;
    const { object, parsed } = route;
    const winner = parsed.ok ? winners.get(parsed.value.model) : undefined;
    const lost =
      winner !== undefined && (winner.namespace !== object.metadata.namespace || winner.name !== object.metadata.name);
    return routeStatus({
      route: parsed,
      generation: object.metadata.generation,
      previous: object.status,
      conflictWinner: lost ? `${winner.namespace}/${winner.name}` : undefined,
      modelServingRoles: parsed.ok
        ? discovery.modelServingRoles(parsed.value.namespace, parsed.value.modelServing)
        : undefined,
      pods: parsed.ok ? discovery.pods(parsed.value) : [],
      nowIso: new Date(clock.nowMs()).toISOString(),
    });
  }

  async #write(route: StoredRoute, status: ModelRouteStatus): Promise<"written" | "conflict" | "failed"> {
    const { metadata } = route.object;
    const ref = { kind: "ModelRoute" as const, namespace: metadata.namespace ?? "", name: metadata.name };
    const patch = { metadata: { resourceVersion: metadata.resourceVersion ?? "" }, status } as unknown as JsonObject;
    try {
      await this.#options.writer.patchStatus(ref, patch);
      return "written";
    } catch (error) {
      if (isApiError(error) && (error.reason === "Conflict" || error.reason === "NotFound")) return "conflict";
      this.#options.logger.warn(
        { route: `${ref.namespace}/${ref.name}`, error: error instanceof Error ? error.message : String(error) },
        "route status write failed; retrying",
      );
      return "failed";
    }
  }
}
