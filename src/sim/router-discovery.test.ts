import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Pod } from "../api/kube.ts";
import { LABEL_ENTRY, LABEL_MODEL_SERVING, LABEL_ROLE } from "../api/wellknown.ts";
import { encodeControllerRevision } from "../core/revision/controller-revision.ts";
import type { KubeObject } from "../engine/ports.ts";
import { pdRevision } from "../router/test-fixtures.ts";
import { SimCluster } from "./cluster.ts";
import { SimDiscovery } from "./router-discovery.ts";

const LAG_MS = 100;

const route = (name: string, spec: Record<string, unknown>): KubeObject =>
  ({
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelRoute",
    metadata: { name, namespace: "default" },
    spec: { model: "llama", modelServing: "ms", engine: "vllm", ...spec },
  }) as unknown as KubeObject;

const pod = (name: string, entry: boolean): KubeObject =>
  ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: "default",
      labels: { [LABEL_MODEL_SERVING]: "ms", [LABEL_ROLE]: "decode", ...(entry ? { [LABEL_ENTRY]: "true" } : {}) },
    },
    spec: { containers: [{ name: "engine", image: "vllm:1" }] },
  }) as unknown as KubeObject;

function setup() {
  const cluster = new SimCluster({ nodes: [] });
  const user = cluster.writer("user");
  const discovery = new SimDiscovery(cluster, {
    lagMs: LAG_MS,
    addressOf: (found: Pod) => ({ host: "127.0.0.1", port: found.metadata.name.length }),
  });
  return { cluster, user, discovery };
}

describe("the simulator's router Discovery", () => {
  it("shows routes and entry pods a watch lag after they are written, each pod at the address addressOf gives", async () => {
    const { cluster, user, discovery } = setup();
    await user.create(route("llama", { roles: { prefill: "prefill", decode: "decode" } }));
    await user.create(pod("entry", true));
    await user.create(pod("worker-x", false));
    assert.deepEqual(discovery.routes(), []);
    await cluster.advance(LAG_MS);
    const [seen] = discovery.routes();
    assert.ok(seen !== undefined);
    assert.equal(seen.model, "llama");
    assert.equal(seen.port, 8000, "defaults applied");
    assert.equal(seen.kvConnector, "nixl", "a disaggregated vLLM route defaults to NIXL");
    assert.equal(typeof seen.creationTimestamp, "string");
    assert.deepEqual(
      discovery.pods(seen).map((found) => [found.pod.metadata.name, found.address?.port]),
      [["entry", 5]],
    );
    discovery.stop();
    cluster.stop();
  });

  it("keeps the same routes array until a route changes, and leaves out a route that does not parse", async () => {
    const { cluster, user, discovery } = setup();
    await user.create(route("llama", { roles: { serve: "decode" } }));
    await cluster.advance(LAG_MS);
    const first = discovery.routes();
    await user.create(pod("entry", true));
    await cluster.advance(LAG_MS);
    assert.equal(discovery.routes(), first, "a pod event does not rebuild the routes");
    await user.create(route("broken", { roles: { serve: "decode" }, engine: "trt" }));
    await cluster.advance(LAG_MS);
    assert.notEqual(discovery.routes(), first);
    assert.deepEqual(
      discovery.routes().map((found) => found.name),
      ["llama"],
    );
    discovery.stop();
    cluster.stop();
  });

  it("decodes ControllerRevisions from its cache; an unknown one is undefined", async () => {
    const { cluster, user, discovery } = setup();
    const data = pdRevision("p:1", "d:1");
    const revision = encodeControllerRevision({
      owner: { name: "ms", namespace: "default", uid: "u-1" },
      data,
      revision: 1,
      collisionCount: 0,
    });
    await user.create(revision as unknown as KubeObject);
    await cluster.advance(LAG_MS);
    assert.deepEqual(discovery.revision("default", revision.metadata.name), data);
    assert.equal(discovery.revision("default", "ms-unknown"), undefined);
    discovery.stop();
    cluster.stop();
  });
});
