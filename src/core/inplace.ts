/**
 * In-place update (DESIGN §2.10, seed §5): under `rolloutStrategy.type: InPlaceUpdate` a group the
 * rollout has moved to another revision keeps its pods; per role instance:
 *
 * 1. drain: every pod's serving gate False and `tandem.dev/draining` (DESIGN §3), with the progress
 *    annotation `tandem.dev/inplace` in phase `Draining`; wait for the router's ack on entries that
 *    were serving, or `drain.timeoutSeconds`;
 * 2. patch: each pod whose regular-container images differ from the target gets them in one write
 *    with the progress annotation in phase `Patched`, which records the containerIDs before the
 *    patch (the baseline);
 * 3. verify: each patched container reports the new image, a containerID other than the baseline,
 *    and is ready (a changed spec proves nothing, seed §5);
 * 4. finish: gate True, drain and progress annotations removed, and the pod's revision and
 *    role-hash labels set to the target, so status, history and GC see it.
 *
 * Only instances of a role whose spec (its role hash, `sameRoleSpec`) differs between their pods'
 * revision and the target move. The pods of a role the target leaves unchanged get no write at
 * all — no drain, gate or relabel — exactly as under RoleRollingUpdate: they keep their older
 * revision label, `computeState` counts them at the group's record, and history keeps their
 * revision while they name it.
 *
 * Every step is decided from the observed pod alone, so a restarted controller continues where it
 * stopped. A patched container that fails on its new image (crash loop, pull error) moves the
 * annotation to `Stalled` with one InPlaceVerifyFailed Warning event (the event goes with that
 * phase write, so a stateless planner raises it once); the pod stays as it is and holds the budget: it is never
 * recreated unless the user changes the spec again or switches the strategy.
 *
 * Eligibility: only regular-container images may differ between a pod's revision and its target;
 * anything else is refused (`inPlaceDifferences`), never turned into a recreate. Pure.
 */
import type { ContainerStatus, Pod } from "../api/kube.ts";
import {
  ANNOTATION_IN_PLACE,
  LABEL_GROUP,
  LABEL_MODEL_SERVING,
  LABEL_REVISION,
  LABEL_ROLE_HASH,
} from "../api/wellknown.ts";
import type { Action } from "./actions.ts";
import { planDrain, podList, setServing, withGate } from "./drain.ts";
import type { DrainStep } from "./drain.ts";
import { recordEvent } from "./events.ts";
import { drainMarkKeys } from "./health.ts";
import { instanceId } from "./identity.ts";
import type { Model, PodView } from "./model.ts";
import type { Revision } from "./pods.ts";
import { sameCanonicalJson } from "./revision/canonical.ts";
import type { JsonValue } from "./revision/canonical.ts";
import type { RevisionData, RevisionPodTemplate } from "./revision/format.ts";
import { normalizedData } from "./revision/projection.ts";
import { roleHash, sameRoleSpec } from "./role-hash.ts";

export type InPlacePhase = "Draining" | "Patched" | "Stalled";

/** The value of `tandem.dev/inplace` (see `api/wellknown.ts`). */
export interface InPlaceProgress {
  readonly from: string;
  readonly to: string;
  readonly phase: InPlacePhase;
  /** Patched containers → their containerID before the patch ("" when none ran). */
  readonly containerIDs: Readonly<Record<string, string>>;
}

/** Groups whose pods cannot move in place to `to`, and why (what differs). */
export interface Ineligible {
  readonly group: number;
  readonly from: string;
  readonly to: string;
  readonly differences: readonly string[];
}

/** Container states that mean the new image does not run: the update is stalled. */
const STALLED_REASONS: ReadonlySet<string> = new Set([
  "CrashLoopBackOff",
  "ErrImagePull",
  "ImagePullBackOff",
  "InvalidImageName",
  "CreateContainerError",
  "CreateContainerConfigError",
  "RunContainerError",
]);

export function readProgress(pod: Pod): InPlaceProgress | undefined {
  const raw = pod.metadata.annotations?.[ANNOTATION_IN_PLACE];
  if (raw === undefined) return undefined;
  try {
    const value = JSON.parse(raw) as { from?: unknown; to?: unknown; phase?: unknown; containerIDs?: unknown } | null;
    const phase = value?.phase;
    if (
      typeof value?.from !== "string" ||
      typeof value.to !== "string" ||
      (phase !== "Draining" && phase !== "Patched" && phase !== "Stalled")
    )
      return undefined;
    const ids =
      typeof value.containerIDs === "object" && value.containerIDs !== null
        ? (value.containerIDs as Record<string, unknown>)
        : {};
    const containerIDs = Object.fromEntries(
      Object.entries(ids).filter((entry): entry is [string, string] => typeof entry[1] === "string"),
    );
    return { from: value.from, to: value.to, phase, containerIDs };
  } catch {
    // Someone else's edit; treated as absent, so the pod is drained (again) and re-baselined.
    return undefined;
  }
}

/** Fixed key order, so equal progress gives equal annotations. */
export function formatProgress(progress: InPlaceProgress): string {
  return JSON.stringify({
    from: progress.from,
    to: progress.to,
    phase: progress.phase,
    containerIDs: progress.containerIDs,
  });
}

/**
 * What differs between `from` and `to` beyond regular-container images, for a person
 * (`role decode entryTemplate: container vllm field args`); empty when the change may be made in
 * place. Containers are matched by name and must keep their order.
 */
export function inPlaceDifferences(from: RevisionData, to: RevisionData): string[] {
  const a = normalizedData(from);
  const b = normalizedData(to);
  const differences: string[] = [];
  if (a.schedulerName !== b.schedulerName) differences.push("schedulerName");
  if (!sameCanonicalJson((a.plugins ?? []) as JsonValue, (b.plugins ?? []) as JsonValue)) differences.push("plugins");
  const names = [...new Set([...a.roles, ...b.roles].map((role) => role.name))].sort();
  for (const name of names) {
    const left = a.roles.find((role) => role.name === name);
    const right = b.roles.find((role) => role.name === name);
    if (left === undefined || right === undefined) {
      differences.push(`role ${name} ${left === undefined ? "added" : "removed"}`);
      continue;
    }
    if (left.workerReplicas !== right.workerReplicas) differences.push(`role ${name}: workerReplicas`);
    differences.push(...templateDifferences(`role ${name} entryTemplate`, left.entryTemplate, right.entryTemplate));
    differences.push(...templateDifferences(`role ${name} workerTemplate`, left.workerTemplate, right.workerTemplate));
  }
  return differences;
}

function templateDifferences(
  where: string,
  a: RevisionPodTemplate | undefined,
  b: RevisionPodTemplate | undefined,
): string[] {
  if (a === undefined || b === undefined) return a === b ? [] : [`${where} ${a === undefined ? "added" : "removed"}`];
  const { containers: left, ...leftSpec } = a.spec;
  const { containers: right, ...rightSpec } = b.spec;
  const differences = [
    ...keyDifferences(a.metadata ?? {}, b.metadata ?? {}).map((key) => `${where}: metadata.${key}`),
    ...keyDifferences(leftSpec, rightSpec).map((key) => `${where}: spec.${key}`),
  ];
  const leftNames = left.map((container) => container.name);
  const rightNames = right.map((container) => container.name);
  if (leftNames.join(",") !== rightNames.join(","))
    return [...differences, `${where}: containers [${leftNames.join(", ")}] → [${rightNames.join(", ")}]`];
  left.forEach((container, index) => {
    const { image: _left, ...leftRest } = container; // eslint-disable-line @typescript-eslint/no-unused-vars -- images may differ
    const { image: _right, ...rightRest } = right[index] ?? container; // eslint-disable-line @typescript-eslint/no-unused-vars -- images may differ
    for (const key of keyDifferences(leftRest, rightRest))
      differences.push(`${where}: container ${container.name} field ${key}`);
  });
  return differences;
}

/** Keys whose values differ between two objects, sorted. */
function keyDifferences(a: object, b: object): string[] {
  const left = a as Record<string, JsonValue>;
  const right = b as Record<string, JsonValue>;
  return [...new Set([...Object.keys(left), ...Object.keys(right)])]
    .sort()
    .filter((key) => !sameCanonicalJson(left[key] ?? null, right[key] ?? null));
}

/**
 * The live pods of `group` that cannot move in place to `to`, one entry per revision they are at.
 * Pods at an unreadable revision are left out (`lookup` reports them, nothing is guessed), and so
 * are pods whose role spec `to` does not change: they do not move (`movesInPlace`), whatever
 * else differs between their revision and `to`.
 */
export function groupIneligibility(
  model: Model,
  lookup: (name: string) => Revision | undefined,
  group: number,
  to: Revision,
): Ineligible[] {
  const froms = new Set<string>();
  for (const [role, instances] of model.tree.get(group) ?? []) {
    for (const pods of instances.values())
      for (const view of pods.values()) {
        if (view.facts.terminating || view.revision === undefined || view.revision === to.name) continue;
        const from = lookup(view.revision);
        if (from !== undefined && !sameRoleSpec(from.data, to.data, role)) froms.add(view.revision);
      }
  }
  return [...froms].sort().flatMap((name) => {
    const from = lookup(name);
    const differences = from === undefined ? [] : inPlaceDifferences(from.data, to.data);
    return differences.length === 0 ? [] : [{ group, from: name, to: to.name, differences }];
  });
}

/** The RolloutBlocked condition's reason and message for refused groups (a person can act on it). */
export function ineligibleCondition(refused: readonly Ineligible[]): { reason: string; message: string } {
  const byChange = new Map<string, number[]>();
  for (const entry of refused) {
    const key = `revision ${entry.from} → ${entry.to} changes ${entry.differences.slice(0, 3).join(", ")}${entry.differences.length > 3 ? ` and ${entry.differences.length - 3} more` : ""}`;
    byChange.set(
      key,
      [...new Set([...(byChange.get(key) ?? []), entry.group])].sort((x, y) => x - y),
    );
  }
  const items = [...byChange].map(([change, groups]) => `group(s) ${groups.join(", ")}: ${change}`);
  return {
    reason: "InPlaceIneligible",
    message:
      `InPlaceUpdate can only change regular-container images; nothing is done for the refused groups. ${items.slice(0, 3).join("; ")}${items.length > 3 ? `; and ${items.length - 3} more` : ""}. ` +
      "To apply this change, switch spec.rolloutStrategy.type to ServingGroupRollingUpdate or RoleRollingUpdate (the pods are replaced), or revert the change.",
  };
}

/**
 * The pod is in the middle of an in-place update whose only unready containers are the patched
 * ones: their restarts are the update's, judged by verification, not failures to recover from.
 */
export function isInPlaceRestart(pod: Pod): boolean {
  const progress = readProgress(pod);
  if (progress === undefined || progress.phase === "Draining" || pod.status?.phase === "Failed") return false;
  return (pod.status?.containerStatuses ?? []).every(
    (status) => status.ready || Object.hasOwn(progress.containerIDs, status.name),
  );
}

/** Docker Hub's implicit registry, repository and tag, so `vllm` and `docker.io/library/vllm:latest` match. */
function normalizedImage(image: string): string {
  const named = image.replace(/^(docker\.io|index\.docker\.io)\/(library\/)?/, "");
  const lastPart = named.slice(named.lastIndexOf("/") + 1);
  return lastPart.includes(":") || lastPart.includes("@") ? named : `${named}:latest`;
}

/** One pod of an instance moving in place, as planning sees it. */
interface PodMove {
  readonly view: PodView;
  readonly from: string;
  readonly progress: InPlaceProgress | undefined;
  /** Regular containers whose spec image differs from the target's → the target image. */
  readonly changes: Readonly<Record<string, string>>;
}

/** Verification of a patched pod. */
type Verdict =
  { readonly kind: "none" | "verified" | "pending" } | { readonly kind: "stalled"; readonly detail: string };

/** What one plan does for one instance moving in place. */
export interface InPlaceStep extends DrainStep {
  readonly ineligible: readonly Ineligible[];
}

export interface InPlaceInput {
  readonly model: Model;
  readonly nowMs: number;
  readonly lookup: (name: string) => Revision | undefined;
}

/**
 * The instance of `role` has pods to move in place: in progress, or built from a revision whose
 * spec of `role` differs from `target`'s. Pods whose role spec `target` does not change (another
 * role changed, or an equal revision has another name, e.g. re-hashed by a newer controller) are
 * left alone at their label, as RoleRollingUpdate leaves them (`computeState` counts them at the
 * target): a relabel would be the only write they get, for nothing they run.
 */
export function movesInPlace(
  live: readonly PodView[],
  target: Revision,
  role: string,
  lookup: (name: string) => Revision | undefined,
): boolean {
  return live.some((view) => {
    if (view.pod.metadata.annotations?.[ANNOTATION_IN_PLACE] !== undefined) return true;
    if (view.revision === undefined || view.revision === target.name) return false;
    const from = lookup(view.revision);
    return from === undefined || !sameRoleSpec(from.data, target.data, role);
  });
}

/** Plans the next in-place step of the instance whose live pods are `live` (see the module comment). */
export function planInPlace(
  input: InPlaceInput,
  at: { group: number; role: string; instance: number },
  live: readonly PodView[],
  target: Revision,
): InPlaceStep {
  const froms = [...new Set(live.map((view) => view.revision ?? target.name))].sort();
  const resolved = froms.map((name) => ({ name, revision: input.lookup(name) }));
  if (resolved.some((entry) => entry.revision === undefined))
    return { actions: [], recheckAtMs: undefined, wait: undefined, ineligible: [] };
  const ineligible = resolved.flatMap(({ name, revision }) => {
    const differences = revision === undefined ? [] : inPlaceDifferences(revision.data, target.data);
    return differences.length === 0 ? [] : [{ group: at.group, from: name, to: target.name, differences }];
  });
  if (ineligible.length > 0) return { actions: [], recheckAtMs: undefined, wait: undefined, ineligible };
  const moves = live.map((view) => podMove(view, target));
  const verdicts = moves.map((move) =>
    Object.keys(move.changes).length > 0 ? { kind: "pending" as const } : verify(move),
  );
  const label = `${instanceId(at.role, at.instance)} of group ${at.group}`;
  if (verdicts.every((verdict) => verdict.kind === "none" || verdict.kind === "verified"))
    return {
      actions: finish(moves, target, at.role, input.nowMs, label),
      recheckAtMs: undefined,
      wait: undefined,
      ineligible: [],
    };
  const patching = planPatches(input, label, moves, target);
  const stalls = moves.flatMap((move, index) => {
    const verdict = verdicts[index];
    return verdict?.kind === "stalled" && move.progress?.phase === "Patched"
      ? markStalled(move, verdict.detail, label)
      : [];
  });
  return { ...patching, actions: [...patching.actions, ...stalls], ineligible: [] };
}

function podMove(view: PodView, target: Revision): PodMove {
  const role = target.data.roles.find((candidate) => candidate.name === view.id.role);
  const template = view.id.index === 0 ? role?.entryTemplate : role?.workerTemplate;
  const wanted = new Map((template?.spec.containers ?? []).map((container) => [container.name, container.image]));
  const changes = Object.fromEntries(
    view.pod.spec.containers.flatMap((container) => {
      const image = wanted.get(container.name);
      return image === undefined || image === container.image ? [] : [[container.name, image]];
    }),
  );
  return { view, from: view.revision ?? target.name, progress: readProgress(view.pod), changes };
}

/** Whether the patched containers of a pod run their new image (see the module comment). */
function verify(move: PodMove): Verdict {
  const { progress, view } = move;
  if (progress === undefined || progress.phase === "Draining") return { kind: "none" };
  const statuses = view.pod.status?.containerStatuses ?? [];
  let verified = view.facts.containersReady;
  for (const [name, baselineId] of Object.entries(progress.containerIDs)) {
    const image = view.pod.spec.containers.find((container) => container.name === name)?.image ?? "";
    const status = statuses.find((candidate) => candidate.name === name);
    const onImage = status !== undefined && normalizedImage(status.image) === normalizedImage(image);
    const stalled = onImage ? stalledReason(status) : undefined;
    if (stalled !== undefined) return { kind: "stalled", detail: `container ${name} on ${image}: ${stalled}` };
    const restarted =
      status?.containerID !== undefined && status.containerID !== "" && status.containerID !== baselineId;
    verified &&= onImage && restarted && status.ready;
  }
  return { kind: verified ? "verified" : "pending" };
}

function stalledReason(status: ContainerStatus): string | undefined {
  const waiting = status.state?.waiting?.reason;
  if (waiting !== undefined && STALLED_REASONS.has(waiting))
    return waiting + (status.state?.waiting?.message === undefined ? "" : ` (${status.state.waiting.message})`);
  const terminated = status.state?.terminated;
  return terminated === undefined
    ? undefined
    : `terminated with exit code ${terminated.exitCode}${terminated.reason === undefined ? "" : ` (${terminated.reason})`}`;
}

/**
 * Drains the instance (every pod, so workers follow their entry), then patches each pod that is
 * marked, once the drain is over. The mark must be observed first: its write changes the
 * resourceVersion the patch is conditional on.
 */
function planPatches(input: InPlaceInput, label: string, moves: readonly PodMove[], target: Revision): DrainStep {
  const unpatched = moves.filter((move) => Object.keys(move.changes).length > 0);
  if (unpatched.length === 0) return { actions: [], recheckAtMs: undefined, wait: undefined };
  const progressOf = new Map(moves.map((move) => [move.view.uid, move]));
  const drainingMark = (view: PodView) => ({
    [ANNOTATION_IN_PLACE]: formatProgress({
      from: progressOf.get(view.uid)?.from ?? target.name,
      to: target.name,
      phase: "Draining",
      containerIDs: {},
    }),
  });
  const drain = planDrain(
    moves.map((move) => move.view),
    input.model.drain,
    { unitLabel: label, next: "updating images" },
    input.nowMs,
    drainingMark,
  );
  // A pod patched before (the target changed since) was drained then: no second DrainTimeout.
  const repatch = moves.some((move) => move.progress !== undefined && move.progress.phase !== "Draining");
  const actions = drain.actions.filter((action) => !(repatch && action.type === "RecordEvent"));
  if (!drain.drained) return { actions, recheckAtMs: drain.recheckAtMs, wait: drain.wait };
  const patched = unpatched.filter((move) => move.view.facts.drainingSinceMs !== undefined);
  if (patched.length > 0) actions.push(patchEvent(label, patched, target));
  for (const move of patched) actions.push(patch(move, target));
  return { actions, recheckAtMs: undefined, wait: undefined };
}

/** InPlacePatched, or InPlaceTakeover when a pod was patched toward another revision before. */
function patchEvent(label: string, moves: readonly PodMove[], target: Revision): Action {
  const images = [
    ...new Set(moves.flatMap((move) => Object.entries(move.changes).map(([name, image]) => `${name}=${image}`))),
  ]
    .sort()
    .join(", ");
  const what = `${podList(moves.map((move) => move.view))} (${images})`;
  const earlier = [
    ...new Set(
      moves.flatMap((move) =>
        move.progress !== undefined && move.progress.phase !== "Draining" && move.progress.to !== target.name
          ? [`${move.progress.to} (${move.progress.phase})`]
          : [],
      ),
    ),
  ].sort();
  if (earlier.length > 0)
    return recordEvent(
      "InPlaceTakeover",
      `Patching ${label} in place again, to revision ${target.name}, taking over from the update to ${earlier.join(", ")}: ${what}.`,
    );
  return recordEvent(
    "InPlacePatched",
    `Patching ${label} in place to revision ${target.name}: ${what}; verifying that the new images run.`,
  );
}

function patch(move: PodMove, target: Revision): Action {
  const { pod } = move.view;
  const statuses = pod.status?.containerStatuses ?? [];
  const containerIDs = Object.fromEntries(
    Object.keys(move.changes).map((name) => [name, statuses.find((status) => status.name === name)?.containerID ?? ""]),
  );
  const progress: InPlaceProgress = { from: move.from, to: target.name, phase: "Patched", containerIDs };
  return {
    type: "PatchPodImages",
    name: pod.metadata.name,
    uid: move.view.uid,
    resourceVersion: pod.metadata.resourceVersion ?? "",
    images: move.changes,
    annotations: { [ANNOTATION_IN_PLACE]: formatProgress(progress) },
  };
}

function markStalled(move: PodMove, detail: string, label: string): Action[] {
  const { pod } = move.view;
  const progress = move.progress;
  if (progress === undefined) return [];
  return [
    {
      type: "AnnotatePod",
      name: pod.metadata.name,
      uid: move.view.uid,
      annotations: { [ANNOTATION_IN_PLACE]: formatProgress({ ...progress, phase: "Stalled" }) },
    },
    recordEvent(
      "InPlaceVerifyFailed",
      `${label}: ${pod.metadata.name} does not run revision ${progress.to}: ${detail}. The group stays out of traffic and holds the update budget; it is not recreated. ` +
        "To recover, fix or revert the image in the spec (the pod is patched again in place), rebuild the group by replacement " +
        `(tandem rollout restart ${pod.metadata.labels?.[LABEL_MODEL_SERVING] ?? "NAME"} --recreate --group ${pod.metadata.labels?.[LABEL_GROUP] ?? "G"}), ` +
        "or switch spec.rolloutStrategy.type to a rolling update to replace the pods.",
      pod.metadata.name,
    ),
  ];
}

/**
 * Opens the gates, removes the drain and progress marks and relabels every pod of the moved
 * instance at `target`; with an InPlaceUpdated event when pods patched in place are verified (the
 * mark removal is the write that goes with it). Only an instance that moves gets here
 * (`movesInPlace`), so the relabel never costs a write of its own for a role the update leaves
 * unchanged.
 */
function finish(moves: readonly PodMove[], target: Revision, role: string, nowMs: number, label: string): Action[] {
  const hash = roleHash(target.data, role);
  const gates: Action[] = [];
  const marks: Action[] = [];
  for (const { view } of moves) {
    const { pod } = view;
    const gate =
      !view.facts.serving && view.facts.containersReady ? setServing(view, "True", "InPlaceUpdated", nowMs) : undefined;
    const present = drainMarkKeys(pod);
    const labelsNow = pod.metadata.labels ?? {};
    const relabel =
      labelsNow[LABEL_REVISION] !== target.name || (hash !== undefined && labelsNow[LABEL_ROLE_HASH] !== hash);
    if (present.length === 0 && !relabel) {
      if (gate !== undefined) gates.push(gate);
      continue;
    }
    const labels = relabel
      ? { labels: { [LABEL_REVISION]: target.name, ...(hash === undefined ? {} : { [LABEL_ROLE_HASH]: hash }) } }
      : {};
    // The gate opens in the same write as the marks go (one status write).
    const annotate = {
      type: "AnnotatePod",
      name: pod.metadata.name,
      uid: view.uid,
      annotations: Object.fromEntries(present.map((key) => [key, null])),
      ...labels,
    } as const;
    marks.push(withGate(annotate, gate));
  }
  const verified = moves.filter((move) => move.progress !== undefined && move.progress.phase !== "Draining");
  const event =
    verified.length > 0 && marks.length > 0
      ? [
          recordEvent(
            "InPlaceUpdated",
            `Updated ${label} in place to revision ${target.name}: ${podList(verified.map((move) => move.view))} verified on the new images; back in traffic.`,
          ),
        ]
      : [];
  return [...event, ...gates, ...marks];
}
