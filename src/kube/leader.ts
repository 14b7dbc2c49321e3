/**
 * Leader election on a `coordination.k8s.io/v1` Lease, with client-go's timing: a lease lasts
 * `leaseDurationMs` (15 s), the leader renews every `retryPeriodMs` (2 s) and gives up when it
 * has not renewed for `renewDeadlineMs` (10 s); candidates retry every `retryPeriodMs`.
 *
 * Contract:
 * - at most one holder: every write is a create or a resourceVersion-guarded update, so of two
 *   candidates racing for an expired lease one gets 409 and stays a candidate;
 * - a candidate takes a lease only when it is free (no holder) or its record (holder, renewTime)
 *   has not changed for `leaseDurationMs` of the candidate's own clock (no trust in remote clocks);
 * - the leader loses on a 409 while renewing (someone else wrote the lease) or when the renew
 *   deadline passes; `onStoppedLeading` is then called once, and the caller must stop acting;
 * - `stop()` releases a held lease (empty holder), so a standby takes over within one retry period;
 * - times are MicroTime (`.000000Z`): the API server refuses millisecond precision in a Lease.
 */
import { V1MicroTime } from "@kubernetes/client-node";
import type { Logger } from "../engine/logger.ts";
import type { Clock, Timer } from "../engine/ports.ts";
import { KubeHttpError } from "./errors.ts";
import type { KubeTransport } from "./transport.ts";

export interface LeaderElectorOptions {
  readonly transport: KubeTransport;
  readonly clock: Clock;
  readonly namespace: string;
  readonly name: string;
  /** Unique per process (pod name + random suffix). */
  readonly identity: string;
  readonly logger: Logger;
  readonly onStartedLeading: () => void;
  readonly onStoppedLeading: () => void;
  readonly leaseDurationMs?: number;
  readonly renewDeadlineMs?: number;
  readonly retryPeriodMs?: number;
}

interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

interface Lease {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; resourceVersion?: string };
  spec?: LeaseSpec;
}

type Attempt = "held" | "busy" | "conflict" | "failed";

export class LeaderElector {
  readonly #options: LeaderElectorOptions;
  #leader = false;
  #stopped = false;
  #observed: { record: string; atMs: number } | undefined;
  #sleeping: { timer: Timer; wake: () => void } | undefined;
  #loop: Promise<void> | undefined;

  constructor(options: LeaderElectorOptions) {
    this.#options = options;
  }

  /** Starts campaigning; once only. */
  start(): void {
    if (this.#loop !== undefined) throw new Error("leader elector already started");
    this.#loop = this.#run();
  }

  isLeader(): boolean {
    return this.#leader;
  }

  /** Stops campaigning or renewing and releases the lease if held. Does not call onStoppedLeading. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#sleeping !== undefined) {
      this.#sleeping.timer.cancel();
      this.#sleeping.wake();
    }
    await this.#loop;
    if (this.#leader) {
      this.#leader = false;
      await this.#release();
    }
  }

  async #run(): Promise<void> {
    while (!this.#stopped && !this.#leader) {
      if ((await this.#attempt()) === "held") {
        this.#leader = true;
        this.#options.logger.info({ lease: this.#leaseName(), identity: this.#options.identity }, "became leader");
        this.#options.onStartedLeading();
      } else {
        await this.#sleep(this.#retryPeriodMs());
      }
    }
    await this.#renewLoop();
  }

  async #renewLoop(): Promise<void> {
    let renewedAtMs = this.#options.clock.nowMs();
    while (!this.#stopped && this.#leader) {
      await this.#sleep(this.#retryPeriodMs());
      if (this.#isStopped()) return;
      const attempt = await this.#attempt();
      const nowMs = this.#options.clock.nowMs();
      if (attempt === "held") renewedAtMs = nowMs;
      else if (
        attempt === "conflict" ||
        attempt === "busy" ||
        nowMs - renewedAtMs > (this.#options.renewDeadlineMs ?? 10_000)
      ) {
        this.#leader = false;
        this.#options.logger.error(
          { lease: this.#leaseName(), identity: this.#options.identity, attempt },
          "lost leadership",
        );
        this.#options.onStoppedLeading();
        return;
      }
    }
  }

  /** One acquire-or-renew: "held" when this process holds the lease after it. */
  async #attempt(): Promise<Attempt> {
    const nowMs = this.#options.clock.nowMs();
    try {
      const lease = await this.#get();
      if (lease === undefined) {
        await this.#write("create", this.#newLease(undefined, nowMs));
        return "held";
      }
      if (!this.#mayTake(lease, nowMs)) return "busy";
      await this.#write("update", this.#newLease(lease, nowMs));
      return "held";
    } catch (error) {
      if (error instanceof KubeHttpError && error.status === 409) return "conflict";
      this.#options.logger.warn(
        { lease: this.#leaseName(), error: error instanceof Error ? error.message : String(error) },
        "lease request failed",
      );
      return "failed";
    }
  }

  /** True when this process holds `lease`, or it is free, or its record has not changed for a lease duration. */
  #mayTake(lease: Lease, nowMs: number): boolean {
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity ?? "";
    if (holder === this.#options.identity || holder === "") return true;
    const record = `${holder}\u0000${spec.renewTime ?? ""}`;
    if (this.#observed?.record !== record) this.#observed = { record, atMs: nowMs };
    const durationMs = (spec.leaseDurationSeconds ?? 15) * 1_000;
    return nowMs - this.#observed.atMs >= durationMs;
  }

  #newLease(old: Lease | undefined, nowMs: number): Lease {
    const now = new V1MicroTime(nowMs).toISOString();
    const spec = old?.spec ?? {};
    const takingOver = spec.holderIdentity !== this.#options.identity;
    return {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: {
        name: this.#options.name,
        namespace: this.#options.namespace,
        ...(old?.metadata.resourceVersion === undefined ? {} : { resourceVersion: old.metadata.resourceVersion }),
      },
      spec: {
        holderIdentity: this.#options.identity,
        leaseDurationSeconds: Math.ceil((this.#options.leaseDurationMs ?? 15_000) / 1_000),
        // Re-stamped, never re-sent as read: a Date read back would serialise with milliseconds.
        acquireTime:
          takingOver || spec.acquireTime === undefined ? now : new V1MicroTime(spec.acquireTime).toISOString(),
        renewTime: now,
        leaseTransitions: (spec.leaseTransitions ?? 0) + (takingOver && old !== undefined ? 1 : 0),
      },
    };
  }

  async #release(): Promise<void> {
    try {
      const lease = await this.#get();
      if (lease?.spec?.holderIdentity !== this.#options.identity) return;
      const released: Lease = {
        ...lease,
        spec: {
          ...lease.spec,
          holderIdentity: "",
          leaseDurationSeconds: 1,
          renewTime: new V1MicroTime(this.#options.clock.nowMs()).toISOString(),
        },
      };
      if (lease.spec.acquireTime !== undefined)
        released.spec = { ...released.spec, acquireTime: new V1MicroTime(lease.spec.acquireTime).toISOString() };
      await this.#write("update", released);
      this.#options.logger.info({ lease: this.#leaseName(), identity: this.#options.identity }, "released leadership");
    } catch (error) {
      this.#options.logger.warn(
        { lease: this.#leaseName(), error: error instanceof Error ? error.message : String(error) },
        "could not release the lease; a standby takes over when it expires",
      );
    }
  }

  async #get(): Promise<Lease | undefined> {
    try {
      return (await this.#options.transport.request({
        verb: "get",
        kind: "Lease",
        target: { namespace: this.#options.namespace, name: this.#options.name },
      })) as Lease;
    } catch (error) {
      if (error instanceof KubeHttpError && error.status === 404) return undefined;
      throw error;
    }
  }

  async #write(verb: "create" | "update", lease: Lease): Promise<void> {
    const target = { namespace: this.#options.namespace, ...(verb === "update" ? { name: this.#options.name } : {}) };
    await this.#options.transport.request({ verb, kind: "Lease", target, body: lease });
  }

  #sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      this.#sleeping = { timer: this.#options.clock.setTimer(ms, resolve), wake: resolve };
    }).finally(() => {
      this.#sleeping = undefined;
    });
  }

  /** Read through a method: `await` may have changed it since a loop condition narrowed it. */
  #isStopped(): boolean {
    return this.#stopped;
  }

  #retryPeriodMs(): number {
    return this.#options.retryPeriodMs ?? 2_000;
  }

  #leaseName(): string {
    return `${this.#options.namespace}/${this.#options.name}`;
  }
}
