/**
 * Assembles the production controller from the adapter: transport (client-node) → KubeReader,
 * KubeWriter, EventRecorder (on the KubeWriter), WallClock → the engine's Controller; optional Lease leader election;
 * the metrics/health server. Used by `tandem controller` and by the e2e tests (in-process).
 *
 * Lifecycle: the health server starts at once. Without leader election the controller starts at
 * once; with it, only after the lease is acquired, and losing the lease stops it and resolves
 * `done` with "lost-leadership" (the process must exit non-zero so its Deployment restarts it as
 * a fresh candidate). `stop()` stops the controller, then the caches, then releases the lease.
 */
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import type { KubeConfig } from "@kubernetes/client-node";
import { plan as corePlan } from "../core/plan.ts";
import { Controller } from "../engine/controller.ts";
import type { ControllerOptions } from "../engine/controller.ts";
import type { Logger } from "../engine/logger.ts";
import { WallClock } from "./clock.ts";
import { LeaderElector } from "./leader.ts";
import type { LeaderElectorOptions } from "./leader.ts";
import { createMetrics, type ControllerMetrics } from "./metrics.ts";
import { KubeReader } from "./reader.ts";
import type { KubeReaderOptions } from "./reader.ts";
import { dropControllerUnread } from "./unread.ts";
import { EventRecorder } from "../engine/recorder.ts";
import { startHealthServer } from "./server.ts";
import type { HealthServer } from "./server.ts";
import { KubeTransport, clientNodeSend } from "./transport.ts";
import type { TransportOptions } from "./transport.ts";
import { KubeWriter } from "./writer.ts";
import { LABEL_ROUTER } from "../api/wellknown.ts";

/** `reportingController` of our Events. */
export const CONTROLLER_NAME = "tandem.dev/controller";

export interface LeaderElectionConfig {
  /** Namespace and name of the Lease. */
  readonly namespace: string;
  readonly name: string;
  /** Default: hostname + random suffix. */
  readonly identity?: string;
  /** Lease timings (defaults 15 000 / 10 000 / 2 000). */
  readonly timings?: Partial<Pick<LeaderElectorOptions, "leaseDurationMs" | "renewDeadlineMs" | "retryPeriodMs">>;
}

export interface RunOptions {
  readonly kubeConfig: KubeConfig;
  readonly logger: Logger;
  /** Watch and manage only this namespace; all namespaces when absent. */
  readonly namespace?: string | undefined;
  readonly leaderElection?: LeaderElectionConfig | undefined;
  /** `host:port` of /metrics, /healthz, /readyz; no server when absent. */
  readonly metricsAddress?: string | undefined;
  readonly reflector?: KubeReaderOptions["reflector"];
  /**
   * Cache objects whole, as listed (no transform), instead of through `dropControllerUnread`: for
   * measuring what the transform saves (scripts/kube-scale.ts `--keep-unread`), not for production.
   */
  readonly keepUnread?: boolean;
  /** Engine options; its `onReconciled` is called after the metrics have recorded the pass. */
  readonly controller?: Omit<ControllerOptions, "plan">;
}

export type RunEnd = "stopped" | "lost-leadership";

export interface RunningController {
  /** Resolves once the controller has ended: after `stop()`, or when leadership was lost. */
  readonly done: Promise<RunEnd>;
  /** The bound address of the health server, when one runs. */
  readonly metricsAddress: string | undefined;
  readonly identity: string;
  isLeader(): boolean;
  /** True when the controller runs and its caches have synced. */
  isSynced(): boolean;
  stop(): Promise<void>;
}

export async function runController(options: RunOptions): Promise<RunningController> {
  const metrics = createMetrics();
  // Both transports count their requests and failures.
  const counted: Pick<TransportOptions, "onError" | "onRequest"> = {
    onError: (verb, kind, error) => {
      metrics.apiError(verb, kind, error);
    },
    onRequest: (verb, kind) => {
      metrics.apiRequest(verb, kind);
    },
  };
  const transport = new KubeTransport(clientNodeSend(options.kubeConfig), counted);
  const clock = new WallClock();
  const identity = options.leaderElection?.identity ?? `${hostname()}_${randomBytes(4).toString("hex")}`;
  let working: { reader: KubeReader; controller: Controller } | undefined;
  let elector: LeaderElector | undefined;
  let finish: (end: RunEnd) => void = () => undefined;
  const done = new Promise<RunEnd>((resolve) => {
    finish = resolve;
  });

  const startWorking = (): void => {
    working = startWork(options, { transport, clock, metrics, identity });
  };
  const stopWorking = async (): Promise<void> => {
    const current = working;
    working = undefined;
    if (current === undefined) return;
    await current.controller.stop();
    await current.reader.stop();
  };

  const server =
    options.metricsAddress === undefined
      ? undefined
      : await startHealthServer({
          address: options.metricsAddress,
          registry: metrics.registry,
          ready: () => (working?.reader.hasSynced() ?? false) || (elector !== undefined && !elector.isLeader()),
        });
  if (options.leaderElection === undefined) startWorking();
  else {
    const lease = options.leaderElection;
    elector = new LeaderElector({
      ...lease.timings,
      transport: new KubeTransport(clientNodeSend(options.kubeConfig), { requestTimeoutMs: 5_000, ...counted }),
      clock,
      namespace: lease.namespace,
      name: lease.name,
      identity,
      logger: options.logger,
      onStartedLeading: startWorking,
      onStoppedLeading: () => {
        void stopWorking().then(() => {
          finish("lost-leadership");
        });
      },
    });
    elector.start();
  }
  return assemble({ done, server, identity, elector, working: () => working, stopWorking, finish });
}

/** The shared pieces `startWork` builds a working controller from. */
interface WorkParts {
  readonly transport: KubeTransport;
  readonly clock: WallClock;
  readonly metrics: ControllerMetrics;
  readonly identity: string;
}

/** Starts a reader and a controller over it: at start, or when this replica becomes the leader. */
function startWork(
  options: RunOptions,
  { transport, clock, metrics, identity }: WorkParts,
): { reader: KubeReader; controller: Controller } {
  // Only router Leases (DESIGN §3.1), from every namespace: a router routing this namespace may run in another.
  const reader = new KubeReader({
    transport,
    clock,
    namespace: options.namespace,
    labelSelectors: { Lease: `${LABEL_ROUTER}=true` },
    clusterWideKinds: ["Lease"],
    logger: options.logger,
    dropUnread: options.keepUnread === true ? () => undefined : dropControllerUnread,
    ...(options.reflector === undefined ? {} : { reflector: options.reflector }),
  });
  const writer = new KubeWriter(transport);
  const recorder = new EventRecorder({ writer, clock, component: CONTROLLER_NAME, instance: identity });
  const ports = { reader, writer, clock, recorder, logger: options.logger };
  const controller = new Controller(ports, {
    ...options.controller,
    plan: metrics.instrumentPlan(corePlan),
    onReconciled: (pass) => {
      metrics.reconciled(pass);
      options.controller?.onReconciled?.(pass);
    },
  });
  controller.start();
  reader.start();
  return { reader, controller };
}

interface Parts {
  readonly done: Promise<RunEnd>;
  readonly server: HealthServer | undefined;
  readonly identity: string;
  readonly elector: LeaderElector | undefined;
  readonly working: () => { reader: KubeReader } | undefined;
  readonly stopWorking: () => Promise<void>;
  readonly finish: (end: RunEnd) => void;
}

function assemble(parts: Parts): RunningController {
  let stopping: Promise<void> | undefined;
  return {
    done: parts.done,
    metricsAddress: parts.server?.address,
    identity: parts.identity,
    isLeader: () => parts.elector?.isLeader() ?? true,
    isSynced: () => parts.working()?.reader.hasSynced() ?? false,
    stop: () => {
      stopping ??= (async () => {
        await parts.stopWorking();
        await parts.elector?.stop();
        await parts.server?.close();
        parts.finish("stopped");
      })();
      return stopping;
    },
  };
}
