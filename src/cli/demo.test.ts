import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, it } from "node:test";
import { runTandem } from "../../test/cli-process.ts";
import { DEFAULT_ACTS, replayPath, runDemo } from "./demo.ts";

const SCENARIOS = join(import.meta.dirname, "../../deploy/examples/scenarios");

describe("tandem demo", () => {
  it("plays both acts on the simulated cluster, shows the recovery and the decode-only update, and passes", async () => {
    let out = "";
    const code = await runDemo({
      scenarios: DEFAULT_ACTS.map((act) => join(SCENARIOS, act)),
      speed: undefined,
      tty: false,
      write: (text) => (out += text),
    });
    assert.equal(code, 0, out);
    assert.match(out, /Failure injected: deleting 1 pod\(s\) matching tandem\.dev\/role=decode/);
    assert.match(out, /ok: Available after/);
    assert.match(out, /decode-only update: every decode pod replaced, every prefill pod untouched \(same UIDs\)/);
    assert.match(out, /demo-coordinated: PASS/);
    assert.match(out, /invariants: all 10 held/);
  });

  it("refuses a scenario beyond the simulator's limits before playing anything, and exits 1", async (t) => {
    const dir = mkdtempSync(join(tmpdir(), "tandem-demo-"));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, "big.yaml");
    writeFileSync(
      path,
      "name: big\ncluster: {nodes: [{name: a, count: 10000, gpus: 8}, {name: b, count: 10000, gpus: 8}]}\nsteps: [{advance: {seconds: 1}}]\n",
    );
    let out = "";
    assert.equal(await runDemo({ scenarios: [path], speed: undefined, tty: false, write: (text) => (out += text) }), 1);
    assert.equal(out, `${path}: cluster.nodes: adds up to 20000 nodes; the simulator runs at most 10000\n`);
  });

  it("says why a scenario file cannot be played, and exits 1", async () => {
    let out = "";
    assert.equal(
      await runDemo({ scenarios: ["/nonexistent.yaml"], speed: undefined, tty: false, write: (text) => (out += text) }),
      1,
    );
    assert.match(out, /^\/nonexistent\.yaml: cannot read: ENOENT/);
  });

  it("in a terminal: a role the update does not change says so, and every frame fits the terminal", async () => {
    let out = "";
    const terminalSize = () => ({ rows: 20, columns: 80 });
    // At this speed no frame is due while the act plays: the one frame is the last, drawn when it ends (after the rollback).
    const code = await runDemo({
      scenarios: [join(SCENARIOS, "demo-lifecycle.yaml")],
      speed: 1e9,
      tty: true,
      terminalSize,
      write: (text) => (out += text),
    });
    assert.equal(code, 0, out);
    const last = out.split("\x1b[H\x1b[2J").at(-1) ?? "";
    const frame = last.slice(0, last.indexOf("\n\ndemo-lifecycle: PASS")).split("\n");
    assert.ok(frame.length <= 19, `${frame.length} lines in 20 rows:\n${frame.join("\n")}`);
    assert.ok(frame.includes("  prefill unchanged by this update"), frame.join("\n"));
    assert.ok(frame.includes("  decode  ████████████████████ 100% new"), frame.join("\n"));
  });
});

describe("the demo's replay command", () => {
  it("names the file played, relative to the working directory when under it", () => {
    assert.equal(
      replayPath("/repo/deploy/examples/scenarios/demo-lifecycle.yaml", "/repo"),
      "deploy/examples/scenarios/demo-lifecycle.yaml",
    );
    assert.equal(
      replayPath("/usr/lib/node_modules/tandem/deploy/examples/scenarios/demo-lifecycle.yaml", "/home/me"),
      "/usr/lib/node_modules/tandem/deploy/examples/scenarios/demo-lifecycle.yaml",
    );
    assert.equal(replayPath("acts/mine.yaml", "/home/me"), "acts/mine.yaml");
  });

  it("tandem demo --scenario FILE prints a replay command that works from where the demo ran, whatever the scenario's name", async (t) => {
    const dir = mkdtempSync(join(tmpdir(), "tandem-demo-replay-"));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const scenario = readFileSync(join(SCENARIOS, "pod-deletion.yaml"), "utf8").replace(
      /^name: pod-deletion$/m,
      "name: not-the-file-name",
    );
    writeFileSync(join(dir, "my act.yaml"), scenario);
    const demo = await runTandem(["demo", "--no-tty", "--scenario", "my act.yaml"], { cwd: dir, timeoutMs: 60_000 });
    assert.deepEqual({ code: demo.code, stderr: demo.stderr }, { code: 0, stderr: "" }, demo.stdout);
    assert.match(demo.stdout, /\n {2}replay: tandem simulate 'my act\.yaml' --seed 1\n/);
    const replay = await runTandem(["simulate", "my act.yaml", "--seed", "1"], { cwd: dir, timeoutMs: 60_000 });
    assert.deepEqual({ code: replay.code, stderr: replay.stderr }, { code: 0, stderr: "" }, replay.stdout);
    assert.match(replay.stdout, /^scenario not-the-file-name \(seed 1\)\n/);
  });

  it("tandem demo from outside the checkout names the built-in acts by paths that exist", async (t) => {
    const dir = mkdtempSync(join(tmpdir(), "tandem-demo-replay-"));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const demo = await runTandem(["demo", "--no-tty"], { cwd: dir, timeoutMs: 120_000 });
    assert.deepEqual({ code: demo.code, stderr: demo.stderr }, { code: 0, stderr: "" }, demo.stdout);
    const paths = [...demo.stdout.matchAll(/^ {2}replay: tandem simulate (\S+) --seed \d+$/gm)].map(
      (match) => match[1] ?? "",
    );
    assert.equal(paths.length, 2 * DEFAULT_ACTS.length, "each act's summary, then the summary of both");
    for (const path of paths) assert.ok(existsSync(resolve(dir, path)), `${path} does not exist`);
  });
});
