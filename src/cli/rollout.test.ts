import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { runTandem } from "../../test/cli-process.ts";
import {
  BLOCKING,
  COMPLETING,
  REVISIONS,
  WAITING_STAGE,
  objectsAt,
  startFakeApiServer,
} from "../../test/fake-apiserver.ts";
import type { FakeApiServer } from "../../test/fake-apiserver.ts";
import type { Kind, KubeObject, ListOptions } from "../engine/ports.ts";
import { matchesSelector, parseSelector } from "../engine/labels.ts";
import type { RolloutClient, WatchClock } from "./rollout.ts";
import { statusCommand } from "./rollout.ts";

const target = { namespace: "default", name: "m" };
const [OLD, NEW] = REVISIONS.map((revision) => revision.metadata.name);
const WAITING = `Waiting for rollout of m to finish: 0 of 0 groups updated, 0 ready (server 0/0 updated, 0 ready): m: status.currentRevision ${OLD} is not the update revision ${NEW} yet\n`;

/** Stands for a read of the cluster that fails. */
const UNREACHABLE = "unreachable";

/** A client whose every refresh reads the next stage (staying on the last; UNREACHABLE: the read fails); writes are refused. */
function stagedClient(stages: readonly (object | typeof UNREACHABLE)[]): RolloutClient {
  let read = 0;
  let objects: KubeObject[] = [];
  return {
    reader: {
      refresh: () => {
        const stage = stages[Math.min(read++, stages.length - 1)] ?? {};
        if (stage === UNREACHABLE) return Promise.reject(new Error("connect ECONNREFUSED 10.0.0.1:6443"));
        objects = objectsAt(stage) as KubeObject[];
        return Promise.resolve();
      },
      get: <K extends Kind>(kind: K, namespace: string | undefined, name: string) =>
        objects.find(
          (object) => object.kind === kind && object.metadata.namespace === namespace && object.metadata.name === name,
        ) as KubeObject<K> | undefined,
      list: <K extends Kind>(kind: K, options?: ListOptions) =>
        objects.filter(
          (object) =>
            object.kind === kind &&
            matchesSelector(parseSelector(options?.labelSelector ?? ""), object.metadata.labels),
        ) as KubeObject<K>[],
    },
    writer: new Proxy({}, { get: () => () => Promise.reject(new Error("read-only")) }) as RolloutClient["writer"],
  };
}

/** Virtual time: `sleep` moves the clock on at once. */
function virtualClock(): WatchClock & { slept: number[] } {
  let nowMs = 0;
  const slept: number[] = [];
  return {
    slept,
    nowMs: () => nowMs,
    sleep: (delayMs) => {
      slept.push(delayMs);
      nowMs += delayMs;
      return Promise.resolve();
    },
  };
}

async function watch(
  stages: readonly (object | typeof UNREACHABLE)[],
  options: { timeoutSeconds?: number; output?: "json" | "wide" } = {},
) {
  const written: string[] = [];
  const warned: string[] = [];
  const clock = virtualClock();
  const output = await statusCommand(stagedClient(stages), target, {
    watch: true,
    pollMs: 1_000,
    clock,
    write: (text) => written.push(text),
    warn: (text) => warned.push(text),
    ...options,
  });
  return { output, written, warned, slept: clock.slept };
}

describe("tandem rollout status --watch (virtual time)", () => {
  it("writes one line per change as it happens and exits 0 once the rollout is complete", async () => {
    const { output, written, slept } = await watch(COMPLETING);
    assert.deepEqual(written, [WAITING, "rollout of m complete\n"], "the unchanged second stage writes nothing");
    assert.deepEqual(output, { exitCode: 0, stdout: "", stderr: "" });
    assert.deepEqual(slept, [1_000, 1_000]);
  });

  it("exits 1 when the controller says the rollout is blocked, naming the reason and the fix", async () => {
    const { output, written } = await watch(BLOCKING);
    assert.deepEqual(written, [WAITING], "the progress line does not change; the reason goes to stderr");
    assert.equal(output.exitCode, 1);
    assert.equal(
      output.stderr,
      "tandem rollout: default/m is blocked: InPlaceIneligible: InPlaceUpdate cannot change the command of role server; change the spec (or roll back: tandem rollout undo m)\n",
    );
  });

  it("exits 1 after --timeout, saying so", async () => {
    const { output, written, slept } = await watch([WAITING_STAGE], { timeoutSeconds: 3 });
    assert.deepEqual(written, [WAITING]);
    assert.deepEqual(slept, [1_000, 1_000, 1_000]);
    assert.deepEqual(output, {
      exitCode: 1,
      stdout: "",
      stderr: "tandem rollout: timed out after 3s waiting for the rollout of default/m (--timeout sets how long)\n",
    });
  });

  it("a failed read while watching is said on stderr and retried; the watch goes on", async () => {
    const { output, written, warned } = await watch([WAITING_STAGE, UNREACHABLE, UNREACHABLE, ...COMPLETING]);
    assert.deepEqual(written, [WAITING, "rollout of m complete\n"]);
    assert.deepEqual(
      warned,
      Array.from(
        { length: 2 },
        () => "reading from the cluster failed: connect ECONNREFUSED 10.0.0.1:6443; retrying\n",
      ),
    );
    assert.equal(output.exitCode, 0);
  });

  it("-o json writes one JSON object per change", async () => {
    const { written } = await watch(COMPLETING, { output: "json" });
    assert.deepEqual(
      written.map((line) => (JSON.parse(line) as { complete: boolean }).complete),
      [false, true],
    );
  });
});

describe("tandem rollout status with an explicit recreate", () => {
  it("shows the request and says the rollout waits for it until its pods are replaced", async () => {
    const recreate = { id: "r1", group: 0, role: "server", phase: "Replacing", pods: ["uid-1"] };
    const output = await statusCommand(stagedClient([{ ...WAITING_STAGE, recreate }]), target);
    assert.equal(output.exitCode, 0);
    const lines = output.stdout.split("\n");
    assert.ok(lines.includes("recreate r1 of role server in group 0: Replacing"), output.stdout);
    assert.ok(lines.includes("  m: recreate r1 of role server in group 0 is replacing its pods"), output.stdout);
    const json = await statusCommand(stagedClient([{ ...WAITING_STAGE, recreate }]), target, { output: "json" });
    const report = JSON.parse(json.stdout) as { recreate: unknown };
    assert.deepEqual(report.recreate, { id: "r1", group: 0, role: "server", phase: "Replacing" }, "without the UIDs");
  });
});

describe("tandem rollout against an API server (processes)", () => {
  let server: FakeApiServer;
  let blocking: FakeApiServer;
  const dir = mkdtempSync(join(tmpdir(), "tandem-rollout-"));
  before(async () => {
    server = await startFakeApiServer(COMPLETING);
    blocking = await startFakeApiServer(BLOCKING);
    server.kubeconfig(join(dir, "config"));
    blocking.kubeconfig(join(dir, "blocking"));
  });
  after(async () => {
    await Promise.all([server.close(), blocking.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  it("status --watch --context follows the rollout to the end, one line per change", async () => {
    const result = await runTandem([
      "rollout",
      "status",
      "m",
      "--watch",
      "--kubeconfig",
      join(dir, "config"),
      "--context",
      "fake",
    ]);
    assert.deepEqual(result, { code: 0, signal: null, stdout: `${WAITING}rollout of m complete\n`, stderr: "" });
  });

  it("status --watch exits 1 on a blocked rollout", async () => {
    const result = await runTandem([
      "rollout",
      "status",
      "m",
      "-w",
      "--kubeconfig",
      join(dir, "blocking"),
      "--context",
      "fake",
    ]);
    assert.equal(result.code, 1);
    assert.equal(result.stdout, WAITING);
    assert.match(
      result.stderr,
      /^tandem rollout: default\/m is blocked: InPlaceIneligible: .*tandem rollout undo m\)\n$/,
    );
  });

  it("status -o json and history -o yaml|wide print the same state for machines and people", async () => {
    const kubeconfig = ["--kubeconfig", join(dir, "blocking"), "--context", "fake"];
    const status = await runTandem(["rollout", "status", "m", "-o", "json", ...kubeconfig]);
    assert.equal(status.code, 0, status.stderr);
    assert.deepEqual((JSON.parse(status.stdout) as { updateRevision: unknown }).updateRevision, {
      name: NEW,
      revision: 2,
    });
    const yaml = await runTandem(["rollout", "history", "m", "-o", "yaml", ...kubeconfig]);
    assert.match(yaml.stdout, /^namespace: default\nname: m\nrevisions:\n {2}- revision: 1\n/);
    const wide = await runTandem(["rollout", "history", "m", "-o", "wide", ...kubeconfig]);
    assert.deepEqual(wide.stdout.split("\n")[0]?.split(/\s+/), ["REVISION", "NAME", "HASH", "IMAGES"]);
    const bad = await runTandem(["rollout", "history", "m", "-o", "xml", ...kubeconfig]);
    assert.equal(bad.code, 1);
    assert.match(
      bad.stderr,
      /error: option '-o, --output <format>' argument 'xml' is invalid. Allowed choices are json, yaml, wide./,
    );
  });

  it("--context names a context the kubeconfig lacks: the names it has, exit 1", async () => {
    const result = await runTandem([
      "rollout",
      "history",
      "m",
      "--kubeconfig",
      join(dir, "config"),
      "--context",
      "prod",
    ]);
    assert.deepEqual(result, {
      code: 1,
      signal: null,
      stdout: "",
      stderr: `tandem rollout: --context: no context "prod" in ${join(dir, "config")} (it has fake, elsewhere)\n`,
    });
  });
});

describe("tandem rollout restart against an API server (processes)", () => {
  let server: FakeApiServer;
  const dir = mkdtempSync(join(tmpdir(), "tandem-restart-"));
  const kubeconfig = () => ["--kubeconfig", join(dir, "config"), "--context", "fake"];
  before(async () => {
    server = await startFakeApiServer(COMPLETING, 3);
    server.kubeconfig(join(dir, "config"));
  });
  after(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("restart stamps tandem.dev/restartedAt into the pod templates: exit 0, what happens next on stdout", async () => {
    const result = await runTandem(["rollout", "restart", "m", ...kubeconfig()]);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stderr, "");
    assert.match(
      result.stdout,
      /^ModelServing default\/m restarted: every pod template carries tandem\.dev\/restartedAt=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ, a new revision that ServingGroupRollingUpdate rolls out within its budgets \(follow it: tandem rollout status m --watch\)\n$/,
    );
    const written = server.updates.at(-1);
    assert.match(
      written?.spec.template.roles[0].entryTemplate.metadata.annotations["tandem.dev/restartedAt"],
      /^\d{4}-/,
    );
    assert.equal(written?.spec.replicas, 3);
  });

  it("restart --recreate --group --role writes one request with a fresh id", async () => {
    const count = server.updates.length;
    const result = await runTandem([
      "rollout",
      "restart",
      "m",
      "--recreate",
      "--group",
      "2",
      "--role",
      "server",
      ...kubeconfig(),
    ]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stdout,
      /^ModelServing default\/m: recreate of role server in group 2 requested \(id [0-9a-f-]{36}\); the controller replaces its pods once, within the budgets/,
    );
    assert.equal(server.updates.length, count + 1);
    const request = JSON.parse(server.updates.at(-1)?.metadata.annotations["tandem.dev/recreate"]);
    assert.deepEqual({ ...request, id: typeof request.id }, { id: "string", group: 2, role: "server" });
  });

  for (const [args, stderr] of [
    [
      ["--group", "1"],
      "tandem: --group: needs --recreate: a restart without it restarts every group through a new revision\n",
    ],
    [["--role", "server"], "tandem: --role: needs --recreate --group G: it names the role to rebuild in that group\n"],
    [["--recreate"], "tandem: --recreate: needs --group G: the ServingGroup (index) to rebuild\n"],
    [["--recreate", "--group", "-1"], 'tandem: --group: must be a ServingGroup index (0 or more), not "-1"\n'],
    [
      ["--recreate", "--group", "3"],
      "tandem rollout restart: --group 3: ModelServing default/m: there is no ServingGroup 3: its ServingGroups are 0..2\n",
    ],
    [
      ["--recreate", "--group", "0", "--role", "decode"],
      'tandem rollout restart: --role decode: ModelServing default/m: there is no role "decode": its roles are server\n',
    ],
  ] as const) {
    it(`restart ${args.join(" ")}: exit 1, the flag named on stderr, nothing written`, async () => {
      const count = server.updates.length;
      const result = await runTandem(["rollout", "restart", "m", ...args, ...kubeconfig()]);
      assert.deepEqual(result, { code: 1, signal: null, stdout: "", stderr });
      assert.equal(server.updates.length, count);
    });
  }
});
