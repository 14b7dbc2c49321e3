import { test } from "node:test";
import assert from "node:assert/strict";
import { VirtualClock } from "../sim/clock.ts";
import { LeaderElector } from "./leader.ts";
import { silentLogger } from "../engine/logger.ts";
import type { Kind, KubeObject } from "../engine/ports.ts";
import { EventRecorder } from "../engine/recorder.ts";
import { CONTROLLER_KINDS } from "./reader.ts";
import { PERMISSIONS, RESOURCES } from "./resources.ts";
import { fakeSend, jsonResponse, permissionOf, until } from "./test-fakes.ts";
import { KubeTransport } from "./transport.ts";
import { KubeWriter } from "./writer.ts";

const object = (kind: Kind, name: string): KubeObject => ({
  apiVersion: "v1",
  kind,
  metadata: { name, namespace: "ns" },
});

test("the adapter uses exactly the verbs PERMISSIONS grant (least privilege, both ways)", async () => {
  let leaseCreated = false;
  const lease = {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: { name: "l", namespace: "ns", resourceVersion: "2" },
    spec: { holderIdentity: "me" },
  };
  const { send, requests } = fakeSend((request) => {
    if (!request.path.includes("/leases") || (request.method === "GET" && !request.path.includes("/leases/")))
      return jsonResponse(200, { items: [], metadata: { resourceVersion: "1" } });
    if (request.method === "POST") leaseCreated = true;
    return request.method === "GET" && !leaseCreated
      ? jsonResponse(404, { kind: "Status", code: 404, reason: "NotFound" })
      : jsonResponse(200, lease);
  });
  const transport = new KubeTransport(send);
  const writer = new KubeWriter(transport);
  // Every request the engine's executor sends (docs/design/engine.md, "Action → request").
  for (const kind of ["Pod", "Service", "ControllerRevision"] as const) {
    await writer.create(object(kind, "x"));
    await writer.delete({ kind, namespace: "ns", name: "x" }, { uid: "u" });
  }
  await writer.patch({ kind: "Pod", namespace: "ns", name: "x" }, { metadata: { uid: "u", annotations: {} } });
  await writer.patch({ kind: "ControllerRevision", namespace: "ns", name: "x" }, { revision: 2 });
  await writer.patchStatus({ kind: "Pod", namespace: "ns", name: "x" }, { status: {} });
  await writer.patchStatus({ kind: "ModelServing", namespace: "ns", name: "x" }, { status: {} });
  // The informers' list and watch of the kinds the engine observes (router Leases among them).
  for (const kind of CONTROLLER_KINDS) {
    await transport.request({ verb: "list", kind, target: {} });
    await transport.watch({ verb: "watch", kind, target: {} }, AbortSignal.abort()).catch(() => undefined);
  }
  // Events (create, then a repeat patched into its count) and a Lease acquired, then renewed.
  const clock = new VirtualClock();
  const recorder = new EventRecorder({ writer, clock, component: "c", instance: "i" });
  const event = {
    regarding: { kind: "Pod" as const, namespace: "ns", name: "x" },
    type: "Normal" as const,
    reason: "R",
    message: "m",
  };
  recorder.record(event);
  recorder.record(event);
  await recorder.flushed();
  const elector = new LeaderElector({
    transport,
    clock,
    namespace: "ns",
    name: "l",
    identity: "me",
    logger: silentLogger,
    onStartedLeading: () => undefined,
    onStoppedLeading: () => undefined,
    retryPeriodMs: 1,
  });
  elector.start();
  await until(clock, "the Lease renewed", () => requests.some((request) => request.method === "PUT"));
  await elector.stop();

  const used = new Set(requests.map(permissionOf));
  const granted = new Set(
    PERMISSIONS.flatMap((permission) =>
      permission.verbs.map((verb) => `${permission.group} ${permission.resource} ${verb}`),
    ),
  );
  // Required by the OwnerReferencesPermissionEnforcement admission plugin, never sent by us.
  granted.delete("tandem.dev modelservings/finalizers update");
  assert.deepEqual([...used].filter((entry) => !granted.has(entry)).sort(), [], "used but not granted");
  assert.deepEqual([...granted].filter((entry) => !used.has(entry)).sort(), [], "granted but never used");
  assert.ok(Object.keys(RESOURCES).length > 0);
});
