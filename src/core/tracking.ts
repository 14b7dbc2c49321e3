/**
 * Pod tracking with the recovery finalizer (docs/design/pod-tracking.md): every pod the controller
 * creates holds `tandem.dev/recovery`; the controller removes it before deleting a pod itself, so
 * a terminating pod that still holds it was deleted by someone else (a user, an eviction) and is
 * *lost*, observable until the controller releases it once it has acted on the loss. Pure.
 */
import type { Pod } from "../api/kube.ts";
import { FINALIZER_RECOVERY } from "../api/wellknown.ts";
import type { Action, DeleteReason, PodFinalizers } from "./actions.ts";
import { isTerminating, isTracked } from "./health.ts";
import type { PodView } from "./model.ts";

/**
 * Deletes the pod on purpose: released first when it holds the finalizer (see `DeletePod`). A
 * recovery deletion is a verdict on the pod's observed state, so it is guarded by the observed
 * resourceVersion: a pod that recovered meanwhile is not deleted, and the next plan judges it
 * afresh. Planned deletions (update, scale-down) are budgeted whatever the pod's state: no guard.
 */
export function deletePod(view: PodView, reason: DeleteReason): Action {
  const { name, resourceVersion } = view.pod.metadata;
  const guard = reason === "Recovery" && resourceVersion !== undefined ? { resourceVersion } : {};
  return view.facts.tracked
    ? { type: "DeletePod", name, uid: view.uid, reason, ...guard, release: releaseOf(view.pod) }
    : { type: "DeletePod", name, uid: view.uid, reason, ...guard };
}

/** Releases each of `views` that holds the finalizer. */
export function releasePods(views: readonly PodView[], actions: Action[]): void {
  for (const view of views)
    if (view.facts.tracked)
      actions.push({ type: "SetPodFinalizers", name: view.pod.metadata.name, uid: view.uid, ...releaseOf(view.pod) });
}

/**
 * Tracks a live pod that lacks the finalizer: one created before tracking, or one released for a
 * deletion that a restart left undone and that is no longer to be deleted.
 */
export function trackPod(view: PodView): Action {
  const finalizers = [...(view.pod.metadata.finalizers ?? []), FINALIZER_RECOVERY];
  return {
    type: "SetPodFinalizers",
    name: view.pod.metadata.name,
    uid: view.uid,
    resourceVersion: view.pod.metadata.resourceVersion ?? "",
    finalizers,
  };
}

/**
 * Releases every terminating pod of `pods` that holds the finalizer and is not `placed` (in the
 * plan's unit tree; asked only of such pods): pods of a ModelServing that is gone or being
 * deleted, of an earlier ModelServing of the same name, pods whose identity does not parse.
 * Nothing recovers those, so nothing may hold their deletion.
 */
export function releaseUnplaced(pods: readonly Pod[], placed: (pod: Pod) => boolean): Action[] {
  const actions: Action[] = [];
  for (const pod of pods) {
    const uid = pod.metadata.uid;
    if (uid === undefined || !isTerminating(pod) || !isTracked(pod) || placed(pod)) continue;
    actions.push({ type: "SetPodFinalizers", name: pod.metadata.name, uid, ...releaseOf(pod) });
  }
  return actions;
}

/** The pod's finalizers without the recovery one, under the resourceVersion the plan saw. */
export function releaseOf(pod: Pod): PodFinalizers {
  return {
    resourceVersion: pod.metadata.resourceVersion ?? "",
    finalizers: (pod.metadata.finalizers ?? []).filter((finalizer) => finalizer !== FINALIZER_RECOVERY),
  };
}
