import assert from "node:assert/strict";
import { test } from "node:test";
import { silentLogger } from "../engine/logger.ts";
import { DASHBOARD_PERMISSIONS } from "../kube/resources.ts";
import type { Permission } from "../kube/resources.ts";
import { fakeSend, jsonResponse, permissionOf, watchResponse } from "../kube/test-fakes.ts";
import { startKubeFeed } from "./kube-feed.ts";

/** What each scope of a permission means for the dashboard watching namespace `ml`, routers in `tandem-system`. */
const SCOPE_PATH: Readonly<Record<Permission["scope"], string>> = {
  cluster: "/namespaces/ml/",
  allNamespaces: "",
  controller: "/namespaces/tandem-system/",
};

test("the dashboard's feed uses exactly what DASHBOARD_PERMISSIONS (the tandem-dashboard role) grant, each where its scope says", async () => {
  const expected = new Set(
    DASHBOARD_PERMISSIONS.flatMap((permission) => {
      const root = permission.group === "" ? "/api/v1" : `/apis/${permission.group}/`;
      return permission.verbs.map((verb) => `${permission.scope} ${root} ${permission.resource} ${verb}`);
    }),
  );
  let done: () => void = () => undefined;
  const allSeen = new Promise<void>((resolve) => {
    done = resolve;
  });
  const seen = new Set<string>();
  const { send, requests } = fakeSend((request) => {
    const [group, resource, verb] = permissionOf(request).split(" ");
    const path = request.path.split("?")[0] ?? "";
    const scope = path.includes(SCOPE_PATH.controller)
      ? "controller"
      : path.includes(SCOPE_PATH.cluster)
        ? "cluster"
        : "allNamespaces";
    seen.add(`${scope} ${group === "" ? "/api/v1" : `/apis/${group}/`} ${resource} ${verb}`);
    if ([...expected].every((entry) => seen.has(entry))) done();
    return verb === "watch"
      ? watchResponse([], request.signal)
      : jsonResponse(200, { items: [], metadata: { resourceVersion: "1" } });
  });
  const feed = startKubeFeed({
    send,
    namespace: "ml",
    routerNamespace: "tandem-system",
    routerMetrics: [],
    title: "t",
    publish: () => undefined,
    logger: silentLogger,
    say: () => undefined,
  });
  await allSeen;
  await feed.stop();
  assert.deepEqual([...seen].filter((entry) => !expected.has(entry)).sort(), [], "used but not granted");
  assert.ok(
    requests.every((request) => request.method === "GET"),
    "read-only",
  );
  const routerPods = requests.find((request) => request.path.startsWith("/api/v1/namespaces/tandem-system/pods"));
  assert.match(
    decodeURIComponent(routerPods?.path ?? ""),
    /labelSelector=app\.kubernetes\.io\/name=tandem,app\.kubernetes\.io\/component=router/,
  );
});
