/**
 * Prometheus metrics (prom-client) on a private registry:
 * - `tandem_reconcile_duration_seconds` (histogram): time a whole reconcile pass takes (observe,
 *   plan and its writes);
 * - `tandem_workqueue_depth` (gauge): ModelServing keys waiting in the work queue after a pass;
 * - `tandem_rollout_updated_ratio{modelserving,role}`: updated / desired instances per role, from
 *   the status a pass observed or planned (1 when the role wants none);
 * - `tandem_api_requests_total{verb,kind}`: API requests sent (retries included) by RBAC verb and kind;
 * - `tandem_api_errors_total{verb,kind,reason}`: failed API requests by RBAC verb, kind, and
 *   HTTP reason (`Conflict`, `NotFound`, `TooManyRequests`, `NoAnswer`, ...);
 * - Node process metrics (`process_*`, `nodejs_*`).
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { Plan } from "../core/actions.ts";
import type { Observed } from "../core/observed.ts";
import type { ReconcilePass } from "../engine/controller.ts";
import type { PlanFunction } from "../engine/reconciler.ts";
import type { Kind } from "../engine/ports.ts";
import type { KubeHttpError } from "./errors.ts";
import type { Verb } from "./resources.ts";

export interface ControllerMetrics {
  readonly registry: Registry;
  /** Wraps a plan function to record rollout progress. */
  instrumentPlan(plan: PlanFunction): PlanFunction;
  /** The engine's `onReconciled` hook: pass duration and queue depth. */
  reconciled(pass: ReconcilePass): void;
  /** Counts one failed request (transport `onError`). */
  apiError(verb: Verb, kind: Kind, error: KubeHttpError): void;
  /** Counts one request sent (transport `onRequest`). */
  apiRequest(verb: Verb, kind: Kind): void;
}

export function createMetrics(): ControllerMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const duration = new Histogram({
    name: "tandem_reconcile_duration_seconds",
    help: "Time of one reconcile pass of a ModelServing: observe, plan and write.",
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
    registers: [registry],
  });
  const depth = new Gauge({
    name: "tandem_workqueue_depth",
    help: "ModelServing keys waiting in the work queue.",
    registers: [registry],
  });
  const ratio = new Gauge({
    name: "tandem_rollout_updated_ratio",
    help: "Instances on the update revision over desired instances, per ModelServing and role.",
    labelNames: ["modelserving", "role"],
    registers: [registry],
  });
  const requests = new Counter({
    name: "tandem_api_requests_total",
    help: "Kubernetes API requests sent, retries included.",
    labelNames: ["verb", "kind"],
    registers: [registry],
  });
  const errors = new Counter({
    name: "tandem_api_errors_total",
    help: "Failed Kubernetes API requests.",
    labelNames: ["verb", "kind", "reason"],
    registers: [registry],
  });
  return {
    registry,
    instrumentPlan: (plan) => (observed, nowMs) => {
      const result = plan(observed, nowMs);
      for (const sample of rolloutRatios(observed, result))
        ratio.set({ modelserving: sample.modelServing, role: sample.role }, sample.ratio);
      return result;
    },
    reconciled: (pass) => {
      duration.observe(pass.durationMs / 1000);
      depth.set(pass.queueDepth);
    },
    apiError: (verb, kind, error) => {
      errors.inc({ verb, kind, reason: errorReason(error) });
    },
    apiRequest: (verb, kind) => {
      requests.inc({ verb, kind });
    },
  };
}

export interface RatioSample {
  readonly modelServing: string;
  readonly role: string;
  readonly ratio: number;
}

/** Per-role updated/replicas from the status the plan writes, else the one it observed. */
export function rolloutRatios(observed: Observed, plan: Plan): RatioSample[] {
  const object = observed.modelServing as {
    metadata?: { name?: string; namespace?: string };
    status?: { roles?: unknown };
  };
  const written = plan.actions.find((action) => action.type === "WriteStatus");
  const roles = (written?.type === "WriteStatus" ? written.status.roles : object.status?.roles) as
    { name: string; replicas: number; updated: number }[] | undefined;
  const modelServing = `${object.metadata?.namespace ?? ""}/${object.metadata?.name ?? ""}`;
  return (roles ?? []).map((role) => ({
    modelServing,
    role: role.name,
    ratio: role.replicas === 0 ? 1 : role.updated / role.replicas,
  }));
}

function errorReason(error: KubeHttpError): string {
  if (error.reason !== "") return error.reason;
  if (error.status === 0) return "NoAnswer";
  return String(error.status);
}
