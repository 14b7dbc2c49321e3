/**
 * A StatefulSet's rolling update (`OrderedReady`, `maxUnavailable: 1`) replayed in the simulator,
 * for the rollout table (`bench/rollout.ts`). No Tandem configuration reproduces it — Tandem always
 * replaces a whole instance — so this is a peer *plan*: while `active()` it takes the place of the
 * core's `plan`, and the real engine carries its actions out through the same ports (the simulated
 * API server's client), so its pods are scheduled, started and counted as the controller's.
 *
 * What it does, as the StatefulSet controller does with one ordinal space over every pod
 * (group, role, instance, worker index; highest first):
 * - a pod of the spec that is missing is created at the update revision (a StatefulSet recreates
 *   the ordinal it deleted);
 * - otherwise, while any pod is not Ready or is terminating, it waits;
 * - otherwise it deletes the highest pod whose role spec is not the update revision's.
 *
 * Its pods carry neither Tandem's recovery finalizer nor its serving gate (a StatefulSet has
 * neither); a pod Tandem built has its finalizer removed with the deletion. It writes the update
 * revision (a StatefulSet writes one too) but no rollout status, so a scenario waits a fixed time
 * for it. The simulator does not model what replacing one rank does to the others of a
 * multi-node instance (in an engine they lose their peer and restart), so its restart count is a
 * floor.
 */
import type { Pod } from "../../src/api/kube.ts";
import { FINALIZER_RECOVERY, LABEL_ROLE, LABEL_ROLE_HASH, SERVING_GATE } from "../../src/api/wellknown.ts";
import type { Action, Plan } from "../../src/core/actions.ts";
import { isPodReady, isTerminating } from "../../src/core/health.ts";
import type { PodIdentity } from "../../src/core/identity.ts";
import { podName } from "../../src/core/identity.ts";
import { buildModel } from "../../src/core/model.ts";
import type { Model } from "../../src/core/model.ts";
import type { Observed } from "../../src/core/observed.ts";
import { plan } from "../../src/core/plan.ts";
import { buildPod } from "../../src/core/pods.ts";
import type { Revision } from "../../src/core/pods.ts";
import { planRevisions } from "../../src/core/revisions.ts";
import { roleHash } from "../../src/core/role-hash.ts";
import type { PlanFunction } from "../../src/engine/reconciler.ts";

const NOTHING: Plan = { actions: [], requeueAfterMs: undefined };

/** The core's `plan` until `active()` turns true (the rollout's start), then the StatefulSet replay for good. */
export function statefulSetPlan(active: () => boolean): PlanFunction {
  return (observed, nowMs) => (active() ? replayStep(observed) : plan(observed, nowMs));
}

/** One planning pass of the replay. */
export function replayStep(observed: Observed): Plan {
  const built = buildModel(observed);
  if (!built.ok) return NOTHING;
  const resolved = planRevisions(built.model);
  if (!resolved.ok) return NOTHING;
  const { update, actions: revisionActions } = resolved.revisions;
  const planned = (actions: readonly Action[]): Plan => ({
    actions: [...revisionActions, ...actions],
    requeueAfterMs: undefined,
  });
  const byName = new Map(observed.pods.map((pod) => [pod.metadata.name, pod]));
  const ordinals = identities(built.model, update).map((id) => ({
    id,
    pod: byName.get(podName(built.model.ms.metadata.name, id)),
  }));
  const missing = ordinals.filter((ordinal) => ordinal.pod === undefined);
  if (missing.length > 0) return planned(missing.flatMap(({ id }) => create(built.model, update, id)));
  const pods = ordinals.map((ordinal) => ordinal.pod as Pod);
  if (pods.some((pod) => isTerminating(pod) || !isPodReady(pod))) return planned([]);
  const outdated = pods.find((pod) => {
    const role = pod.metadata.labels?.[LABEL_ROLE] ?? "";
    return pod.metadata.labels?.[LABEL_ROLE_HASH] !== roleHash(update.data, role);
  });
  return planned(outdated === undefined ? [] : [deletion(outdated)]);
}

/** Every pod the update revision declares for the spec's groups, highest ordinal first. */
function identities(model: Model, update: Revision): PodIdentity[] {
  const ids: PodIdentity[] = [];
  const roles = update.data.roles;
  for (let group = model.ms.spec.replicas - 1; group >= 0; group--)
    for (const role of [...roles].reverse()) {
      const replicas = model.roles.get(role.name)?.replicas ?? 0;
      for (let instance = replicas - 1; instance >= 0; instance--)
        for (let index = role.workerReplicas; index >= 0; index--)
          ids.push({ group, role: role.name, instance, index });
    }
  return ids;
}

/** The pod as the update revision builds it, without Tandem's finalizer and serving gate. */
function create(model: Model, update: Revision, id: PodIdentity): Action[] {
  const pod = buildPod(model.owner, update, id);
  if (pod === undefined) return [];
  const gates = (pod.spec.readinessGates ?? []).filter((gate) => gate.conditionType !== SERVING_GATE);
  // A StatefulSet's pod carries no finalizer of Tandem's: deleting it needs no release first.
  const metadata = { ...pod.metadata };
  delete metadata.finalizers;
  return [{ type: "CreatePod", pod: { ...pod, metadata, spec: { ...pod.spec, readinessGates: gates } } }];
}

function deletion(pod: Pod): Action {
  const finalizers = pod.metadata.finalizers ?? [];
  const release = finalizers.includes(FINALIZER_RECOVERY)
    ? {
        resourceVersion: pod.metadata.resourceVersion ?? "",
        finalizers: finalizers.filter((name) => name !== FINALIZER_RECOVERY),
      }
    : undefined;
  return {
    type: "DeletePod",
    name: pod.metadata.name,
    uid: pod.metadata.uid ?? "",
    reason: "Update",
    ...(release === undefined ? {} : { release }),
  };
}
