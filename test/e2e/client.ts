/**
 * A tiny Kubernetes REST client for the e2e tests: JSON over node:https with the test API server's
 * CA and a bearer token. It is deliberately not a general client (the controller will use
 * @kubernetes/client-node); it exists so the harness can check the API server's own behaviour
 * (admission, defaulting, subresources) without depending on the code under test.
 */
import { Agent, request } from "node:https";

/** Where a resource lives in the REST API. */
export interface Resource {
  /** API group; "" for the core group. */
  readonly group: string;
  readonly version: string;
  readonly plural: string;
  readonly namespaced: boolean;
}

export const NAMESPACES: Resource = { group: "", version: "v1", plural: "namespaces", namespaced: false };
export const CRDS: Resource = {
  group: "apiextensions.k8s.io",
  version: "v1",
  plural: "customresourcedefinitions",
  namespaced: false,
};
export const MODEL_SERVINGS: Resource = {
  group: "tandem.dev",
  version: "v1alpha1",
  plural: "modelservings",
  namespaced: true,
};
export const MODEL_ROUTES: Resource = {
  group: "tandem.dev",
  version: "v1alpha1",
  plural: "modelroutes",
  namespaced: true,
};

/** Selects one object, or a collection when `name` is absent, optionally a subresource of it. */
export interface Target {
  readonly namespace?: string;
  readonly name?: string;
  readonly subresource?: string;
  /** Query parameters, already strings. */
  readonly query?: Readonly<Record<string, string>>;
}

/** The URL path (with query) for `target` within `resource`. */
export function resourcePath(resource: Resource, target: Target = {}): string {
  const root = resource.group === "" ? `/api/${resource.version}` : `/apis/${resource.group}/${resource.version}`;
  let path = root;
  if (resource.namespaced && target.namespace !== undefined)
    path += `/namespaces/${encodeURIComponent(target.namespace)}`;
  path += `/${resource.plural}`;
  if (target.name !== undefined) path += `/${encodeURIComponent(target.name)}`;
  if (target.subresource !== undefined) path += `/${target.subresource}`;
  const query = new URLSearchParams(target.query ?? {}).toString();
  return query === "" ? path : `${path}?${query}`;
}

/** A raw response: status code, parsed JSON body (undefined when empty), `Warning` headers. */
export interface KubeResponse {
  readonly status: number;
  readonly body: any;
  readonly warnings: readonly string[];
}

/** A non-2xx answer, carrying the API server's Status message (what a user would read). */
export class KubeError extends Error {
  readonly status: number;
  readonly reason: string;
  readonly body: any;

  constructor(method: string, path: string, response: KubeResponse) {
    const message = typeof response.body?.message === "string" ? response.body.message : JSON.stringify(response.body);
    super(`${method} ${path}: ${response.status} ${message}`);
    this.name = "KubeError";
    this.status = response.status;
    this.reason = typeof response.body?.reason === "string" ? response.body.reason : "";
    this.body = response.body;
  }
}

export interface ClientOptions {
  /** https://127.0.0.1:PORT */
  readonly server: string;
  /** PEM of the CA that signed the serving certificate (may hold a chain). */
  readonly caPem: string;
  readonly token: string;
  /** Per-request bound; the request is aborted after it. Default 30 000. */
  readonly requestTimeoutMs?: number;
}

const JSON_TYPE = "application/json";
export const MERGE_PATCH = "application/merge-patch+json";
export const APPLY_PATCH = "application/apply-patch+yaml";

/** JSON helpers over one keep-alive agent. Call `close()` when done so no socket keeps Node alive. */
export class KubeClient {
  readonly server: URL;
  readonly #agent: Agent;
  readonly #token: string;
  readonly #requestTimeoutMs: number;

  constructor(options: ClientOptions) {
    this.server = new URL(options.server);
    this.#agent = new Agent({ ca: options.caPem, keepAlive: true, maxSockets: 8 });
    this.#token = options.token;
    this.#requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
  }

  /** Sends one request; resolves with any status (never rejects on 4xx/5xx), rejects on I/O errors. */
  request(method: string, path: string, body?: unknown, contentType: string = JSON_TYPE): Promise<KubeResponse> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string> = { authorization: `Bearer ${this.#token}`, accept: JSON_TYPE };
    if (payload !== undefined) {
      headers["content-type"] = contentType;
      // Without a length node:http sends a DELETE body chunked, which kube-apiserver leaves unread:
      // the next request on the kept-alive socket then fails with a bare "400 Bad Request".
      headers["content-length"] = String(Buffer.byteLength(payload));
    }
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host: this.server.hostname,
          port: this.server.port,
          path,
          method,
          headers,
          agent: this.#agent,
          timeout: this.#requestTimeoutMs,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (chunk: Buffer) => chunks.push(chunk));
          res.on("error", reject);
          res.on("end", () => {
            resolve({
              status: res.statusCode ?? 0,
              body: parseBody(Buffer.concat(chunks).toString("utf8")),
              warnings: res.headersDistinct.warning ?? [],
            });
          });
        },
      );
      req.on("timeout", () =>
        req.destroy(new Error(`${method} ${path}: no answer within ${this.#requestTimeoutMs} ms`)),
      );
      req.on("error", reject);
      req.end(payload);
    });
  }

  /** Like `request`, but a non-2xx status rejects with a KubeError. Resolves with the body. */
  async call(method: string, path: string, body?: unknown, contentType?: string): Promise<any> {
    const response = await this.request(method, path, body, contentType);
    if (response.status < 200 || response.status > 299) throw new KubeError(method, path, response);
    return response.body;
  }

  get(resource: Resource, name: string, namespace?: string): Promise<any> {
    return this.call("GET", resourcePath(resource, { name, ...ns(namespace) }));
  }

  list(resource: Resource, namespace?: string, query?: Record<string, string>): Promise<any> {
    return this.call("GET", resourcePath(resource, { ...ns(namespace), ...(query === undefined ? {} : { query }) }));
  }

  /** POST; `object.metadata.namespace` chooses the namespace of a namespaced resource. */
  create(resource: Resource, object: any): Promise<any> {
    return this.call("POST", resourcePath(resource, ns(object.metadata?.namespace)), object);
  }

  /** PUT of a whole object (needs `metadata.resourceVersion` for optimistic concurrency). */
  replace(resource: Resource, object: any, subresource?: string): Promise<any> {
    const target = {
      name: object.metadata.name,
      ...ns(object.metadata?.namespace),
      ...(subresource === undefined ? {} : { subresource }),
    };
    return this.call("PUT", resourcePath(resource, target), object);
  }

  /** Server-side apply with `force`, as field manager `fieldManager`. */
  apply(resource: Resource, object: any, fieldManager = "tandem-e2e"): Promise<any> {
    const query = { fieldManager, force: "true" };
    const path = resourcePath(resource, { name: object.metadata.name, ...ns(object.metadata?.namespace), query });
    return this.call("PATCH", path, object, APPLY_PATCH);
  }

  /** JSON merge patch of the object or one of its subresources. */
  mergePatch(resource: Resource, target: Target & { readonly name: string }, patch: unknown): Promise<any> {
    return this.call("PATCH", resourcePath(resource, target), patch, MERGE_PATCH);
  }

  delete(resource: Resource, name: string, namespace?: string): Promise<any> {
    return this.call("DELETE", resourcePath(resource, { name, ...ns(namespace) }));
  }

  /**
   * Streams the watch events of `resource` after `resourceVersion` to `onEvent`, in order, until the
   * server ends the watch (after `timeoutSeconds`), `signal` aborts it or the connection fails; then
   * resolves. Rejects when the watch does not start (a non-200 answer, e.g. 410 Gone).
   */
  watch(
    resource: Resource,
    namespace: string,
    resourceVersion: string,
    onEvent: (type: string, object: any) => void,
    signal: AbortSignal,
    timeoutSeconds = 300,
  ): Promise<void> {
    const query = { watch: "1", resourceVersion, timeoutSeconds: String(timeoutSeconds) };
    const path = resourcePath(resource, { namespace, query });
    const headers = { authorization: `Bearer ${this.#token}`, accept: JSON_TYPE };
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host: this.server.hostname,
          port: this.server.port,
          path,
          method: "GET",
          headers,
          agent: this.#agent,
          signal,
        },
        (res) => {
          if (res.statusCode !== 200) {
            res.resume();
            reject(new Error(`watch ${path}: ${res.statusCode}`));
            return;
          }
          let buffered = "";
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => {
            buffered += chunk;
            const lines = buffered.split("\n");
            buffered = lines.pop() ?? "";
            for (const line of lines) {
              if (line.trim() === "") continue;
              const event = JSON.parse(line) as { type: string; object: any };
              onEvent(event.type, event.object);
            }
          });
          res.on("end", () => resolve());
          res.on("error", () => resolve());
        },
      );
      req.on("error", () => resolve());
      req.end();
    });
  }

  /** Closes idle sockets; later requests open new ones. */
  close(): void {
    this.#agent.destroy();
  }
}

function ns(namespace: string | undefined): { namespace?: string } {
  return namespace === undefined ? {} : { namespace };
}

function parseBody(text: string): unknown {
  if (text === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
