/**
 * The scenario report (DESIGN §6, contract) and the records it is built from. The report is a
 * pure function of (scenario, seed): it holds virtual times only, every object is built with a
 * fixed key order, and every list is sorted (pods by name, revisions by number, counts by key).
 */
import { LABEL_ENTRY, LABEL_GROUP, LABEL_INSTANCE, LABEL_REVISION, LABEL_ROLE } from "../api/wellknown.ts";
import type { JsonValue, KubeObject } from "../engine/ports.ts";
import type { InvariantResult } from "./checker.ts";
import { isJsonObject } from "./json.ts";
import type { PodEvent } from "./pod-events.ts";
import { isPodReady } from "./pod-status.ts";
import type { WriteCount } from "./apiserver.ts";
import { compareStrings } from "../core/maps.ts";
import type { Outcomes } from "../router/outcomes.ts";

/** DESIGN §6 pod record. */
export interface PodRecord {
  name: string;
  uid: string;
  group: number | null;
  role: string | null;
  instance: string | null;
  entry: boolean;
  revision: string | null;
  images: string[];
  node: string | null;
  phase: string;
  ready: boolean;
}

export interface StepRecord {
  index: number;
  kind: string;
  ok: boolean;
  /** Virtual seconds. */
  startedAt: number;
  endedAt: number;
  message: string;
  /** Pods that appeared on the server during the step, by role (roles with none left out). */
  podsCreated: Record<string, number>;
  /** Pods that disappeared from the server during the step, by role (roles with none left out). */
  podsDeleted: Record<string, number>;
  /** Only with `cluster.router`: the legs that ended during the step, by role (roles with none left out). */
  requests?: Record<string, StepRequests>;
}

/** Leg outcomes within one step. */
export type StepRequests = Outcomes;

/** A count in total and by `tandem.dev/role` (keys sorted). */
export interface ByRole {
  total: number;
  byRole: Record<string, number>;
}

export interface RequestCounts extends Outcomes {
  total: number;
  /** Still in flight when the run ended: `total - ok - failed - cut`. */
  inFlight: number;
}

export interface Metrics {
  podsCreated: ByRole;
  podsDeleted: ByRole;
  containerRestarts: ByRole;
  /** The controller's writes (client "controller"): total and by kind then verb. */
  apiWrites: { total: number; byKind: Record<string, Record<string, number>> };
  /**
   * Only with `cluster.router`: every leg in total and by role (a disaggregated request counts on
   * prefill and decode), and the requests a decode refused for their prefill's KV format.
   */
  requests?: RequestCounts & { incompatible: number; byRole: Record<string, RequestCounts> };
}

export interface Report {
  scenario: string;
  seed: number;
  verdict: "pass" | "fail";
  simulatedSeconds: number;
  steps: StepRecord[];
  invariants: InvariantResult[];
  metrics: Metrics;
  snapshots: Record<string, PodRecord[]>;
  final: { status: JsonValue; pods: PodRecord[]; revisions: { name: string; revision: number }[] };
  events: PodEvent[];
  /** The controller's Kubernetes Events (docs/design/events.md), repeats counted. */
  controllerEvents: ControllerEventRecord[];
}

/** A Kubernetes Event the controller recorded; times in virtual seconds (whole seconds, as Events store them). */
export interface ControllerEventRecord {
  first: number;
  last: number;
  count: number;
  type: string;
  reason: string;
  /** `<Kind>/<name>` of the object the Event is about. */
  object: string;
  message: string;
}

/**
 * Records of `events` (in the simulator only the controller writes Events), sorted by first time,
 * then object, then name (the recorder names one object's Events in the order it made them).
 */
export function controllerEventRecords(
  events: readonly KubeObject[],
  seconds: (timestamp: string) => number,
): ControllerEventRecord[] {
  const text = (value: unknown): string => (typeof value === "string" ? value : "");
  const named = events.map((event): { name: string; record: ControllerEventRecord } => {
    const involved = isJsonObject(event["involvedObject"]) ? event["involvedObject"] : {};
    const count = event["count"];
    const record = {
      first: seconds(text(event["firstTimestamp"])),
      last: seconds(text(event["lastTimestamp"])),
      count: typeof count === "number" ? count : 1,
      type: text(event["type"]),
      reason: text(event["reason"]),
      object: `${text(involved["kind"])}/${text(involved["name"])}`,
      message: text(event["message"]),
    };
    return { name: event.metadata.name, record };
  });
  named.sort(
    (a, b) =>
      a.record.first - b.record.first ||
      compareStrings(a.record.object, b.record.object) ||
      compareStrings(a.name, b.name),
  );
  return named.map((entry) => entry.record);
}

/** The report record of a pod as stored. */
export function podRecord(pod: KubeObject): PodRecord {
  const labels = pod.metadata.labels ?? {};
  const group = Number(labels[LABEL_GROUP]);
  const containers = Array.isArray(pod.spec?.["containers"]) ? pod.spec["containers"] : [];
  const nodeName = pod.spec?.["nodeName"];
  const phase = isJsonObject(pod.status) ? pod.status["phase"] : undefined;
  return {
    name: pod.metadata.name,
    uid: pod.metadata.uid ?? "",
    group: labels[LABEL_GROUP] !== undefined && Number.isSafeInteger(group) ? group : null,
    role: labels[LABEL_ROLE] ?? null,
    instance: labels[LABEL_INSTANCE] ?? null,
    entry: labels[LABEL_ENTRY] === "true",
    revision: labels[LABEL_REVISION] ?? null,
    images: containers.flatMap((container) =>
      isJsonObject(container) && typeof container["image"] === "string" ? [container["image"]] : [],
    ),
    node: typeof nodeName === "string" ? nodeName : null,
    phase: typeof phase === "string" ? phase : "Pending",
    ready: pod.metadata.deletionTimestamp === undefined && isPodReady(pod),
  };
}

/** Records of `pods`, sorted by name. */
export function podRecords(pods: readonly KubeObject[]): PodRecord[] {
  return pods.map(podRecord).sort((a, b) => compareStrings(a.name, b.name));
}

/** Pod events with a fixed key order. */
export function eventRecords(events: readonly PodEvent[]): PodEvent[] {
  return events.map((event) => ({
    t: event.t,
    type: event.type,
    pod: event.pod,
    ...(event.role === undefined ? {} : { role: event.role }),
    ...(event.group === undefined ? {} : { group: event.group }),
    ...(event.instance === undefined ? {} : { instance: event.instance }),
    ...(event.revision === undefined ? {} : { revision: event.revision }),
  }));
}

/** Counts events of `type` by role. */
export function eventsByRole(events: readonly PodEvent[], type: PodEvent["type"]): ByRole {
  const counts: Record<string, number> = {};
  for (const event of events) if (event.type === type) counts[event.role ?? ""] = (counts[event.role ?? ""] ?? 0) + 1;
  return byRole(counts);
}

/** What each role's leg counters gained from `before` to `after` (cumulative counts by role), roles with none left out. */
export function requestsDuring(
  before: Readonly<Record<string, StepRequests>>,
  after: Readonly<Record<string, StepRequests>>,
): Record<string, StepRequests> {
  const during: Record<string, StepRequests> = {};
  for (const role of Object.keys(after).sort(compareStrings)) {
    const now = after[role] as StepRequests;
    const then = before[role] ?? { ok: 0, failed: 0, cut: 0 };
    const gained = { ok: now.ok - then.ok, failed: now.failed - then.failed, cut: now.cut - then.cut };
    if (gained.ok + gained.failed + gained.cut > 0) during[role] = gained;
  }
  return during;
}

/** A by-role map as `{total, byRole}` with sorted keys. */
export function byRole(counts: Readonly<Record<string, number>>): ByRole {
  const sorted = sortedRecord(counts);
  return { total: Object.values(sorted).reduce((sum, count) => sum + count, 0), byRole: sorted };
}

/** The controller's write counts: total, by kind then verb. */
export function controllerWrites(counts: readonly WriteCount[], client = "controller"): Metrics["apiWrites"] {
  const byKind: Record<string, Record<string, number>> = {};
  let total = 0;
  for (const row of counts) {
    if (row.client !== client) continue;
    const verbs = (byKind[row.kind] ??= {});
    verbs[row.verb] = (verbs[row.verb] ?? 0) + row.count;
    total += row.count;
  }
  return {
    total,
    byKind: Object.fromEntries(
      Object.keys(byKind)
        .sort(compareStrings)
        .map((kind) => [kind, sortedRecord(byKind[kind] ?? {})]),
    ),
  };
}

/** A deep copy of JSON with object keys sorted, so foreign objects print in a stable order. */
export function canonical(value: unknown): JsonValue {
  if (Array.isArray(value)) return value.map(canonical);
  if (isJsonObject(value))
    return Object.fromEntries(
      Object.keys(value)
        .sort(compareStrings)
        .map((key) => [key, canonical(value[key])]),
    );
  return value === undefined ? null : (value as JsonValue);
}

function sortedRecord<T>(record: Readonly<Record<string, T>>): Record<string, T> {
  return Object.fromEntries(
    Object.keys(record)
      .sort(compareStrings)
      .map((key) => [key, record[key] as T]),
  );
}
