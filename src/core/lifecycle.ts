/**
 * The serving lifecycle (DESIGN §2.5, lifecycle issue): create groups → roles → instances → pods,
 * scale groups and role instances (highest ordinal first, drained), keep instances whole, and
 * recover failures by `recoveryPolicy`. Pure: appends actions to a `Work` accumulator.
 */
import type { Role } from "../api/schema.ts";
import type { Action } from "./actions.ts";
import { cancelDrain, openGate, planDrainedDeletion } from "./drain.ts";
import { hasStarted, instanceHealth, isTerminating, podFailure, range } from "./health.ts";
import type { InstanceHealth } from "./health.ts";
import { instanceId, serviceName } from "./identity.ts";
import type { InstancePods, Model, PodView } from "./model.ts";
import type { Revision } from "./pods.ts";
import { buildPod, buildService } from "./pods.ts";
import type { Revisions } from "./revisions.ts";
import { recordedRevision } from "./units.ts";

/** What planning accumulates: actions in order, when to look again, and why it waits. */
export interface Work {
  readonly actions: Action[];
  recheckAtMs: number | undefined;
  /** Reasons some units cannot be acted on because a revision they depend on is unreadable. */
  readonly unreadable: string[];
}

export function newWork(): Work {
  return { actions: [], recheckAtMs: undefined, unreadable: [] };
}

export function recheckAt(work: Work, atMs: number | undefined): void {
  if (atMs !== undefined) work.recheckAtMs = work.recheckAtMs === undefined ? atMs : Math.min(work.recheckAtMs, atMs);
}

interface Context {
  readonly model: Model;
  readonly revisions: Revisions;
  readonly nowMs: number;
  readonly work: Work;
}

/** A desired instance with the revision it is at and how its pods are doing. */
export interface DesiredInstance {
  readonly group: number;
  readonly role: string;
  readonly instance: number;
  readonly pods: InstancePods | undefined;
  readonly revision: Revision;
  readonly health: InstanceHealth;
}

/**
 * Plans creation, scaling and recovery for every group. A Service is kept while its instance is
 * desired with workers or still has pods (workers being drained still resolve their entry).
 */
export function planLifecycle(model: Model, revisions: Revisions, nowMs: number, work: Work): DesiredInstance[] {
  const context = { model, revisions, nowMs, work };
  const neededServices = new Set<string>();
  const desired: DesiredInstance[] = [];
  for (const [group, roles] of model.tree) {
    if (group >= model.ms.spec.replicas) scaleDown(context, [...roles.values()].flatMap((instances) => [...instances.values()]), `group ${group}`);
  }
  for (const group of range(model.ms.spec.replicas)) desired.push(...planGroup(context, group, neededServices));
  for (const [group, roles] of model.tree) {
    for (const [role, instances] of roles) for (const [instance, pods] of instances) if (pods.size > 0) neededServices.add(serviceName(model.owner.name, group, role, instance));
  }
  for (const [name, service] of model.services) {
    if (!neededServices.has(name) && service.metadata.uid !== undefined) work.actions.push({ type: "DeleteService", name, uid: service.metadata.uid });
  }
  return desired;
}

function scaleDown(context: Context, units: readonly InstancePods[], label: string): void {
  const pods = units.flatMap((pods) => [...pods.values()]);
  const step = planDrainedDeletion(pods, context.model.ms.spec.drain.timeoutSeconds, "ScaleDown", label, context.nowMs);
  context.work.actions.push(...step.actions);
  recheckAt(context.work, step.recheckAtMs);
}

/** Plans one desired group; returns its desired instances (those whose revision is readable). */
function planGroup(context: Context, group: number, neededServices: Set<string>): DesiredInstance[] {
  const { model } = context;
  const observed = model.tree.get(group) ?? new Map<string, ReadonlyMap<number, InstancePods>>();
  const specRoles = new Map(model.ms.spec.template.roles.map((role) => [role.name, role]));
  for (const [role, instances] of observed) {
    const replicas = specRoles.get(role)?.replicas ?? 0;
    for (const [instance, pods] of [...instances].reverse()) if (instance >= replicas) scaleDown(context, [pods], `${instanceId(role, instance)} of group ${group}`);
  }
  const desired = model.ms.spec.template.roles.flatMap((role) => desiredInstances(context, group, role, observed.get(role.name)));
  if (model.ms.spec.recoveryPolicy === "ServingGroupRecreate" && desired.some((instance) => isBroken(context, instance))) {
    recoverGroup(context, group, desired);
    return desired;
  }
  for (const instance of desired) {
    planInstance(context, instance);
    if (expectedPods(instance.revision, instance.role) > 1) neededServices.add(serviceName(model.owner.name, group, instance.role, instance.instance));
  }
  return desired;
}

export function expectedPods(revision: Revision, role: string): number {
  const spec = revision.data.roles.find((candidate) => candidate.name === role);
  return spec === undefined ? 0 : 1 + spec.workerReplicas;
}

/** The desired instances of `role` in `group`, each resolved to its revision (unreadable ones skipped). */
function desiredInstances(context: Context, group: number, role: Role, observed: ReadonlyMap<number, InstancePods> | undefined): DesiredInstance[] {
  const result: DesiredInstance[] = [];
  for (const instance of range(role.replicas)) {
    const pods = observed?.get(instance);
    const revision = instanceRevision(context, group, role.name, instance, pods);
    if (revision === undefined) continue;
    result.push({ group, role: role.name, instance, pods, revision, health: instanceHealth(pods, expectedPods(revision, role.name)) });
  }
  return result;
}

/**
 * The revision an instance is at: its live pods' label, else its durable record, else the current
 * revision; a role the current revision lacks (a role added since) starts at the update revision.
 */
function instanceRevision(context: Context, group: number, role: string, instance: number, pods: InstancePods | undefined): Revision | undefined {
  const { revisions } = context;
  const live = [...(pods?.values() ?? [])].find((view) => !isTerminating(view.pod) && view.revision !== undefined);
  const name = live?.revision ?? recordedRevision(context.model.ms.status?.units, group, role, instance) ?? revisions.currentName;
  const lookup = revisions.lookup(name);
  if (!lookup.ok) {
    context.work.unreadable.push(`${instanceId(role, instance)} of group ${group}: ${lookup.reason}`);
    return undefined;
  }
  const hasRole = lookup.revision.data.roles.some((candidate) => candidate.name === role);
  return hasRole || live !== undefined ? lookup.revision : revisions.update;
}

/**
 * An instance is broken when a pod has failed, or when a pod is missing or being deleted while
 * another has already started (a partially created instance whose pods are all still pending is
 * just being created, e.g. by a controller that restarted mid-creation).
 */
function isBroken(context: Context, instance: DesiredInstance): boolean {
  const { health } = instance;
  if (failedPods(context, health.live).length > 0) return true;
  const incomplete = health.absent.length > 0 || health.terminating.length > 0;
  return incomplete && health.live.some((view) => hasStarted(view.pod));
}

function failedPods(context: Context, pods: readonly PodView[]): PodView[] {
  const graceSeconds = context.model.ms.spec.template.restartGracePeriodSeconds;
  return pods.filter((view) => {
    const verdict = podFailure(view.pod, graceSeconds, context.nowMs);
    if (!verdict.failed) recheckAt(context.work, verdict.recheckAtMs);
    return verdict.failed;
  });
}

function planInstance(context: Context, instance: DesiredInstance): void {
  const { work, nowMs } = context;
  const { health } = instance;
  const label = `${instanceId(instance.role, instance.instance)} of group ${instance.group}`;
  for (const view of health.extra) work.actions.push({ type: "DeletePod", name: view.pod.metadata.name, uid: view.uid, reason: "Orphan" });
  if (isBroken(context, instance)) {
    const policy = context.model.ms.spec.recoveryPolicy;
    const victims = policy === "None" ? failedPods(context, health.live) : health.live;
    deleteForRecovery(context, victims, `${label} failed (${describeFailure(context, instance)}); ${policy === "None" ? "replacing the failed pods" : "rebuilding the instance"}`);
    if (policy === "None") createAbsent(context, instance);
    return;
  }
  createAbsent(context, instance);
  for (const view of health.live) work.actions.push(...cancelDrain(view, nowMs), ...openGate(view, nowMs));
}

function recoverGroup(context: Context, group: number, desired: readonly DesiredInstance[]): void {
  const broken = desired.filter((instance) => isBroken(context, instance));
  const why = broken.map((instance) => `${instanceId(instance.role, instance.instance)}: ${describeFailure(context, instance)}`).join("; ");
  deleteForRecovery(context, desired.flatMap((instance) => instance.health.live), `group ${group} failed (${why}); rebuilding the group`);
}

function deleteForRecovery(context: Context, victims: readonly PodView[], message: string): void {
  if (victims.length === 0) return;
  context.work.actions.push({ type: "RecordEvent", eventType: "Warning", reason: "Recovering", message });
  // Dead or broken pods serve nothing: no drain (DESIGN §3.4).
  for (const view of victims) context.work.actions.push({ type: "DeletePod", name: view.pod.metadata.name, uid: view.uid, reason: "Recovery" });
}

function describeFailure(context: Context, instance: DesiredInstance): string {
  const failed = failedPods(context, instance.health.live).map((view) => `${view.pod.metadata.name} ${view.pod.status?.phase === "Failed" ? "failed" : "keeps restarting"}`);
  const gone = [...instance.health.terminating.map((view) => view.pod.metadata.name), ...instance.health.absent.map((index) => `pod ${index}`)];
  return [...failed, ...(gone.length > 0 ? [`lost ${gone.join(", ")}`] : [])].join(", ");
}

/** Creates the instance's pods that have no pod at all (a terminating pod still holds its name). */
function createAbsent(context: Context, instance: DesiredInstance): void {
  const { model, work } = context;
  if (instance.health.absent.length === 0) return;
  if (instance.health.live.length === 0 && instance.health.terminating.length === 0) {
    work.actions.push({
      type: "RecordEvent",
      eventType: "Normal",
      reason: "CreateInstance",
      message: `creating ${instanceId(instance.role, instance.instance)} of group ${instance.group} at revision ${instance.revision.name}`,
    });
  }
  if (expectedPods(instance.revision, instance.role) > 1 && !model.services.has(serviceName(model.owner.name, instance.group, instance.role, instance.instance))) {
    work.actions.push({ type: "CreateService", service: buildService(model.owner, instance.group, instance.role, instance.instance) });
  }
  for (const index of instance.health.absent) {
    const pod = buildPod(model.owner, instance.revision, { group: instance.group, role: instance.role, instance: instance.instance, index });
    if (pod !== undefined) work.actions.push({ type: "CreatePod", pod });
  }
}
