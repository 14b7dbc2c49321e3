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
import { OrdinalTable, positionOf } from "../core/ordinals.ts";
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

export interface RetiredUnit extends Omit<UnitStart, "kind"> {
  /** The unit had started as a surge unit in this rollout. */
  readonly surge: boolean;
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
  /**
   * Units whose pods were deleted for good while this step was the latest: outdated units a surge
   * unit succeeded, or (`surge`) surge units removed at the end.
   */
  readonly retired: readonly RetiredUnit[];
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
  // The stored (frozen) objects, read without a copy: the recorder only looks.
  const pods = cluster.server
    .stored("Pod")
    .filter((pod) => pod.metadata.labels?.[LABEL_MODEL_SERVING] === ms.metadata.name) as unknown as Pod[];
  const stored = cluster.server.stored("ModelServing").find((object) => object.metadata.name === ms.metadata.name);
  // Labels carry ordinals; desired and surge units are told by position (docs/design/succession.md).
  const table = OrdinalTable.read((stored as unknown as ModelServing | undefined)?.status?.ordinals);
  const byUnit = podsByInstance(placedPods(ms, pods));
  const counts = availableCounts(ms, byUnit, new Map());
  const units = [...byUnit.values()].flatMap((unit) => {
    const id = unit[0]?.id;
    return id === undefined ? [] : [{ id, at: positionOf(table, id) }];
  });
  const groupOrdinals = new Set(units.map((unit) => unit.id.group));
  let groups = 0;
  for (const group of groupOrdinals) if (groupAvailable(ms, group, counts)) groups += 1;
  const desiredGroups = [...groupOrdinals].filter((group) => {
    const position = table.groups.position(group);
    return position >= 0 && position < ms.spec.replicas;
  });
  const roles: Record<string, number> = {};
  for (const role of ms.spec.template.roles)
    roles[role.name] = desiredGroups.reduce((sum, group) => sum + (counts.get(countKey(group, role.name)) ?? 0), 0);
  const desired = new Map(ms.spec.template.roles.map((role) => [role.name, role.replicas]));
  const surge = units.filter(({ at }) => at.group >= ms.spec.replicas || at.instance >= (desired.get(at.role) ?? 0));
  const surgeGroups = new Set(units.flatMap(({ at }) => (at.group >= ms.spec.replicas ? [at.group] : []))).size;
  return { groups, roles, surge: surge.length, surgeGroups };
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
  /** Its current (or last) life started as a surge unit. */
  surge: boolean;
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
): { starts: Found[]; retired: (RetiredUnit & { t: number })[] } {
  const units = new Map<string, UnitTrack>();
  const live = new LiveUnits(desired);
  const starts: Found[] = [];
  const retired: (RetiredUnit & { t: number })[] = [];
  // The last deletion of each unit that has no pod left: a retirement unless the unit is rebuilt.
  const deletions = new Map<string, RetiredUnit & { t: number }>();
  const startedAt = new Set<string>();
  events.forEach((event, index) => {
    const key = `${event.group ?? -1}/${event.instance ?? ""}`;
    const unit = units.get(key) ?? {
      live: 0,
      lived: false,
      surge: false,
      revisions: new Map(),
      disruptedAt: undefined,
    };
    units.set(key, unit);
    const found = step(event, unit, live);
    if (index < fromEvent) return;
    if (found !== undefined && !startedAt.has(`${key}@${found.t}`)) {
      startedAt.add(`${key}@${found.t}`);
      starts.push(found);
      // A surge unit on an ordinal whose unit went for good (pod names are reused only once free).
      const gone = deletions.get(key);
      if (gone !== undefined && found.start.kind === "surge") retired.push(gone);
      deletions.delete(key);
    }
    if (event.type === "PodDeleted" && unit.live === 0)
      deletions.set(key, {
        t: event.t,
        group: event.group ?? -1,
        instance: event.instance ?? "",
        role: event.role ?? "",
        surge: unit.surge,
      });
  });
  retired.push(...deletions.values());
  return { starts, retired };
}

/** Applies one event to its unit; the start it makes, if any. */
function step(event: PodEvent, unit: UnitTrack, live: LiveUnits): Found | undefined {
  const start = (kind: StartKind, begin: number): Found => ({
    t: event.t,
    begin,
    start: { group: event.group ?? -1, instance: event.instance ?? "", role: event.role ?? "", kind },
  });
  switch (event.type) {
    case "PodCreated": {
      const fresh = unit.live === 0;
      unit.live += 1;
      unit.revisions.set(event.pod, event.revision);
      if (!fresh) return undefined;
      const surge = live.beyondDesired(event);
      const kind = surge ? "surge" : unit.lived ? "recreate" : "new";
      live.started(event);
      const begin = unit.disruptedAt ?? event.t;
      unit.disruptedAt = undefined;
      unit.lived = true;
      unit.surge = surge;
      return start(kind, begin);
    }
    case "PodDeleted":
      unit.live = Math.max(0, unit.live - 1);
      unit.revisions.delete(event.pod);
      unit.disruptedAt ??= event.t;
      if (unit.live === 0) live.ended(event);
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

/**
 * The units with live pods, per group and per role in each group, to tell a surge start by count:
 * ordinals say nothing once a surge unit has succeeded an outdated one (docs/design/succession.md),
 * but a unit that starts while its group (or its role in its group) already has the desired
 * count live is beyond the desired ones. A group is a surge group from its first start on.
 */
class LiveUnits {
  readonly #desired: ModelServing;
  /** Group ordinal → whether it started as a surge group, while it has live units. */
  readonly #groups = new Map<number, { surge: boolean; units: number }>();
  /** `<group>/<role>` → live units. */
  readonly #roles = new Map<string, number>();

  constructor(desired: ModelServing) {
    this.#desired = desired;
  }

  beyondDesired(event: PodEvent): boolean {
    const group = this.#groups.get(event.group ?? -1);
    if (group === undefined) return this.#groups.size >= this.#desired.spec.replicas;
    const wanted = this.#desired.spec.template.roles.find((role) => role.name === event.role)?.replicas ?? 0;
    return group.surge || (this.#roles.get(`${event.group ?? -1}/${event.role ?? ""}`) ?? 0) >= wanted;
  }

  started(event: PodEvent): void {
    const key = event.group ?? -1;
    const group = this.#groups.get(key) ?? { surge: this.#groups.size >= this.#desired.spec.replicas, units: 0 };
    group.units += 1;
    this.#groups.set(key, group);
    const role = `${key}/${event.role ?? ""}`;
    this.#roles.set(role, (this.#roles.get(role) ?? 0) + 1);
  }

  ended(event: PodEvent): void {
    const key = event.group ?? -1;
    const role = `${key}/${event.role ?? ""}`;
    this.#roles.set(role, Math.max(0, (this.#roles.get(role) ?? 0) - 1));
    const group = this.#groups.get(key);
    if (group === undefined) return;
    group.units -= 1;
    if (group.units <= 0) this.#groups.delete(key);
  }
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

function unitOf({ group, instance, role, surge }: RetiredUnit): RetiredUnit {
  return { group, instance, role, surge };
}

function compareStarts(a: UnitStart, b: UnitStart): number {
  return a.group - b.group || compareStrings(a.role, b.role) || ordinalOf(a.instance) - ordinalOf(b.instance);
}

function roundMs(seconds: number): number {
  return Math.round(seconds * 1000) / 1000;
}
