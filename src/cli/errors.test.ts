/**
 * Bad input and a hostile environment, each run as a process (issue #25): one message on stderr
 * naming the cause and the fix, never a stack trace, and the exit code.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import type { AddressInfo, Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { SOURCE_MAIN, runTandem } from "../../test/cli-process.ts";
import { COMPLETING, startFakeApiServer } from "../../test/fake-apiserver.ts";
import type { FakeApiServer } from "../../test/fake-apiserver.ts";

const dir = mkdtempSync(join(tmpdir(), "tandem-errors-"));
const SCENARIO = join(import.meta.dirname, "../../deploy/examples/scenarios/pod-deletion.yaml");
/** No kubeconfig anywhere: an empty home, no $KUBECONFIG, not in a cluster. */
const NO_CLUSTER_ENV = { PATH: process.env["PATH"] ?? "", HOME: join(dir, "home") };
const NO_CLUSTER =
  "no cluster is configured: pass --kubeconfig FILE, set $KUBECONFIG, write ~/.kube/config, or run in a cluster";

function noStackTrace(stderr: string): void {
  assert.doesNotMatch(stderr, /^\s+at /m, "a stack trace");
}

describe("tandem: errors name the cause and the fix, without a stack trace (processes)", () => {
  let api: FakeApiServer;
  let busy: Server;
  let busyAddress: string;
  before(async () => {
    mkdirSync(join(dir, "home"));
    api = await startFakeApiServer(COMPLETING);
    api.kubeconfig(join(dir, "kubeconfig"));
    busy = createServer();
    busy.listen(0, "127.0.0.1");
    await once(busy, "listening");
    busyAddress = `127.0.0.1:${(busy.address() as AddressInfo).port}`;
  });
  after(async () => {
    busy.close();
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("controller --kubeconfig /nonexistent", async () => {
    assert.deepEqual(await runTandem(["controller", "--kubeconfig", "/nonexistent"]), {
      code: 1,
      signal: null,
      stdout: "",
      stderr:
        "tandem controller: --kubeconfig /nonexistent: no such file; name an existing kubeconfig, or leave --kubeconfig out to use $KUBECONFIG or ~/.kube/config\n",
    });
  });

  it("controller --metrics-addr bogus", async () => {
    assert.deepEqual(await runTandem(["controller", "--metrics-addr", "bogus"]), {
      code: 1,
      signal: null,
      stdout: "",
      stderr: 'tandem: --metrics-addr: must be host:port (IPv6 in brackets), such as 127.0.0.1:8080, not "bogus"\n',
    });
  });

  it("a port in use: controller --metrics-addr and router --listen", async () => {
    const cluster = ["--kubeconfig", join(dir, "kubeconfig"), "--context", "fake"];
    const inUse = "address already in use (another process listens there: stop it, or choose another port)";
    assert.deepEqual(await runTandem(["controller", ...cluster, "--metrics-addr", busyAddress]), {
      code: 1,
      signal: null,
      stdout: "",
      stderr: `tandem controller: cannot listen on ${busyAddress} (--metrics-addr): ${inUse}\n`,
    });
    assert.deepEqual(await runTandem(["router", ...cluster, "--listen", busyAddress]), {
      code: 1,
      signal: null,
      stdout: "",
      stderr: `tandem router: cannot listen on ${busyAddress} (--listen): ${inUse}\n`,
    });
  });

  it("no kubeconfig at all: controller, router and rollout say no cluster is configured and exit 1", async () => {
    for (const [command, args] of [
      ["controller", ["controller"]],
      ["router", ["router"]],
      ["rollout", ["rollout", "status", "m"]],
    ] as const) {
      assert.deepEqual(
        await runTandem(args, { env: NO_CLUSTER_ENV, timeoutMs: 60_000 }),
        { code: 1, signal: null, stdout: "", stderr: `tandem ${command}: ${NO_CLUSTER}\n` },
        command,
      );
    }
  });

  it("demo --speed abc", async () => {
    assert.deepEqual(await runTandem(["demo", "--speed", "abc"]), {
      code: 1,
      signal: null,
      stdout: "",
      stderr: 'tandem: --speed: must be a positive number of simulated seconds per second, not "abc"\n',
    });
  });

  it("simulate --out /nonexistent/dir/r.json keeps the run's output and says which directory is missing", async () => {
    const result = await runTandem(["simulate", SCENARIO, "--out", "/nonexistent/dir/r.json"]);
    assert.equal(result.code, 1);
    assert.match(result.stdout, /\nverdict: pass after /);
    assert.equal(
      result.stderr,
      "--out: cannot write /nonexistent/dir/r.json: the directory /nonexistent/dir does not exist (create it, or choose another path)\n",
    );
  });

  it("output into a closed pipe (| head): exit 0 quietly", async () => {
    for (const args of [["crd"], ["demo", "--no-tty"], ["--help"]]) {
      const child = spawn(process.execPath, [SOURCE_MAIN, ...args], { stdio: ["ignore", "pipe", "pipe"] });
      child.stdout.destroy(); // the reader is gone before the first write
      let stderr = "";
      child.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      const [code] = (await once(child, "close")) as [number | null];
      assert.deepEqual({ code, stderr }, { code: 0, stderr: "" }, args.join(" "));
    }
  });

  it("binary input to validate, simulate, revision and demo --scenario: a short escaped excerpt, exit 1", async () => {
    const binary = join(dir, "model.bin");
    writeFileSync(
      binary,
      Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0x02, 0x01, 0x00]), Buffer.alloc(4 * 1024 * 1024, 0xa7)]),
    );
    const expected = `${binary}: cannot read: not a text file (it starts "\\x7fELF\\x02\\x01\\x00\\xa7\\xa7\\xa7\\xa7\\xa7\\xa7\\xa7\\xa7\\xa7"… (4194311 bytes)); give a YAML file\n`;
    assert.deepEqual(await runTandem(["validate", binary]), { code: 1, signal: null, stdout: expected, stderr: "" });
    assert.deepEqual(await runTandem(["simulate", binary]), { code: 1, signal: null, stdout: "", stderr: expected });
    assert.deepEqual(await runTandem(["revision", binary]), { code: 1, signal: null, stdout: "", stderr: expected });
    const demo = await runTandem(["demo", "--no-tty", "--scenario", binary]);
    assert.equal(demo.code, 1);
    assert.ok(demo.stdout.includes(expected.trimEnd()) && demo.stdout.length < 1_000, demo.stdout.slice(0, 2_000));
  });

  it("text that is not YAML: at most 10 syntax errors, each line short", async () => {
    const junk = join(dir, "junk.yaml");
    writeFileSync(
      junk,
      Array.from({ length: 200 }, (_, index) => `key${index}: [unclosed "${"x".repeat(5_000)}\n  - : :`).join("\n"),
    );
    const result = await runTandem(["validate", junk]);
    assert.equal(result.code, 1);
    const lines = result.stdout.trimEnd().split("\n");
    assert.ok(lines.length <= 11, `${lines.length} lines`);
    assert.ok(
      lines.every((line) => line.length < 400),
      "a line over 400 characters",
    );
    noStackTrace(result.stderr);
  });

  it("validation reports every problem at once: the schema's and the rules'", async () => {
    const manifest = join(dir, "many.yaml");
    writeFileSync(
      manifest,
      `apiVersion: tandem.dev/v1alpha1
kind: ModelServing
metadata: {name: many}
spec:
  replicas: 2
  colour: blue
  template:
    roles:
      - name: server
        entryTemplate: {spec: {containers: [{name: c, image: "vllm:v1"}, {name: c, image: "vllm:v1"}]}}
      - name: server
        replicas: lots
        entryTemplate: {spec: {containers: [{name: c, image: "vllm:v1"}]}}
`,
    );
    const problem = (text: string) => `${manifest}: ModelServing/many: ${text}\n`;
    assert.deepEqual(await runTandem(["validate", manifest]), {
      code: 1,
      signal: null,
      stderr: "",
      stdout: [
        problem('spec.template.roles[1].replicas: must be an integer, not string "lots"'),
        problem("spec.colour: is not a known field"),
        problem(
          'spec.template.roles[1].name: duplicates spec.template.roles[0].name "server": role names must be unique',
        ),
        problem(
          'spec.template.roles[0].entryTemplate.spec.containers[1].name: duplicates containers[0].name "c": container names must be unique within a pod',
        ),
      ].join(""),
    });
  });
});
