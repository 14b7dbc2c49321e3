/**
 * `KubeWriter`: the engine's ClusterWriter on a real API server. Every request carries field
 * manager `tandem`; patches are JSON merge patches (`application/merge-patch+json`, which custom
 * resources accept — never strategic merge); status goes through the status subresource; deletes
 * send their preconditions (uid, resourceVersion) and grace period in the DeleteOptions body.
 * Failures reject with the port's ApiError (mapping in errors.ts).
 *
 * A `metadata.uid` in a merge patch is a precondition (ports.ts); the API server answers a
 * mismatch with 422 "metadata.uid: field is immutable", which this writer reports as Conflict.
 */
import { ApiError, KINDS } from "../engine/ports.ts";
import type { ClusterWriter, DeleteOptions, JsonObject, Kind, KubeObject, ObjectRef } from "../engine/ports.ts";
import { KubeHttpError, toApiError } from "./errors.ts";
import type { Access, KubeTransport } from "./transport.ts";

/** The field manager of every write (server-side field ownership). */
export const FIELD_MANAGER = "tandem";
export const MERGE_PATCH = "application/merge-patch+json";

export class KubeWriter implements ClusterWriter {
  readonly #transport: KubeTransport;

  constructor(transport: KubeTransport) {
    this.#transport = transport;
  }

  async create<K extends Kind>(object: KubeObject<K>): Promise<KubeObject<K>> {
    const target = { namespace: object.metadata.namespace };
    return this.#send<K>({
      verb: "create",
      kind: object.kind,
      target,
      query: { fieldManager: FIELD_MANAGER },
      body: object,
    });
  }

  async update<K extends Kind>(object: KubeObject<K>): Promise<KubeObject<K>> {
    const target = { namespace: object.metadata.namespace, name: object.metadata.name };
    return this.#send<K>({
      verb: "update",
      kind: object.kind,
      target,
      query: { fieldManager: FIELD_MANAGER },
      body: object,
    });
  }

  async patch<K extends Kind>(ref: ObjectRef<K>, mergePatch: JsonObject): Promise<KubeObject<K>> {
    return this.#mergePatch(ref, undefined, mergePatch);
  }

  async patchStatus<K extends Kind>(ref: ObjectRef<K>, mergePatch: JsonObject): Promise<KubeObject<K>> {
    if (!KINDS[ref.kind].statusSubresource) throw new ApiError("NotFound", `${ref.kind} has no status subresource`);
    return this.#mergePatch(ref, "status", mergePatch);
  }

  /** A JSON merge patch of the object, or of its `subresource`, under our field manager. */
  #mergePatch<K extends Kind>(
    ref: ObjectRef<K>,
    subresource: "status" | undefined,
    mergePatch: JsonObject,
  ): Promise<KubeObject<K>> {
    const target = { namespace: ref.namespace, name: ref.name, ...(subresource === undefined ? {} : { subresource }) };
    return this.#sendPatch<K>({
      verb: "patch",
      kind: ref.kind,
      target,
      query: { fieldManager: FIELD_MANAGER },
      body: mergePatch,
      contentType: MERGE_PATCH,
    });
  }

  async delete(ref: ObjectRef, options: DeleteOptions = {}): Promise<void> {
    const preconditions = {
      ...(options.uid === undefined ? {} : { uid: options.uid }),
      ...(options.resourceVersion === undefined ? {} : { resourceVersion: options.resourceVersion }),
    };
    const grace =
      ref.kind === "Pod" && options.gracePeriodSeconds !== undefined
        ? { gracePeriodSeconds: options.gracePeriodSeconds }
        : {};
    const body = {
      apiVersion: "v1",
      kind: "DeleteOptions",
      propagationPolicy: "Background",
      ...grace,
      ...(Object.keys(preconditions).length === 0 ? {} : { preconditions }),
    };
    await this.#send({ verb: "delete", kind: ref.kind, target: { namespace: ref.namespace, name: ref.name }, body });
  }

  /** Sends a merge patch; a failed uid precondition becomes Conflict. */
  async #sendPatch<K extends Kind>(access: Access): Promise<KubeObject<K>> {
    try {
      return await this.#send<K>(access);
    } catch (error) {
      if (error instanceof ApiError && error.cause instanceof KubeHttpError && isUidMismatch(error.cause))
        throw new ApiError("Conflict", `uid precondition failed: ${error.cause.message}`);
      throw error;
    }
  }

  async #send<K extends Kind>(access: Access): Promise<KubeObject<K>> {
    try {
      const stored = (await this.#transport.request(access)) as KubeObject<K>;
      return { ...stored, kind: access.kind as K };
    } catch (error) {
      const apiError = toApiError(error);
      if (error instanceof KubeHttpError) apiError.cause = error;
      throw apiError;
    }
  }
}

/** 422 naming `metadata.uid`: the uid in a patch differs from the stored object's. */
function isUidMismatch(error: KubeHttpError): boolean {
  return error.status === 422 && error.causeFields.includes("metadata.uid");
}
