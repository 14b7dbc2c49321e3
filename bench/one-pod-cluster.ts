/**
 * A stand-in API server for `runRouter` with no cluster (the router benchmark, the tests of
 * `--workers`): a `Send` that serves one ModelRoute (model `m`, aggregated, vLLM, port
 * `enginePort`) over ModelServing `ms` in namespace `ns`, and one Running, Ready, serving entry
 * pod `engine-0` at 127.0.0.1 — the engine-mock or fake engine listening on that port. Lists
 * answer those objects, watches stay open until aborted, and every write (Leases, route status,
 * confirmations) is accepted and forgotten.
 * Bench and test support only (outside src/, so the package never ships it or the fixtures it uses).
 */
import { fakeSend, jsonResponse, watchResponse } from "../src/kube/test-fakes.ts";
import type { Send } from "../src/kube/transport.ts";
import { aPod } from "../src/router/test-fixtures.ts";

export function onePodCluster(enginePort: number): Send {
  const route = {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelRoute",
    metadata: { name: "r", namespace: "ns", resourceVersion: "5", creationTimestamp: "2026-01-01T00:00:00Z" },
    spec: { model: "m", modelServing: "ms", engine: "vllm", port: enginePort, roles: { serve: "serve" } },
  };
  const modelServing = {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "ms", namespace: "ns", resourceVersion: "2" },
    spec: { template: { roles: [{ name: "serve" }] } },
  };
  const pod = aPod({ name: "engine-0", port: enginePort }).pod;
  const { send } = fakeSend((request) => {
    if (request.method !== "GET")
      return jsonResponse(request.method === "POST" ? 201 : 200, request.json ?? { kind: "Status" });
    if (request.path.includes("watch=true")) return watchResponse([], request.signal);
    const items = request.path.includes("/modelroutes")
      ? [route]
      : request.path.includes("/pods")
        ? [pod]
        : request.path.includes("/modelservings")
          ? [modelServing]
          : [];
    return jsonResponse(200, { metadata: { resourceVersion: "10" }, items });
  });
  return send;
}
