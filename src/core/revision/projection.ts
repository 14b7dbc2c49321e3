/**
 * The projection of a ModelServing onto its versioned fields (DESIGN §2.6, seed §3): the single
 * source of both the revision hash and the stored ControllerRevision data.
 */
import type { ModelServing } from "../../api/index.ts";
import { CONTROLLER_ENV, SERVING_GATE, isReservedTemplateKey } from "../../api/wellknown.ts";
import { deepFreeze, onFrozen } from "../frozen.ts";
import { pruneEmpty } from "./canonical.ts";
import { compareStrings } from "../maps.ts";
import type { RevisionData } from "./format.ts";

/** Env vars the controller injects into every container (DESIGN §1); a template's copy is overwritten. */
const CONTROLLER_ENV_NAMES: ReadonlySet<string> = new Set(CONTROLLER_ENV);

/**
 * The shape both a ModelServing and stored revision data can be read as: the versioned fields
 * before normalization. Templates are opaque JSON here; normalization only filters them.
 */
export interface VersionedFields {
  readonly schedulerName: string;
  readonly plugins?: readonly VersionedPlugin[] | undefined;
  readonly roles: readonly VersionedRole[];
}

interface VersionedPlugin {
  readonly name: string;
  readonly config?: object | undefined;
  readonly scope?: { readonly roles?: readonly string[] | undefined; readonly target: string } | undefined;
}

interface VersionedRole {
  readonly name: string;
  readonly entryTemplate: object;
  readonly workerReplicas: number;
  readonly workerTemplate?: object | undefined;
}

/**
 * The canonical projection of `ms` (already parsed and defaulted by `parseModelServing`):
 * `schedulerName`, `plugins` and, per role, `name`, `entryTemplate`, `workerReplicas`,
 * `workerTemplate`, normalized by `normalizeRevisionData`. Runtime parameters (replica counts,
 * budgets, partition, recovery, drain, gang policy, rollout strategy, history limit, restart grace
 * period) never appear. The result satisfies `RevisionDataSchema`.
 */
export function revisionData(ms: ModelServing): RevisionData {
  const { spec } = ms;
  return normalizeRevisionData({
    schedulerName: spec.schedulerName,
    plugins: spec.plugins,
    roles: spec.template.roles.map((role) => ({
      name: role.name,
      entryTemplate: role.entryTemplate,
      workerReplicas: role.workerReplicas,
      workerTemplate: role.workerTemplate,
    })),
  });
}

/**
 * Normalizes versioned fields to their canonical form; idempotent, never mutates its input.
 * Roles are sorted by name; plugins keep their chain order, `scope.roles` is sorted and
 * de-duplicated, and a scope that means "every pod" (target All, no roles) is dropped;
 * controller-injected env, the serving readiness gate, and labels and annotations under the
 * reserved `tandem.dev/` prefix are stripped from templates;
 * then empty values are dropped (`pruneEmpty`). Applied to stored data it re-normalizes a revision
 * written by an older controller, which is what makes `sameRevision` semantic.
 */
export function normalizeRevisionData(fields: VersionedFields): RevisionData {
  const projected = {
    schedulerName: fields.schedulerName,
    plugins: fields.plugins?.map(normalizePlugin),
    roles: [...fields.roles]
      .sort((a, b) => compareStrings(a.name, b.name))
      .map((role) => ({
        name: role.name,
        entryTemplate: stripInjected(role.entryTemplate),
        workerReplicas: role.workerReplicas,
        workerTemplate: role.workerTemplate === undefined ? undefined : stripInjected(role.workerTemplate),
      })),
  };
  // Pruning keeps every required member (non-empty names, images, role list, an int), so the
  // result has the RevisionData shape; the round-trip tests decode it with RevisionDataSchema.
  // Frozen, so the memos of its bytes and hashes (hash.ts, role-hash.ts) can never go stale.
  return deepFreeze(pruneEmpty(projected)) as unknown as RevisionData;
}

/**
 * `normalizeRevisionData(data)` per revision data object (`onFrozen`: revision data is deep-frozen
 * where it is built, so the normalized form computed once stays right; a WeakMap frees it with the
 * data). Role views, normalized bytes and in-place comparisons all start from it, once per data.
 */
const normalizedMemo = new WeakMap<RevisionData, RevisionData>();

export function normalizedData(data: RevisionData): RevisionData {
  return onFrozen(normalizedMemo, data, normalizeRevisionData);
}

function normalizePlugin(plugin: VersionedPlugin): VersionedPlugin {
  const roles = [...new Set(plugin.scope?.roles ?? [])].sort(compareStrings);
  const target = plugin.scope?.target ?? "All";
  const scope = target === "All" && roles.length === 0 ? undefined : { roles, target };
  return { name: plugin.name, config: plugin.config, scope };
}

/** A copy of a pod template without what the controller injects into every pod it builds from it. */
function stripInjected(template: object): object {
  const { metadata, spec } = template as { metadata?: unknown; spec?: unknown };
  return {
    ...template,
    metadata: isRecord(metadata) ? stripMetadata(metadata) : metadata,
    spec: isRecord(spec) ? stripPodSpec(spec) : spec,
  };
}

function stripMetadata(metadata: Record<string, unknown>): Record<string, unknown> {
  return {
    ...metadata,
    labels: withoutReservedKeys(metadata.labels, "labels"),
    annotations: withoutReservedKeys(metadata.annotations, "annotations"),
  };
}

function stripPodSpec(spec: Record<string, unknown>): Record<string, unknown> {
  return {
    ...spec,
    containers: mapRecords(spec.containers, stripContainerEnv),
    initContainers: mapRecords(spec.initContainers, stripContainerEnv),
    readinessGates: filterRecords(spec.readinessGates, (gate) => gate.conditionType !== SERVING_GATE),
  };
}

function stripContainerEnv(container: Record<string, unknown>): Record<string, unknown> {
  const env = filterRecords(
    container.env,
    (variable) => !(typeof variable.name === "string" && CONTROLLER_ENV_NAMES.has(variable.name)),
  );
  return { ...container, env };
}

/**
 * Labels and annotations under the controller's reserved prefix are the controller's to set on
 * pods; the restart annotation is the user's and versioned (a restart is a new revision).
 */
function withoutReservedKeys(map: unknown, field: "labels" | "annotations"): unknown {
  if (!isRecord(map)) return map;
  return Object.fromEntries(Object.entries(map).filter(([key]) => !isReservedTemplateKey(field, key)));
}

function mapRecords(list: unknown, f: (item: Record<string, unknown>) => Record<string, unknown>): unknown {
  return Array.isArray(list) ? list.map((item: unknown) => (isRecord(item) ? f(item) : item)) : list;
}

function filterRecords(list: unknown, keep: (item: Record<string, unknown>) => boolean): unknown {
  return Array.isArray(list) ? list.filter((item: unknown) => !isRecord(item) || keep(item)) : list;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
