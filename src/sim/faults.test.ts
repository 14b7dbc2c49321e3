import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { ApiServer } from "./apiserver.ts";
import { EventRecorder } from "../engine/recorder.ts";
import { aModelServing, aPod, rejectsWith, setupServer } from "./test-fixtures.ts";

const msRef = { kind: "ModelServing", namespace: "default", name: "m" } as const;

/** Runs `count` spec patches and returns which ones failed ("x") or succeeded ("."). */
async function patchPattern(server: ApiServer, count: number): Promise<string> {
  const client = server.client("controller");
  let pattern = "";
  for (let i = 0; i < count; i++) {
    try {
      await client.patch(msRef, { spec: { replicas: i + 2 } });
      pattern += ".";
    } catch {
      pattern += "x";
    }
  }
  return pattern;
}

describe("fault injection", () => {
  it("fails exactly the Nth matching call, once, without applying it", async () => {
    const { server, client } = setupServer();
    server.faults.failNth({ verb: "create", kind: "Pod" }, 2, { error: "Conflict" });
    await client.create(aModelServing("m")); // another kind: not counted by the rule
    await client.create(aPod("p1"));
    await assert.rejects(client.create(aPod("p2")), rejectsWith("Conflict"));
    await client.create(aPod("p3"));
    await client.create(aPod("p2"));
    assert.deepEqual(
      server.list("Pod").items.map((item) => item.metadata.name),
      ["p1", "p2", "p3"],
    );
    assert.equal(server.apiWrites({ kind: "Pod", verb: "create" }), 4, "failed requests count as writes");
  });

  it("matches rules by client, so the kubelet's requests do not advance the controller's count", async () => {
    const { server, client } = setupServer();
    await client.create(aModelServing("m"));
    server.faults.failNth({ client: "controller", verb: "patchStatus" }, 1, { error: "ServerError" });
    await server.client("kubelet").patchStatus(msRef, { status: { replicas: 1 } });
    await assert.rejects(client.patchStatus(msRef, { status: { replicas: 2 } }), rejectsWith("ServerError"));
    assert.deepEqual(server.get(msRef).status, { replicas: 1 });
  });

  it("fails with an exact-ratio probability drawn from a named stream: same seed, same failures", async () => {
    const patterns: string[] = [];
    for (const seed of [5, 5, 6]) {
      const { server, client } = setupServer({}, seed);
      await client.create(aModelServing("m"));
      server.faults.failWithChance({ verb: "patch" }, 1, 3, { error: "Conflict", stream: "conflicts" });
      patterns.push(await patchPattern(server, 60));
    }
    assert.equal(patterns[0], patterns[1]);
    assert.notEqual(patterns[0], patterns[2]);
    const failures = (patterns[0] ?? "").replaceAll(".", "").length;
    assert.ok(failures > 8 && failures < 32, `failures ${failures}`);
  });

  it("keeps a probabilistic rule's draws independent of other rules and other traffic", async () => {
    const run = async (extraRule: boolean): Promise<string> => {
      const { server, client } = setupServer({}, 9);
      await client.create(aModelServing("m"));
      if (extraRule) server.faults.failNth({ verb: "patch" }, 3, { error: "ServerError" });
      server.faults.failWithChance({ verb: "patch" }, 1, 2, { error: "Conflict", stream: "conflicts" });
      await client.create(aPod("unrelated"));
      return patchPattern(server, 40);
    };
    const alone = await run(false);
    const withOther = await run(true);
    assert.equal(withOther.slice(0, 2), alone.slice(0, 2));
    assert.equal(withOther[2], "x", "the Nth rule fired on the 3rd patch");
    assert.equal(withOther.slice(3), alone.slice(3), "and the probabilistic rule's draws did not shift");
  });

  it("models an applied timeout: the client sees Timeout, the write happened, a retry meets AlreadyExists", async () => {
    const { server, client } = setupServer();
    server.faults.failNth({ verb: "create" }, 1, { error: "Timeout", applied: true });
    await assert.rejects(client.create(aPod("p")), rejectsWith("Timeout"));
    assert.equal(server.list("Pod").items.length, 1);
    await assert.rejects(client.create(aPod("p")), rejectsWith("AlreadyExists"));

    server.faults.failNth({ verb: "delete" }, 1, { error: "Timeout" });
    await assert.rejects(client.delete({ kind: "Pod", namespace: "default", name: "p" }), rejectsWith("Timeout"));
    assert.equal(server.list("Pod").items.length, 1, "an unapplied timeout changes nothing");
  });

  it("refuses malformed rules and can be cleared", async () => {
    const { server, client } = setupServer();
    assert.throws(() => server.faults.failNth({}, 0, { error: "Conflict" }), /positive integer/);
    assert.throws(() => server.faults.failNth({}, 1, { error: "Conflict", applied: true }), /only a Timeout/);
    assert.throws(() => server.faults.failWithChance({}, 3, 2, { error: "Conflict", stream: "s" }), /bad ratio/);
    server.faults.failWithChance({}, 1, 1, { error: "ServerError", stream: "always" });
    await assert.rejects(client.create(aPod("p")), rejectsWith("ServerError"));
    server.faults.clear();
    await client.create(aPod("p"));
  });
});

describe("write metrics and events", () => {
  it("counts writes by client, kind and verb; reads are not writes", async () => {
    const { server, client } = setupServer();
    await client.create(aModelServing("m"));
    await client.patch(msRef, { spec: { replicas: 2 } });
    await client.patchStatus(msRef, { status: { replicas: 2 } });
    await server.client("kubelet").create(aPod("p"));
    client.list("ModelServing");
    await client.delete(msRef);
    assert.deepEqual(server.apiWriteCounts(), [
      { client: "controller", kind: "ModelServing", verb: "create", count: 1 },
      { client: "controller", kind: "ModelServing", verb: "delete", count: 1 },
      { client: "controller", kind: "ModelServing", verb: "patch", count: 1 },
      { client: "controller", kind: "ModelServing", verb: "patchStatus", count: 1 },
      { client: "kubelet", kind: "Pod", verb: "create", count: 1 },
    ]);
    assert.equal(server.apiWrites({ client: "controller" }), 4);
  });

  it("records Events through a client and drops the ones that cannot be written", async () => {
    const { server, client, clock } = setupServer();
    const recorder = new EventRecorder({ writer: client, clock: clock.onEpoch(), component: "tandem-controller" });
    const regarding = { kind: "ModelServing", namespace: "default", name: "m", uid: "u-1" } as const;
    recorder.record({
      regarding,
      type: "Warning",
      reason: "DrainTimeout",
      message: "pod m-0-decode-0-0 did not drain in 300s",
    });
    await recorder.flushed();
    server.faults.failNth({ kind: "Event" }, 1, { error: "ServerError" });
    recorder.record({ regarding, type: "Normal", reason: "Dropped", message: "never stored" });
    await recorder.flushed();
    const events = server.list("Event").items;
    assert.equal(events.length, 1);
    const [event] = events;
    assert.ok(event !== undefined);
    assert.equal(event["reason"], "DrainTimeout");
    assert.deepEqual(event["involvedObject"], { apiVersion: "tandem.dev/v1alpha1", ...regarding });
    assert.equal(recorder.droppedCount(), 1);
  });
});
