/**
 * What the core asks the engine to do, as data (DESIGN §5): `plan(observed, nowMs)` returns a
 * `Plan`; the engine's executor applies its actions in order. The core never performs I/O.
 *
 * Ordering contract for the executor:
 * - actions run in list order; independent actions of one kind may be batched concurrently, but
 *   never across a `barrier`;
 * - an action with `barrier: true` must succeed before anything after it runs; if it fails, the
 *   rest of the plan is dropped and the key is requeued (so a pod is never created before the
 *   revision it references, nor deleted before the status record that says how to rebuild it);
 * - NotFound on a delete and AlreadyExists on a create count as success (the cluster already is
 *   as planned); a failed precondition (Conflict) requeues without an error log.
 */
import type { Pod, PodCondition, Service } from "../api/kube.ts";
import type { ModelServingStatus } from "../api/schema.ts";
import type { ControllerRevision } from "./revision/controller-revision.ts";
import type { EventReason } from "./events.ts";

/** Why a pod is deleted; shown in events and logs. */
export type DeleteReason = "ScaleDown" | "Recovery" | "Update" | "Orphan" | "Recreate";

export type Action =
  | { readonly type: "CreateRevision"; readonly revision: ControllerRevision; readonly barrier: true }
  /** Rollback to an equal older revision: only its number changes (data is immutable). */
  | { readonly type: "AdvanceRevision"; readonly name: string; readonly revision: number; readonly barrier: true }
  | { readonly type: "DeleteRevision"; readonly name: string }
  /**
   * Write `status` (the whole status subresource). With `barrier`, later actions depend on it
   * (new unit records); without, it only reports observation.
   */
  | { readonly type: "WriteStatus"; readonly status: ModelServingStatus; readonly barrier: boolean }
  | { readonly type: "CreatePod"; readonly pod: Pod }
  /**
   * Delete with a UID precondition, so a pod re-created under the same name is never hit. With
   * `release` (the pod holds the recovery finalizer), the executor first sets the finalizers
   * without it, as SetPodFinalizers does, and deletes only once that write is applied: a pod the
   * controller deletes never looks lost to someone else (docs/design/pod-tracking.md).
   *
   * With `resourceVersion` (the version the plan saw), the deletion applies only to the pod as
   * observed, else Conflict: a recovery's verdict is about the pod's state, and a pod that became
   * Ready since (the cache lagged, or an earlier attempt failed) must not be taken for the broken
   * one (fuzz-faults-910035). After a release the version the release wrote is the one required.
   */
  | {
      readonly type: "DeletePod";
      readonly name: string;
      readonly uid: string;
      readonly reason: DeleteReason;
      readonly resourceVersion?: string;
      readonly gracePeriodSeconds?: number;
      readonly release?: PodFinalizers;
    }
  /**
   * Set the pod's finalizers: without the recovery finalizer to release a lost pod the controller
   * has accounted for (or one of a ModelServing that is gone), with it to track a pod that lacks
   * it. UID precondition as for deletion.
   */
  | ({ readonly type: "SetPodFinalizers"; readonly name: string; readonly uid: string } & PodFinalizers)
  /**
   * Set (string) or remove (null) pod annotations and, when given, labels, in one write; UID
   * precondition as for deletion.
   *
   * With `release`, the same write sets the pod's finalizers (as SetPodFinalizers does, under
   * `release.resourceVersion`): the drain mark of a pod about to be deleted releases it, so its
   * deletion needs no write of its own (docs/design/pod-tracking.md rule 1). With `gate`, the
   * same write also sets that status condition as SetPodCondition does, under
   * `gate.resourceVersion` (the version the plan saw): it goes to the pod's status subresource,
   * which takes labels, annotations and finalizers too. The mark, the gate and the release of one
   * pod are one write, and nothing that changed the pod since the plan goes unnoticed.
   */
  | {
      readonly type: "AnnotatePod";
      readonly name: string;
      readonly uid: string;
      readonly annotations: Readonly<Record<string, string | null>>;
      readonly labels?: Readonly<Record<string, string>>;
      readonly release?: PodFinalizers;
      readonly gate?: { readonly resourceVersion: string; readonly condition: PodCondition };
    }
  /**
   * In-place update (DESIGN §2.10): set the image of each named regular container (`images`:
   * container name → image) and the pod `annotations` in one write, so the progress record and the
   * patch land together. `resourceVersion` is the version the plan saw (the baseline containerIDs
   * in the annotations were read at it); a newer pod makes it a Conflict and a requeue.
   */
  | {
      readonly type: "PatchPodImages";
      readonly name: string;
      readonly uid: string;
      readonly resourceVersion: string;
      readonly images: Readonly<Record<string, string>>;
      readonly annotations: Readonly<Record<string, string | null>>;
    }
  /**
   * Set one condition in the pod's status (the serving readiness gate), keeping the others;
   * `resourceVersion` is the version the plan saw, so a concurrent kubelet write causes a
   * Conflict and a requeue instead of a lost update.
   */
  | {
      readonly type: "SetPodCondition";
      readonly name: string;
      readonly uid: string;
      readonly resourceVersion: string;
      readonly condition: PodCondition;
    }
  | { readonly type: "CreateService"; readonly service: Service }
  | { readonly type: "DeleteService"; readonly name: string; readonly uid: string }
  /** A Kubernetes Event (reasons and types in `events.ts`; build it with `recordEvent`). */
  | {
      readonly type: "RecordEvent";
      readonly eventType: "Normal" | "Warning";
      readonly reason: EventReason;
      readonly message: string;
      readonly pod?: string;
    };

/**
 * A pod's finalizers as they are to be: sent whole (a merge patch replaces lists) under the
 * resourceVersion the plan saw, so a finalizer another party changed meanwhile is never lost (a
 * Conflict, and the key is planned again).
 */
export interface PodFinalizers {
  readonly resourceVersion: string;
  readonly finalizers: readonly string[];
}

/** The result of one planning pass over one ModelServing. */
export interface Plan {
  readonly actions: readonly Action[];
  /**
   * When to plan again even if nothing changes (a drain timeout, a restart grace period
   * expiring), in milliseconds from `nowMs`; undefined when only a change can matter.
   */
  readonly requeueAfterMs: number | undefined;
}
