import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { silentLogger } from "../engine/logger.ts";
import { defaultClusterConfigured } from "../kube/config.ts";
import { fakeSend, jsonResponse } from "../kube/test-fakes.ts";
import { ListenError, runRouter } from "../router/kube/run.ts";
import { routerOptionsOf } from "./router.ts";
import type { RouterFlags } from "./router.ts";

const flags = (overrides: Partial<RouterFlags> = {}): RouterFlags => ({
  listen: "127.0.0.1:8000",
  logLevel: "info",
  ...overrides,
});

describe("tandem router flags", () => {
  it("the defaults: listen 127.0.0.1:8000, all namespaces, id from $POD_NAME, Lease in $POD_NAMESPACE, no debug headers", () => {
    assert.deepEqual(routerOptionsOf(flags(), { POD_NAME: "router-0", POD_NAMESPACE: "tandem-system" }), {
      namespace: undefined,
      listen: "127.0.0.1:8000",
      metricsAddress: undefined,
      id: "router-0",
      leaseNamespace: "tandem-system",
      leaseDurationSeconds: undefined,
      debugHeaders: false,
      workers: 1,
    });
    assert.equal(routerOptionsOf(flags({ id: "r1", debugHeaders: true, namespace: "serve" }), {}).id, "r1");
  });

  it("--workers: a count, or auto for one per core; an id that leaves room for -w<index>", () => {
    assert.equal(routerOptionsOf(flags({ id: "r", workers: "3" }), {}).workers, 3);
    assert.equal(routerOptionsOf(flags({ id: "r", workers: "auto" }), {}, "default", 6).workers, 6);
    assert.equal(routerOptionsOf(flags({ id: "r".repeat(63) }), {}).workers, 1, "one worker keeps the id as it is");
    assert.equal(routerOptionsOf(flags({ id: "r".repeat(60), workers: "10" }), {}).id, "r".repeat(60));
  });

  it("the Lease's namespace: --lease-namespace, else $POD_NAMESPACE, else the kubeconfig's; its duration from --lease-duration-seconds", () => {
    assert.equal(
      routerOptionsOf(flags({ id: "r", leaseNamespace: "mine" }), { POD_NAMESPACE: "pods" }, "ctx").leaseNamespace,
      "mine",
    );
    assert.equal(routerOptionsOf(flags({ id: "r" }), { POD_NAMESPACE: "pods" }, "ctx").leaseNamespace, "pods");
    assert.equal(routerOptionsOf(flags({ id: "r" }), {}, "ctx").leaseNamespace, "ctx");
    assert.equal(routerOptionsOf(flags({ id: "r", leaseDurationSeconds: "30" }), {}).leaseDurationSeconds, 30);
  });

  for (const [given, message] of [
    [{ listen: "8000" }, /^Error: --listen "8000" is not host:port$/],
    [{ listen: "127.0.0.1:99999" }, /^Error: --listen "127.0.0.1:99999" is not host:port$/],
    [{ metricsAddr: "metrics" }, /^Error: --metrics-addr "metrics" is not host:port$/],
    [{ namespace: "Not_A_Namespace" }, /^Error: --namespace "Not_A_Namespace" is not a namespace name/],
    [{ id: " " }, /^Error: --id must not be empty$/],
    [{ id: "Router_1" }, /^Error: --id "Router_1" is not a DNS-1123 label .*it names the router's Lease$/],
    [{ id: "r", leaseNamespace: "Bad NS" }, /^Error: --lease-namespace "Bad NS" is not a namespace name/],
    [{ id: "r", leaseDurationSeconds: "2" }, /^Error: --lease-duration-seconds must be an integer ≥ 3, got "2"$/],
    [{ logLevel: "loud" }, /^Error: --log-level must be one of debug, info, warn, error, got "loud"$/],
    [{ workers: "0" }, /^Error: --workers: must be a positive integer or "auto", got "0"$/],
    [
      { id: "r".repeat(61), workers: "10" },
      /^Error: --id "r{61}" is too long for --workers 10: each worker is a replica named <id>-w<index>, and "r{61}-w9" is not a DNS-1123 label/,
    ],
  ] as const) {
    it(`refuses ${JSON.stringify(given)} with one line naming the flag`, () => {
      assert.throws(() => routerOptionsOf(flags(given), { POD_NAME: "router-0" }), message);
    });
  }

  it("no kubeconfig, no ~/.kube/config and not in a cluster: no cluster is configured (no endless retries of localhost:8080)", () => {
    assert.equal(
      defaultClusterConfigured({}, "/home/x", () => false),
      false,
    );
    assert.equal(
      defaultClusterConfigured({ KUBECONFIG: "/missing" }, "/home/x", (path) => path === "/home/x/.kube/config"),
      false,
      "$KUBECONFIG names the files to read",
    );
    assert.equal(
      defaultClusterConfigured({}, "/home/x", (path) => path === "/home/x/.kube/config"),
      true,
    );
    assert.equal(
      defaultClusterConfigured({ KUBERNETES_SERVICE_HOST: "10.96.0.1" }, "/home/x", (path) =>
        path.endsWith("/serviceaccount/token"),
      ),
      true,
    );
  });

  it("an address in use is a ListenError naming the flag (--listen, or --metrics-addr), and nothing is left listening", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const address = `127.0.0.1:${(taken.address() as AddressInfo).port}`;
    const { send } = fakeSend(() => jsonResponse(200, { items: [], metadata: { resourceVersion: "1" } }));
    try {
      for (const [options, flag] of [
        [{ listen: address }, "--listen"],
        [{ listen: "127.0.0.1:0", metricsAddress: address }, "--metrics-addr"],
      ] as const) {
        const failure = await runRouter({
          send,
          logger: silentLogger,
          id: "t",
          leaseNamespace: "default",
          ...options,
        }).then(
          () => undefined,
          (error: unknown) => error,
        );
        assert.ok(failure instanceof ListenError, String(failure));
        assert.equal(failure.message, `cannot listen on ${address} (${flag})`);
        assert.equal((failure.cause as { code?: string }).code, "EADDRINUSE");
      }
    } finally {
      taken.close();
    }
  });
});
