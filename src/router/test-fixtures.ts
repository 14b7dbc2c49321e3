/**
 * Fixtures for the router's tests: routes with defaults, entry pods in any state, revision data.
 * Test-only (imported by *.test.ts files).
 */
import type { Pod, PodCondition, PodPhase } from "../api/kube.ts";
import {
  ANNOTATION_DRAINING,
  LABEL_ENTRY,
  LABEL_GROUP,
  LABEL_MODEL_SERVING,
  LABEL_REVISION,
  LABEL_ROLE,
  LABEL_ROLE_HASH,
  SERVING_GATE,
} from "../api/wellknown.ts";
import type { RevisionData } from "../core/revision/index.ts";
import type { ApiError, ClusterWriter, JsonObject, Kind, KubeObject, ObjectRef } from "../engine/ports.ts";
import type { DiscoveredPod } from "./endpoints.ts";
import type { RouterRoute } from "./route.ts";

export function aRoute(overrides: Partial<RouterRoute> = {}): RouterRoute {
  return {
    namespace: "ns",
    name: "r",
    model: "m",
    modelServing: "ms",
    engine: "vllm",
    port: 8000,
    roles: { serve: "serve" },
    kvConnector: "nixl",
    pairing: "SameGroup",
    retries: { attempts: 2 },
    timeouts: { firstByteSeconds: 60, idleSeconds: 300 },
    ...overrides,
  };
}

export interface PodOptions {
  name: string;
  role?: string;
  group?: number;
  revision?: string;
  roleHash?: string;
  namespace?: string;
  modelServing?: string;
  entry?: boolean;
  phase?: PodPhase;
  ready?: boolean;
  serving?: boolean;
  draining?: boolean;
  deleting?: boolean;
  annotations?: Record<string, string>;
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 8000; `null` for a pod without an address. */
  port?: number | null;
}

/** An entry pod, by default Running, Ready, serving, in namespace ns of ModelServing ms. */
export function aPod(options: PodOptions): DiscoveredPod {
  const condition = (type: string, on: boolean): PodCondition => ({ type, status: on ? "True" : "False" });
  const annotations = {
    ...options.annotations,
    ...(options.draining === true ? { [ANNOTATION_DRAINING]: "2026-01-01T00:00:00Z" } : {}),
  };
  const pod: Pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: options.name,
      namespace: options.namespace ?? "ns",
      labels: {
        [LABEL_MODEL_SERVING]: options.modelServing ?? "ms",
        [LABEL_ROLE]: options.role ?? "serve",
        [LABEL_GROUP]: String(options.group ?? 0),
        [LABEL_REVISION]: options.revision ?? "ms-rev1",
        [LABEL_ROLE_HASH]: options.roleHash ?? "0123456789",
        ...(options.entry === false ? {} : { [LABEL_ENTRY]: "true" }),
      },
      ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
      ...(options.deleting === true ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
    },
    spec: { containers: [{ name: "engine", image: "vllm:1" }], readinessGates: [{ conditionType: SERVING_GATE }] },
    status: {
      phase: options.phase ?? "Running",
      podIP: options.host ?? "127.0.0.1",
      conditions: [condition("Ready", options.ready ?? true), condition(SERVING_GATE, options.serving ?? true)],
    },
  };
  const port = options.port === undefined ? 8000 : options.port;
  return { pod, address: port === null ? undefined : { host: options.host ?? "127.0.0.1", port } };
}

/** Revision data of a prefill/decode ModelServing with the given images. */
export function pdRevision(prefillImage: string, decodeImage: string): RevisionData {
  const template = (image: string) => ({ spec: { containers: [{ name: "engine", image }] } });
  return {
    schedulerName: "default-scheduler",
    roles: [
      { name: "decode", entryTemplate: template(decodeImage), workerReplicas: 0 },
      { name: "prefill", entryTemplate: template(prefillImage), workerReplicas: 0 },
    ],
  };
}

/** A tie-break stream that always draws its lowest value, recording each span asked for. */
export function firstDraw(): { int(min: number, max: number): number; spans: number[] } {
  const spans: number[] = [];
  return {
    spans,
    int(min: number, max: number): number {
      spans.push(max - min);
      return min;
    },
  };
}

/** One request a RecordingWriter was sent, at its clock's time. */
export interface WriterCall {
  readonly verb: "create" | "update" | "patch" | "patchStatus" | "delete";
  readonly kind: string;
  readonly name: string;
  readonly body: unknown;
  readonly atMs: number;
}

/**
 * A ClusterWriter that records every request and answers from `answer`: an ApiError rejects the
 * request, "hang" never answers, undefined accepts it (resolving with the object sent, or `{}`
 * for a patch).
 */
export class RecordingWriter implements ClusterWriter {
  readonly calls: WriterCall[] = [];
  answer: (call: WriterCall) => ApiError | "hang" | undefined = () => undefined;
  readonly #nowMs: () => number;

  constructor(nowMs: () => number) {
    this.#nowMs = nowMs;
  }

  create<K extends Kind>(object: KubeObject<K>): Promise<KubeObject<K>> {
    return this.#record({ verb: "create", kind: object.kind, name: object.metadata.name, body: object }, object);
  }

  update<K extends Kind>(object: KubeObject<K>): Promise<KubeObject<K>> {
    return this.#record({ verb: "update", kind: object.kind, name: object.metadata.name, body: object }, object);
  }

  patch<K extends Kind>(ref: ObjectRef<K>, mergePatch: JsonObject): Promise<KubeObject<K>> {
    return this.#record({ verb: "patch", kind: ref.kind, name: ref.name, body: mergePatch }, {} as KubeObject<K>);
  }

  patchStatus<K extends Kind>(ref: ObjectRef<K>, mergePatch: JsonObject): Promise<KubeObject<K>> {
    return this.#record({ verb: "patchStatus", kind: ref.kind, name: ref.name, body: mergePatch }, {} as KubeObject<K>);
  }

  delete(ref: ObjectRef): Promise<void> {
    return this.#record({ verb: "delete", kind: ref.kind, name: ref.name, body: undefined }, undefined);
  }

  #record<T>(request: Omit<WriterCall, "atMs">, result: T): Promise<T> {
    const call = { ...request, atMs: this.#nowMs() };
    this.calls.push(call);
    const answer = this.answer(call);
    if (answer === "hang") return new Promise(() => undefined);
    return answer === undefined ? Promise.resolve(result) : Promise.reject(answer);
  }
}
