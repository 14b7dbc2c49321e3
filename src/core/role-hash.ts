/**
 * What a role's pods are built from: the role's part of the revision data plus `schedulerName`
 * and the plugins that apply to it (its *role view*). Two revisions with equal role views build
 * that role's pods identically, so RoleRollingUpdate leaves the role alone (DESIGN §2.1) although
 * its pods keep the older revision label.
 *
 * Decisions compare role views of normalized revision data (`sameRoleSpec`), never the
 * `tandem.dev/role-hash` label: a label written by an older controller must not roll pods. The
 * label (`roleHash`) is for people and selectors.
 */
import { createHash } from "node:crypto";
import { canonicalJson } from "./revision/canonical.ts";
import type { JsonValue } from "./revision/canonical.ts";
import type { RevisionData, RevisionPlugin } from "./revision/format.ts";
import { normalizedData } from "./revision/projection.ts";
import { normalizedRevisionBytes } from "./revision/hash.ts";
import { onFrozen } from "./frozen.ts";

/** Length of a role hash in lowercase hex characters. */
export const ROLE_HASH_LENGTH = 10;

function appliesTo(plugin: RevisionPlugin, role: string): boolean {
  const roles = plugin.scope?.roles ?? [];
  return roles.length === 0 || roles.includes(role);
}

/**
 * Memos of role-view bytes and role hashes per revision data object (`onFrozen`: revision data is
 * deep-frozen where it is built, so a value computed once stays right; a WeakMap frees it with
 * the data). Pure in effect: it only saves repeating a deterministic computation.
 */
const viewMemo = new WeakMap<RevisionData, Map<string, string | undefined>>();
const hashMemo = new WeakMap<RevisionData, Map<string, string | undefined>>();

/** Canonical bytes of the role view of `role` after normalizing `data`; undefined when absent. */
function roleViewBytes(data: RevisionData, role: string): string | undefined {
  const views = onFrozen(viewMemo, data, () => new Map<string, string | undefined>());
  if (views.has(role)) return views.get(role);
  const normalized = normalizedData(data);
  const spec = normalized.roles.find((candidate) => candidate.name === role);
  const plugins = (normalized.plugins ?? []).filter((plugin) => appliesTo(plugin, role));
  const bytes =
    spec === undefined
      ? undefined
      : canonicalJson({ schedulerName: normalized.schedulerName, plugins, role: spec } as unknown as JsonValue);
  views.set(role, bytes);
  return bytes;
}

/**
 * The `tandem.dev/role-hash` label value of `role` in `data`: the first `ROLE_HASH_LENGTH` hex
 * characters of sha256 over its role view; undefined when the revision has no such role.
 */
export function roleHash(data: RevisionData, role: string): string | undefined {
  const hashes = onFrozen(hashMemo, data, () => new Map<string, string | undefined>());
  if (hashes.has(role)) return hashes.get(role);
  const bytes = roleViewBytes(data, role);
  const hash =
    bytes === undefined
      ? undefined
      : createHash("sha256").update(bytes, "utf8").digest("hex").slice(0, ROLE_HASH_LENGTH);
  hashes.set(role, hash);
  return hash;
}

/** True when `a` and `b` build `role`'s pods identically (both lacking the role counts as equal). */
export function sameRoleSpec(a: RevisionData, b: RevisionData, role: string): boolean {
  return a === b || roleViewBytes(a, role) === roleViewBytes(b, role);
}

/** True when `a` and `b` declare the same pods for every role (normalized, so older data matches). */
export function sameRevisionData(a: RevisionData, b: RevisionData): boolean {
  return a === b || normalizedRevisionBytes(a) === normalizedRevisionBytes(b);
}
