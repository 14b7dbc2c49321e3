/**
 * A ModelServing's revision history as the dashboard lists it: each stored ControllerRevision by
 * number, whether it is the current or the update revision, and what changed from the one before
 * it, in words (`decode: image vllm:v1 → vllm:v2`). Pure.
 */
import type { ModelServingStatus } from "../api/schema.ts";
import { compareStrings } from "../core/maps.ts";
import { decodeControllerRevision } from "../core/revision/controller-revision.ts";
import type { StoredRevision } from "../core/revision/controller-revision.ts";
import type { RevisionData, RevisionPodTemplate, RevisionRole } from "../core/revision/format.ts";
import { roleHash } from "../core/role-hash.ts";
import type { KubeObject } from "../engine/ports.ts";

export interface RevisionEntry {
  readonly name: string;
  readonly number: number;
  readonly current: boolean;
  readonly update: boolean;
  /** What changed from the previous revision; empty for the first. */
  readonly changes: readonly string[];
}

/** The stored revisions, oldest first; unreadable ones are listed by name with why. */
export function revisionHistory(
  objects: readonly KubeObject[],
  status: ModelServingStatus | undefined,
): RevisionEntry[] {
  const readable: StoredRevision[] = [];
  const unreadable: RevisionEntry[] = [];
  for (const object of objects) {
    const decoded = decodeControllerRevision(object);
    if (decoded.ok) readable.push(decoded.revision);
    else if (decoded.name !== undefined)
      unreadable.push({ ...flags(decoded.name, status), number: 0, changes: [`unreadable: ${decoded.reason}`] });
  }
  readable.sort((a, b) => a.revision - b.revision || compareStrings(a.name, b.name));
  const entries = readable.map((revision, index) => ({
    ...flags(revision.name, status),
    number: revision.revision,
    changes: index === 0 ? [] : changesBetween(readable[index - 1]?.data, revision.data),
  }));
  return [...entries, ...unreadable];
}

function flags(
  name: string,
  status: ModelServingStatus | undefined,
): { name: string; current: boolean; update: boolean } {
  return { name, current: status?.currentRevision === name, update: status?.updateRevision === name };
}

/** Per role, in words: added, removed, images and worker counts changed, or "spec changed". */
export function changesBetween(before: RevisionData | undefined, after: RevisionData): string[] {
  if (before === undefined) return [];
  const changes: string[] = [];
  const names = [...new Set([...before.roles, ...after.roles].map((role) => role.name))].sort(compareStrings);
  for (const name of names) {
    const old = before.roles.find((role) => role.name === name);
    const now = after.roles.find((role) => role.name === name);
    if (old === undefined) changes.push(`${name}: added`);
    else if (now === undefined) changes.push(`${name}: removed`);
    else if (roleHash(before, name) !== roleHash(after, name)) changes.push(...roleChanges(name, old, now));
  }
  if (before.schedulerName !== after.schedulerName)
    changes.push(`schedulerName ${before.schedulerName} → ${after.schedulerName}`);
  if (changes.length === 0 && JSON.stringify(before.plugins ?? []) !== JSON.stringify(after.plugins ?? []))
    changes.push("plugins changed");
  return changes;
}

function roleChanges(name: string, old: RevisionRole, now: RevisionRole): string[] {
  const changes: string[] = [];
  const oldImages = images(old);
  const newImages = images(now);
  if (oldImages.join(",") !== newImages.join(","))
    changes.push(`${name}: image ${oldImages.join(", ")} → ${newImages.join(", ")}`);
  if (old.workerReplicas !== now.workerReplicas)
    changes.push(`${name}: workerReplicas ${old.workerReplicas} → ${now.workerReplicas}`);
  return changes.length === 0 ? [`${name}: spec changed`] : changes;
}

/** The distinct container images of a role's templates, in template order. */
function images(role: RevisionRole): string[] {
  const of = (template: RevisionPodTemplate | undefined): string[] =>
    template?.spec.containers.map((container) => container.image) ?? [];
  return [...new Set([...of(role.entryTemplate), ...of(role.workerTemplate)])];
}
