/**
 * A stand-in Kubernetes API server on 127.0.0.1 for CLI process tests of `tandem rollout`: it
 * answers the three lists the rollout commands make (ModelServings by name, ControllerRevisions
 * and Pods by label) for one ModelServing `m` in namespace `default` with revisions 1 (vllm:v1)
 * and 2 (vllm:v2), and a status that moves one stage on at each ModelServing list, staying on
 * the last; and it accepts updates of `m` (recorded, not stored). Anything else is a 404. `kubeconfig` writes a file whose current context points
 * elsewhere (a closed port) and whose context `fake` points here.
 */
import { writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { parseModelServing } from "../src/api/parse.ts";
import { encodeControllerRevision } from "../src/core/revision/controller-revision.ts";
import { revisionData } from "../src/core/revision/projection.ts";

const UID = "0b5c1e0a-0000-4000-8000-000000000001";

function manifest(image: string) {
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "m", namespace: "default", uid: UID, generation: 2, resourceVersion: "7" },
    spec: {
      replicas: 0,
      template: { roles: [{ name: "server", entryTemplate: { spec: { containers: [{ name: "c", image }] } } }] },
    },
  };
}

/** Revisions 1 and 2 of `m`, as the controller stores them. */
export const REVISIONS = ["vllm:v1", "vllm:v2"].map((image, index) => {
  const parsed = parseModelServing(manifest(image));
  if (!parsed.ok) throw new Error("the fixture's ModelServing is invalid");
  return encodeControllerRevision({
    owner: { name: "m", namespace: "default", uid: UID },
    data: revisionData(parsed.value),
    revision: index + 1,
    collisionCount: 0,
  });
});

const [OLD, NEW] = REVISIONS.map((revision) => revision.metadata.name) as [string, string];
const ROLES = [{ name: "server", replicas: 0, ready: 0, updated: 0 }];

function condition(type: string, status: string, reason: string, message: string) {
  return { type, status, reason, message, observedGeneration: 2, lastTransitionTime: "2026-01-01T00:00:00Z" };
}

/** The status of a rollout that waits for its current revision to become the update revision. */
export const WAITING_STAGE = { observedGeneration: 2, updateRevision: NEW, currentRevision: OLD, roles: ROLES };

/** Status stages: the rollout waits (twice the same), then completes. */
export const COMPLETING: readonly object[] = [
  WAITING_STAGE,
  WAITING_STAGE,
  {
    observedGeneration: 2,
    updateRevision: NEW,
    currentRevision: NEW,
    roles: ROLES,
    conditions: [condition("Progressing", "False", "Converged", "Nothing to do: the observed pods match the spec.")],
  },
];

/** Status stages: the rollout waits, then the controller says it is blocked. */
export const BLOCKING: readonly object[] = [
  WAITING_STAGE,
  {
    ...WAITING_STAGE,
    conditions: [
      condition(
        "RolloutBlocked",
        "True",
        "InPlaceIneligible",
        "InPlaceUpdate cannot change the command of role server",
      ),
    ],
  },
];

/** What the API server holds at a status stage: the ModelServing `m` and its revisions. */
export function objectsAt(status: object, replicas = 0): object[] {
  const stored = manifest("vllm:v2");
  return [{ ...stored, spec: { ...stored.spec, replicas }, status }, ...REVISIONS];
}

export interface FakeApiServer {
  readonly url: string;
  /** The bodies of the updates (PUT) of `m` it accepted, in order. */
  readonly updates: readonly Record<string, any>[];
  /** Writes a kubeconfig at `path`: current context `elsewhere` (nothing listens), context `fake` here. */
  kubeconfig(path: string): void;
  close(): Promise<void>;
}

/**
 * `replicas` sets the ModelServing's spec.replicas (default 0). An update (PUT) of `m` is accepted
 * and answered with its body, and recorded in `updates`; the lists keep serving the stages.
 */
export async function startFakeApiServer(stages: readonly object[], replicas = 0): Promise<FakeApiServer> {
  let served = 0;
  const updates: Record<string, any>[] = [];
  const server = createServer((request, response) => {
    const path = new URL(request.url ?? "/", "http://localhost").pathname;
    if (request.method === "PUT" && path === "/apis/tandem.dev/v1alpha1/namespaces/default/modelservings/m") {
      let body = "";
      request.on("data", (chunk: Buffer) => (body += chunk.toString()));
      request.on("end", () => {
        updates.push(JSON.parse(body) as Record<string, any>);
        response.writeHead(200, { "content-type": "application/json" });
        response.end(body);
      });
      return;
    }
    const items =
      path === "/apis/tandem.dev/v1alpha1/namespaces/default/modelservings"
        ? objectsAt(stages[Math.min(served++, stages.length - 1)] ?? {}, replicas).slice(0, 1)
        : path === "/apis/apps/v1/namespaces/default/controllerrevisions"
          ? REVISIONS
          : path === "/api/v1/namespaces/default/pods"
            ? []
            : undefined;
    response.writeHead(items === undefined ? 404 : 200, { "content-type": "application/json" });
    response.end(
      JSON.stringify(
        items === undefined
          ? { kind: "Status", status: "Failure", reason: "NotFound", code: 404 }
          : { kind: "List", metadata: { resourceVersion: "7" }, items },
      ),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    updates,
    kubeconfig: (path) => {
      writeFileSync(path, kubeconfigText(url));
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

function kubeconfigText(url: string): string {
  return `apiVersion: v1
kind: Config
current-context: elsewhere
clusters:
  - {name: fake, cluster: {server: "${url}", insecure-skip-tls-verify: true}}
  - {name: elsewhere, cluster: {server: "http://127.0.0.1:9", insecure-skip-tls-verify: true}}
users:
  - {name: user, user: {token: test}}
contexts:
  - {name: fake, context: {cluster: fake, user: user}}
  - {name: elsewhere, context: {cluster: elsewhere, user: user}}
`;
}
