/**
 * The step sequence of a rollout as the simulator played it: which units started at each instant
 * (created by surge or to replace an old unit, or moved in place), which went for good, and the
 * lowest serving capacity meanwhile. `tandem plan` prints it, so the table is what the real
 * controller did on a simulated cluster, never a second planner's guess.
 *
 * A *start* is the first pod event of a unit's new life: its first pod created (a unit is a role
 * instance `(group, role-j)`), or, in place, the first of its pods taken out of service that comes
 * back at another revision without being deleted. A *step* is one instant with starts. Nothing
 * here reads a clock: times are the events' virtual seconds.
 */
import type { Pod } from "../api/kube.ts";
import { parseModelServing } from "../api/parse.ts";
import type { ModelServing } from "../api/schema.ts";
import { LABEL_MODEL_SERVING } from "../api/wellknown.ts";
import { availableCounts, countKey, groupAvailable, placedPods, podsByInstance } from "../core/invariants.ts";
import { compareStrings } from "../core/maps.ts";
import type { SimCluster } from "./cluster.ts";
import type { PodEvent } from "./pod-events.ts";
import type { RunObserver } from "./runner.ts";

/**
 * `recreate`: a unit that had pods before is built again (its old pods deleted first); `surge`: a
 * unit that never had pods, beyond the desired ones; `new`: one that never had pods, within them
 * (a role the change adds); `in-place`: a unit's pods moved to the new revision without deletion.
 */
export type StartKind = "recreate" | "surge" | "new" | "in-place";

export interface UnitStart {
  readonly group: number;
  /** `<role>-<j>`, as the report's `instance`. */
  readonly instance: string;
  readonly role: string;
  readonly kind: StartKind;
}

/** Serving capacity at an instant: groups with every role at its desired count, and instances per role. */
export interface Capacity {
  readonly groups: number;
  readonly roles: Readonly<Record<string, number>>;
  /** Live role instances beyond the desired ones (surge instances, those of surge groups included). */
  readonly surge: number;
  /** Live groups beyond the desired ones (surge groups). */
  readonly surgeGroups: number;
}

export interface RolloutStep {
  /** Seconds from the change to the step's starts. */
  readonly atSeconds: number;
  readonly starts: readonly UnitStart[];
  /** Units whose pods were deleted for good while this step was the latest. */
  readonly retired: readonly Omit<UnitStart, "kind">[];
  /** The lowest capacity from the first disruption of this step's units to the next step's. */
  readonly floor: Capacity;
  /** The most surge role instances live over the same window. */
  readonly surge: number;
  /** The most surge groups live over the same window. */
  readonly surgeGroups: number;
}

interface Sample extends Capacity {
  readonly t: number;
}

/**
 * Watches a run (`runScenario`'s observer) from the step with index `changeStep` on: the pod event
 * index and time the change began at, and the serving capacity at the end of every instant after
 * it (kept only when it changed). Capacity counts instances as the budgets do (`availableCounts`:
 * every pod Ready, none draining; surge instances included).
 */
export class StepRecorder implements RunObserver {
  readonly #changeStep: number;
  readonly #name: string;
  #cluster: SimCluster | undefined;
  #ms: ModelServing | undefined;
  #changeAt: { seconds: number; event: number } | undefined;
  /** A pod was committed since the last sample (capacity is a function of the pods alone). */
  #podsChanged = true;
  readonly samples: Sample[] = [];

  constructor(changeStep: number, modelServing: string) {
    this.#changeStep = changeStep;
    this.#name = modelServing;
  }

  attach(cluster: SimCluster): void {
    this.#cluster = cluster;
    cluster.server.onCommit("Pod", () => {
      this.#podsChanged = true;
    });
  }

  stepStarted(index: number): void {
    if (index !== this.#changeStep || this.#cluster === undefined) return;
    this.#changeAt = { seconds: this.#cluster.clock.nowMs() / 1000, event: this.#cluster.podEvents.count() };
  }

  instantEnded(cluster: SimCluster): void {
    if (this.#changeAt === undefined) return;
    this.#ms ??= this.#stored(cluster);
    if (this.#ms === undefined || !this.#podsChanged) return;
    this.#podsChanged = false;
    const sample = { t: cluster.clock.nowMs() / 1000, ...capacityOf(this.#ms, cluster) };
    const last = this.samples.at(-1);
    if (last === undefined || !sameCapacity(last, sample)) this.samples.push(sample);
  }

  /** Seconds the change began at, and the index of its first pod event; undefined before it ran. */
  get changeAt(): { readonly seconds: number; readonly event: number } | undefined {
    return this.#changeAt;
  }

  #stored(cluster: SimCluster): ModelServing | undefined {
    const parsed = parseModelServing(
      cluster.server.peek({ kind: "ModelServing", namespace: "default", name: this.#name }),
    );
    return parsed.ok ? parsed.value : undefined;
  }
}

function capacityOf(ms: ModelServing, cluster: SimCluster): Capacity {
  // The stored (frozen) pods, read without a copy: the recorder only looks.
  const pods = cluster.server
    .stored("Pod")
    .filter((pod) => pod.metadata.labels?.[LABEL_MODEL_SERVING] === ms.metadata.name) as unknown as Pod[];
  const byUnit = podsByInstance(placedPods(ms, pods));
  const counts = availableCounts(ms, byUnit, new Map());
  let groups = 0;
  for (const group of new Set([...byUnit.values()].map((unit) => unit[0]?.id.group ?? 0)))
    if (groupAvailable(ms, group, counts)) groups += 1;
  const roles: Record<string, number> = {};
  for (const role of ms.spec.template.roles) {
    let serving = 0;
    for (let group = 0; group < ms.spec.replicas; group++) serving += counts.get(countKey(group, role.name)) ?? 0;
    roles[role.name] = serving;
  }
  const desired = new Map(ms.spec.template.roles.map((role) => [role.name, role.replicas]));
  const surge = [...byUnit.values()].filter((unit) => {
    const id = unit[0]?.id;
    return id !== undefined && (id.group >= ms.spec.replicas || id.instance >= (desired.get(id.role) ?? 0));
  }).length;
  const surgeGroups = new Set(
    [...byUnit.values()].map((unit) => unit[0]?.id.group ?? 0).filter((group) => group >= ms.spec.replicas),
  ).size;
  return { groups, roles, surge, surgeGroups };
}

function sameCapacity(a: Capacity, b: Capacity): boolean {
  return (
    a.groups === b.groups &&
    a.surge === b.surge &&
    a.surgeGroups === b.surgeGroups &&
    JSON.stringify(a.roles) === JSON.stringify(b.roles)
  );
}

/** What a pass over the events knows of a unit (`<group>/<instance>`). */
interface UnitTrack {
  live: number;
  /** The unit has had pods before (its key was built at some point of the run). */
  lived: boolean;
  /** Revision of each live pod, by name. */
  readonly revisions: Map<string, string | undefined>;
  /** When the unit's current life was first disrupted (a pod not Ready or deleted), if it was. */
  disruptedAt: number | undefined;
}

interface Found {
  readonly t: number;
  readonly begin: number;
  readonly start: UnitStart;
}

/**
 * The steps of the change that began at `changeAt` (its seconds and first event index), from
 * every pod event of the run (earlier events tell which pods existed and at what revision),
 * and the capacity samples of a `StepRecorder`. `desired` is the ModelServing after the change.
 */
export function rolloutSteps(
  events: readonly PodEvent[],
  changeAt: { readonly seconds: number; readonly event: number },
  samples: readonly Sample[],
  desired: ModelServing,
): RolloutStep[] {
  const { starts, retired } = findStarts(events, changeAt.event, desired);
  const times = [...new Set(starts.map((found) => found.t))].sort((a, b) => a - b);
  let previousBegin = -Infinity;
  const windows = times.map((t) => {
    const own = starts.filter((found) => found.t === t);
    const begin = Math.max(previousBegin, Math.min(...own.map((found) => found.begin)));
    previousBegin = begin;
    return { t, begin, own };
  });
  return windows.map(({ t, begin, own }, index) => {
    const end = windows[index + 1]?.begin ?? Infinity;
    const window = samplesIn(samples, begin, end);
    return {
      atSeconds: roundMs(t - changeAt.seconds),
      starts: own.map((found) => found.start).sort(compareStarts),
      // From the step's starts to the next step's; the first step also takes what went before it.
      retired: retired
        .filter((unit) => (index === 0 || unit.t >= t) && unit.t < (windows[index + 1]?.t ?? Infinity))
        .map(unitOf),
      floor: lowest(window),
      surge: Math.max(0, ...window.map((sample) => sample.surge)),
      surgeGroups: Math.max(0, ...window.map((sample) => sample.surgeGroups)),
    };
  });
}

function findStarts(
  events: readonly PodEvent[],
  fromEvent: number,
  desired: ModelServing,
): { starts: Found[]; retired: (Omit<UnitStart, "kind"> & { t: number })[] } {
  const units = new Map<string, UnitTrack>();
  const starts: Found[] = [];
  const deletions = new Map<string, { t: number; unit: Omit<UnitStart, "kind"> }>();
  const startedAt = new Set<string>();
  events.forEach((event, index) => {
    const key = `${event.group ?? -1}/${event.instance ?? ""}`;
    const unit = units.get(key) ?? { live: 0, lived: false, revisions: new Map(), disruptedAt: undefined };
    units.set(key, unit);
    const found = step(event, unit, desired);
    if (index < fromEvent) return;
    if (found !== undefined && !startedAt.has(`${key}@${found.t}`)) {
      startedAt.add(`${key}@${found.t}`);
      starts.push(found);
      deletions.delete(key);
    }
    if (event.type === "PodDeleted" && unit.live === 0)
      deletions.set(key, {
        t: event.t,
        unit: { group: event.group ?? -1, instance: event.instance ?? "", role: event.role ?? "" },
      });
  });
  const retired = [...deletions.values()].map(({ t, unit }) => ({ ...unit, t }));
  return { starts, retired };
}

/** Applies one event to its unit; the start it makes, if any. */
function step(event: PodEvent, unit: UnitTrack, desired: ModelServing): Found | undefined {
  const start = (kind: StartKind, begin: number): Found => ({
    t: event.t,
    begin,
    start: { group: event.group ?? -1, instance: event.instance ?? "", role: event.role ?? "", kind },
  });
  switch (event.type) {
    case "PodCreated": {
      const fresh = unit.live === 0;
      const kind = unit.lived ? "recreate" : isSurge(event, desired) ? "surge" : "new";
      const begin = unit.disruptedAt ?? event.t;
      unit.live += 1;
      unit.revisions.set(event.pod, event.revision);
      if (!fresh) return undefined;
      unit.disruptedAt = undefined;
      unit.lived = true;
      return start(kind, begin);
    }
    case "PodDeleted":
      unit.live = Math.max(0, unit.live - 1);
      unit.revisions.delete(event.pod);
      unit.disruptedAt ??= event.t;
      return undefined;
    case "PodNotReady":
      unit.disruptedAt ??= event.t;
      return undefined;
    case "PodReady": {
      const before = unit.revisions.get(event.pod);
      unit.revisions.set(event.pod, event.revision);
      const begin = unit.disruptedAt;
      // Back at the revision it had: a disruption that moved nothing (a drain cancelled).
      if (before === event.revision) unit.disruptedAt = undefined;
      if (before === event.revision || begin === undefined) return undefined;
      unit.disruptedAt = undefined;
      return { ...start("in-place", begin), t: begin };
    }
  }
}

/** A unit beyond the desired ones: its group or instance ordinal follows the desired ones. */
function isSurge(event: PodEvent, desired: ModelServing): boolean {
  const wanted = desired.spec.template.roles.find((candidate) => candidate.name === event.role)?.replicas ?? 0;
  return (event.group ?? -1) >= desired.spec.replicas || ordinalOf(event.instance ?? "") >= wanted;
}

/** `j` of `<role>-<j>`. */
export function ordinalOf(instance: string): number {
  return Number(instance.slice(instance.lastIndexOf("-") + 1));
}

/** The sample in effect at `begin` and every later one before `end`. */
function samplesIn(samples: readonly Sample[], begin: number, end: number): Sample[] {
  const atBegin = samples.filter((sample) => sample.t <= begin).at(-1);
  const later = samples.filter((sample) => sample.t > begin && sample.t < end);
  return atBegin === undefined ? later : [atBegin, ...later];
}

function lowest(samples: readonly Sample[]): Capacity {
  const roles: Record<string, number> = {};
  for (const sample of samples)
    for (const [role, count] of Object.entries(sample.roles)) roles[role] = Math.min(roles[role] ?? count, count);
  return {
    groups: Math.min(...samples.map((sample) => sample.groups)),
    roles,
    surge: Math.min(...samples.map((sample) => sample.surge)),
    surgeGroups: Math.min(...samples.map((sample) => sample.surgeGroups)),
  };
}

function unitOf({ group, instance, role }: Omit<UnitStart, "kind">): Omit<UnitStart, "kind"> {
  return { group, instance, role };
}

function compareStarts(a: UnitStart, b: UnitStart): number {
  return a.group - b.group || compareStrings(a.role, b.role) || ordinalOf(a.instance) - ordinalOf(b.instance);
}

function roundMs(seconds: number): number {
  return Math.round(seconds * 1000) / 1000;
}
