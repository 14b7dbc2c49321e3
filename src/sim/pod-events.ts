/**
 * The pod events of a scenario report (DESIGN §6 `events[]`), derived from watching pods on the
 * server without lag — what happened in the cluster, not what the controller believes happened.
 *
 * - `PodCreated` / `PodDeleted`: the pod appeared / disappeared on the server;
 * - `PodReady` / `PodNotReady`: its Ready condition became True / stopped being True. A pod
 *   deleted while Ready gets `PodNotReady` then `PodDeleted`, so counting Ready pods from the
 *   events alone gives the truth.
 *
 * A lost watch is reopened and the difference from what was known is recorded at that instant.
 */
import type { KubeObject } from "../engine/ports.ts";
import { LABEL_GROUP, LABEL_INSTANCE, LABEL_REVISION, LABEL_ROLE } from "../api/wellknown.ts";
import type { ApiServer } from "./apiserver.ts";
import { isPodReady } from "./pod-status.ts";
import { followStored } from "./follow.ts";
import type { Follower } from "./follow.ts";

export type PodEventType = "PodCreated" | "PodDeleted" | "PodReady" | "PodNotReady";

export interface PodEvent {
  /** Virtual seconds since the start of the simulation (millisecond precision). */
  t: number;
  type: PodEventType;
  pod: string;
  role?: string;
  /** The group index. */
  group?: number;
  /** `<role>-<j>`. */
  instance?: string;
  revision?: string;
}

export interface PodEventLogOptions {
  /** Events kept; later ones are counted in `droppedCount` only. Default 1 000 000. */
  maxEvents?: number;
}

/** Updated in place as the pod changes: one per pod, not one per event. */
interface Known {
  pod: KubeObject;
  ready: boolean;
}

export class PodEventLog {
  readonly #server: ApiServer;
  readonly #maxEvents: number;
  readonly #events: PodEvent[] = [];
  /** The last state seen of each pod, by uid. */
  readonly #known = new Map<string, Known>();
  #follower: Follower | undefined;
  #droppedCount = 0;

  constructor(server: ApiServer, options: PodEventLogOptions = {}) {
    this.#server = server;
    this.#maxEvents = options.maxEvents ?? 1_000_000;
  }

  /** Starts watching; pods that exist already are recorded as created now. */
  start(): void {
    this.#follower = followStored(this.#server, "Pod", {
      seen: (pod) => {
        this.#seen(pod);
      },
      gone: (uid) => {
        this.#gone(uid);
      },
      knownUids: () => this.#known.keys(),
    });
  }

  stop(): void {
    this.#follower?.stop();
    this.#follower = undefined;
  }

  /** Events so far, in the order they happened; from the `fromIndex`-th on (events are only ever appended). */
  events(fromIndex = 0): PodEvent[] {
    return this.#events.slice(fromIndex).map((event) => ({ ...event }));
  }

  /** How many events there are so far (the `fromIndex` of the next one). */
  count(): number {
    return this.#events.length;
  }

  droppedCount(): number {
    return this.#droppedCount;
  }

  #seen(pod: KubeObject): void {
    const uid = pod.metadata.uid ?? "";
    const known = this.#known.get(uid);
    const wasReady = known?.ready ?? false;
    const ready = known !== undefined && haveSameConditions(known.pod, pod) ? wasReady : isPodReady(pod);
    if (known === undefined) {
      this.#known.set(uid, { pod, ready });
      this.#record("PodCreated", pod);
    } else {
      known.pod = pod;
      known.ready = ready;
    }
    if (ready !== wasReady) this.#record(ready ? "PodReady" : "PodNotReady", pod);
  }

  #gone(uid: string): void {
    const before = this.#known.get(uid);
    if (before === undefined) return;
    this.#known.delete(uid);
    if (before.ready) this.#record("PodNotReady", before.pod);
    this.#record("PodDeleted", before.pod);
  }

  #record(type: PodEventType, pod: KubeObject): void {
    if (this.#events.length >= this.#maxEvents) {
      this.#droppedCount++;
      return;
    }
    const labels = pod.metadata.labels ?? {};
    const event: PodEvent = { t: this.#server.clock.nowMs() / 1000, type, pod: pod.metadata.name };
    const role = labels[LABEL_ROLE];
    const group = Number(labels[LABEL_GROUP]);
    const instance = labels[LABEL_INSTANCE];
    const revision = labels[LABEL_REVISION];
    if (role !== undefined) event.role = role;
    if (labels[LABEL_GROUP] !== undefined && Number.isSafeInteger(group)) event.group = group;
    if (instance !== undefined) event.instance = instance;
    if (revision !== undefined) event.revision = revision;
    this.#events.push(event);
  }
}

/** True when both pods hold the same frozen conditions list: readiness, read from it alone, is then the same. */
function haveSameConditions(a: KubeObject, b: KubeObject): boolean {
  const conditions = b.status?.["conditions"];
  return conditions === a.status?.["conditions"] && Object.isFrozen(conditions);
}
