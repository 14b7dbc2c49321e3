/**
 * User-side rollout commands, built on the ports only so `tandem rollout undo|status|history|
 * pause|resume|restart` (against a real cluster) and the simulator's `rollback`, `restart` and
 * `recreate` steps run the same code.
 *
 * Rollback (DESIGN §2.8): read the ModelServing, find the target ControllerRevision (by number;
 * by default the previous one: the highest number below the current update revision's), decode it
 * (never guess an unreadable one), write its versioned fields into the spec with `applyRevision`
 * (runtime parameters kept) and update the object with its resourceVersion, re-reading and
 * retrying on Conflict. The controller's normal rollout carries the change out.
 */
import type { Pod } from "../api/kube.ts";
import { parseModelServing } from "../api/parse.ts";
import { readRecreateRequest, recreateAnnotationValue, recreateProblem, recreateUnitLabel } from "../api/recreate.ts";
import type { RecreateRequest } from "../api/recreate.ts";
import type { ModelServing, PodTemplateSpec, RecreateRecord } from "../api/schema.ts";
import { ANNOTATION_RECREATE, ANNOTATION_RESTARTED_AT, LABEL_MODEL_SERVING } from "../api/wellknown.ts";
import { placedPods, rolloutPending } from "../core/invariants.ts";
import { OrdinalTable, groupOrdinals } from "../core/ordinals.ts";
import { applyRevision } from "../core/revision/apply.ts";
import { decodeControllerRevision } from "../core/revision/controller-revision.ts";
import type { DecodeResult, StoredRevision } from "../core/revision/controller-revision.ts";
import { isApiError } from "./ports.ts";
import type { ClusterReader, ClusterWriter, JsonObject, KubeObject } from "./ports.ts";

export interface RollbackPorts {
  /** Reads that should be fresh: a direct API reader or a cache known to be synced. */
  readonly reader: Pick<ClusterReader, "get" | "list">;
  readonly writer: ClusterWriter;
  /** Called before each retry after a Conflict, so a snapshot reader can read again. */
  readonly refresh?: () => Promise<void>;
}

export interface RollbackRequest {
  readonly namespace: string;
  readonly name: string;
  /** The revision number to go back to; the previous revision when absent. */
  readonly toRevision?: number | undefined;
  /** Attempts when the update meets a Conflict. Default 5. */
  readonly maxAttempts?: number;
}

export type RollbackResult =
  | {
      readonly ok: true;
      readonly from: string;
      readonly to: { readonly name: string; readonly revision: number };
      readonly message: string;
    }
  | { readonly ok: false; readonly message: string };

/** Rolls `request.name` back; never throws for API errors (they become `ok: false`). */
export function rollback(ports: RollbackPorts, request: RollbackRequest): Promise<RollbackResult> {
  return updateWithRetry(ports, request, () => prepareRollback(ports.reader, request));
}

/** A refusal; `field` names the request field at fault (`group`, `role`), for the caller to name its flag. */
export interface CommandFailure {
  readonly ok: false;
  readonly message: string;
  readonly field?: "group" | "role";
}

/** An update prepared from a fresh read: the object to write (with the resourceVersion read), and the result once written. */
type Prepared<R> =
  { readonly ok: true; readonly object: KubeObject<"ModelServing">; readonly result: R } | CommandFailure;

/**
 * Prepares and writes an update of `target` (with its resourceVersion), reading again and
 * preparing anew after each Conflict, at most `maxAttempts` (default 5) times. Never throws for
 * API errors: they become `ok: false`.
 */
async function updateWithRetry<R>(
  ports: RollbackPorts,
  target: RolloutTarget & { readonly maxAttempts?: number | undefined },
  prepare: () => Prepared<R>,
): Promise<R | CommandFailure> {
  const attempts = target.maxAttempts ?? 5;
  let last = "";
  for (let attempt = 1; attempt <= attempts; attempt++) {
    if (attempt > 1) await ports.refresh?.();
    const prepared = prepare();
    if (!prepared.ok) return prepared;
    try {
      await ports.writer.update(prepared.object);
      return prepared.result;
    } catch (error) {
      if (!isApiError(error, "Conflict"))
        return {
          ok: false,
          message: `updating ModelServing ${target.namespace}/${target.name} failed: ${errorMessage(error)}`,
        };
      last = errorMessage(error);
    }
  }
  return {
    ok: false,
    message: `ModelServing ${target.namespace}/${target.name} kept changing (${attempts} conflicts, last: ${last}); try again`,
  };
}

/** Reads the object and its revisions and builds the updated object, or says why it cannot. */
function prepareRollback(
  reader: RollbackPorts["reader"],
  request: RollbackRequest,
): Prepared<RollbackResult & { ok: true }> {
  const { namespace, name } = request;
  const read = readModelServing(reader, request);
  if (!read.ok) return read;
  const { stored, ms, revisions: readable, decoded } = read;
  const updateName = ms.status?.updateRevision;
  const current = readable.find((revision) => revision.name === updateName);
  const target = chooseTarget(readable, decoded, current, request.toRevision);
  if (typeof target === "string") return { ok: false, message: `ModelServing ${namespace}/${name}: ${target}` };
  const spec = applyRevision(ms.spec, target.data);
  const object = { ...stored, spec: spec as unknown as JsonObject };
  const check = parseModelServing(object);
  if (!check.ok)
    return {
      ok: false,
      message: `revision ${target.revision} does not fit the current spec: ${check.problems.map((found) => `${found.path}: ${found.reason}`).join("; ")}`,
    };
  const from = updateName ?? "(none)";
  const message = `rolled ${namespace}/${name} back from ${from} to revision ${target.revision} (${target.name})`;
  return {
    ok: true,
    object,
    result: { ok: true, from, to: { name: target.name, revision: target.revision }, message },
  };
}

/** The revision to roll back to, or why there is none. */
function chooseTarget(
  readable: readonly StoredRevision[],
  decoded: readonly DecodeResult[],
  current: StoredRevision | undefined,
  toRevision: number | undefined,
): StoredRevision | string {
  const numbers = readable.map((revision) => revision.revision).sort((a, b) => a - b);
  if (toRevision !== undefined) {
    const found = readable.find((revision) => revision.revision === toRevision);
    if (found !== undefined) return found;
    const unreadable = decoded.find((result) => !result.ok && result.revision === toRevision);
    if (unreadable !== undefined && !unreadable.ok)
      return `revision ${toRevision} (${unreadable.name ?? "?"}) is unreadable: ${unreadable.reason}`;
    return `no revision ${toRevision}; revisions are ${numbers.join(", ") || "(none)"}`;
  }
  if (current === undefined)
    return "the update revision is not recorded yet; wait for the controller or name --to-revision";
  const previous = readable
    .filter((revision) => revision.revision < current.revision)
    .sort((a, b) => b.revision - a.revision)[0];
  return previous ?? `no revision before ${current.revision} (${current.name}) to roll back to`;
}

// ---------------------------------------------------------------------------------------------
// restart, and the explicit recreate

export interface RestartRequest extends RolloutTarget {
  /** RFC 3339: the value of `tandem.dev/restartedAt` in every pod template. */
  readonly restartedAt: string;
  readonly maxAttempts?: number;
}

export type CommandResult = { readonly ok: true; readonly message: string } | CommandFailure;

/**
 * `tandem rollout restart NAME`, as kubectl's: writes `tandem.dev/restartedAt` into every pod
 * template (entry and worker, every role), a new revision that the configured strategy rolls out
 * within its budgets and partitions. Refused while paused (nothing would move, as kubectl refuses
 * a paused Deployment) and under InPlaceUpdate, which patches images only: a template annotation
 * is no image, so the rollout would refuse it (InPlaceIneligible); `--recreate` rebuilds units
 * there.
 */
export function restart(ports: RollbackPorts, request: RestartRequest): Promise<CommandResult> {
  return updateWithRetry(ports, request, () => prepareRestart(ports.reader, request));
}

function prepareRestart(reader: RollbackPorts["reader"], request: RestartRequest): Prepared<CommandResult> {
  const { namespace, name } = request;
  const read = readModelServing(reader, request);
  if (!read.ok) return read;
  const { stored, ms } = read;
  const label = `ModelServing ${namespace}/${name}`;
  if (ms.spec.rolloutStrategy.paused)
    return {
      ok: false,
      message: `${label} is paused: nothing would roll out; resume it first (tandem rollout resume ${name})`,
    };
  if (ms.spec.rolloutStrategy.type === "InPlaceUpdate")
    return {
      ok: false,
      message: `${label} updates in place (InPlaceUpdate), which changes images only: a restart is a template change it refuses. Rebuild a unit by replacement with --recreate --group G [--role R], or switch spec.rolloutStrategy.type to ServingGroupRollingUpdate or RoleRollingUpdate`,
    };
  const stamp = (template: PodTemplateSpec): PodTemplateSpec => ({
    ...template,
    metadata: {
      ...template.metadata,
      annotations: { ...template.metadata?.annotations, [ANNOTATION_RESTARTED_AT]: request.restartedAt },
    },
  });
  const roles = ms.spec.template.roles.map((role) => ({
    ...role,
    entryTemplate: stamp(role.entryTemplate),
    ...(role.workerTemplate === undefined ? {} : { workerTemplate: stamp(role.workerTemplate) }),
  }));
  const spec = { ...ms.spec, template: { ...ms.spec.template, roles } };
  const message = `${label} restarted: every pod template carries ${ANNOTATION_RESTARTED_AT}=${request.restartedAt}, a new revision that ${ms.spec.rolloutStrategy.type} rolls out within its budgets (follow it: tandem rollout status ${name} --watch)`;
  return { ok: true, object: { ...stored, spec: spec as unknown as JsonObject }, result: { ok: true, message } };
}

export interface RecreateCommand extends RolloutTarget, RecreateRequest {
  readonly maxAttempts?: number;
}

/**
 * `tandem rollout restart NAME --recreate --group G [--role R]`: writes the request
 * `tandem.dev/recreate` (src/api/recreate.ts) once it fits the spec; the controller replaces the
 * unit's pods once, within the budgets (src/core/recreate.ts). Refused while an earlier request
 * waits to be taken up (writing over it would lose it); one being carried out does not stop it.
 */
export function requestRecreate(ports: RollbackPorts, request: RecreateCommand): Promise<CommandResult> {
  return updateWithRetry(ports, request, () => prepareRecreate(ports.reader, request));
}

function prepareRecreate(reader: RollbackPorts["reader"], request: RecreateCommand): Prepared<CommandResult> {
  const { namespace, name } = request;
  const read = readModelServing(reader, request);
  if (!read.ok) return read;
  const { stored, ms } = read;
  const label = `ModelServing ${namespace}/${name}`;
  const waiting = readRecreateRequest(ms.metadata.annotations);
  if (waiting !== undefined && waiting.id !== ms.status?.recreate?.id)
    return {
      ok: false,
      message: `${label}: the recreate request ${waiting.id} is not taken up by the controller yet; wait for it (tandem rollout status ${name}) before asking again`,
    };
  // G is the group ordinal pod names and labels show, which a succession may have changed.
  const groups = groupOrdinals(OrdinalTable.read(ms.status?.ordinals), ms.spec.replicas);
  const problem = recreateProblem(ms.spec, request, groups);
  if (problem !== undefined) return { ok: false, field: problem.field, message: `${label}: ${problem.reason}` };
  const annotations = { ...stored.metadata.annotations, [ANNOTATION_RECREATE]: recreateAnnotationValue(request) };
  const message = `${label}: recreate of ${recreateUnitLabel(request)} requested (id ${request.id}); the controller replaces its pods once, within the budgets (follow it: tandem rollout status ${name} --watch)`;
  return {
    ok: true,
    object: { ...stored, metadata: { ...stored.metadata, annotations } },
    result: { ok: true, message },
  };
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

// ---------------------------------------------------------------------------------------------
// status, history, pause, resume

export interface RolloutTarget {
  readonly namespace: string;
  readonly name: string;
}

/** The rollout state of one ModelServing, as `tandem rollout status -o json|yaml` prints it. */
export interface RolloutStatusReport {
  readonly namespace: string;
  readonly name: string;
  readonly generation: number | undefined;
  readonly observedGeneration: number | undefined;
  readonly updateRevision: RevisionRef | undefined;
  readonly currentRevision: RevisionRef | undefined;
  readonly groups: {
    readonly desired: number;
    readonly ready: number;
    readonly updated: number;
    readonly available: number;
  };
  readonly roles: readonly {
    readonly name: string;
    readonly replicas: number;
    readonly ready: number;
    readonly updated: number;
  }[];
  readonly conditions: readonly {
    readonly type: string;
    readonly status: string;
    readonly reason?: string | undefined;
    readonly message?: string | undefined;
  }[];
  readonly paused: boolean;
  /** The explicit recreate the controller took up last (`status.recreate`), without its pod UIDs. */
  readonly recreate: Omit<RecreateRecord, "pods"> | undefined;
  /** Every unit runs the update revision and the status agrees (the simulator's RolloutComplete). */
  readonly complete: boolean;
  /** The controller has seen this generation and says RolloutBlocked=True: waiting will not finish it. */
  readonly blocked: boolean;
  /** What the rollout still waits for, every reason (empty when complete). */
  readonly waitingFor: readonly string[];
}

/** A revision by name and number (undefined when its ControllerRevision is not readable). */
export interface RevisionRef {
  readonly name: string;
  readonly revision: number | undefined;
}

export type RolloutStatusResult =
  | { readonly ok: true; readonly report: RolloutStatusReport; readonly lines: readonly string[] }
  | { readonly ok: false; readonly message: string };

/** Lines of `waitingFor` shown by default (`tandem rollout status -o wide` shows all). */
export const MAX_PENDING_LINES = 8;

/**
 * The rollout state of `target`, from `reader` (which should be fresh): generation, revisions,
 * counts per role, conditions, and whether the rollout is complete (the same predicate the
 * simulator's `RolloutComplete` wait uses) or what it is waiting for.
 */
export function rolloutStatus(reader: RollbackPorts["reader"], target: RolloutTarget): RolloutStatusResult {
  const read = readModelServing(reader, target);
  if (!read.ok) return read;
  const { ms, revisions } = read;
  const pods = reader.list("Pod", {
    namespace: target.namespace,
    labelSelector: `${LABEL_MODEL_SERVING}=${target.name}`,
  }) as unknown as Pod[];
  const byName = new Map(revisions.map((revision) => [revision.name, { name: revision.name, data: revision.data }]));
  const pending = rolloutPending(ms, placedPods(ms, pods), byName);
  const status = ms.status ?? {};
  const refOf = (name: string | undefined): RevisionRef | undefined =>
    name === undefined ? undefined : { name, revision: revisions.find((revision) => revision.name === name)?.revision };
  const conditions = status.conditions ?? [];
  const seen = status.observedGeneration !== undefined && status.observedGeneration === ms.metadata.generation;
  const report: RolloutStatusReport = {
    ...target,
    generation: ms.metadata.generation,
    observedGeneration: status.observedGeneration,
    updateRevision: refOf(status.updateRevision),
    currentRevision: refOf(status.currentRevision),
    groups: {
      desired: ms.spec.replicas,
      ready: status.readyReplicas ?? 0,
      updated: status.updatedReplicas ?? 0,
      available: status.availableReplicas ?? 0,
    },
    roles: (status.roles ?? []).map((role) => ({
      name: role.name,
      replicas: role.replicas,
      ready: role.ready,
      updated: role.updated,
    })),
    conditions: conditions.map((condition) => ({
      type: condition.type,
      status: condition.status,
      reason: condition.reason,
      message: condition.message,
    })),
    paused: ms.spec.rolloutStrategy.paused,
    recreate: recreateSummary(status.recreate),
    complete: pending.length === 0,
    blocked:
      pending.length > 0 &&
      seen &&
      conditions.some((condition) => condition.type === "RolloutBlocked" && condition.status === "True"),
    waitingFor: pending,
  };
  return { ok: true, report, lines: statusLines(report) };
}

function recreateSummary(record: RecreateRecord | undefined): Omit<RecreateRecord, "pods"> | undefined {
  if (record === undefined) return undefined;
  const { pods: _pods, ...rest } = record; // eslint-disable-line @typescript-eslint/no-unused-vars -- UIDs are for the controller
  return rest;
}

/** The human status block; at most `maxPendingLines` of what the rollout waits for. */
export function statusLines(report: RolloutStatusReport, maxPendingLines = MAX_PENDING_LINES): string[] {
  const refText = (ref: RevisionRef | undefined): string =>
    ref === undefined ? "(none)" : `${ref.name} (revision ${ref.revision ?? "?"})`;
  const lines = [
    `ModelServing ${report.namespace}/${report.name}: generation ${report.generation ?? "?"}, observed ${report.observedGeneration ?? "(not yet)"}`,
    `update revision ${refText(report.updateRevision)}, current revision ${refText(report.currentRevision)}`,
    `groups: ${report.groups.desired} desired, ${report.groups.ready} ready, ${report.groups.updated} updated, ${report.groups.available} available`,
    ...report.roles.map(
      (role) => `role ${role.name}: ${role.replicas} instances, ${role.ready} ready, ${role.updated} updated`,
    ),
    ...report.conditions.map(
      (condition) => `${condition.type}=${condition.status} (${condition.reason ?? ""}): ${condition.message ?? ""}`,
    ),
    ...(report.recreate === undefined
      ? []
      : [
          `recreate ${report.recreate.id} of ${recreateUnitLabel(report.recreate)}: ${report.recreate.phase}${report.recreate.message === undefined ? "" : ` (${report.recreate.message})`}`,
        ]),
  ];
  if (report.complete) lines.push(`rollout of ${report.name} complete`);
  else
    lines.push(
      `rollout of ${report.name} ${report.paused ? "paused" : "in progress"}; waiting for:`,
      ...report.waitingFor.slice(0, maxPendingLines).map((reason) => `  ${reason}`),
    );
  return lines;
}

export interface HistoryEntry {
  readonly revision: number;
  readonly name: string;
  /** `role=image[,image...]` per role (entry containers, then worker containers). */
  readonly images: string;
  /** `update`, `current`, both, or "". */
  readonly marks: string;
  /** The hash of the revision's data (the name's suffix). */
  readonly hash: string;
}

export type RolloutHistoryResult =
  | { readonly ok: true; readonly entries: readonly HistoryEntry[]; readonly unreadable: readonly string[] }
  | { readonly ok: false; readonly message: string };

/** The readable revisions of `target`, oldest first, with their images; unreadable ones by name and reason. */
export function rolloutHistory(reader: RollbackPorts["reader"], target: RolloutTarget): RolloutHistoryResult {
  const read = readModelServing(reader, target);
  if (!read.ok) return read;
  const status = read.ms.status ?? {};
  const entries = [...read.revisions]
    .sort((a, b) => a.revision - b.revision)
    .map((revision) => ({
      revision: revision.revision,
      name: revision.name,
      images: revision.data.roles
        .map(
          (role) =>
            `${role.name}=${[...role.entryTemplate.spec.containers, ...(role.workerTemplate?.spec.containers ?? [])].map((container) => container.image).join(",")}`,
        )
        .join(" "),
      marks: [
        revision.name === status.updateRevision ? "update" : "",
        revision.name === status.currentRevision ? "current" : "",
      ]
        .filter((mark) => mark !== "")
        .join(","),
      hash: revision.hash,
    }));
  return { ok: true, entries, unreadable: read.unreadable };
}

export type PauseResult = { readonly ok: boolean; readonly message: string };

/**
 * Sets `spec.rolloutStrategy.paused` by a merge patch (no read, no precondition: the field is the
 * user's alone). The controller stops starting updates while paused; runtime fields are untouched.
 */
export async function setPaused(writer: ClusterWriter, target: RolloutTarget, paused: boolean): Promise<PauseResult> {
  try {
    await writer.patch(
      { kind: "ModelServing", namespace: target.namespace, name: target.name },
      { spec: { rolloutStrategy: { paused } } },
    );
    return { ok: true, message: `ModelServing ${target.namespace}/${target.name} ${paused ? "paused" : "resumed"}` };
  } catch (error) {
    if (isApiError(error, "NotFound"))
      return { ok: false, message: `ModelServing ${target.namespace}/${target.name} not found` };
    return {
      ok: false,
      message: `${paused ? "pausing" : "resuming"} ModelServing ${target.namespace}/${target.name} failed: ${errorMessage(error)}`,
    };
  }
}

type ReadResult =
  | {
      readonly ok: true;
      readonly stored: KubeObject<"ModelServing">;
      readonly ms: ModelServing;
      /** Readable revisions owned by it. */
      readonly revisions: readonly StoredRevision[];
      /** Unreadable revisions as `name: reason`. */
      readonly unreadable: readonly string[];
      /** Every decode result of the revisions listed under its label. */
      readonly decoded: readonly DecodeResult[];
    }
  | { readonly ok: false; readonly message: string };

/** The stored and parsed ModelServing and its revisions (owned by it), split into readable and unreadable. */
function readModelServing(reader: RollbackPorts["reader"], target: RolloutTarget): ReadResult {
  const { namespace, name } = target;
  const stored = reader.get("ModelServing", namespace, name);
  if (stored === undefined) return { ok: false, message: `ModelServing ${namespace}/${name} not found` };
  const parsed = parseModelServing(stored);
  if (!parsed.ok)
    return {
      ok: false,
      message: `ModelServing ${namespace}/${name} is invalid: ${parsed.problems.map((found) => `${found.path}: ${found.reason}`).join("; ")}`,
    };
  const listed = reader.list("ControllerRevision", { namespace, labelSelector: `${LABEL_MODEL_SERVING}=${name}` });
  const decoded = listed.map(decodeControllerRevision);
  const revisions: StoredRevision[] = [];
  const unreadable: string[] = [];
  for (const result of decoded) {
    if (result.ok && result.revision.ownerUid === stored.metadata.uid) revisions.push(result.revision);
    else if (!result.ok) unreadable.push(`${result.name ?? "?"}: ${result.reason}`);
  }
  return { ok: true, stored, ms: parsed.value, revisions, unreadable, decoded };
}
