/**
 * The simulated node lifecycle controller: what the control plane does about a node whose kubelet
 * stopped reporting. `monitorGraceMs` after the failure (Kubernetes' node-monitor-grace-period) it
 * sets the Node's Ready condition to Unknown — the scheduler then places nothing there — and marks
 * every pod on it Ready=False, so endpoints and the controller see them gone. `evictionMs` later
 * (the default toleration of `node.kubernetes.io/unreachable`) it deletes those pods with a grace
 * period of 0: nobody is left to run a graceful termination, and the controller has to recover the
 * pods elsewhere. Recovery sets Ready=True again and cancels what had not happened yet.
 *
 * Writes go through a client named "node-lifecycle". A failed pass is retried `retryDelayMs` later
 * while the node is still in the same state; every pass is idempotent.
 */
import { isApiError } from "../engine/ports.ts";
import type { JsonObject, KubeObject, Timer } from "../engine/ports.ts";
import type { ApiServer } from "./apiserver.ts";
import type { SimClient } from "./client.ts";
import { isDeleting, refOf } from "./objects.ts";
import { conditionsOf, mergeConditions } from "./pod-status.ts";
import { compareStrings } from "../core/maps.ts";

export interface NodeLifecycleOptions {
  /** From a node's failure to its being marked NotReady with its pods. Default 40 000. */
  monitorGraceMs?: number;
  /** From NotReady to the deletion of its pods. Default 300 000. */
  evictionMs?: number;
  /** Delay before retrying a pass whose writes failed. Default 1000. */
  retryDelayMs?: number;
}

/** One failure of one node; a recovery ends it, a new failure starts a new one. */
interface Outage {
  readonly node: string;
  stage: "undetected" | "notReady" | "evicted";
  timer: Timer | undefined;
}

export class SimNodeLifecycle {
  readonly #server: ApiServer;
  readonly #client: SimClient;
  readonly #monitorGraceMs: number;
  readonly #evictionMs: number;
  readonly #retryDelayMs: number;
  readonly #outages = new Map<string, Outage>();

  constructor(server: ApiServer, options: NodeLifecycleOptions = {}) {
    this.#server = server;
    this.#client = server.client("node-lifecycle");
    this.#monitorGraceMs = options.monitorGraceMs ?? 40_000;
    this.#evictionMs = options.evictionMs ?? 300_000;
    this.#retryDelayMs = options.retryDelayMs ?? 1_000;
  }

  /** The node's kubelet stopped reporting now. Idempotent while the node is down. */
  nodeFailed(node: string): void {
    if (this.#outages.has(node)) return;
    const outage: Outage = { node, stage: "undetected", timer: undefined };
    this.#outages.set(node, outage);
    outage.timer = this.#server.clock.setTimer(this.#monitorGraceMs, () => {
      outage.stage = "notReady";
      this.#run(outage, () => this.#markNotReady(node));
      outage.timer = this.#server.clock.setTimer(this.#evictionMs, () => {
        outage.stage = "evicted";
        outage.timer = undefined;
        this.#run(outage, () => this.#evictPods(node));
      });
    });
  }

  /** The node's kubelet reports again: Ready=True (once detected), pending steps cancelled. */
  nodeRecovered(node: string): void {
    const outage = this.#outages.get(node);
    if (outage === undefined) return;
    outage.timer?.cancel();
    this.#outages.delete(node);
    if (outage.stage !== "undetected") this.#setReadyUntilDone(node);
  }

  /** Nodes currently failed, with how far the lifecycle got, sorted by name. */
  outages(): { node: string; stage: Outage["stage"] }[] {
    return [...this.#outages.values()]
      .map(({ node, stage }) => ({ node, stage }))
      .sort((a, b) => compareStrings(a.node, b.node));
  }

  stop(): void {
    for (const outage of this.#outages.values()) outage.timer?.cancel();
    this.#outages.clear();
  }

  /** Runs `pass`; on an API error runs it again later, as long as this outage is still current. */
  #run(outage: Outage, pass: () => Promise<void>): void {
    pass().catch((error: unknown) => {
      if (!isApiError(error)) throw error;
      this.#server.clock.setTimer(this.#retryDelayMs, () => {
        if (this.#outages.get(outage.node) === outage) this.#run(outage, pass);
      });
    });
  }

  async #markNotReady(node: string): Promise<void> {
    await this.#setNodeReady(node, {
      status: "Unknown",
      reason: "NodeStatusUnknown",
      message: "Kubelet stopped posting node status.",
    });
    for (const pod of this.#podsOn(node)) {
      const ready = conditionsOf(pod).find((condition) => condition["type"] === "Ready");
      if (ready?.["status"] === "False") continue;
      const desired = {
        type: "Ready",
        status: "False",
        reason: "NodeNotReady",
        message: `node ${node} is not ready`,
      } as const;
      const conditions = mergeConditions(conditionsOf(pod), [desired], this.#server.clock.nowRfc3339());
      const precondition = { uid: pod.metadata.uid ?? "", resourceVersion: pod.metadata.resourceVersion ?? "" };
      await this.#client.patchStatus(refOf(pod), { metadata: precondition, status: { conditions } });
    }
  }

  async #evictPods(node: string): Promise<void> {
    for (const pod of this.#podsOn(node)) {
      try {
        await this.#client.delete(refOf(pod), { uid: pod.metadata.uid ?? "", gracePeriodSeconds: 0 });
      } catch (error) {
        // Gone already, or re-created under the same name (not on this node): nothing to evict.
        if (!isApiError(error, "NotFound", "Conflict")) throw error;
      }
    }
  }

  /** Ready=True, retried until written or the node fails again. */
  #setReadyUntilDone(node: string): void {
    this.#setNodeReady(node, {
      status: "True",
      reason: "KubeletReady",
      message: "kubelet is posting ready status",
    }).catch((error: unknown) => {
      if (!isApiError(error)) throw error;
      this.#server.clock.setTimer(this.#retryDelayMs, () => {
        if (!this.#outages.has(node)) this.#setReadyUntilDone(node);
      });
    });
  }

  async #setNodeReady(
    node: string,
    ready: { status: "True" | "Unknown"; reason: string; message: string },
  ): Promise<void> {
    const current = this.#server.get({ kind: "Node", name: node });
    const others = conditionsOf(current).filter((condition) => condition["type"] !== "Ready");
    const old = conditionsOf(current).find((condition) => condition["type"] === "Ready");
    const since = old?.["status"] === ready.status ? old["lastTransitionTime"] : undefined;
    const condition: JsonObject = {
      type: "Ready",
      ...ready,
      lastTransitionTime: typeof since === "string" ? since : this.#server.clock.nowRfc3339(),
    };
    const precondition = { resourceVersion: current.metadata.resourceVersion ?? "" };
    await this.#client.patchStatus(
      { kind: "Node", name: node },
      { metadata: precondition, status: { conditions: [...others, condition] } },
    );
  }

  /** Pods bound to `node` that have not finished, in name order. */
  #podsOn(node: string): KubeObject[] {
    return this.#server.list("Pod").items.filter((pod) => {
      const phase = pod.status?.["phase"];
      return (
        pod.spec?.["nodeName"] === node &&
        phase !== "Succeeded" &&
        phase !== "Failed" &&
        !(isDeleting(pod) && pod.metadata.deletionGracePeriodSeconds === 0)
      );
    });
  }
}
