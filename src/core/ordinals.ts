/**
 * Positions and ordinals (docs/design/succession.md). The planner reasons about **positions**:
 * groups 0..replicas−1 with surge groups above, and per group each role's instances
 * 0..role.replicas−1 with surge instances above. Pod names and the `tandem.dev/group` /
 * `tandem.dev/instance` labels carry **ordinals**, which never change for a pod's life. The durable
 * map between them is `status.ordinals`, stored only where a position's ordinal differs from its
 * number, so a ModelServing that never succeeded a unit has none.
 *
 * A surge unit that is Ready at the update revision *succeeds* the outdated unit it replaces: it
 * takes the outdated unit's position (its pods keep their names), and the outdated unit is
 * *retired*: surplus, drained and deleted. A retired unit sits at position `retiredPosition(o)`,
 * below every real one, so every count of desired and surge units passes it by. The surge position
 * takes the retired unit's ordinal once its pods are gone (a name is never reused while a pod
 * holds it), so ordinals stay below `replicas + maxSurge`. Pure.
 */
import { resolveGroupBudget, resolveRoleBudget } from "../api/budgets.ts";
import type { OrdinalEntry } from "../api/schema.ts";
import type { Layout } from "./instances.ts";
import type { Model } from "./model.ts";
import { instanceId } from "./identity.ts";
import { compareStrings } from "./maps.ts";

/** The position of the retired unit of `ordinal`: negative, one per ordinal. */
export function retiredPosition(ordinal: number): number {
  return -1 - ordinal;
}

/** The ordinal of the retired unit at `position` (`retiredPosition` inverted), for messages. */
export function retiredOrdinal(position: number): number {
  return -1 - position;
}

/**
 * One scope of positions and ordinals: the groups of a ModelServing, or one role's instances in
 * one group position. Without an entry a position's ordinal is its own number, unless another
 * position's entry takes that number: then it has none until one is allocated (`settle`).
 */
export class OrdinalScope {
  /** Position → ordinal; a negative position holds a retired ordinal (`retiredPosition`). */
  readonly #byPosition = new Map<number, number>();
  /** Ordinal → the non-negative position with an entry naming it. */
  readonly #byOrdinal = new Map<number, number>();

  /** The entries, position → ordinal (retired ones at negative positions). */
  entries(): [number, number][] {
    return [...this.#byPosition];
  }

  /** `position` has an entry of its own. */
  hasEntry(position: number): boolean {
    return this.#byPosition.has(position);
  }

  /** Some position's entry names `ordinal`. */
  names(ordinal: number): boolean {
    return this.#byOrdinal.has(ordinal);
  }

  /** Position `position` is served by `ordinal` (an entry equal to the position is none). */
  set(position: number, ordinal: number): void {
    this.forget(position);
    if (position === ordinal) return;
    this.#byPosition.set(position, ordinal);
    if (position >= 0) this.#byOrdinal.set(ordinal, position);
  }

  /** Drops the entry of `position`, if any. */
  forget(position: number): void {
    const ordinal = this.#byPosition.get(position);
    if (ordinal === undefined) return;
    this.#byPosition.delete(position);
    if (this.#byOrdinal.get(ordinal) === position) this.#byOrdinal.delete(ordinal);
  }

  /** The unit at `ordinal` is retired: surplus, and its ordinal is not reused until released. */
  retire(ordinal: number): void {
    this.#byPosition.set(retiredPosition(ordinal), ordinal);
  }

  /** Ordinals with a retired unit. */
  retired(): number[] {
    return [...this.#byPosition].filter(([position]) => position < 0).map(([, ordinal]) => ordinal);
  }

  /** The ordinal `position` was given, whether or not a retired unit still holds it. */
  assigned(position: number): number | undefined {
    if (position < 0) return this.#byPosition.get(position);
    return this.#byPosition.get(position) ?? (this.#byOrdinal.has(position) ? undefined : position);
  }

  /**
   * The ordinal new pods of `position` get: undefined at a retired position, at a position without
   * one (its number is another position's ordinal), and while a retired unit still holds it.
   */
  ordinal(position: number): number | undefined {
    if (position < 0) return undefined;
    const ordinal = this.assigned(position);
    return ordinal === undefined || this.#byPosition.has(retiredPosition(ordinal)) ? undefined : ordinal;
  }

  /**
   * The position of the unit whose pods carry `ordinal`. An ordinal no position names is retired
   * (only a stored map edited by hand leaves one): surplus, like any unit beyond the layout.
   */
  position(ordinal: number): number {
    if (this.#byPosition.has(retiredPosition(ordinal))) return retiredPosition(ordinal);
    const mapped = this.#byOrdinal.get(ordinal);
    if (mapped !== undefined) return mapped;
    return this.#byPosition.has(ordinal) ? retiredPosition(ordinal) : ordinal;
  }

  /**
   * The lowest ordinal below `bound` no position is served by, no retired unit holds and no pod
   * carries (`held`), if any.
   */
  free(bound: number, held: ReadonlySet<number>): number | undefined {
    for (let ordinal = 0; ordinal < bound; ordinal++) {
      const named = this.#byOrdinal.has(ordinal) || !this.#byPosition.has(ordinal);
      if (!named && !this.#byPosition.has(retiredPosition(ordinal)) && !held.has(ordinal)) return ordinal;
    }
    return undefined;
  }

  get empty(): boolean {
    return this.#byPosition.size === 0;
  }

  copy(): OrdinalScope {
    const copy = new OrdinalScope();
    for (const [position, ordinal] of this.#byPosition) {
      if (position < 0) copy.retire(ordinal);
      else copy.set(position, ordinal);
    }
    return copy;
  }

  /**
   * `successor` (a surge position) succeeds `outdated`: each takes the other's ordinal, and the
   * outdated unit's ordinal is retired, so its unit is surplus and the surge position waits until
   * its pods are gone.
   */
  succeed(outdated: number, successor: number): void {
    const old = this.assigned(outdated);
    const next = this.assigned(successor);
    if (old === undefined || next === undefined) throw new Error(`position ${outdated} or ${successor} has no ordinal`);
    this.forget(outdated);
    this.forget(successor);
    this.set(outdated, next);
    this.set(successor, old);
    this.retire(old);
  }
}

const EMPTY_SCOPE = new OrdinalScope();

function scopeKey(group: number, role: string): string {
  return `${group}/${role}`;
}

/**
 * Every scope of one ModelServing: its groups, and per group position and role its instances.
 * Read from `status.ordinals`; the planner copies it to record successions and allocations.
 */
export class OrdinalTable {
  readonly groups: OrdinalScope;
  readonly #instances: Map<string, { group: number; role: string; scope: OrdinalScope }>;

  private constructor(
    groups: OrdinalScope,
    instances: Map<string, { group: number; role: string; scope: OrdinalScope }>,
  ) {
    this.groups = groups;
    this.#instances = instances;
  }

  /**
   * The table `entries` describe. Entries that contradict earlier ones (a position or an ordinal
   * named twice in one scope) are ignored, so the map stays one to one.
   */
  static read(entries: readonly OrdinalEntry[] | undefined): OrdinalTable {
    const table = new OrdinalTable(new OrdinalScope(), new Map());
    for (const entry of entries ?? []) {
      const scope =
        entry.role === undefined
          ? table.groups
          : entry.group === undefined
            ? undefined
            : table.#scope(entry.group, entry.role);
      const position = entry.role === undefined ? entry.group : entry.instance;
      if (scope === undefined) continue;
      if (entry.retired === true) scope.retire(entry.ordinal);
      else if (position !== undefined && !scope.hasEntry(position) && !scope.names(entry.ordinal))
        scope.set(position, entry.ordinal);
    }
    return table;
  }

  /** The instance scope of `role` in group position `group` (an empty one when it has no entry). */
  instances(group: number, role: string): OrdinalScope {
    return this.#instances.get(scopeKey(group, role))?.scope ?? EMPTY_SCOPE;
  }

  /** The instance scopes with entries, by group position and role. */
  instanceScopes(): { group: number; role: string; scope: OrdinalScope }[] {
    return [...this.#instances.values()];
  }

  #scope(group: number, role: string): OrdinalScope {
    const key = scopeKey(group, role);
    let found = this.#instances.get(key);
    if (found === undefined) {
      found = { group, role, scope: new OrdinalScope() };
      this.#instances.set(key, found);
    }
    return found.scope;
  }

  /** The writable instance scope of `role` in group position `group`. */
  instanceScope(group: number, role: string): OrdinalScope {
    return this.#scope(group, role);
  }

  copy(): OrdinalTable {
    const instances = new Map<string, { group: number; role: string; scope: OrdinalScope }>();
    for (const [key, { group, role, scope }] of this.#instances)
      instances.set(key, { group, role, scope: scope.copy() });
    return new OrdinalTable(this.groups.copy(), instances);
  }

  /**
   * Surge group position `successor` succeeds group position `outdated` (`OrdinalScope.succeed`).
   * The successor's instance map goes with it to its new position; the surge position starts
   * afresh, as does the retired group (its pods are placed by their own ordinals).
   */
  succeedGroup(outdated: number, successor: number): void {
    this.groups.succeed(outdated, successor);
    for (const [key, entry] of [...this.#instances]) if (entry.group === outdated) this.#instances.delete(key);
    for (const [key, entry] of [...this.#instances]) {
      if (entry.group !== successor) continue;
      this.#instances.delete(key);
      this.#instances.set(scopeKey(outdated, entry.role), { ...entry, group: outdated });
    }
  }

  /** Drops the instance scopes of group position `group`. */
  forgetInstances(group: number): void {
    for (const [key, entry] of [...this.#instances]) if (entry.group === group) this.#instances.delete(key);
  }

  /** The table as `status.ordinals` stores it, in a canonical order (equal tables, equal lists). */
  entries(): OrdinalEntry[] {
    const entries: OrdinalEntry[] = [];
    for (const [position, ordinal] of this.groups.entries())
      entries.push(position < 0 ? { ordinal, retired: true } : { group: position, ordinal });
    for (const { group, role, scope } of this.#instances.values()) {
      for (const [position, ordinal] of scope.entries())
        entries.push(
          position < 0 ? { group, role, ordinal, retired: true } : { group, role, instance: position, ordinal },
        );
    }
    return entries.sort(compareEntries);
  }
}

function compareEntries(a: OrdinalEntry, b: OrdinalEntry): number {
  return (
    Number(a.role !== undefined) - Number(b.role !== undefined) ||
    (a.group ?? -1) - (b.group ?? -1) ||
    compareStrings(a.role ?? "", b.role ?? "") ||
    Number(a.retired === true) - Number(b.retired === true) ||
    (a.instance ?? -1) - (b.instance ?? -1) ||
    a.ordinal - b.ordinal
  );
}

/** What `settle` needs to know of the layout and the pods. */
export interface SettleInputs {
  /** Group positions the layout keeps (desired and surge). */
  readonly groups: number;
  /** Desired group positions (`replicas`): the first of `groups`. */
  readonly desiredGroups: number;
  /** `replicas + maxSurge`: no group ordinal is allocated at or beyond it. */
  readonly groupBound: number;
  /**
   * Instance positions the layout keeps of `role` in group position `group` (desired and surge),
   * how many of them are desired (the role's `replicas`), and the role's bound.
   */
  readonly instances: (
    group: number,
    role: string,
  ) => { readonly count: number; readonly desired: number; readonly bound: number };
  /** The roles of the spec. */
  readonly roles: readonly string[];
  /** Group ordinals some pod carries (terminating pods included: they still hold their names). */
  readonly heldGroups: ReadonlySet<number>;
  /** Instance ordinals some pod carries, per group position and role. */
  readonly heldInstances: (group: number, role: string) => ReadonlySet<number>;
}

/** Some pod lives at `position` of `scope`: its ordinal is carried and not retired. */
function hasPods(scope: OrdinalScope, position: number, held: ReadonlySet<number>): boolean {
  const ordinal = scope.assigned(position);
  return ordinal !== undefined && held.has(ordinal) && scope.position(ordinal) === position;
}

/**
 * `table` brought up to date with the layout and the pods (in place): retired ordinals whose pods
 * are gone are released, entries of positions beyond the layout without pods forgotten (a
 * scale-down removes the highest positions; a finished rollout its surge), instance maps of groups
 * without pods dropped, a retired unit whose position a scale-up made desired again restored
 * there, and every position the layout keeps that has no ordinal given the lowest free one below
 * its bound, when there is one (until then its pods wait).
 */
export function settle(table: OrdinalTable, inputs: SettleInputs): OrdinalTable {
  settleScope(
    table.groups,
    { count: inputs.groups, desired: inputs.desiredGroups, bound: inputs.groupBound },
    inputs.heldGroups,
  );
  for (const { group, role, scope } of table.instanceScopes()) {
    const groupHasPods = group >= 0 && hasPods(table.groups, group, inputs.heldGroups);
    if (!groupHasPods) {
      table.forgetInstances(group);
      continue;
    }
    const kept = group < inputs.groups && inputs.roles.includes(role) ? inputs.instances(group, role) : undefined;
    settleScope(scope, kept ?? NOTHING_KEPT, inputs.heldInstances(group, role));
  }
  return table;
}

const NOTHING_KEPT = { count: 0, desired: 0, bound: 0 } as const;

/**
 * `settle` of one scope keeping `count` positions, the first `desired` of them desired, with
 * ordinals below `bound`.
 */
function settleScope(
  scope: OrdinalScope,
  kept: { readonly count: number; readonly desired: number; readonly bound: number },
  held: ReadonlySet<number>,
): void {
  const { count, bound } = kept;
  for (const ordinal of scope.retired()) if (!held.has(ordinal)) scope.forget(retiredPosition(ordinal));
  for (const [position] of scope.entries())
    if (position >= count && !hasPods(scope, position, held)) scope.forget(position);
  if (scope.empty) return;
  restoreRetired(scope, kept.desired);
  for (let position = 0; position < count; position++) {
    if (scope.assigned(position) !== undefined) continue;
    const ordinal = scope.free(bound, held);
    if (ordinal !== undefined) scope.set(position, ordinal);
  }
}

/**
 * A retired unit is surplus only while no desired position lacks a unit: a scale-up that makes
 * a position desired which has no usable ordinal (the surge position the succession gave the
 * retired ordinal, or one whose number another position took) gets the retired unit back, as it
 * runs — its own ordinal's position first. Left retired, it would wait to be drained until the
 * scope's floor holds without it, while the floor waits for the position (fuzz-918128).
 */
function restoreRetired(scope: OrdinalScope, desired: number): void {
  for (let position = 0; position < desired; position++) {
    if (scope.ordinal(position) !== undefined) continue;
    const retired = scope.retired();
    const assigned = scope.assigned(position);
    const ordinal = assigned === undefined ? retired[0] : retired.find((candidate) => candidate === assigned);
    if (ordinal === undefined) continue;
    scope.forget(retiredPosition(ordinal));
    scope.set(position, ordinal);
  }
}

/** A unit's place: group, role and instance, as positions or as ordinals. */
export interface UnitPlace {
  readonly group: number;
  readonly role: string;
  readonly instance: number;
}

/** The positions of the unit whose pods carry the ordinals of `physical` (their labels). */
export function positionOf(table: OrdinalTable, physical: UnitPlace): UnitPlace {
  const group = table.groups.position(physical.group);
  return { group, role: physical.role, instance: table.instances(group, physical.role).position(physical.instance) };
}

/**
 * The ordinals new pods at positions `at` get (their names and labels); undefined while the
 * position has none (`OrdinalScope.ordinal`).
 */
export function ordinalsOf(table: OrdinalTable, at: UnitPlace): UnitPlace | undefined {
  const group = table.groups.ordinal(at.group);
  const instance = table.instances(at.group, at.role).ordinal(at.instance);
  return group === undefined || instance === undefined ? undefined : { group, role: at.role, instance };
}

/**
 * How messages name group position `group`: by the ordinal its pods carry in their names and
 * labels (what a person finds with kubectl), a retired group by its own ordinal, and a position
 * that has no ordinal yet by its number.
 */
export function groupLabel(table: OrdinalTable, group: number): string {
  return `group ${group < 0 ? retiredOrdinal(group) : (table.groups.ordinal(group) ?? group)}`;
}

/** How messages name the instance at positions `at`, by ordinals as `groupLabel` does. */
export function unitLabel(table: OrdinalTable, at: UnitPlace): string {
  const instance =
    at.instance < 0
      ? retiredOrdinal(at.instance)
      : (table.instances(at.group, at.role).ordinal(at.instance) ?? at.instance);
  return `${instanceId(at.role, instance)} of ${groupLabel(table, at.group)}`;
}

/**
 * `settle` of `table` for `model`'s pods under `layout`: bounds from the spec's surge budgets
 * (`replicas + maxSurge` at each level), held ordinals from every pod in the tree.
 */
export function settleFor(model: Model, layout: Layout, table: OrdinalTable): OrdinalTable {
  const heldGroups = new Set<number>();
  const heldInstances = new Map<string, Set<number>>();
  for (const [group, roles] of model.tree) {
    for (const [role, instances] of roles) {
      const held = new Set<number>();
      for (const pods of instances.values()) {
        for (const view of pods.values()) {
          heldGroups.add(view.id.group);
          held.add(view.id.instance);
        }
      }
      heldInstances.set(scopeKey(group, role), held);
    }
  }
  return settle(table, {
    groups: layout.groups,
    desiredGroups: model.ms.spec.replicas,
    groupBound: model.ms.spec.replicas + resolveGroupBudget(model.ms.spec).maxSurge,
    roles: [...model.roles.keys()],
    instances: (group, name) => {
      const role = model.roles.get(name);
      return role === undefined
        ? NOTHING_KEPT
        : {
            count: layout.instances(group, role),
            desired: role.replicas,
            bound: role.replicas + resolveRoleBudget(role).maxSurge,
          };
    },
    heldGroups,
    heldInstances: (group, role) => heldInstances.get(scopeKey(group, role)) ?? NO_ORDINALS,
  });
}

const NO_ORDINALS: ReadonlySet<number> = new Set();

/**
 * The ordinals of group positions 0..`replicas`−1 (what pod names and labels show for the desired
 * ServingGroups), ascending; a position still waiting for an ordinal has none.
 */
export function groupOrdinals(table: OrdinalTable, replicas: number): number[] {
  const ordinals: number[] = [];
  for (let position = 0; position < replicas; position++) {
    const ordinal = table.groups.assigned(position);
    if (ordinal !== undefined) ordinals.push(ordinal);
  }
  return ordinals.sort((a, b) => a - b);
}
