/**
 * The explicit recreate request (seed §5: a costlier recovery needs an explicit trigger), as the
 * user side writes it and the controller reads it. Pure.
 *
 * The request is the ModelServing annotation `tandem.dev/recreate`, JSON
 * `{"id":"<unique>","group":G}` or `{"id":"<unique>","group":G,"role":"R"}`: rebuild ServingGroup
 * G (or the instances of role R in it) by replacement. The controller records the request it took
 * up in `status.recreate` (same id), so each id is carried out once; a new id asks again. An
 * annotation does not change `metadata.generation`: a request is no spec change.
 */
import { quote } from "./problems.ts";
import type { ModelServingSpec } from "./schema.ts";
import { ANNOTATION_RECREATE } from "./wellknown.ts";

/** The longest request id; the id is kept in status, so it stays short. */
export const MAX_RECREATE_ID_LENGTH = 64;

export interface RecreateRequest {
  readonly id: string;
  readonly group: number;
  /** Only this role's instances of the group; the whole group when absent. */
  readonly role?: string | undefined;
}

/**
 * The request in `annotations` and its id: undefined without one; `ok: false` with the reason
 * when it cannot be read, its `id` then being the raw value (bounded), so one bad value is
 * refused once.
 */
export function readRecreateRequest(
  annotations: Readonly<Record<string, string>> | undefined,
):
  | { readonly ok: true; readonly id: string; readonly request: RecreateRequest }
  | { readonly ok: false; readonly id: string; readonly reason: string }
  | undefined {
  const raw = annotations?.[ANNOTATION_RECREATE];
  if (raw === undefined) return undefined;
  const bad = (reason: string) => ({ ok: false as const, id: raw.slice(0, MAX_RECREATE_ID_LENGTH), reason });
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return bad(`is not JSON: ${quote(raw)}; write {"id":"<unique>","group":<index>} with an optional "role"`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value))
    return bad('must be a JSON object {"id":"<unique>","group":<index>} with an optional "role"');
  const { id, group, role, ...rest } = value as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) return bad(`has unknown field(s) ${unknown.join(", ")}: only id, group and role`);
  if (typeof id !== "string" || id === "" || id.length > MAX_RECREATE_ID_LENGTH)
    return bad(`id must be a non-empty string of at most ${MAX_RECREATE_ID_LENGTH} characters`);
  if (typeof group !== "number" || !Number.isSafeInteger(group) || group < 0)
    return bad("group must be a ServingGroup index (an integer, 0 or more)");
  if (role !== undefined && (typeof role !== "string" || role === "")) return bad("role must be a role name");
  return { ok: true, id, request: { id, group, ...(role === undefined ? {} : { role }) } };
}

/** The annotation value of `request`. */
export function recreateAnnotationValue(request: RecreateRequest): string {
  return JSON.stringify({
    id: request.id,
    group: request.group,
    ...(request.role === undefined ? {} : { role: request.role }),
  });
}

/**
 * Why `request` does not fit `spec`, naming the field (`group` or `role`); undefined when it fits.
 * `groups` are the ordinals of the ServingGroups (as pod names and labels show them, ascending;
 * 0..replicas−1 unless surge groups succeeded some, docs/design/succession.md).
 */
export function recreateProblem(
  spec: ModelServingSpec,
  request: RecreateRequest,
  groups: readonly number[] = [...Array(spec.replicas).keys()],
): { readonly field: "group" | "role"; readonly reason: string } | undefined {
  if (!groups.includes(request.group)) {
    const contiguous = groups.every((ordinal, index) => ordinal === index);
    const range =
      groups.length === 0
        ? "it has no ServingGroup (replicas is 0)"
        : contiguous
          ? `its ServingGroups are 0..${groups.length - 1}`
          : `its ServingGroups are ${groups.join(", ")}`;
    return { field: "group", reason: `there is no ServingGroup ${request.group}: ${range}` };
  }
  if (request.role !== undefined && !spec.template.roles.some((role) => role.name === request.role)) {
    return {
      field: "role",
      reason: `there is no role ${quote(request.role)}: its roles are ${spec.template.roles.map((role) => role.name).join(", ")}`,
    };
  }
  return undefined;
}

/** How messages name the unit a request rebuilds. */
export function recreateUnitLabel(request: {
  readonly group?: number | undefined;
  readonly role?: string | undefined;
}): string {
  return request.role === undefined
    ? `group ${request.group ?? "?"}`
    : `role ${request.role} in group ${request.group ?? "?"}`;
}
