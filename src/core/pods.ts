/**
 * Building the pods and Services of a role instance from a revision (DESIGN §1, contract): names,
 * identity labels, the owner reference, injected env, the serving readiness gate, and one
 * headless Service per instance with workers. Pure: the same inputs give equal objects.
 */
import type { Container } from "../api/schema.ts";
import type { Pod, Service } from "../api/kube.ts";
import {
  FINALIZER_RECOVERY,
  LABEL_ENTRY,
  LABEL_GROUP,
  LABEL_INSTANCE,
  LABEL_MODEL_SERVING,
  LABEL_REVISION,
  LABEL_ROLE,
  LABEL_ROLE_HASH,
  SERVING_GATE,
} from "../api/wellknown.ts";
import { entryAddress, instanceId, ownerReference, podName, serviceName } from "./identity.ts";
import type { NamespacedOwner, PodIdentity } from "./identity.ts";
import type { RevisionData, RevisionPodTemplate } from "./revision/format.ts";
import { roleHash } from "./role-hash.ts";

/** A decoded revision: its name (the ControllerRevision's) and data. */
export interface Revision {
  readonly name: string;
  readonly data: RevisionData;
}

/** Labels every object of one instance carries; the Service selects the entry pod with them. */
function instanceLabels(
  owner: NamespacedOwner,
  id: Pick<PodIdentity, "group" | "role" | "instance">,
): Record<string, string> {
  return {
    [LABEL_MODEL_SERVING]: owner.name,
    [LABEL_GROUP]: String(id.group),
    [LABEL_ROLE]: id.role,
    [LABEL_INSTANCE]: instanceId(id.role, id.instance),
  };
}

/**
 * The pod `id` of `owner` as `revision` declares it, or undefined when the revision has no such
 * role or pod index (a worker index beyond its `workerReplicas`).
 */
export function buildPod(owner: NamespacedOwner, revision: Revision, id: PodIdentity): Pod | undefined {
  const role = revision.data.roles.find((candidate) => candidate.name === id.role);
  const hash = roleHash(revision.data, id.role);
  if (role === undefined || hash === undefined || id.index > role.workerReplicas) return undefined;
  const template = id.index === 0 ? role.entryTemplate : role.workerTemplate;
  if (template === undefined) return undefined;
  const env = [
    { name: "GROUP_SIZE", value: String(1 + role.workerReplicas) },
    { name: "ENTRY_ADDRESS", value: entryAddress(owner.name, owner.namespace, id.group, id.role, id.instance) },
    { name: "WORKER_INDEX", value: String(id.index) },
  ];
  const labels = {
    ...template.metadata?.labels,
    ...instanceLabels(owner, id),
    ...(id.index === 0 ? { [LABEL_ENTRY]: "true" } : {}),
    [LABEL_REVISION]: revision.name,
    [LABEL_ROLE_HASH]: hash,
  };
  const annotations = template.metadata?.annotations;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: podName(owner.name, id),
      namespace: owner.namespace,
      labels,
      ...(annotations !== undefined ? { annotations: { ...annotations } } : {}),
      ownerReferences: [ownerReference(owner)],
      finalizers: [FINALIZER_RECOVERY],
    },
    spec: buildPodSpec(template, revision.data.schedulerName, env),
  };
}

function buildPodSpec(
  template: RevisionPodTemplate,
  schedulerName: string,
  env: readonly { name: string; value: string }[],
): Pod["spec"] {
  // A shallow copy, not a deep one: every part set below is built new, and the parts left as they
  // are (resources, volumes, …) are shared with the revision data, which nothing writes to.
  const spec = { ...template.spec } as Pod["spec"];
  spec.containers = spec.containers.map((container) => withEnv(container, env));
  if (spec.initContainers !== undefined)
    spec.initContainers = spec.initContainers.map((container) => withEnv(container, env));
  spec.schedulerName = schedulerName;
  const gates = (spec.readinessGates ?? []).filter((gate) => gate.conditionType !== SERVING_GATE);
  spec.readinessGates = [...gates, { conditionType: SERVING_GATE }];
  return spec;
}

/** The container with the controller's env appended, replacing any variable of the same name. */
function withEnv(container: Container, env: readonly { name: string; value: string }[]): Container {
  const injected = new Set(env.map((variable) => variable.name));
  const kept = (container.env ?? []).filter((variable) => !injected.has(variable.name));
  return { ...container, env: [...kept, ...env.map((variable) => ({ ...variable }))] };
}

/**
 * The headless Service of an instance with workers, named after its entry pod, so
 * `ENTRY_ADDRESS` (`<entry-pod>.<namespace>`) resolves to the entry pod. Not-ready addresses are
 * published because workers must reach the entry before the instance can become Ready.
 */
export function buildService(owner: NamespacedOwner, group: number, role: string, instance: number): Service {
  const labels = instanceLabels(owner, { group, role, instance });
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: {
      name: serviceName(owner.name, group, role, instance),
      namespace: owner.namespace,
      labels,
      ownerReferences: [ownerReference(owner)],
    },
    spec: { clusterIP: "None", publishNotReadyAddresses: true, selector: { ...labels, [LABEL_ENTRY]: "true" } },
  };
}
