/**
 * A point-in-time reader for the rollout commands: one ModelServing with its ControllerRevisions
 * and pods, listed from the API server at once, served through the ClusterReader's synchronous
 * `get`/`list` (so the port-based commands in src/engine/rollout-commands.ts run unchanged).
 * `refresh()` lists again. Objects are deep-frozen and handed out as they are, as by the
 * controller's reader (a copy per read would also overflow the stack on a deeply nested object,
 * which the parse then refuses with a message).
 */
import { LABEL_MODEL_SERVING } from "../api/wellknown.ts";
import { deepFreeze } from "../core/frozen.ts";
import { matchesSelector, parseSelector } from "../engine/labels.ts";
import { KINDS } from "../engine/ports.ts";
import type { ClusterReader, Kind, KubeObject, ListOptions } from "../engine/ports.ts";
import { toApiError } from "./errors.ts";
import type { KubeTransport } from "./transport.ts";

export class SnapshotReader implements Pick<ClusterReader, "get" | "list"> {
  readonly #transport: KubeTransport;
  readonly #namespace: string;
  readonly #name: string;
  #objects: KubeObject[] = [];

  constructor(transport: KubeTransport, namespace: string, name: string) {
    this.#transport = transport;
    this.#namespace = namespace;
    this.#name = name;
  }

  /** Lists the ModelServing, its revisions and its pods. Rejects with an ApiError. */
  async refresh(): Promise<void> {
    const byName = { fieldSelector: `metadata.name=${this.#name}` };
    const byLabel = { labelSelector: `${LABEL_MODEL_SERVING}=${this.#name}` };
    const [ms, revisions, pods] = await Promise.all([
      this.#list("ModelServing", byName),
      this.#list("ControllerRevision", byLabel),
      this.#list("Pod", byLabel),
    ]);
    this.#objects = [...ms, ...revisions, ...pods];
  }

  get<K extends Kind>(kind: K, namespace: string | undefined, name: string): KubeObject<K> | undefined {
    const found = this.#objects.find(
      (object) => object.kind === kind && object.metadata.namespace === namespace && object.metadata.name === name,
    );
    return found as KubeObject<K> | undefined;
  }

  list<K extends Kind>(kind: K, options: ListOptions = {}): KubeObject<K>[] {
    const selector = parseSelector(options.labelSelector ?? "");
    return this.#objects
      .filter(
        (object) =>
          object.kind === kind && (options.namespace === undefined || object.metadata.namespace === options.namespace),
      )
      .filter((object) => matchesSelector(selector, object.metadata.labels)) as KubeObject<K>[];
  }

  async #list(kind: Kind, query: Record<string, string>): Promise<KubeObject[]> {
    try {
      const body = (await this.#transport.request({
        verb: "list",
        kind,
        target: { namespace: this.#namespace },
        query,
      })) as { items?: KubeObject[] };
      return (body.items ?? []).map((item) => deepFreeze({ ...item, apiVersion: KINDS[kind].apiVersion, kind }));
    } catch (error) {
      throw toApiError(error);
    }
  }
}
