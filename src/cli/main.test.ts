import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, it } from "node:test";
import type { TestContext } from "node:test";
import type { Command } from "commander";
import { runTandem } from "../../test/cli-process.ts";
import { runOptionsOf } from "./controller.ts";
import { FlagError } from "./io.ts";
import { buildProgram, main } from "./main.ts";
import { writeReport } from "./simulate.ts";

/**
 * Runs the CLI in-process for a command that fails before it prints anything; its exit code and
 * what it wrote to stderr (stdout is left alone: the test runner reports through it).
 */
async function cli(t: TestContext, ...argv: string[]): Promise<{ code: number; stderr: string }> {
  let stderr = "";
  t.mock.method(process.stderr, "write", (chunk: string | Uint8Array) => ((stderr += String(chunk)), true));
  const code = await main(argv);
  t.mock.restoreAll();
  return { code, stderr };
}

describe("tandem: bad flag values are messages, not stack traces", () => {
  afterEach(() => {
    process.exitCode = undefined; // a command's exit code is not this test process's
  });

  it("demo --speed, rollout --timeout and --to-revision name the flag and exit 1", async (t) => {
    assert.deepEqual(await cli(t, "demo", "--speed", "abc"), {
      code: 1,
      stderr: 'tandem: --speed: must be a positive number of simulated seconds per second, not "abc"\n',
    });
    assert.deepEqual(await cli(t, "demo", "--serve", "--port", "99999"), {
      code: 1,
      stderr: 'tandem: --port: must be a TCP port, 0 to 65535 (0: any free port), not "99999"\n',
    });
    assert.deepEqual(await cli(t, "rollout", "status", "m", "--timeout", "soon"), {
      code: 1,
      stderr: 'tandem: --timeout: must be a number of seconds, 0 or more, not "soon"\n',
    });
    assert.deepEqual(await cli(t, "rollout", "undo", "m", "--to-revision", "1.5"), {
      code: 1,
      stderr: 'tandem: --to-revision: must be a revision number (1 or more), not "1.5"\n',
    });
  });

  it("controller --workers, --log-level and --metrics-addr are checked before anything starts", () => {
    const flags = { metricsAddr: "127.0.0.1:8080", logLevel: "info", workers: "2" };
    assert.throws(
      () => runOptionsOf({ ...flags, workers: "0" }, {}),
      new FlagError("--workers", 'must be a positive integer, not "0"'),
    );
    assert.throws(
      () => runOptionsOf({ ...flags, logLevel: "loud" }, {}),
      new FlagError("--log-level", 'must be one of debug, info, warn, error, not "loud"'),
    );
    assert.throws(
      () => runOptionsOf({ ...flags, metricsAddr: "8080" }, {}),
      new FlagError("--metrics-addr", 'must be host:port (IPv6 in brackets), such as 127.0.0.1:8080, not "8080"'),
    );
    assert.equal(runOptionsOf(flags, {}).controller?.workers, 2);
  });

  it("simulate --out to a path it cannot write keeps the run's output and says why, exit 1", async () => {
    const output = await writeReport(import.meta.dirname, "{}\n", {
      exitCode: 0,
      stdout: "verdict: pass\n",
      stderr: "",
    });
    assert.equal(output.exitCode, 1);
    assert.equal(output.stdout, "verdict: pass\n");
    assert.equal(output.stderr, `--out: cannot write ${import.meta.dirname}: it is a directory (name a file)\n`);
  });
});

describe("tandem: kubectl's habits", () => {
  it("every command that takes --kubeconfig also takes --context", () => {
    const walk = (command: Command): Command[] => [command, ...command.commands.flatMap(walk)];
    const clusterCommands = walk(buildProgram()).filter((command) =>
      command.options.some((option) => option.long === "--kubeconfig"),
    );
    assert.deepEqual(
      clusterCommands.map((command) => command.name()),
      ["controller", "status", "history", "undo", "restart", "pause", "resume", "router", "dashboard"],
    );
    for (const command of clusterCommands)
      assert.ok(
        command.options.some((option) => option.long === "--context"),
        command.name(),
      );
  });

  it("tandem --version prints package.json's version and exits 0", async () => {
    const manifest = JSON.parse(readFileSync(join(import.meta.dirname, "../../package.json"), "utf8")) as {
      version: string;
    };
    assert.deepEqual(await runTandem(["--version"]), {
      code: 0,
      signal: null,
      stdout: `${manifest.version}\n`,
      stderr: "",
    });
  });
});
