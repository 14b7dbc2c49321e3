/**
 * Clients of the simulated API server. A `SimClient` is the simulator's ClusterWriter: each call is
 * one request, counted under the client's name and subject to fault rules, applied at once (no
 * network latency is modelled) and answered through a promise. `list` and `watch` serve the
 * simulator's informer. A write resolves with the object the server stored, itself: deeply frozen
 * and shared, so read-only (mutating it throws). Events are written through a client by the
 * engine's `EventRecorder`, as in production.
 */
import type {
  ClusterWriter,
  DeleteOptions,
  JsonObject,
  Kind,
  KubeObject,
  ListOptions,
  ObjectRef,
} from "../engine/ports.ts";
import type { ApiServer, ListResult } from "./apiserver.ts";
import type { Verb } from "./faults.ts";
import type { WatchHandlers, WatchOptions, WatchStream } from "./watch.ts";

export class SimClient implements ClusterWriter {
  readonly name: string;
  readonly #server: ApiServer;

  constructor(server: ApiServer, name: string) {
    this.#server = server;
    this.name = name;
  }

  create<K extends Kind>(object: KubeObject<K>): Promise<KubeObject<K>> {
    return this.#request("create", object.kind, () => this.#server.create(object) as KubeObject<K>);
  }

  update<K extends Kind>(object: KubeObject<K>): Promise<KubeObject<K>> {
    return this.#request("update", object.kind, () => this.#server.update(object) as KubeObject<K>);
  }

  patch<K extends Kind>(ref: ObjectRef<K>, mergePatch: JsonObject): Promise<KubeObject<K>> {
    return this.#request("patch", ref.kind, () => this.#server.patch(ref, mergePatch) as KubeObject<K>);
  }

  patchStatus<K extends Kind>(ref: ObjectRef<K>, mergePatch: JsonObject): Promise<KubeObject<K>> {
    return this.#request("patchStatus", ref.kind, () => this.#server.patchStatus(ref, mergePatch) as KubeObject<K>);
  }

  /** Binds a pending pod to `nodeName` (the binding subresource; see `ApiServer.bind`). */
  bind(ref: ObjectRef, nodeName: string, uid?: string): Promise<KubeObject> {
    return this.#request("bind", ref.kind, () => this.#server.bind(ref, nodeName, uid));
  }

  delete(ref: ObjectRef, options: DeleteOptions = {}): Promise<void> {
    return this.#request("delete", ref.kind, () => {
      this.#server.delete(ref, options);
    });
  }

  /** A synchronous list request (the informer's list half). Throws ApiError. */
  list(kind: Kind, options: ListOptions = {}): ListResult {
    return this.#server.handle({ verb: "list", kind, client: this.name }, () => this.#server.list(kind, options));
  }

  /** A synchronous watch request (the informer's watch half). Throws ApiError. */
  watch(kind: Kind, options: WatchOptions, handlers: WatchHandlers): WatchStream {
    return this.#server.handle({ verb: "watch", kind, client: this.name }, () =>
      this.#server.watch(kind, options, handlers),
    );
  }

  #request<T>(verb: Verb, kind: Kind, run: () => T): Promise<T> {
    try {
      return Promise.resolve(this.#server.handle({ verb, kind, client: this.name }, run));
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  }
}
