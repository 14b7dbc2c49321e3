import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ApiError, isApiError } from "../engine/ports.ts";
import { apiErrorReason, httpError, KubeHttpError, transportError } from "./errors.ts";
import { fakeSend, jsonResponse } from "./test-fakes.ts";
import { KubeTransport } from "./transport.ts";
import { KubeWriter } from "./writer.ts";

const status = (code: number, reason: string, extra: object = {}): object => ({
  kind: "Status",
  apiVersion: "v1",
  status: "Failure",
  code,
  reason,
  message: `${reason} message`,
  ...extra,
});

describe("error mapping", () => {
  const reasonOf = (code: number, reason = ""): string =>
    apiErrorReason(httpError("x", code, JSON.stringify(status(code, reason)), {}));
  it("maps HTTP answers to the port's reasons", () => {
    assert.equal(reasonOf(404, "NotFound"), "NotFound");
    assert.equal(reasonOf(409, "AlreadyExists"), "AlreadyExists");
    assert.equal(reasonOf(409, "Conflict"), "Conflict");
    assert.equal(reasonOf(422, "Invalid"), "Invalid");
    assert.equal(reasonOf(400, "BadRequest"), "Invalid");
    assert.equal(reasonOf(403, "Forbidden"), "Invalid");
    assert.equal(reasonOf(500, "InternalError"), "ServerError");
    assert.equal(reasonOf(503, "ServiceUnavailable"), "ServerError");
    assert.equal(reasonOf(504, "Timeout"), "Timeout");
    assert.equal(reasonOf(500, "ServerTimeout"), "Timeout");
    assert.equal(reasonOf(429, "TooManyRequests"), "ServerError");
  });

  it("a request without an answer is a Timeout (ambiguous) unless the connection was refused", () => {
    assert.equal(apiErrorReason(transportError("x", new DOMException("t", "TimeoutError"))), "Timeout");
    const refused = Object.assign(new Error("fetch failed"), {
      cause: Object.assign(new Error("connect"), { code: "ECONNREFUSED" }),
    });
    assert.equal(apiErrorReason(transportError("x", refused)), "ServerError");
  });
});

describe("KubeWriter", () => {
  it("patches with merge-patch+json and field manager tandem; status through /status", async () => {
    const { send, requests } = fakeSend(() =>
      jsonResponse(200, {
        apiVersion: "tandem.dev/v1alpha1",
        kind: "ModelServing",
        metadata: { name: "m", namespace: "ns" },
      }),
    );
    const writer = new KubeWriter(new KubeTransport(send));
    await writer.patch({ kind: "Pod", namespace: "ns", name: "p" }, { metadata: { annotations: { a: "b" } } });
    await writer.patchStatus({ kind: "ModelServing", namespace: "ns", name: "m" }, { status: { replicas: 1 } });
    assert.deepEqual(
      requests.map((request) => [request.method, request.path, request.headers["content-type"]]),
      [
        ["PATCH", "/api/v1/namespaces/ns/pods/p?fieldManager=tandem", "application/merge-patch+json"],
        [
          "PATCH",
          "/apis/tandem.dev/v1alpha1/namespaces/ns/modelservings/m/status?fieldManager=tandem",
          "application/merge-patch+json",
        ],
      ],
    );
  });

  it("deletes with uid/resourceVersion preconditions and a pod's grace period", async () => {
    const { send, requests } = fakeSend(() => jsonResponse(200, {}));
    const writer = new KubeWriter(new KubeTransport(send));
    await writer.delete(
      { kind: "Pod", namespace: "ns", name: "p" },
      { uid: "u1", resourceVersion: "7", gracePeriodSeconds: 5 },
    );
    assert.equal(requests[0]?.method, "DELETE");
    assert.deepEqual(requests[0].json, {
      apiVersion: "v1",
      kind: "DeleteOptions",
      propagationPolicy: "Background",
      gracePeriodSeconds: 5,
      preconditions: { uid: "u1", resourceVersion: "7" },
    });
  });

  it("reports a failed uid precondition in a patch (422 on metadata.uid) as Conflict", async () => {
    const invalid = status(422, "Invalid", {
      details: { causes: [{ reason: "FieldValueInvalid", field: "metadata.uid" }] },
    });
    const writer = new KubeWriter(new KubeTransport(fakeSend(() => jsonResponse(422, invalid)).send));
    await assert.rejects(
      writer.patch({ kind: "Pod", namespace: "ns", name: "p" }, { metadata: { uid: "old" } }),
      (error) => isApiError(error, "Conflict"),
    );
  });

  it("rejects with ApiError: AlreadyExists vs Conflict by Status.reason; patchStatus of a kind without status is NotFound", async () => {
    let answer = status(409, "AlreadyExists");
    const writer = new KubeWriter(new KubeTransport(fakeSend(() => jsonResponse(409, answer)).send));
    await assert.rejects(
      writer.create({ apiVersion: "v1", kind: "Pod", metadata: { name: "p", namespace: "ns" } }),
      (error) => isApiError(error, "AlreadyExists"),
    );
    answer = status(409, "Conflict");
    await assert.rejects(
      writer.update({
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { name: "l", namespace: "ns", resourceVersion: "1" },
      }),
      (error) => isApiError(error, "Conflict"),
    );
    await assert.rejects(
      writer.patchStatus({ kind: "ControllerRevision", namespace: "ns", name: "r" }, {}),
      (error) => error instanceof ApiError && error.reason === "NotFound",
    );
  });
});

describe("KubeTransport", () => {
  it("retries 429 after Retry-After, then succeeds", async () => {
    let calls = 0;
    const { send } = fakeSend(() =>
      ++calls < 3
        ? jsonResponse(429, status(429, "TooManyRequests"), { "retry-after": "2" })
        : jsonResponse(200, { items: [] }),
    );
    const waits: number[] = [];
    const transport = new KubeTransport(send, {
      sleep: (ms) => {
        waits.push(ms);
        return Promise.resolve();
      },
    });
    assert.deepEqual(await transport.request({ verb: "list", kind: "Pod", target: {} }), { items: [] });
    assert.deepEqual(waits, [2_000, 2_000]);
  });

  it("gives up on 429 after maxThrottleRetries and reports every request sent and every failure for metrics", async () => {
    const failures: string[] = [];
    const sent: string[] = [];
    const { send } = fakeSend(() => jsonResponse(429, status(429, "TooManyRequests")));
    const transport = new KubeTransport(send, {
      maxThrottleRetries: 2,
      sleep: () => Promise.resolve(),
      onError: (verb, kind, error) => failures.push(`${verb} ${kind} ${error.reason}`),
      onRequest: (verb, kind) => sent.push(`${verb} ${kind}`),
    });
    await assert.rejects(
      transport.request({ verb: "list", kind: "Pod", target: {} }),
      (error) => error instanceof KubeHttpError && error.status === 429,
    );
    assert.deepEqual(failures, ["list Pod TooManyRequests"]);
    // The first try and both retries were sent.
    assert.deepEqual(sent, ["list Pod", "list Pod", "list Pod"]);
  });

  it("refuses a request outside its permission list before sending it", async () => {
    const { send, requests } = fakeSend(() => jsonResponse(200, {}));
    await assert.rejects(
      new KubeTransport(send).request({ verb: "delete", kind: "ModelServing", target: { namespace: "ns", name: "m" } }),
      /not in the permission list/,
    );
    assert.equal(requests.length, 0);
  });
});
