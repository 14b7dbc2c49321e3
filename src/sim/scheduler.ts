/**
 * The simulated kube-scheduler. A change to any Pod or Node wakes it; `cycleMs` later it runs one
 * cycle over every pending pod (no nodeName, not being deleted, one of its schedulerNames): pods
 * are grouped into gangs and each gang is placed all-or-nothing (`placement.ts`), oldest gang
 * first. A placed pod is bound through the binding subresource (spec.nodeName and
 * `PodScheduled=True` in one write); a pod that does not fit stays Pending with
 * `PodScheduled=False`, reason `Unschedulable` and a message naming the shortfall, and waits for
 * the next change.
 *
 * Gangs (all-or-nothing sets): by default all pending pods of one role instance (same
 * `tandem.dev/modelserving`, `tandem.dev/group`, `tandem.dev/instance`) — an instance's entry
 * and workers are useless apart; when the owning ModelServing sets
 * `spec.template.gangPolicy.minRoleReplicas`, all pending pods of the ServingGroup, every role.
 *
 * The scheduler reads the server directly (a scheduler cache that is never stale and never
 * double-books) and writes through its own client, so its writes are counted apart from the
 * controller's and faults can target it; a failed write is retried the next cycle.
 */
import type { JsonObject, KubeObject } from "../engine/ports.ts";
import { LABEL_GROUP, LABEL_INSTANCE, LABEL_MODEL_SERVING } from "../api/wellknown.ts";
import type { ApiServer } from "./apiserver.ts";
import type { SimClient } from "./client.ts";
import { isJsonObject } from "./json.ts";
import { refOf } from "./objects.ts";
import { conditionsOf, mergeConditions } from "./pod-status.ts";
import { HeldGpuLedger, freeCapacity, placeGang, podGpuRequest } from "./placement.ts";
import type { Demand } from "./placement.ts";
import type { WatchStream } from "./watch.ts";
import { compareStrings } from "../core/maps.ts";
import { compareStored } from "./pod-changes.ts";

export interface SchedulerOptions {
  /** Delay from a change to the cycle it triggers (DESIGN §6 `timing.scheduleSeconds`). Default 1000. */
  cycleMs?: number;
  /** Pods whose `spec.schedulerName` (default "default-scheduler") is one of these. */
  schedulerNames?: readonly string[];
  /**
   * The gang a pending pod belongs to; pods with the same key are placed all-or-nothing, pods with
   * none alone. Default: `tandemGang` with the owning ModelServing's gang policy.
   */
  gangOf?: (pod: KubeObject) => string | undefined;
}

/**
 * Tandem's gang of a pod: its ServingGroup when `groupGang` (the ModelServing has a gang policy),
 * else its role instance. Undefined, so the pod is placed alone, when a label it needs is missing.
 */
export function tandemGang(pod: KubeObject, groupGang: boolean): string | undefined {
  const labels = pod.metadata.labels ?? {};
  const modelServing = labels[LABEL_MODEL_SERVING];
  const group = labels[LABEL_GROUP];
  const instance = labels[LABEL_INSTANCE];
  if (modelServing === undefined || group === undefined) return undefined;
  const groupKey = `${pod.metadata.namespace ?? ""}/${modelServing}/${group}`;
  if (groupGang) return groupKey;
  return instance === undefined ? undefined : `${groupKey}/${instance}`;
}

/** True when a ModelServing asks for group gangs: `spec.template.gangPolicy.minRoleReplicas` names a role. */
export function hasGangPolicy(modelServing: KubeObject): boolean {
  const template = modelServing.spec?.["template"];
  const gangPolicy = isJsonObject(template) ? template["gangPolicy"] : undefined;
  const minRoleReplicas = isJsonObject(gangPolicy) ? gangPolicy["minRoleReplicas"] : undefined;
  return isJsonObject(minRoleReplicas) && Object.keys(minRoleReplicas).length > 0;
}

export class SimScheduler {
  readonly #server: ApiServer;
  readonly #client: SimClient;
  readonly #cycleMs: number;
  readonly #schedulerNames: readonly string[];
  readonly #gangOf: (pod: KubeObject) => string | undefined;
  readonly #streams: WatchStream[] = [];
  /** GPUs the stored pods hold per node, kept from the server's commit feed. */
  readonly #heldGpus = new HeldGpuLedger();
  /**
   * The stored pods pending for this scheduler (`#isPending`) by uid, kept from the server's
   * commit feed, so a cycle does not pass over every stored pod to find them. A commit never
   * changes a stored pod's uid (a pod re-created under its name is a removal, then a creation).
   */
  readonly #pending = new Map<string, KubeObject>();
  /** Owner keys (`ownerKey`) of ModelServings with a gang policy, read at the start of each cycle. */
  #groupGangOwners: ReadonlySet<string> = new Set();
  #cyclePending = false;
  #cycleCount = 0;

  constructor(server: ApiServer, options: SchedulerOptions = {}) {
    this.#server = server;
    this.#client = server.client("scheduler");
    this.#cycleMs = options.cycleMs ?? 1_000;
    this.#schedulerNames = options.schedulerNames ?? ["default-scheduler"];
    this.#gangOf = options.gangOf ?? ((pod) => tandemGang(pod, this.#groupGangOwners.has(ownerKey(pod))));
    for (const pod of server.stored("Pod")) this.#podChanged(undefined, pod);
    server.onCommit("Pod", (before, after) => {
      this.#podChanged(before, after);
    });
  }

  /** Starts watching Pods and Nodes, and schedules a first cycle. */
  start(): void {
    this.#watch("Pod");
    this.#watch("Node");
    this.#wake();
  }

  stop(): void {
    for (const stream of this.#streams.splice(0)) stream.stop();
  }

  /** Cycles run so far. */
  cycleCount(): number {
    return this.#cycleCount;
  }

  /** Runs one cycle now: places what fits, marks the rest Unschedulable. */
  cycle(): void {
    this.#cycleCount++;
    this.#groupGangOwners = groupGangOwners(this.#server.stored("ModelServing"));
    const nodes = this.#server.stored("Node");
    let free = freeCapacity(nodes, this.#heldGpus.byNode());
    for (const gang of this.#pendingGangs()) {
      const demands: Demand[] = gang.map((pod) => ({ pod: podKey(pod), gpus: podGpuRequest(pod) }));
      const placement = placeGang(demands, free, nodes.length);
      if (!placement.ok) {
        for (const pod of gang) this.#markUnschedulable(pod, placement.reason);
        continue;
      }
      for (const pod of gang) {
        const nodeName = placement.nodeByPod.get(podKey(pod));
        if (nodeName !== undefined) this.#bind(pod, nodeName);
      }
      // Later gangs see this one's GPUs as taken: bindings commit at once, and the ledger follows
      // every commit.
      free = freeCapacity(nodes, this.#heldGpus.byNode());
    }
  }

  #watch(kind: "Pod" | "Node"): void {
    const stream = this.#server.watch(
      kind,
      { lagMs: 0 },
      {
        onEvent: () => {
          this.#wake();
        },
        onClose: () => {
          this.#streams.splice(this.#streams.indexOf(stream), 1);
          // Reopen and look again: changes made while the stream was down produced no event.
          this.#watch(kind);
          this.#wake();
        },
      },
    );
    this.#streams.push(stream);
  }

  #wake(): void {
    if (this.#cyclePending) return;
    this.#cyclePending = true;
    this.#server.clock.setTimer(this.#cycleMs, () => {
      this.#cyclePending = false;
      this.cycle();
    });
  }

  /** A stored pod changed (`ApiServer.onCommit`): keeps the GPU ledger and the pending pods. */
  #podChanged(before: KubeObject | undefined, after: KubeObject | undefined): void {
    this.#heldGpus.change(before, after);
    const uid = (after ?? before)?.metadata.uid ?? "";
    if (after !== undefined && this.#isPending(after)) this.#pending.set(uid, after);
    else this.#pending.delete(uid);
  }

  /**
   * Pending pods grouped into gangs, oldest gang first (by its oldest member, then key); members
   * in the server's stored order (namespace, then name).
   */
  #pendingGangs(): KubeObject[][] {
    const gangs = new Map<string, KubeObject[]>();
    for (const pod of [...this.#pending.values()].sort(compareStored)) {
      const gangKey = this.#gangOf(pod) ?? `pod:${podKey(pod)}`;
      const gang = gangs.get(gangKey);
      if (gang === undefined) gangs.set(gangKey, [pod]);
      else gang.push(pod);
    }
    // Each gang's oldest creation time, found once, not once per comparison.
    return [...gangs.entries()]
      .map(([key, gang]) => ({
        key,
        gang,
        oldest: gang.map((pod) => pod.metadata.creationTimestamp ?? "").sort()[0] ?? "",
      }))
      .sort((a, b) => compareStrings(a.oldest, b.oldest) || compareStrings(a.key, b.key))
      .map(({ gang }) => gang);
  }

  #isPending(pod: KubeObject): boolean {
    return pod.spec?.["nodeName"] === undefined && pod.metadata.deletionTimestamp === undefined && this.#isMine(pod);
  }

  /** True when one of this scheduler's names is the pod's `spec.schedulerName`. */
  #isMine(pod: KubeObject): boolean {
    const schedulerName = pod.spec?.["schedulerName"] ?? "default-scheduler";
    return typeof schedulerName === "string" && this.#schedulerNames.includes(schedulerName);
  }

  /** Binds through the binding subresource (nodeName and PodScheduled=True at once); a failure wakes the next cycle. */
  #bind(pod: KubeObject, nodeName: string): void {
    this.#client.bind(refOf(pod), nodeName, pod.metadata.uid).catch(() => {
      this.#wake();
    });
  }

  #markUnschedulable(pod: KubeObject, message: string): void {
    const current = conditionOf(pod, "PodScheduled");
    if (current?.["reason"] === "Unschedulable" && current["message"] === message) return;
    // The transition time moves only when the status does (mergeConditions keeps it otherwise).
    const condition = { type: "PodScheduled", status: "False", reason: "Unschedulable", message } as const;
    const conditions = mergeConditions(conditionsOf(pod), [condition], this.#server.clock.nowRfc3339());
    const precondition = { uid: pod.metadata.uid ?? "", resourceVersion: pod.metadata.resourceVersion ?? "" };
    const patch = { metadata: precondition, status: { conditions } };
    this.#client.patchStatus(refOf(pod), patch).catch(() => {
      this.#wake();
    });
  }
}

/**
 * `namespace/name@uid` of the ModelServing owning `pod`: named by its label, and the uid of its
 * controller reference, so a ModelServing re-created under the same name is not mistaken for it
 * (`namespace/name@` for a pod without one: matched by name only).
 */
function ownerKey(pod: KubeObject): string {
  const owner = (pod.metadata.ownerReferences ?? []).find(
    (reference) => reference.controller === true && reference.kind === "ModelServing",
  );
  return `${pod.metadata.namespace ?? ""}/${pod.metadata.labels?.[LABEL_MODEL_SERVING] ?? ""}@${owner?.uid ?? ""}`;
}

/** Owner keys (`ownerKey`) of the ModelServings that ask for group gangs. */
function groupGangOwners(modelServings: readonly KubeObject[]): Set<string> {
  return new Set(
    modelServings.filter(hasGangPolicy).flatMap((modelServing) => {
      const name = `${modelServing.metadata.namespace ?? ""}/${modelServing.metadata.name}`;
      return [`${name}@${modelServing.metadata.uid ?? ""}`, `${name}@`];
    }),
  );
}

function podKey(pod: KubeObject): string {
  return `${pod.metadata.namespace ?? ""}/${pod.metadata.name}`;
}

function conditionOf(pod: KubeObject, type: string): JsonObject | undefined {
  return conditionsOf(pod).find((condition) => condition["type"] === type);
}
