/**
 * Revision identity: canonical bytes, the hash over them, the revision name, and the semantic
 * comparison (DESIGN §2.6). The byte form and the hash are part of revision format 1 and must never
 * change within it: golden-hashes.json pins them.
 */
import { createHash } from "node:crypto";
import { canonicalJson } from "./canonical.ts";
import type { JsonValue } from "./canonical.ts";
import type { RevisionData } from "./format.ts";
import { REVISION_HASH_LENGTH } from "../../api/wellknown.ts";
import { normalizedData } from "./projection.ts";
import { onFrozen } from "../frozen.ts";

/**
 * Memos of bytes and hashes per revision data object (`onFrozen`: revision data is deep-frozen
 * where it is built — `normalizeRevisionData` and a decoded stored revision — so a value computed
 * once stays right; a WeakMap frees it with the data).
 */
const bytesMemo = new WeakMap<RevisionData, string>();
const normalizedBytesMemo = new WeakMap<RevisionData, string>();
const hashMemo = new WeakMap<RevisionData, Map<number, string>>();

/** The canonical bytes of revision data (sorted keys, no whitespace): stored and hashed. */
export function revisionBytes(data: RevisionData): string {
  // RevisionData is JSON by construction (pruneEmpty) or by validation (decode's isJsonValue).
  return onFrozen(bytesMemo, data, () => canonicalJson(data as unknown as JsonValue));
}

/** The canonical bytes of `data` normalized with this controller's rules (`normalizeRevisionData`). */
export function normalizedRevisionBytes(data: RevisionData): string {
  return onFrozen(normalizedBytesMemo, data, () => canonicalJson(normalizedData(data) as unknown as JsonValue));
}

/**
 * The revision hash: the first `REVISION_HASH_LENGTH` lowercase hex characters of
 * sha256(utf8(bytes)) when `collisionCount` is 0, and of sha256(utf8(bytes ‖ "\n" ‖ decimal
 * collisionCount)) otherwise, so revisions written before any collision keep their hash.
 */
export function revisionHash(data: RevisionData, collisionCount: number): string {
  const hashes = onFrozen(hashMemo, data, () => new Map<number, string>());
  const cached = hashes.get(collisionCount);
  if (cached !== undefined) return cached;
  const bytes = revisionBytes(data);
  const input = collisionCount > 0 ? `${bytes}\n${collisionCount}` : bytes;
  const hash = createHash("sha256").update(input, "utf8").digest("hex").slice(0, REVISION_HASH_LENGTH);
  hashes.set(collisionCount, hash);
  return hash;
}

/** `<ms>-<hash>`: the ControllerRevision name, also the pod label `tandem.dev/revision`. */
export function revisionName(modelServingName: string, hash: string): string {
  return `${modelServingName}-${hash}`;
}

/** Revision data together with the hash recorded for it. */
export interface HashedRevision {
  readonly hash: string;
  readonly data: RevisionData;
}

/**
 * True when `a` and `b` declare the same pods. Equal hashes are confirmed by equal bytes (the fast
 * path); otherwise both are re-normalized with this controller's rules and compared, so data
 * written by an older controller, or lacking a field that is now written empty, still matches and a
 * controller upgrade never rolls pods.
 */
export function sameRevision(a: HashedRevision, b: HashedRevision): boolean {
  if (a.hash === b.hash && revisionBytes(a.data) === revisionBytes(b.data)) return true;
  return normalizedRevisionBytes(a.data) === normalizedRevisionBytes(b.data);
}
