/**
 * Pure placement for the simulated scheduler: node pools, GPU requests, free capacity, and gang
 * placement (a set of pods placed all-or-nothing). Only `nvidia.com/gpu` is modelled: it is the
 * resource LLM serving runs out of; CPU and memory never decide placement in Tandem's scenarios.
 */
import type { JsonObject, JsonValue, KubeObject } from "../engine/ports.ts";
import { isJsonObject } from "./json.ts";
import { compareStrings } from "../core/maps.ts";
import { onFrozen } from "../core/frozen.ts";

export const GPU_RESOURCE = "nvidia.com/gpu";
/** The label a simulated node carries naming its pool. */
export const POOL_LABEL = "sim.tandem.dev/pool";

export interface NodePool {
  name: string;
  count: number;
  /** GPUs per node. */
  gpus: number;
}

/** Nodes `<pool>-0 .. <pool>-(count-1)`, Ready and schedulable, with `gpus` allocatable GPUs. */
export function nodesOfPools(pools: readonly NodePool[]): KubeObject<"Node">[] {
  return pools.flatMap((pool) =>
    Array.from({ length: pool.count }, (_, index): KubeObject<"Node"> => {
      const resources = { [GPU_RESOURCE]: String(pool.gpus) };
      return {
        apiVersion: "v1",
        kind: "Node",
        metadata: { name: `${pool.name}-${index}`, labels: { [POOL_LABEL]: pool.name } },
        spec: {},
        status: { capacity: resources, allocatable: resources, conditions: [{ type: "Ready", status: "True" }] },
      };
    }),
  );
}

/**
 * GPUs a pod needs: the larger of the sum over its containers and the largest init container, as
 * Kubernetes computes effective requests. A container's request defaults to its limit. Returns
 * undefined when a value is not a non-negative integer (such a pod never fits).
 */
export function podGpuRequest(pod: KubeObject): number | undefined {
  const spec = pod.spec;
  if (spec === undefined || !Object.isFrozen(spec)) return computedGpuRequest(pod);
  const cached = gpuRequestBySpec.get(spec);
  // One lookup when the request is a number; `has` only tells a remembered malformed one apart.
  if (cached !== undefined || gpuRequestBySpec.has(spec)) return cached;
  const gpus = computedGpuRequest(pod);
  gpuRequestBySpec.set(spec, gpus);
  return gpus;
}

/**
 * `podGpuRequest` by pod spec, for frozen specs only (the server's stored objects, whose spec is
 * shared by every version of a pod whose spec did not change): a frozen spec cannot change, so
 * neither can its request.
 */
const gpuRequestBySpec = new WeakMap<object, number | undefined>();

function computedGpuRequest(pod: KubeObject): number | undefined {
  const regular = containerRequests(pod.spec?.["containers"]);
  const init = containerRequests(pod.spec?.["initContainers"]);
  if (regular === undefined || init === undefined) return undefined;
  return Math.max(
    regular.reduce((sum, gpus) => sum + gpus, 0),
    init.reduce((most, gpus) => Math.max(most, gpus), 0),
  );
}

function containerRequests(containers: unknown): number[] | undefined {
  if (!Array.isArray(containers)) return [];
  const requests: number[] = [];
  for (const container of containers) {
    const resources: unknown = isJsonObject(container) ? container["resources"] : undefined;
    const request = isJsonObject(resources)
      ? (resourceOf(resources["requests"]) ?? resourceOf(resources["limits"]))
      : undefined;
    const gpus = request === undefined ? 0 : Number(request);
    if (!Number.isSafeInteger(gpus) || gpus < 0) return undefined;
    requests.push(gpus);
  }
  return requests;
}

function resourceOf(list: unknown): string | number | undefined {
  if (!isJsonObject(list)) return undefined;
  const value = list[GPU_RESOURCE];
  return typeof value === "string" || typeof value === "number" ? value : undefined;
}

export interface NodeCapacity {
  readonly name: string;
  readonly freeGpus: number;
}

/** True when a node takes new pods: not cordoned and its Ready condition is True. */
export function isSchedulable(node: KubeObject): boolean {
  if (node.spec?.["unschedulable"] === true) return false;
  const conditions = node.status?.["conditions"];
  const isReady = (condition: JsonValue): boolean => isJsonObject(condition) && condition["type"] === "Ready";
  const ready = Array.isArray(conditions) ? conditions.find(isReady) : undefined;
  return isJsonObject(ready) && ready["status"] === "True";
}

/**
 * Free GPUs of each schedulable node, in name order: allocatable minus the GPUs the pods bound to
 * it hold (`heldGpus`: every pod bound to it that has not finished; terminating pods still hold
 * their GPUs until they are gone), as `HeldGpuLedger.byNode` sums them.
 */
export function freeCapacity(nodes: readonly KubeObject[], usedGpus: ReadonlyMap<string, number>): NodeCapacity[] {
  return schedulableNodes(nodes).map((node) => ({
    name: node.name,
    freeGpus: node.allocatableGpus - (usedGpus.get(node.name) ?? 0),
  }));
}

/** A schedulable node's name and allocatable GPUs. */
interface SchedulableNode {
  readonly name: string;
  readonly allocatableGpus: number;
}

/**
 * `schedulableNodes` by node list, for frozen lists only (the server's `stored` array of its
 * deep-frozen nodes, shared until a node changes): such a list cannot change, so neither can the
 * result. A scheduler cycle reads it once per gang, and nodes rarely change.
 */
const schedulableByNodes = new WeakMap<object, readonly SchedulableNode[]>();

/** The schedulable nodes (`isSchedulable`) of `nodes` with their allocatable GPUs, in name order. */
function schedulableNodes(nodes: readonly KubeObject[]): readonly SchedulableNode[] {
  return onFrozen(schedulableByNodes, nodes, (list) =>
    list
      .filter(isSchedulable)
      .map((node) => ({ name: node.metadata.name, allocatableGpus: allocatableGpus(node) }))
      .sort((a, b) => compareStrings(a.name, b.name)),
  );
}

/** The node whose GPUs `pod` holds and how many, or undefined when it holds none (not bound, or finished). */
function heldGpus(pod: KubeObject): { readonly node: string; readonly gpus: number } | undefined {
  const nodeName = pod.spec?.["nodeName"];
  const phase = pod.status?.["phase"];
  if (typeof nodeName !== "string" || phase === "Succeeded" || phase === "Failed") return undefined;
  return { node: nodeName, gpus: podGpuRequest(pod) ?? 0 };
}

/**
 * GPUs held per node by a set of pods, kept up to date as the pods change (`change`), so reading
 * them costs the changes since, not a pass over every pod. Pods passed in must not change
 * afterwards (the server's frozen objects): what a pod added is taken off again when it changes.
 */
export class HeldGpuLedger {
  /** Node name → GPUs held there (`heldGpus` summed); absent when none. */
  readonly #gpusByNode = new Map<string, number>();

  /** A pod changed from `before` to `after` (undefined: the pod did not exist / no longer does). */
  change(before: KubeObject | undefined, after: KubeObject | undefined): void {
    // The same spec and phase hold the same GPUs: most changes touch neither.
    if (before?.spec === after?.spec && before?.status?.["phase"] === after?.status?.["phase"]) return;
    this.#add(before === undefined ? undefined : heldGpus(before), -1);
    this.#add(after === undefined ? undefined : heldGpus(after), 1);
  }

  /** GPUs held per node name, for `freeCapacity`; live, not a copy. */
  byNode(): ReadonlyMap<string, number> {
    return this.#gpusByNode;
  }

  #add(held: { readonly node: string; readonly gpus: number } | undefined, sign: 1 | -1): void {
    if (held === undefined) return;
    const gpus = (this.#gpusByNode.get(held.node) ?? 0) + sign * held.gpus;
    if (gpus === 0) this.#gpusByNode.delete(held.node);
    else this.#gpusByNode.set(held.node, gpus);
  }
}

function allocatableGpus(node: KubeObject): number {
  const status: JsonObject = node.status ?? {};
  const value = Number(resourceOf(status["allocatable"]) ?? resourceOf(status["capacity"]) ?? 0);
  return Number.isSafeInteger(value) && value > 0 ? value : 0;
}

export interface Demand {
  /** Unique within a gang, e.g. "namespace/name". */
  readonly pod: string;
  /** GPUs needed; undefined when the pod's request is malformed. */
  readonly gpus: number | undefined;
}

export type GangPlacement =
  | { readonly ok: true; readonly nodeByPod: ReadonlyMap<string, string> }
  | { readonly ok: false; readonly reason: string };

/**
 * Places every member of a gang or none. Best-fit decreasing: largest requests first (ties by pod
 * name), each on the node it leaves with the fewest free GPUs (ties by node name). Greedy, so it
 * can miss a packing that exists; deterministic, and good enough to model fragmentation.
 * `nodes` is not modified. `totalNodes` counts unschedulable nodes too, for the message.
 */
export function placeGang(
  members: readonly Demand[],
  nodes: readonly NodeCapacity[],
  totalNodes: number,
): GangPlacement {
  // Free GPUs by index into `nodes` (names are unique): a scan per member, so an array, not a map.
  const free = nodes.map((node) => node.freeGpus);
  const nodeByPod = new Map<string, string>();
  const ordered = [...members].sort((a, b) => (b.gpus ?? 0) - (a.gpus ?? 0) || compareStrings(a.pod, b.pod));
  for (const member of ordered) {
    const gpus = member.gpus;
    if (gpus === undefined) return { ok: false, reason: `pod ${member.pod} has a malformed ${GPU_RESOURCE} request` };
    const best = tightestFit(free, gpus);
    const bestNode = nodes[best];
    if (bestNode === undefined) {
      return {
        ok: false,
        reason: unfitReason(member.pod, gpus, { size: members.length, placed: nodeByPod.size }, free, totalNodes),
      };
    }
    free[best] = (free[best] ?? 0) - gpus;
    nodeByPod.set(member.pod, bestNode.name);
  }
  return { ok: true, nodeByPod };
}

/** The index of the fewest free GPUs that are at least `gpus` (the first such on ties), or -1. */
function tightestFit(free: readonly number[], gpus: number): number {
  let best = -1;
  let bestFreeGpus = 0;
  for (let index = 0; index < free.length; index++) {
    const freeGpus = free[index] ?? 0;
    if (freeGpus >= gpus && (best === -1 || freeGpus < bestFreeGpus)) {
      best = index;
      bestFreeGpus = freeGpus;
    }
  }
  return best;
}

function unfitReason(
  pod: string,
  gpus: number,
  gang: { size: number; placed: number },
  free: readonly number[],
  totalNodes: number,
): string {
  const mostFree = Math.max(0, ...free);
  const unschedulable = totalNodes - free.length;
  const cordoned = unschedulable > 0 ? `, ${unschedulable} not schedulable (NotReady or cordoned)` : "";
  // The free count is what is left after the gang's larger members took their share.
  const after = gang.placed > 0 ? ` after placing ${gang.placed} of the gang's pods` : "";
  const gangNote = gang.size > 1 ? ` (gang of ${gang.size} pods, placed all-or-nothing)` : "";
  const shortfall = `pod ${pod} needs ${gpus} ${GPU_RESOURCE}, at most ${mostFree} free on any schedulable node`;
  return `0/${totalNodes} nodes are available: ${shortfall}${after}${cordoned}${gangNote}`;
}
