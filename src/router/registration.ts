/**
 * A router replica's registration (DESIGN §3.1): its Lease `<router-id>` in its own namespace,
 * created before the replica routes anything, renewed every third of `leaseDurationSeconds`,
 * deleted once it has stopped routing. Written against the engine's ports (Clock, ClusterWriter),
 * so `tandem router` on a cluster and `tandem demo --serve` on the simulated one run this code.
 *
 * Requests: `create` of the Lease; when it exists already (this replica restarted under the same
 * id) a merge patch of the whole registration takes it over; renewals are merge patches of
 * `spec.renewTime` (a renewal that finds no Lease — somebody deleted it — creates it again); on
 * stop, `delete`. Merge patches need no prior read: the Lease is this replica's alone (its name
 * is the replica's identity), so there is no other holder to fence off with a resourceVersion.
 *
 * Routing is allowed (`refusal()` undefined) from the first successful write on, and only while
 * the last successful write began less than two thirds of the duration ago (self-fencing): a
 * replica that cannot renew stops routing before the controller, which waits one full duration
 * on its own clock, stops waiting for it. A failed write is retried with capped exponential
 * backoff; renewals go on while fenced, and the next success lifts the fence. A write that has
 * not answered within the renewal interval counts as failed (its late answer is ignored), so one
 * hung request does not hold the renewals up until the transport gives up on it.
 */
import type { Logger } from "../engine/logger.ts";
import { ApiError, isApiError } from "../engine/ports.ts";
import type { Clock, ClusterWriter, JsonObject, ObjectRef, Timer } from "../engine/ports.ts";
import { ROUTER_LEASE_DURATION_SECONDS, microTime, routerLeaseObject } from "../api/router-lease.ts";
import type { RouterScope } from "../api/router-lease.ts";

/** First retry of a failed Lease write; each further failure doubles it, up to RETRY_CAP_MS. */
export const LEASE_RETRY_BASE_MS = 250;
/** Retries never wait longer than this (nor longer than the renewal interval). */
export const LEASE_RETRY_CAP_MS = 2_000;

/** `unregistered`: no Lease written yet; `fenced`: not renewed for 2/3 of the duration; `stopped`: after `stop()`. */
export type LeaseState = "unregistered" | "registered" | "fenced" | "stopped";

export interface RegistrationOptions {
  /** `<router-id>`: the Lease's name and holder (a DNS-1123 label; the caller validates it). */
  readonly id: string;
  /** The namespace of the Lease: the router's own. */
  readonly namespace: string;
  readonly scope: RouterScope;
  /** Default ROUTER_LEASE_DURATION_SECONDS (15). */
  readonly leaseDurationSeconds?: number;
  readonly writer: ClusterWriter;
  /** Renewals and the fence run on it; its `nowMs` (epoch ms) is written as `renewTime`. */
  readonly clock: Clock;
  readonly logger: Logger;
  /** Told of every state change (the Lease-state gauge). */
  readonly onState?: (state: LeaseState) => void;
}

export class RouterRegistration {
  readonly #options: RegistrationOptions;
  readonly #ref: ObjectRef<"Lease">;
  readonly #durationSeconds: number;
  #state: LeaseState = "unregistered";
  /** Whether this replica's Lease has been written since it started (else: create or take over). */
  #written = false;
  #failures = 0;
  #next: Timer | undefined;
  #fence: Timer | undefined;
  #writing: Promise<void> | undefined;
  /** Counts writes; an answer to any but the latest is ignored. */
  #generation = 0;

  constructor(options: RegistrationOptions) {
    this.#options = options;
    this.#ref = { kind: "Lease", namespace: options.namespace, name: options.id };
    this.#durationSeconds = options.leaseDurationSeconds ?? ROUTER_LEASE_DURATION_SECONDS;
  }

  /** Writes the Lease now, then keeps it renewed until `stop()`. */
  start(): void {
    if (this.#state === "unregistered" && this.#next === undefined && this.#writing === undefined) this.#write();
  }

  state(): LeaseState {
    return this.#state;
  }

  /** Why this replica must not route now (a 503's reason); undefined while it may. */
  refusal(): string | undefined {
    switch (this.#state) {
      case "registered":
        return undefined;
      case "unregistered":
        return `router ${this.#options.id} has not registered its Lease ${this.#options.namespace}/${this.#options.id} yet`;
      case "fenced":
        return `router ${this.#options.id} could not renew its Lease for ${this.#fenceMs() / 1000}s and stopped routing until it can`;
      case "stopped":
        return `router ${this.#options.id} is shutting down`;
    }
  }

  /** Stops renewing (waiting for a write in flight) and deletes the Lease. Call once routing has stopped. */
  async stop(): Promise<void> {
    if (this.#state === "stopped") return;
    this.#setState("stopped");
    this.#next?.cancel();
    this.#fence?.cancel();
    await this.#writing;
    try {
      await this.#options.writer.delete(this.#ref);
      this.#options.logger.info({ lease: `${this.#options.namespace}/${this.#options.id}` }, "router lease deleted");
    } catch (error) {
      // It expires on its own: the controller stops waiting for it after one duration.
      if (!isApiError(error, "NotFound"))
        this.#options.logger.warn(
          { lease: `${this.#options.namespace}/${this.#options.id}`, error: String(error) },
          "router lease not deleted; it will expire",
        );
    }
  }

  /**
   * The process dies without a word (the simulator's crash of a replica): renewals stop, a write in
   * flight is ignored, and the Lease stays, to expire on the controller's clock.
   */
  abandon(): void {
    this.#setState("stopped");
    this.#next?.cancel();
    this.#fence?.cancel();
    this.#generation++;
  }

  #renewIntervalMs(): number {
    return (this.#durationSeconds * 1000) / 3;
  }

  #fenceMs(): number {
    return (this.#durationSeconds * 2000) / 3;
  }

  #write(): void {
    this.#next = undefined;
    const { clock } = this.#options;
    const startMs = clock.nowMs();
    const generation = ++this.#generation;
    const timeoutMs = Math.ceil(this.#renewIntervalMs());
    let done = (): void => undefined;
    // Settles when the write answers or times out: `stop` waits for it no longer than that.
    this.#writing = new Promise((resolve) => {
      done = resolve;
    });
    const settle = (handle: () => void): void => {
      timeout.cancel();
      done();
      if (generation === this.#generation) handle();
    };
    const timeout = clock.setTimer(timeoutMs, () => {
      done();
      this.#generation++;
      this.#failed(new Error(`no answer within ${timeoutMs} ms`));
    });
    this.#send(startMs).then(
      () => {
        settle(() => {
          this.#succeeded(startMs);
        });
      },
      (error: unknown) => {
        settle(() => {
          this.#failed(error);
        });
      },
    );
  }

  /** Creates or takes over the Lease the first time, renews it afterwards. */
  async #send(nowMs: number): Promise<void> {
    const { writer } = this.#options;
    const lease = routerLeaseObject({
      id: this.#options.id,
      namespace: this.#options.namespace,
      scope: this.#options.scope,
      leaseDurationSeconds: this.#durationSeconds,
      nowMs,
    });
    if (!this.#written) {
      try {
        await writer.create(lease);
      } catch (error) {
        if (!isApiError(error, "AlreadyExists")) throw error;
        await writer.patch(this.#ref, {
          metadata: { labels: lease.metadata.labels, annotations: lease.metadata.annotations },
          spec: lease.spec,
        });
      }
      return;
    }
    try {
      await writer.patch(this.#ref, { spec: { renewTime: microTime(nowMs) } } satisfies JsonObject);
    } catch (error) {
      // Stopped meanwhile: the delete may have gone first, and nothing may bring the Lease back.
      if (!isApiError(error, "NotFound") || this.#state === "stopped") throw error;
      await writer.create(lease);
    }
  }

  #succeeded(startMs: number): void {
    if (this.#state === "stopped") return;
    const lease = `${this.#options.namespace}/${this.#options.id}`;
    if (!this.#written)
      this.#options.logger.info(
        { lease, leaseDurationSeconds: this.#durationSeconds },
        "router lease registered; routing",
      );
    else if (this.#state === "fenced")
      this.#options.logger.info({ lease }, "router lease renewed again; routing resumed");
    this.#written = true;
    this.#failures = 0;
    const nowMs = this.#options.clock.nowMs();
    // Measured from when the write began: the server may have stored it any time after that.
    const fenceInMs = startMs + this.#fenceMs() - nowMs;
    this.#fence?.cancel();
    if (fenceInMs <= 0) this.#fenced();
    else {
      this.#setState("registered");
      this.#fence = this.#options.clock.setTimer(Math.ceil(fenceInMs), () => {
        this.#fenced();
      });
    }
    this.#next = this.#options.clock.setTimer(Math.max(0, Math.ceil(startMs + this.#renewIntervalMs() - nowMs)), () => {
      this.#write();
    });
  }

  #failed(error: unknown): void {
    if (this.#state === "stopped") return;
    this.#failures++;
    const delayMs = Math.min(
      LEASE_RETRY_BASE_MS * 2 ** (this.#failures - 1),
      LEASE_RETRY_CAP_MS,
      this.#renewIntervalMs(),
    );
    const reason = error instanceof ApiError ? error.message : String(error);
    this.#options.logger.warn(
      {
        lease: `${this.#options.namespace}/${this.#options.id}`,
        failures: this.#failures,
        retryInMs: delayMs,
        error: reason,
      },
      this.#written ? "router lease renewal failed" : "router lease registration failed",
    );
    this.#next = this.#options.clock.setTimer(Math.ceil(delayMs), () => {
      this.#write();
    });
  }

  #fenced(): void {
    this.#fence = undefined;
    if (this.#state !== "registered") return;
    this.#setState("fenced");
    this.#options.logger.warn(
      { lease: `${this.#options.namespace}/${this.#options.id}`, fenceSeconds: this.#fenceMs() / 1000 },
      "router lease not renewed for two thirds of its duration; stopped routing until it is",
    );
  }

  #setState(state: LeaseState): void {
    if (this.#state === state) return;
    this.#state = state;
    this.#options.onState?.(state);
  }
}
