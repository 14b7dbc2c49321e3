/**
 * One kind's list + watch loop (client-go's "reflector"), feeding a `ReflectorSink`.
 *
 * Contract:
 * - list (paginated; a fresh, consistent read) → `sink.replace(items)` → watch from the list's
 *   resourceVersion with `allowWatchBookmarks`; events go to `sink.apply` in stream order and
 *   bookmarks only advance the resourceVersion;
 * - a clean end of the stream (the server's `timeoutSeconds`) → watch again from the last
 *   resourceVersion; 410 Gone / `Expired` (HTTP or an ERROR event) → relist at once;
 * - the watchdog: no line (event or bookmark) for `watchdogMs` → abort the stream and watch again,
 *   so a half-open connection never silently stops the cache;
 * - any other error (HTTP, network, a malformed line) → wait with exponential backoff (equal
 *   jitter, capped) and try again; the loop ends only on `stop()`.
 */
import { KINDS } from "../engine/ports.ts";
import type { Clock, Kind, KubeObject, Timer, WatchEventType } from "../engine/ports.ts";
import type { Logger } from "../engine/logger.ts";
import { KubeHttpError } from "./errors.ts";
import type { KubeTransport } from "./transport.ts";

export interface ReflectorSink {
  /** Replaces every object of the kind with a fresh list (the caller diffs). */
  replace(items: KubeObject[]): void;
  apply(type: WatchEventType, object: KubeObject): void;
}

export interface ReflectorOptions {
  readonly kind: Kind;
  /** Only this namespace; all namespaces when absent. */
  readonly namespace?: string | undefined;
  /** Only objects with these labels (a Kubernetes label selector); all when absent. */
  readonly labelSelector?: string | undefined;
  readonly transport: KubeTransport;
  readonly clock: Clock;
  readonly sink: ReflectorSink;
  readonly logger: Logger;
  /** Abort a watch that has been silent this long. Default 90 000. */
  readonly watchdogMs?: number;
  /** The server ends each watch after this long. Default 300. */
  readonly watchTimeoutSeconds?: number;
  /** Backoff after a failure: first delay and cap. Defaults 500 and 30 000. */
  readonly baseDelayMs?: number;
  readonly maxDelayMs?: number;
  /** Objects per list page. Default 500. */
  readonly pageSize?: number;
  /** A number in [0, 1) for jitter; default Math.random. */
  readonly random?: () => number;
}

/** The abort reason of a watch the watchdog ended. */
const WATCHDOG = "watchdog";

/** How one watch ended. */
type WatchEnd = "closed" | "gone" | "watchdog";

export class Reflector {
  readonly #options: ReflectorOptions;
  #resourceVersion: string | undefined;
  #failures = 0;
  #stopped = false;
  #synced = false;
  #listCount = 0;
  #abort: AbortController | undefined;
  #sleeping: { timer: Timer; wake: () => void } | undefined;
  #loop: Promise<void> | undefined;

  constructor(options: ReflectorOptions) {
    this.#options = options;
  }

  /** Starts the loop; once only. */
  start(): void {
    if (this.#loop !== undefined) throw new Error(`reflector for ${this.#options.kind} already started`);
    this.#loop = this.#run();
  }

  /** Ends the loop: aborts the watch and any pending wait. Resolves when the loop has returned. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#abort?.abort();
    if (this.#sleeping !== undefined) {
      this.#sleeping.timer.cancel();
      this.#sleeping.wake();
    }
    await this.#loop;
  }

  /** True once a list has succeeded. */
  hasSynced(): boolean {
    return this.#synced;
  }

  /** Lists served so far (1 after the initial sync; each relist adds one). */
  listCount(): number {
    return this.#listCount;
  }

  async #run(): Promise<void> {
    while (!this.#stopped) {
      try {
        if (this.#resourceVersion === undefined) await this.#list();
        const end = await this.#watch();
        if (end === "gone") this.#resourceVersion = undefined;
        if (end === "watchdog")
          this.#options.logger.warn(
            { kind: this.#options.kind, watchdogMs: this.#watchdogMs() },
            "watch silent too long; watching again",
          );
      } catch (error) {
        if (this.#isStopped()) break;
        if (isGone(error)) {
          this.#resourceVersion = undefined;
          continue;
        }
        await this.#backOff(error);
      }
    }
  }

  /** Lists every page from a consistent read, then hands the whole list to the sink. */
  async #list(): Promise<void> {
    const items: KubeObject[] = [];
    let continueToken: string | undefined;
    let resourceVersion: string;
    do {
      const query: Record<string, string> = {
        ...this.#selector(),
        limit: String(this.#options.pageSize ?? 500),
        ...(continueToken === undefined ? {} : { continue: continueToken }),
      };
      const page = (await this.#options.transport.request({
        verb: "list",
        kind: this.#options.kind,
        target: this.#scope(),
        query,
      })) as ListBody;
      for (const item of page.items ?? [])
        items.push({ ...item, apiVersion: KINDS[this.#options.kind].apiVersion, kind: this.#options.kind });
      resourceVersion = page.metadata?.resourceVersion ?? "";
      continueToken = page.metadata?.continue === "" ? undefined : page.metadata?.continue;
    } while (continueToken !== undefined && !this.#stopped);
    if (this.#stopped) return;
    this.#options.sink.replace(items);
    this.#resourceVersion = resourceVersion;
    this.#synced = true;
    this.#listCount++;
    this.#failures = 0;
  }

  /** One watch from the current resourceVersion, until the stream ends. */
  async #watch(): Promise<WatchEnd> {
    const abort = new AbortController();
    this.#abort = abort;
    let watchdog: Timer | undefined;
    const arm = (): void => {
      watchdog?.cancel();
      watchdog = this.#options.clock.setTimer(this.#watchdogMs(), () => {
        abort.abort(WATCHDOG);
      });
    };
    const query = {
      ...this.#selector(),
      resourceVersion: this.#resourceVersion ?? "",
      allowWatchBookmarks: "true",
      timeoutSeconds: String(this.#options.watchTimeoutSeconds ?? 300),
    };
    try {
      arm();
      const events = await this.#options.transport.watch(
        { verb: "watch", kind: this.#options.kind, target: this.#scope(), query },
        abort.signal,
      );
      for await (const line of events) {
        arm();
        if (this.#handle(line) === "gone") return "gone";
      }
      return "closed";
    } catch (error) {
      if (abort.signal.reason === WATCHDOG && !this.#isStopped()) return "watchdog";
      throw error;
    } finally {
      watchdog?.cancel();
      abort.abort();
    }
  }

  /** Applies one watch line; "gone" for a 410 ERROR event. Throws for other ERROR events. */
  #handle(line: unknown): "ok" | "gone" {
    const { type, object } = line as {
      type?: string;
      object?: KubeObject & { code?: number; reason?: string; message?: string };
    };
    if (object === undefined) throw new Error(`${this.#options.kind} watch: a line without an object`);
    if (type === "ERROR") {
      if (object.code === 410 || object.reason === "Expired" || object.reason === "Gone") return "gone";
      throw new KubeHttpError({
        status: object.code ?? 500,
        reason: object.reason ?? "",
        message: `${this.#options.kind} watch: ${object.message ?? "ERROR event"}`,
      });
    }
    const resourceVersion = object.metadata.resourceVersion;
    if (resourceVersion !== undefined) this.#resourceVersion = resourceVersion;
    if (type === "ADDED" || type === "MODIFIED" || type === "DELETED") {
      this.#options.sink.apply(type, { ...object, kind: this.#options.kind });
      this.#failures = 0;
    }
    return "ok";
  }

  async #backOff(error: unknown): Promise<void> {
    this.#failures++;
    const ceiling = Math.min(
      this.#options.maxDelayMs ?? 30_000,
      (this.#options.baseDelayMs ?? 500) * 2 ** Math.min(this.#failures - 1, 30),
    );
    const delayMs = Math.round(ceiling / 2 + (this.#options.random ?? Math.random)() * (ceiling / 2));
    const message = error instanceof Error ? error.message : String(error);
    this.#options.logger.warn(
      { kind: this.#options.kind, failures: this.#failures, retryInMs: delayMs, error: message },
      "list/watch failed; retrying",
    );
    await new Promise<void>((resolve) => {
      this.#sleeping = { timer: this.#options.clock.setTimer(delayMs, resolve), wake: resolve };
    });
    this.#sleeping = undefined;
  }

  /** Read through a method: `await` may have changed it since a condition narrowed it. */
  #isStopped(): boolean {
    return this.#stopped;
  }

  #watchdogMs(): number {
    return this.#options.watchdogMs ?? 90_000;
  }

  #selector(): { labelSelector?: string } {
    return this.#options.labelSelector === undefined ? {} : { labelSelector: this.#options.labelSelector };
  }

  #scope(): { namespace?: string } {
    return this.#options.namespace === undefined ? {} : { namespace: this.#options.namespace };
  }
}

interface ListBody {
  items?: KubeObject[];
  metadata?: { resourceVersion?: string; continue?: string };
}

/** 410 Gone or reason Expired: the resourceVersion (or continue token) is too old. */
function isGone(error: unknown): boolean {
  return (
    error instanceof KubeHttpError && (error.status === 410 || error.reason === "Expired" || error.reason === "Gone")
  );
}
