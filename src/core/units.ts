/**
 * Durable per-unit revision records (DESIGN §4, docs/design/controller-model.md):
 * `status.units` names the revision of a unit only where it differs from `currentRevision`.
 */
import type { UnitRecord } from "../api/schema.ts";
import { getOrCreate } from "./maps.ts";

/** The recorded revision of instance `(group, role, instance)`: its own record, else its group's. */
export interface RecordedRevision {
  (group: number, role: string, instance: number): string | undefined;
  /** The instance's own record only (a RoleRollingUpdate's), not its group's. */
  readonly own: (group: number, role: string, instance: number) => string | undefined;
}

/**
 * Indexes `units` once for `RecordedRevision` look-ups. Where records repeat, an instance's first
 * record and a group's last group record count (what reading the list in order finds).
 */
export function recordedRevisions(units: readonly UnitRecord[]): RecordedRevision {
  const groups = new Map<
    number,
    { revision: string | undefined; readonly instances: Map<string, Map<number, string>> }
  >();
  for (const record of units) {
    const group = getOrCreate(groups, record.group, () => ({
      revision: undefined,
      instances: new Map<string, Map<number, string>>(),
    }));
    if (record.role === undefined) group.revision = record.revision;
    else if (record.instance !== undefined) {
      const instances = getOrCreate(group.instances, record.role, () => new Map<number, string>());
      if (!instances.has(record.instance)) instances.set(record.instance, record.revision);
    }
  }
  const own = (group: number, role: string, instance: number) => groups.get(group)?.instances.get(role)?.get(instance);
  return Object.assign(
    (group: number, role: string, instance: number) => own(group, role, instance) ?? groups.get(group)?.revision,
    { own },
  );
}
