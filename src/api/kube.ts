/**
 * The Kubernetes object shapes Tandem reads and writes, as plain JSON types: only the fields
 * Tandem uses are named; the rest pass through untouched. Shared by the core (which builds and
 * reads them), the engine ports and both of their implementations (simulator, Kubernetes).
 */
import type { PodSpec } from "./schema.ts";

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/**
 * The subset of `metav1.ObjectMeta` Tandem uses. Fields marked "server" are set by the API server;
 * values a client sends for them are ignored (create) or checked as preconditions (update).
 */
export interface ObjectMeta {
  name: string;
  namespace?: string;
  /** Server. Unique for the object's lifetime; a re-created object with the same name has a new one. */
  uid?: string;
  /** Server. Opaque; compare only for equality. Required on update (optimistic concurrency). */
  resourceVersion?: string;
  /** Server. Bumped on spec changes, for kinds that track it (ModelServing). */
  generation?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
  /** Server, RFC 3339. Set by delete: the time at which a graceful deletion becomes final. */
  deletionTimestamp?: string;
  /** Server. The grace period of a pending deletion; 0 once it may be removed. */
  deletionGracePeriodSeconds?: number;
  /** Server, RFC 3339 with second precision. */
  creationTimestamp?: string;
}

export type ConditionStatus = "True" | "False" | "Unknown";

export interface PodCondition {
  type: string;
  status: ConditionStatus;
  reason?: string;
  message?: string;
  /** RFC 3339. */
  lastTransitionTime?: string;
}

export interface ContainerStatus {
  name: string;
  image: string;
  imageID?: string;
  containerID?: string;
  ready: boolean;
  restartCount: number;
  started?: boolean;
  state?: {
    waiting?: { reason?: string; message?: string };
    running?: { startedAt?: string };
    terminated?: { exitCode: number; reason?: string; finishedAt?: string };
  };
}

export type PodPhase = "Pending" | "Running" | "Succeeded" | "Failed" | "Unknown";

export interface PodStatus {
  phase?: PodPhase;
  conditions?: PodCondition[];
  containerStatuses?: ContainerStatus[];
  initContainerStatuses?: ContainerStatus[];
  podIP?: string;
  hostIP?: string;
  reason?: string;
  message?: string;
}

export interface Pod {
  apiVersion: "v1";
  kind: "Pod";
  metadata: ObjectMeta;
  spec: PodSpec & {
    nodeName?: string;
    hostname?: string;
    subdomain?: string;
    readinessGates?: { conditionType: string }[];
    terminationGracePeriodSeconds?: number;
  };
  status?: PodStatus;
}

export interface Service {
  apiVersion: "v1";
  kind: "Service";
  metadata: ObjectMeta;
  spec: {
    clusterIP?: string;
    selector?: Record<string, string>;
    publishNotReadyAddresses?: boolean;
    ports?: { name?: string; port: number; protocol?: string }[];
  };
}
