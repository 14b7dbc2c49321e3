/**
 * Durable per-unit revision records (DESIGN §4, docs/design/controller-model.md):
 * `status.units` names the revision of a unit only where it differs from `currentRevision`.
 */
import type { UnitRecord } from "../api/schema.ts";

/** The recorded revision of instance `(group, role, instance)`: its own record, else its group's. */
export function recordedRevision(units: readonly UnitRecord[] | undefined, group: number, role: string, instance: number): string | undefined {
  let groupRecord: string | undefined;
  for (const record of units ?? []) {
    if (record.group !== group) continue;
    if (record.role === undefined) groupRecord = record.revision;
    else if (record.role === role && record.instance === instance) return record.revision;
  }
  return groupRecord;
}
