import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { parseModelRoute } from "../api/parse.ts";
import { routerRouteOf } from "./route.ts";

const EXAMPLES = join(import.meta.dirname, "..", "..", "deploy", "examples");

function parsedExample(file: string) {
  const result = parseModelRoute(parse(readFileSync(join(EXAMPLES, file), "utf8")));
  assert.ok(result.ok);
  return result.value;
}

describe("routerRouteOf: the router's view of a parsed ModelRoute", () => {
  it("an aggregated route: {serve}, the API's defaults (port 8000, SameGroup, 2 retries, 60 s / 300 s), kvConnector the engine's default", () => {
    const route = parsedExample("single-role-route.yaml");
    assert.deepEqual(
      routerRouteOf({ ...route, metadata: { ...route.metadata, creationTimestamp: "2026-01-01T00:00:00Z" } }),
      {
        namespace: "default",
        name: "qwen-small",
        creationTimestamp: "2026-01-01T00:00:00Z",
        model: "Qwen/Qwen3-8B",
        modelServing: "qwen-small",
        engine: "vllm",
        port: 8000,
        roles: { serve: "server" },
        kvConnector: "nixl",
        pairing: "SameGroup",
        retries: { attempts: 2 },
        timeouts: { firstByteSeconds: 60, idleSeconds: 300 },
      },
    );
  });

  it("a disaggregated route: {prefill, decode} and the spec's own settings", () => {
    const route = routerRouteOf(parsedExample("prefill-decode-2p1d-route.yaml"));
    assert.deepEqual(route.roles, { prefill: "prefill", decode: "decode" });
    assert.deepEqual(
      [route.kvConnector, route.pairing, route.timeouts.firstByteSeconds, route.creationTimestamp],
      ["nixl", "SameRevision", 120, undefined],
    );
  });
});
