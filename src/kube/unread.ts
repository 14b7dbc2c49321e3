/**
 * What a KubeReader removes from each object before caching it (the informer transform): the
 * parts its consumers never read. The objects are fresh from the wire and not yet shared, so the
 * removal is in place and copies nothing; no writer sends a cached object back whole (they merge
 * patch), so nothing is lost on the server — but where a patch sends a cached list whole (a merge
 * patch replaces arrays), that list is kept whole: the controller's Pod transform keeps
 * `spec.containers` (PatchPodImages), `status.conditions` (SetPodCondition) and
 * `metadata.finalizers` exactly as listed.
 */
import { isJsonObject } from "../engine/json.ts";
import type { JsonObject, KubeObject, ObjectMeta } from "../engine/ports.ts";

/** A transform: replaces, in the object it is given, what no reader of the cache reads. */
export type DropUnread = (object: KubeObject) => void;

/**
 * Removes `metadata.managedFields` (server-side apply's field ownership, a third or more of a Pod
 * as the API server stores it). No Tandem reader reads it; the default of every KubeReader. The
 * metadata is rebuilt rather than `delete`d from, which would turn it into a slower and larger
 * dictionary-mode object in V8.
 */
export function dropManagedFields(object: KubeObject): void {
  const metadata: ObjectMeta & { managedFields?: unknown } = object.metadata;
  if (metadata.managedFields === undefined) return;
  const { managedFields: _dropped, ...kept } = metadata; // eslint-disable-line @typescript-eslint/no-unused-vars -- dropped
  object.metadata = kept;
}
/**
 * The Pod spec fields the controller reads (src/core, src/engine): only the containers (images
 * and env, and the whole list PatchPodImages sends back). The rest (volumes, tolerations,
 * affinity, DNS and security settings, what the API server defaulted, `nodeName`) only the
 * scheduler and the kubelet read. A new read of a Pod field by the controller must be added here
 * (and to unread.test.ts's stored pod), or it reads undefined on a real cluster.
 */
const POD_SPEC_READ: ReadonlySet<string> = new Set(["containers"]);

/** The Pod status fields the controller reads: the phase, the conditions (whole: SetPodCondition sends them back), the container statuses. */
const POD_STATUS_READ: ReadonlySet<string> = new Set(["phase", "conditions", "containerStatuses"]);

/**
 * The container status fields the controller reads: its image and ID (an in-place update's
 * verification), readiness, restarts and state (why it waits). Not `imageID`, `lastState`,
 * `started`, `volumeMounts`, `resources`, `allocatedResources`, `user`.
 */
const CONTAINER_STATUS_READ: ReadonlySet<string> = new Set([
  "name",
  "image",
  "containerID",
  "ready",
  "restartCount",
  "state",
]);

/**
 * The controller's transform (src/kube/run.ts): `dropManagedFields` of every kind, and of Pods
 * also every spec, status and container status field outside the sets above. Other kinds keep
 * the rest: ModelServings and ControllerRevisions are read whole, Services and Leases are few.
 */
export function dropControllerUnread(object: KubeObject): void {
  dropManagedFields(object);
  if (object.kind !== "Pod") return;
  if (object.spec !== undefined) object.spec = pick(object.spec, POD_SPEC_READ);
  if (object.status === undefined) return;
  const status = pick(object.status, POD_STATUS_READ);
  const list = status["containerStatuses"];
  if (Array.isArray(list))
    status["containerStatuses"] = list.map((entry) =>
      isJsonObject(entry) ? pick(entry, CONTAINER_STATUS_READ) : entry,
    );
  object.status = status;
}

/** A new object of `record`'s keys in `kept`, in their order. */
function pick(record: JsonObject, kept: ReadonlySet<string>): JsonObject {
  return Object.fromEntries(Object.entries(record).filter(([key]) => kept.has(key)));
}
