/**
 * The simulated kubelet: one process model for every node, driven by the virtual clock. For each
 * pod bound to a node it pulls images (a per-node cache that outlives pods), starts containers,
 * reports them ready, restarts crashing ones with Kubernetes' back-off, restarts a container whose
 * image changed in place, and stops containers of a deleted pod before finishing its deletion
 * (the API server runs with `podTermination: "external"`).
 *
 * Status is written through a client named "kubelet", as a merge patch with a resourceVersion
 * precondition of every status field the kubelet reports whose value is not already stored as is
 * (whole fields: a merge patch replaces arrays, so conditions owned by others — PodScheduled,
 * readiness-gate conditions — are re-sent as read). Ready is recomputed whenever the pod changes,
 * so a readiness-gate condition set by the controller takes effect at once.
 *
 * The kubelet reads the server directly and watches pods without lag, like the scheduler: it is
 * the source of truth about containers, so there is nothing for it to be stale about.
 */
import { LABEL_ROLE } from "../api/wellknown.ts";
import { isApiError } from "../engine/ports.ts";
import type { JsonObject, JsonValue, KubeObject, ObjectRef, Timer } from "../engine/ports.ts";
import type { ApiServer } from "./apiserver.ts";
import type { SimClient } from "./client.ts";
import type { VirtualClock } from "./clock.ts";
import { isJsonObject, mergePatchIsNoop, sameJsonText } from "./json.ts";
import { isDeleting, refOf } from "./objects.ts";
import {
  conditionsOf,
  containerStatus,
  imageIdOf,
  kubeletConditions,
  mergeConditions,
  newContainer,
  podPhase,
} from "./pod-status.ts";
import type { ContainerExit, ContainerRuntime } from "./pod-status.ts";
import type { Prng } from "./prng.ts";
import { followStored } from "./follow.ts";
import type { Follower } from "./follow.ts";
import { compareStrings } from "../core/maps.ts";

/** Per-image behaviour (DESIGN §6 `cluster.images`); absent fields take the kubelet's defaults. */
export interface ImageBehaviour {
  /** The container exits `crashAfterSeconds` after each start and never becomes ready. */
  crash?: boolean;
  /**
   * Crashes like `crash`, but only when the image was changed in place: the new process meets
   * what the old one left in the pod (a cache of another format in an emptyDir, say), while a
   * fresh pod runs it (seed §5: why an in-place update may need a rebuild by replacement).
   */
  crashInPlace?: boolean;
  pullSeconds?: number;
  startSeconds?: number;
  crashAfterSeconds?: number;
}

export interface KubeletOptions {
  /** Pulling an image not cached on the node. Default 20. */
  pullSeconds?: number;
  /** From a container's start to its being ready (a model loading). Default 60. */
  startSeconds?: number;
  /** From a deletion to the containers having stopped, bounded by the grace period. Default 5. */
  terminationSeconds?: number;
  /** From a crash image's start to its exit. Default 5. */
  crashAfterSeconds?: number;
  images?: Readonly<Record<string, ImageBehaviour>>;
  /** Pull and start times get up to this percentage added, drawn from the kubelet's stream. Default 10. */
  jitterPercent?: number;
  /** Delay before retrying a status write or deletion that failed. Default 1000. */
  retryDelayMs?: number;
}

/** Kubernetes' container restart back-off: 10 s, doubling, at most 300 s. */
const BACKOFF_INITIAL_SECONDS = 10;
const BACKOFF_MAX_SECONDS = 300;
/** Conflicts retried at once before waiting `retryDelayMs`: conflicts come from concurrent writers. */
const MAX_IMMEDIATE_RETRIES = 5;
/** Exit code and reason a container gets when its outcome is unknown (never ran, node lost). */
const UNKNOWN_EXIT = { exitCode: 137, reason: "ContainerStatusUnknown" } as const;

interface Termination {
  gracePeriodSeconds: number;
  /** When the grace period ends; a second delete may bring it forward. */
  graceEndMs: number;
  timer: Timer | undefined;
  /** Containers have stopped; what is left is the final status and the deletion. */
  done: boolean;
}

interface PodRuntime {
  readonly uid: string;
  readonly ref: ObjectRef<"Pod">;
  readonly node: string;
  readonly containers: ContainerRuntime[];
  readonly restartPolicy: string;
  /** The pod's `tandem.dev/role` label ("" without one), for restart metrics. */
  readonly role: string;
  readonly podIP: string;
  /** `status.podIPs` as reported: made once, never modified (patches hand it to the server, which copies it). */
  readonly podIPs: JsonValue;
  readonly hostIP: string;
  readonly startTime: string;
  termination: Termination | undefined;
  syncTimer: Timer | undefined;
  conflicts: number;
  /** Bumped whenever a container changes: besides the pod, what the reported status comes from. */
  statusVersion: number;
  /** The stored pod the last status write produced, and `statusVersion` when it was computed. */
  reported: { readonly pod: KubeObject; readonly statusVersion: number } | undefined;
  /**
   * The spec object the containers were last brought in line with (`#applySpec`): each runs its
   * image and has its next step set. Undefined again once that no longer holds (node lost).
   */
  appliedSpec: JsonObject | undefined;
  /** The status parts that come from the containers alone, as of `containerReport.statusVersion`. */
  containerReport: ContainerReport | undefined;
}

/**
 * What the reported status takes from the containers alone (and the pod's name, fixed for a
 * runtime): valid while `statusVersion` is the runtime's, since every container change bumps it.
 */
interface ContainerReport {
  readonly statusVersion: number;
  readonly phase: string;
  /**
   * Made once, never modified (patches hand it to the server, which copies it); once a write has
   * stored it, the stored (frozen) list itself, so later syncs find it unchanged by identity
   * instead of comparing it element by element.
   */
  containerStatuses: JsonValue;
}

interface Timing {
  readonly pullSeconds: number;
  readonly startSeconds: number;
  readonly terminationSeconds: number;
  readonly crashAfterSeconds: number;
  readonly jitterPercent: number;
  readonly retryDelayMs: number;
}

export class SimKubelet {
  readonly #server: ApiServer;
  readonly #client: SimClient;
  readonly #clock: VirtualClock;
  readonly #rng: Prng;
  readonly #timing: Timing;
  readonly #images: Readonly<Record<string, ImageBehaviour>>;
  /** Pods this kubelet runs, by uid. */
  readonly #pods = new Map<string, PodRuntime>();
  /** Per node: image → the instant its pull completes (or completed). */
  readonly #imageCache = new Map<string, Map<string, number>>();
  readonly #downNodes = new Set<string>();
  readonly #hostIPs = new Map<string, string>();
  /** Container restarts by role, deleted pods' included (DESIGN §6 `metrics.containerRestarts`). */
  readonly #restartsByRole = new Map<string, number>();
  #follower: Follower | undefined;
  #containerSeq = 0;
  #podIPSeq = 0;

  /** `rng` is the kubelet's own stream (jitter of pull and start times). */
  constructor(server: ApiServer, rng: Prng, options: KubeletOptions = {}) {
    this.#server = server;
    this.#clock = server.clock;
    this.#client = server.client("kubelet");
    this.#rng = rng;
    this.#timing = checkedTiming(options);
    this.#images = options.images ?? {};
    for (const [image, behaviour] of Object.entries(this.#images)) checkedBehaviour(image, behaviour);
  }

  /** Watches pods and takes over every pod already bound to a node. */
  start(): void {
    this.#follower = followStored(this.#server, "Pod", {
      seen: (pod) => {
        this.#observe(pod);
      },
      gone: (uid) => {
        this.#forget(uid);
      },
      knownUids: () => this.#pods.keys(),
    });
  }

  /** Stops watching and forgets every pod; nothing more is written. */
  stop(): void {
    this.#follower?.stop();
    this.#follower = undefined;
    for (const uid of [...this.#pods.keys()]) this.#forget(uid);
  }

  /**
   * The node's kubelet dies with its containers: nothing is written for its pods any more, their
   * containers are lost, and pulls in progress are lost. Finished pulls stay cached (the disk
   * survives). Idempotent.
   */
  stopNode(node: string): void {
    if (this.#downNodes.has(node)) return;
    this.#downNodes.add(node);
    for (const runtime of this.#podsOn(node)) this.#loseContainers(runtime);
    const cache = this.#imageCache.get(node);
    for (const [image, availableAtMs] of cache ?? []) if (availableAtMs > this.#clock.nowMs()) cache?.delete(image);
  }

  /**
   * The node's kubelet is back: containers of its pods start again (restartCount + 1, new
   * containerIDs; images still cached are not pulled again), pods deleted meanwhile finish their
   * deletion, and pods bound to it meanwhile are started. Idempotent.
   */
  startNode(node: string): void {
    if (!this.#downNodes.delete(node)) return;
    this.#follower?.resync();
  }

  isNodeDown(node: string): boolean {
    return this.#downNodes.has(node);
  }

  /** Images whose pull has completed on `node`, sorted. */
  cachedImages(node: string): string[] {
    const nowMs = this.#clock.nowMs();
    return [...(this.#imageCache.get(node) ?? [])]
      .filter(([, availableAtMs]) => availableAtMs <= nowMs)
      .map(([image]) => image)
      .sort();
  }

  /** Container restarts so far by `tandem.dev/role` ("" for pods without one), sorted by role. */
  restartsByRole(): Record<string, number> {
    return Object.fromEntries([...this.#restartsByRole].sort(([a], [b]) => compareStrings(a, b)));
  }

  /** Reacts to the current state of a pod: admission, deletion, image changes, gate changes. */
  #observe(pod: KubeObject): void {
    const node = pod.spec?.["nodeName"];
    const uid = pod.metadata.uid;
    if (typeof node !== "string" || uid === undefined || this.#downNodes.has(node)) return;
    let runtime = this.#pods.get(uid);
    if (runtime === undefined) {
      const phase = pod.status?.["phase"];
      // No node, no kubelet: a pod bound to a node that does not exist stays Pending.
      if (phase === "Succeeded" || phase === "Failed" || !this.#nodeExists(node)) return;
      runtime = this.#admit(pod, node, uid);
    }
    if (isOwnEcho(runtime, pod)) return;
    if (isDeleting(pod)) this.#terminate(runtime, pod);
    // The spec the containers follow already (the same object) has nothing new to apply.
    else if (runtime.termination === undefined && pod.spec !== runtime.appliedSpec) this.#applySpec(runtime, pod);
    // Also when nothing changed here: a readiness-gate condition may have, and Ready follows it.
    this.#markDirty(runtime);
  }

  #admit(pod: KubeObject, node: string, uid: string): PodRuntime {
    const restartPolicy = pod.spec?.["restartPolicy"];
    const podIP = this.#nextPodIP();
    const runtime: PodRuntime = {
      uid,
      ref: refOf(pod as KubeObject<"Pod">),
      node,
      containers: specContainers(pod).map(({ name, image }) => newContainer(name, image)),
      restartPolicy: typeof restartPolicy === "string" ? restartPolicy : "Always",
      role: pod.metadata.labels?.[LABEL_ROLE] ?? "",
      podIP,
      podIPs: [{ ip: podIP }],
      hostIP: this.#hostIP(node),
      startTime: this.#clock.nowRfc3339(),
      termination: undefined,
      syncTimer: undefined,
      conflicts: 0,
      statusVersion: 0,
      reported: undefined,
      appliedSpec: undefined,
      containerReport: undefined,
    };
    this.#pods.set(uid, runtime);
    return runtime;
  }

  /** Starts containers that wait for a start, and restarts those whose image changed in the spec. */
  #applySpec(runtime: PodRuntime, pod: KubeObject): void {
    runtime.appliedSpec = pod.spec;
    const images = new Map(specContainers(pod).map(({ name, image }) => [name, image]));
    for (const container of runtime.containers) {
      const image = images.get(container.name) ?? container.image;
      if (image !== container.image) this.#changeImage(runtime, container, image);
      else if (container.phase === "creating" && container.timer === undefined)
        this.#startContainer(runtime, container);
    }
  }

  /** An in-place image change: the container is stopped and started again with the new image. */
  #changeImage(runtime: PodRuntime, container: ContainerRuntime, image: string): void {
    container.timer?.cancel();
    if (container.phase === "starting" || container.phase === "running")
      container.lastExit = this.#exit(container, 0, "Completed");
    container.image = image;
    container.crashes = 0;
    container.changedInPlace = true;
    this.#startContainer(runtime, container);
  }

  /** Waits for the image (pulling it unless cached or already being pulled), then runs it. */
  #startContainer(runtime: PodRuntime, container: ContainerRuntime): void {
    container.phase = "creating";
    container.timer = this.#clock.setTimer(this.#imageReadyInMs(runtime.node, container.image), () => {
      this.#runContainer(runtime, container);
    });
    this.#containersChanged(runtime);
  }

  #runContainer(runtime: PodRuntime, container: ContainerRuntime): void {
    // Every start after the first is a restart, whatever caused it (crash, image change, node loss).
    if (container.containerID !== undefined) {
      container.restartCount++;
      this.#restartsByRole.set(runtime.role, (this.#restartsByRole.get(runtime.role) ?? 0) + 1);
    }
    container.containerID = `sim://${runtime.node}/${(++this.#containerSeq).toString(16).padStart(8, "0")}`;
    container.imageID = imageIdOf(container.image);
    container.startedAtMs = this.#clock.nowMs();
    container.phase = "starting";
    const behaviour = this.#images[container.image] ?? {};
    if (behaviour.crash === true || (behaviour.crashInPlace === true && container.changedInPlace)) {
      const crashMs = secondsToMs(behaviour.crashAfterSeconds ?? this.#timing.crashAfterSeconds);
      container.timer = this.#clock.setTimer(crashMs, () => {
        this.#crash(runtime, container);
      });
    } else {
      container.timer = this.#clock.setTimer(
        this.#jitteredMs(behaviour.startSeconds ?? this.#timing.startSeconds),
        () => {
          container.timer = undefined;
          container.phase = "running";
          this.#containersChanged(runtime);
        },
      );
    }
    this.#containersChanged(runtime);
  }

  /** A crash: restart after 10 s, 20 s, 40 s ... at most 300 s (restartPolicy Never: stays exited). */
  #crash(runtime: PodRuntime, container: ContainerRuntime): void {
    container.lastExit = this.#exit(container, 1, "Error");
    container.crashes++;
    container.timer = undefined;
    if (runtime.restartPolicy === "Never") {
      container.phase = "exited";
    } else {
      // The exponent is capped so the power stays finite; the cap on seconds applies long before.
      container.backoffSeconds = Math.min(
        BACKOFF_MAX_SECONDS,
        BACKOFF_INITIAL_SECONDS * 2 ** Math.min(container.crashes - 1, 16),
      );
      container.phase = "backoff";
      container.timer = this.#clock.setTimer(container.backoffSeconds * 1000, () => {
        this.#startContainer(runtime, container);
      });
    }
    this.#containersChanged(runtime);
  }

  /**
   * A deletion was requested: containers stop `terminationSeconds` later (at once when none runs),
   * bounded by the grace period; a later, shorter grace period brings the stop forward.
   */
  #terminate(runtime: PodRuntime, pod: KubeObject): void {
    const gracePeriodSeconds = pod.metadata.deletionGracePeriodSeconds ?? 0;
    const nowMs = this.#clock.nowMs();
    const termination = runtime.termination;
    if (termination === undefined) {
      for (const container of runtime.containers) cancelTimer(container);
      const running = runtime.containers.some(
        (container) => container.phase === "starting" || container.phase === "running",
      );
      const stopMs = running ? Math.min(secondsToMs(this.#timing.terminationSeconds), gracePeriodSeconds * 1000) : 0;
      runtime.termination = {
        gracePeriodSeconds,
        graceEndMs: nowMs + gracePeriodSeconds * 1000,
        timer: undefined,
        done: false,
      };
      runtime.termination.timer = this.#clock.setTimer(stopMs, () => {
        this.#stopContainers(runtime);
      });
      return;
    }
    if (termination.done || gracePeriodSeconds >= termination.gracePeriodSeconds) return;
    termination.graceEndMs -= (termination.gracePeriodSeconds - gracePeriodSeconds) * 1000;
    termination.gracePeriodSeconds = gracePeriodSeconds;
    if (termination.timer !== undefined && termination.graceEndMs < termination.timer.dueMs) {
      termination.timer.cancel();
      termination.timer = this.#clock.setTimer(Math.max(0, termination.graceEndMs - nowMs), () => {
        this.#stopContainers(runtime);
      });
    }
  }

  /** Containers have stopped: the pod reaches a terminal phase, and the next sync deletes it. */
  #stopContainers(runtime: PodRuntime): void {
    if (runtime.termination === undefined) return;
    runtime.termination.done = true;
    runtime.termination.timer = undefined;
    for (const container of runtime.containers) {
      if (container.phase === "starting" || container.phase === "running")
        container.lastExit = this.#exit(container, 0, "Completed");
      else container.lastExit ??= this.#exit(container, UNKNOWN_EXIT.exitCode, UNKNOWN_EXIT.reason);
      container.phase = "exited";
    }
    this.#containersChanged(runtime);
  }

  /** The node died: every container is gone, pending steps are void; recovery starts them again. */
  #loseContainers(runtime: PodRuntime): void {
    runtime.statusVersion++;
    for (const container of runtime.containers) {
      cancelTimer(container);
      if (container.phase === "starting" || container.phase === "running")
        container.lastExit = this.#exit(container, 255, "Unknown");
      if (container.phase !== "exited") container.phase = "creating";
    }
    runtime.termination?.timer?.cancel();
    runtime.termination = undefined;
    // Containers wait to be started again: the next look at the pod applies its spec anew.
    runtime.appliedSpec = undefined;
    runtime.syncTimer?.cancel();
    runtime.syncTimer = undefined;
  }

  #forget(uid: string): void {
    const runtime = this.#pods.get(uid);
    if (runtime === undefined) return;
    for (const container of runtime.containers) cancelTimer(container);
    runtime.termination?.timer?.cancel();
    runtime.syncTimer?.cancel();
    this.#pods.delete(uid);
  }

  /** A container changed: the status to report may have too. */
  #containersChanged(runtime: PodRuntime): void {
    runtime.statusVersion++;
    this.#markDirty(runtime);
  }

  /** Schedules a status sync `delayMs` from now, unless one is due no later. */
  #markDirty(runtime: PodRuntime, delayMs = 0): void {
    const pending = runtime.syncTimer;
    if (pending !== undefined && pending.dueMs <= this.#clock.nowMs() + delayMs) return;
    pending?.cancel();
    runtime.syncTimer = this.#clock.setTimer(delayMs, () => {
      runtime.syncTimer = undefined;
      void this.#sync(runtime);
    });
  }

  /** Writes the status if it differs from the stored one; deletes the pod once its containers stopped. */
  async #sync(runtime: PodRuntime): Promise<void> {
    if (this.#pods.get(runtime.uid) !== runtime || this.#downNodes.has(runtime.node)) return;
    const pod = this.#fresh(runtime);
    if (pod === undefined) {
      this.#forget(runtime.uid);
      return;
    }
    try {
      const statusVersion = runtime.statusVersion;
      const patch = isReported(runtime, pod) ? undefined : this.#statusPatch(runtime, pod);
      if (patch !== undefined) {
        const stored = await this.#client.patchStatus(runtime.ref, patch);
        runtime.reported = { pod: stored, statusVersion };
        adoptStoredReport(runtime.containerReport, stored, statusVersion);
      }
      runtime.conflicts = 0;
      if (runtime.termination?.done === true)
        await this.#client.delete(runtime.ref, { uid: runtime.uid, gracePeriodSeconds: 0 });
    } catch (error) {
      this.#retry(runtime, error);
    }
  }

  /** The stored pod (frozen, not a copy), or undefined when it is gone (or re-created under the same name). */
  #fresh(runtime: PodRuntime): KubeObject | undefined {
    const pod = this.#server.peek(runtime.ref);
    return pod?.metadata.uid === runtime.uid ? pod : undefined;
  }

  #retry(runtime: PodRuntime, error: unknown): void {
    if (!isApiError(error)) throw error;
    if (error.reason === "NotFound") {
      this.#forget(runtime.uid);
    } else if (error.reason === "Conflict" && runtime.conflicts < MAX_IMMEDIATE_RETRIES) {
      runtime.conflicts++;
      this.#markDirty(runtime);
    } else {
      runtime.conflicts = 0;
      this.#markDirty(runtime, this.#timing.retryDelayMs);
    }
  }

  /**
   * The status patch (resourceVersion precondition), or undefined when merging the whole status
   * would change nothing. Fields stored as the same JSON text are left out: merging them would
   * store them again unchanged, so the stored result is the same as the whole status's.
   */
  #statusPatch(runtime: PodRuntime, pod: KubeObject): JsonObject | undefined {
    const report = this.#containerReport(runtime);
    const current: JsonObject = pod.status ?? {};
    const changed: JsonObject = {};
    // Field by field, in this order (the patch's); each is offered, whatever the others did.
    const changes = [
      offerField(changed, current, "phase", report.phase),
      offerField(
        changed,
        current,
        "conditions",
        mergeConditions(conditionsOf(pod), kubeletConditions(pod, runtime.containers), this.#clock.nowRfc3339()),
      ),
      offerField(changed, current, "containerStatuses", report.containerStatuses),
      offerField(changed, current, "hostIP", runtime.hostIP),
      offerField(changed, current, "podIP", runtime.podIP),
      offerField(changed, current, "podIPs", runtime.podIPs),
      offerField(changed, current, "startTime", runtime.startTime),
    ].includes(true);
    if (!changes) return undefined;
    return { metadata: { uid: runtime.uid, resourceVersion: pod.metadata.resourceVersion ?? "" }, status: changed };
  }

  /** The runtime's container report, made anew only when a container changed since the last one. */
  #containerReport(runtime: PodRuntime): ContainerReport {
    const cached = runtime.containerReport;
    if (cached?.statusVersion === runtime.statusVersion) return cached;
    const rfc3339 = (atMs: number): string => this.#clock.rfc3339(atMs);
    const report: ContainerReport = {
      statusVersion: runtime.statusVersion,
      phase: podPhase(runtime.containers),
      containerStatuses: runtime.containers.map((container) => containerStatus(container, runtime.ref.name, rfc3339)),
    };
    runtime.containerReport = report;
    return report;
  }

  /** Milliseconds until `image` is on `node`, starting its pull when it is neither there nor coming. */
  #imageReadyInMs(node: string, image: string): number {
    let cache = this.#imageCache.get(node);
    if (cache === undefined) {
      cache = new Map();
      this.#imageCache.set(node, cache);
    }
    const nowMs = this.#clock.nowMs();
    const availableAtMs = cache.get(image);
    if (availableAtMs !== undefined) return Math.max(0, availableAtMs - nowMs);
    const pullMs = this.#jitteredMs(this.#images[image]?.pullSeconds ?? this.#timing.pullSeconds);
    cache.set(image, nowMs + pullMs);
    return pullMs;
  }

  /** `seconds` plus up to `jitterPercent` of it; always one draw, so a zero jitter shifts nothing. */
  #jitteredMs(seconds: number): number {
    const baseMs = secondsToMs(seconds);
    return baseMs + this.#rng.int(0, Math.floor((baseMs * this.#timing.jitterPercent) / 100) + 1);
  }

  #exit(container: ContainerRuntime, exitCode: number, reason: string): ContainerExit {
    return {
      exitCode,
      reason,
      containerID: container.containerID,
      startedAtMs: container.startedAtMs,
      finishedAtMs: this.#clock.nowMs(),
    };
  }

  #nodeExists(node: string): boolean {
    return this.#server.peek({ kind: "Node", name: node }) !== undefined;
  }

  #podsOn(node: string): PodRuntime[] {
    return [...this.#pods.values()].filter((runtime) => runtime.node === node);
  }

  /** 10.x.y.z from a counter: unique labels for pods, never used as network addresses. */
  #nextPodIP(): string {
    const n = ++this.#podIPSeq % 0x100_0000;
    return `10.${(n >> 16) & 0xff}.${(n >> 8) & 0xff}.${n & 0xff}`;
  }

  #hostIP(node: string): string {
    let ip = this.#hostIPs.get(node);
    if (ip === undefined) {
      const n = (this.#hostIPs.size + 1) % 0x1_0000;
      ip = `192.168.${(n >> 8) & 0xff}.${n & 0xff}`;
      this.#hostIPs.set(node, ip);
    }
    return ip;
  }
}

/**
 * Puts status `field` into `changed` unless the `current` status stores `value` as is; returns
 * whether merging it would change the stored status (as `mergePatchIsNoop` decides it for the
 * whole status). Fields stored as the same JSON text are left out: merging them would store them
 * again unchanged. Only a non-object value replaces the stored one whole (an object would be
 * merged into it), so only those are left out.
 */
function offerField(changed: JsonObject, current: JsonObject, field: string, value: JsonValue): boolean {
  const stored = Object.hasOwn(current, field) ? current[field] : undefined;
  if (!isJsonObject(value) && sameJsonText(stored, value)) return false;
  changed[field] = value;
  return !mergePatchIsNoop(stored, value, 1);
}

/**
 * After a status write computed from `report` (as of `statusVersion`) stored `stored`: the
 * stored containerStatuses are the same JSON text as the report's (merged from it whole, or left
 * out of the patch because they were stored as is), so the report takes the stored list itself.
 */
function adoptStoredReport(report: ContainerReport | undefined, stored: KubeObject, statusVersion: number): void {
  const containerStatuses = stored.status?.["containerStatuses"];
  if (report?.statusVersion === statusVersion && containerStatuses !== undefined)
    report.containerStatuses = containerStatuses;
}

/**
 * True when `pod` is the very object the last status write stored and no container changed since:
 * its status is then the one the kubelet would report, and merging that again changes nothing
 * (the reported status depends on the pod only through conditions it re-sends as they are, and
 * on lastTransitionTimes it keeps while statuses hold), so `#statusPatch` would find no patch.
 */
function isReported(runtime: PodRuntime, pod: KubeObject): boolean {
  return runtime.reported?.pod === pod && runtime.reported.statusVersion === runtime.statusVersion;
}

/**
 * The pod is what this kubelet's last status write stored and nothing has changed since: no
 * container changed, the spec is the one its containers follow (the same object: copy on write
 * keeps it through status writes), and it is not being deleted. Looking at it again would change
 * nothing and write nothing. A spec change folded into that write unseen (its event lost with a
 * dropped watch) is a new spec object, so it is still acted on.
 */
function isOwnEcho(runtime: PodRuntime, pod: KubeObject): boolean {
  return isReported(runtime, pod) && pod.spec === runtime.appliedSpec && !isDeleting(pod);
}

/** The pod's containers as (name, image), in spec order. */
function specContainers(pod: KubeObject): { name: string; image: string }[] {
  const containers = pod.spec?.["containers"];
  if (!Array.isArray(containers)) return [];
  return containers.filter(isJsonObject).map((container, index) => ({
    name: typeof container["name"] === "string" ? container["name"] : `container-${index}`,
    image: typeof container["image"] === "string" ? container["image"] : "",
  }));
}

function cancelTimer(container: ContainerRuntime): void {
  container.timer?.cancel();
  container.timer = undefined;
}

function secondsToMs(seconds: number): number {
  return Math.round(seconds * 1000);
}

function checkedTiming(options: KubeletOptions): Timing {
  const timing: Timing = {
    pullSeconds: options.pullSeconds ?? 20,
    startSeconds: options.startSeconds ?? 60,
    terminationSeconds: options.terminationSeconds ?? 5,
    crashAfterSeconds: options.crashAfterSeconds ?? 5,
    jitterPercent: options.jitterPercent ?? 10,
    retryDelayMs: options.retryDelayMs ?? 1_000,
  };
  for (const [name, value] of Object.entries(timing) as [string, number][]) checkedSeconds(name, value);
  if (!Number.isInteger(timing.jitterPercent) || timing.jitterPercent > 100)
    throw new Error(`jitterPercent must be an integer 0..100`);
  if (!Number.isSafeInteger(timing.retryDelayMs)) throw new Error(`retryDelayMs must be an integer`);
  return timing;
}

function checkedBehaviour(image: string, behaviour: ImageBehaviour): void {
  for (const field of ["pullSeconds", "startSeconds", "crashAfterSeconds"] as const) {
    const value = behaviour[field];
    if (value !== undefined) checkedSeconds(`images["${image}"].${field}`, value);
  }
}

function checkedSeconds(name: string, value: number): void {
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a non-negative number, got ${value}`);
}
