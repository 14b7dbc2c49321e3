/**
 * The well-known names of the API contract (DESIGN §1, §3): labels, annotations, the readiness
 * gate, injected env, and the length limits that follow from them. One definition each, used by
 * validation, the core, the simulator and the router alike.
 */

/** Prefix of every label and annotation the controller owns; templates may not use it. */
export const RESERVED_PREFIX = "tandem.dev/";

export const LABEL_MODEL_SERVING = "tandem.dev/modelserving";
export const LABEL_GROUP = "tandem.dev/group";
export const LABEL_ROLE = "tandem.dev/role";
/** `<role>-<j>`. */
export const LABEL_INSTANCE = "tandem.dev/instance";
/** `"true"` on entry pods only. */
export const LABEL_ENTRY = "tandem.dev/entry";
/** The name of the ControllerRevision a pod was built from. */
export const LABEL_REVISION = "tandem.dev/revision";
export const LABEL_ROLE_HASH = "tandem.dev/role-hash";
/** On ControllerRevisions: the revision hash. */
export const LABEL_REVISION_HASH = "tandem.dev/revision-hash";

/** RFC 3339 time at which the controller took the pod out of traffic (DESIGN §3). */
export const ANNOTATION_DRAINING = "tandem.dev/draining";
/** `"true"` on a router replica's Lease (DESIGN §3.1). */
export const LABEL_ROUTER = "tandem.dev/router";
/** On a router replica's Lease: `*` or a comma list of the namespaces it routes (DESIGN §3.1). */
export const ANNOTATION_ROUTER_SCOPE = "tandem.dev/scope";
/**
 * In-place update progress on a pod (DESIGN §2.10, §4), JSON
 * `{"from":"<revision>","to":"<revision>","phase":"Draining"|"Patched"|"Stalled","containerIDs":{"<container>":"<id>"}}`:
 * the revisions the pod moves between, how far it got, and, from `Patched` on, the containerIDs
 * its patched containers had before the patch (the baseline that proves a restart). Reserved
 * prefix: validation rejects it in templates and the revision projection strips it.
 */
export const ANNOTATION_IN_PLACE = "tandem.dev/inplace";
/**
 * On pod templates: when `tandem rollout restart` asked for new pods (RFC 3339), as kubectl's
 * `kubectl.kubernetes.io/restartedAt`. The one key under the reserved prefix a template may
 * carry: the user's command sets it, and it is versioned, so a restart is a new revision that the
 * rollout strategy carries out.
 */
export const ANNOTATION_RESTARTED_AT = "tandem.dev/restartedAt";
/**
 * On the ModelServing: an explicit recreate request, JSON `{"id","group","role"?}`
 * (src/api/recreate.ts); the controller records the one it took up in `status.recreate`.
 */
export const ANNOTATION_RECREATE = "tandem.dev/recreate";
/**
 * A pod template key the controller owns: every label and annotation under the reserved prefix
 * except the restart annotation, which the user's `tandem rollout restart` sets.
 */
export function isReservedTemplateKey(field: "labels" | "annotations", key: string): boolean {
  return key.startsWith(RESERVED_PREFIX) && !(field === "annotations" && key === ANNOTATION_RESTARTED_AT);
}
/** On ControllerRevisions: the data format version. */
export const ANNOTATION_REVISION_FORMAT = "tandem.dev/revision-format";
/** On ControllerRevisions: the collision count the hash was computed with; absent means 0. */
export const ANNOTATION_COLLISION_COUNT = "tandem.dev/collision-count";

/**
 * Finalizer on every pod the controller creates: a pod deleted by anyone but the controller (a
 * user, an eviction, the node lifecycle controller) stays observable as lost until the controller
 * has acted on the loss, and the controller removes it before deleting a pod itself
 * (docs/design/pod-tracking.md).
 */
export const FINALIZER_RECOVERY = "tandem.dev/recovery";

/** Readiness gate condition type on every pod: True once it may take traffic (DESIGN §1). */
export const SERVING_GATE = "tandem.dev/serving";

/** Env vars the controller injects into every container and init container (DESIGN §1). */
export const CONTROLLER_ENV = ["GROUP_SIZE", "ENTRY_ADDRESS", "WORKER_INDEX"] as const;

/** Lowercase hex characters of a revision hash. */
export const REVISION_HASH_LENGTH = 10;
/** Kubernetes' limit for a label value, a pod hostname and a Service name. */
export const MAX_LABEL_VALUE_LENGTH = 63;
/**
 * The longest ModelServing name: revision names `<name>-<hash>` are pod label values
 * (`tandem.dev/revision`), so 63 - 1 - 10 = 52.
 */
export const MAX_MODEL_SERVING_NAME_LENGTH = MAX_LABEL_VALUE_LENGTH - 1 - REVISION_HASH_LENGTH;
