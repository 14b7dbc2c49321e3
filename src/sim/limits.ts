/**
 * What a scenario may ask of the simulator, checked when the scenario is parsed (so `tandem
 * simulate`, `tandem demo --scenario`, the fuzz generator and the bench all get it) and, for the
 * pods a `patch` asks for, when the patch runs. Each field is valid on its own; the totals they
 * multiply into would otherwise run into the simulator's internal bounds (100,000 stored objects,
 * 100,000 live timers, 10,000,000 timers per step) only after many seconds and gigabytes, with a
 * stack trace. The limits are far above every shipped scenario, the fuzz generator and the bench
 * (docs/design/scenario-runner.md, "Limits").
 */
import type { Problem } from "../api/problems.ts";
import { problem } from "../api/problems.ts";
import type { ModelServing } from "../api/schema.ts";

/** Bound on a whole run's simulated time: 30 days (the runner stops there). */
export const MAX_SIMULATED_SECONDS = 30 * 24 * 3600;
/** Nodes over all pools. The bench's largest cluster has 125, the fuzz generator's about 20. */
export const MAX_NODES = 10_000;
/** Pods the ModelServings ask for together (surge aside). The bench's 100 groups ask for 600. */
export const MAX_PODS = 10_000;
/** Router requests in flight at once: `requestsPerSecond × requestSeconds`. Shipped: at most 160. */
export const MAX_REQUESTS_IN_FLIGHT = 10_000;
/** Router requests over the whole run, at most: `requestsPerSecond ×` the longest the steps can run. */
export const MAX_REQUESTS = 2_000_000;
/** Router replicas (`cluster.router.replicas`): each has its own cache of every pod. */
export const MAX_ROUTER_REPLICAS = 16;
/** Pod records kept by `snapshot` steps: snapshots × the pods asked for. */
export const MAX_SNAPSHOT_PODS = 200_000;

/** The parts of a parsed scenario the limits read. */
export interface LimitInput {
  readonly nodes?: readonly { readonly count: number }[] | undefined;
  readonly router?:
    | { readonly requestsPerSecond: number; readonly requestSeconds: number; readonly replicas?: number | undefined }
    | undefined;
  /** Each step with its path; `modelServing` set for an `apply` of a valid ModelServing. */
  readonly steps: readonly LimitStep[];
}

export interface LimitStep {
  readonly path: readonly (string | number)[];
  readonly kind: string;
  /** Longest this step can take, in simulated seconds (a wait's timeout, an advance). */
  readonly maxSeconds: number;
  readonly modelServing?: ModelServing | undefined;
}

/** The pods a ModelServing asks for: `replicas × Σ role.replicas × (1 + workerReplicas)`. */
export function podsOf(ms: ModelServing): number {
  return (
    ms.spec.replicas * ms.spec.template.roles.reduce((sum, role) => sum + role.replicas * (1 + role.workerReplicas), 0)
  );
}

/** Every total of `input` beyond its limit, naming the field, the total and the limit. */
export function limitProblems(input: LimitInput): Problem[] {
  const problems: Problem[] = [];
  const nodes = (input.nodes ?? []).reduce((sum, pool) => sum + pool.count, 0);
  if (nodes > MAX_NODES)
    problems.push(problem(["cluster", "nodes"], `adds up to ${nodes} nodes; the simulator runs at most ${MAX_NODES}`));
  const pods = podProblems(input.steps, problems);
  const snapshots = input.steps.filter((step) => step.kind === "snapshot").length;
  if (snapshots * pods > MAX_SNAPSHOT_PODS) {
    problems.push(
      problem(
        ["steps"],
        `${snapshots} snapshots of up to ${pods} pods each would record ${snapshots * pods} pods; the simulator keeps at most ${MAX_SNAPSHOT_PODS}`,
      ),
    );
  }
  if (input.router !== undefined) problems.push(...routerProblems(input.router, input.steps));
  return problems;
}

/** Checks the pods asked for, each ModelServing at its largest apply; returns the total. */
function podProblems(steps: readonly LimitStep[], problems: Problem[]): number {
  const largest = new Map<string, number>();
  let total = 0;
  for (const step of steps) {
    const ms = step.modelServing;
    if (ms === undefined) continue;
    const key = `${ms.metadata.namespace ?? "default"}/${ms.metadata.name}`;
    const pods = podsOf(ms);
    const before = largest.get(key) ?? 0;
    if (pods <= before) continue;
    largest.set(key, pods);
    total += pods - before;
    const reason = podsReason(pods, total);
    if (reason !== undefined) problems.push(problem([...step.path, "spec"], reason));
  }
  return total;
}

/**
 * Why `pods` (a ModelServing's, `total` with every other ModelServing) is too many for the
 * simulator; undefined when they fit.
 */
export function podsReason(pods: number, total: number): string | undefined {
  if (total <= MAX_PODS) return undefined;
  const together = total === pods ? "" : ` (${total} with the other ModelServings)`;
  return `asks for ${pods} pods (replicas × the sum over roles of replicas × (1 + workerReplicas))${together}; the simulator runs at most ${MAX_PODS}`;
}

function routerProblems(router: NonNullable<LimitInput["router"]>, steps: readonly LimitStep[]): Problem[] {
  const { requestsPerSecond, requestSeconds, replicas = 1 } = router;
  if (replicas > MAX_ROUTER_REPLICAS)
    return [
      problem(
        ["cluster", "router", "replicas"],
        `is ${replicas}; the simulator runs at most ${MAX_ROUTER_REPLICAS} router replicas`,
      ),
    ];
  const inFlight = Math.ceil(requestsPerSecond * requestSeconds);
  if (inFlight > MAX_REQUESTS_IN_FLIGHT) {
    return [
      problem(
        ["cluster", "router"],
        `${requestsPerSecond} requests/s lasting ${requestSeconds}s each keep ${inFlight} requests in flight; the simulator runs at most ${MAX_REQUESTS_IN_FLIGHT} at once`,
      ),
    ];
  }
  const seconds = Math.min(
    MAX_SIMULATED_SECONDS,
    steps.reduce((sum, step) => sum + step.maxSeconds, 0),
  );
  const requests = Math.ceil(requestsPerSecond * seconds);
  if (requests <= MAX_REQUESTS) return [];
  return [
    problem(
      ["cluster", "router", "requestsPerSecond"],
      `${requestsPerSecond} requests/s over up to ${seconds}s of steps (their wait timeouts and advances) is ${requests} requests; the simulator runs at most ${MAX_REQUESTS} in all`,
    ),
  ];
}
