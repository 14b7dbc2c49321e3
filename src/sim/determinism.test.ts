import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { isApiError } from "../engine/ports.ts";
import { SimInformer } from "./informer.ts";
import { Prng } from "./prng.ts";
import { aPod, settle, setupServer } from "./test-fixtures.ts";

const SIM_DIR = import.meta.dirname;
const ENGINE_DIR = join(SIM_DIR, "..", "engine");
const BANNED =
  /\bDate\.now\(|\bMath\.random\(|\bsetTimeout\(|\bsetInterval\(|\bsetImmediate\(|\bperformance\.now\(|\bnew Date\(\)|\bgetRandomValues\(|\brandomUUID\(/;

/** A random workload of writes, time steps and watch drops; returns everything it observed. */
async function runWorkload(seed: number): Promise<string> {
  const { server, clock } = setupServer({ watchLagMs: 20, gcDelayMs: 50 }, seed);
  const workload = new Prng(seed).fork("workload");
  server.faults.failWithChance({ verb: "patch" }, 1, 10, { error: "Conflict", stream: "conflicts" });
  server.faults.failWithChance({ verb: "create" }, 1, 20, { error: "Timeout", applied: true, stream: "timeouts" });
  const informer = new SimInformer(server.client("controller"), clock, { kinds: ["Pod"], relistDelayMs: 100 });
  const trace: string[] = [];
  informer.subscribe((event) =>
    trace.push(
      `${clock.nowMs()} ${event.type} ${event.object.metadata.name} rv=${event.object.metadata.resourceVersion ?? ""}`,
    ),
  );
  informer.start();
  const client = server.client("controller");
  for (let step = 0; step < 300; step++) {
    const name = `p${workload.int(0, 12)}`;
    const ref = { kind: "Pod", namespace: "default", name } as const;
    const action = workload.pick(["create", "patch", "delete", "advance", "advance", "drop"] as const);
    try {
      if (action === "create")
        await client.create(
          aPod(
            name,
            {},
            workload.chance(1, 2) ? { nodeName: "n-0", terminationGracePeriodSeconds: workload.int(0, 3) } : {},
          ),
        );
      if (action === "patch") await client.patch(ref, { metadata: { labels: { step: String(step) } } });
      if (action === "delete") await client.delete(ref);
      if (action === "advance") clock.advance(workload.int(0, 500));
      if (action === "drop") server.dropWatches("Pod");
      trace.push(`${clock.nowMs()} ${action} ${name} ok`);
    } catch (error) {
      if (!isApiError(error)) throw error;
      trace.push(`${clock.nowMs()} ${action} ${name} ${error.reason}`);
    }
    await settle(2);
  }
  clock.advance(10_000);
  assert.deepEqual(informer.list("Pod"), server.list("Pod").items, "the cache converges once quiet");
  trace.push(JSON.stringify(server.list("Pod").items), JSON.stringify(server.apiWriteCounts()));
  return trace.join("\n");
}

describe("determinism", () => {
  it("replays a random workload with faults and watch drops identically for the same seed", async () => {
    const first = await runWorkload(42);
    assert.equal(await runWorkload(42), first);
    assert.notEqual(await runWorkload(43), first);
    assert.match(first, / Conflict\n/, "the workload met injected conflicts");
    assert.match(first, / Timeout\n/, "and applied timeouts");
  });

  it("uses no wall clock, ambient randomness or real timers in the simulator and the ports", () => {
    const files = [
      ...readdirSync(SIM_DIR)
        .filter((file) => file.endsWith(".ts") && !file.endsWith(".test.ts"))
        .map((file) => join(SIM_DIR, file)),
      join(ENGINE_DIR, "ports.ts"),
      join(ENGINE_DIR, "labels.ts"),
    ];
    for (const file of files) {
      const offending = readFileSync(file, "utf8")
        .split("\n")
        .filter((line) => BANNED.test(line));
      assert.deepEqual(offending, [], file);
    }
  });
});
