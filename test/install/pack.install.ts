/**
 * The package as users install it (issue #25): `npm pack` (which builds dist/ at prepack), a global
 * install of the tarball into a temporary prefix, then the installed `tandem` run from a
 * directory outside the checkout, on this Node. Run by `npm run test:install` (and `.ci/run`), not
 * by `npm test`: packing compiles the whole tree, which takes tens of seconds.
 *
 * The install uses `--prefer-offline`: every dependency is in the npm cache after `npm ci`, and
 * npm asks the registry only for package metadata it has not cached yet.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { spawnSync } from "node:child_process";
import { nodeVersionProblem } from "../../src/cli/node-version.ts";
import { runProcess } from "../cli-process.ts";
import type { ProcessResult } from "../cli-process.ts";

const ROOT = join(import.meta.dirname, "../..");
const PACKAGE = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { name: string; version: string };
const NPM_TIMEOUT_MS = 240_000;
const scratch = mkdtempSync(join(tmpdir(), "tandem-install-"));
const prefix = join(scratch, "prefix");
const elsewhere = join(scratch, "elsewhere");
/** This Node first on PATH: npm, its prepack build and the installed `#!/usr/bin/env node` all run on it. */
const env = {
  ...process.env,
  PATH: [join(prefix, "bin"), dirname(process.execPath), process.env["PATH"] ?? ""].join(delimiter),
};

/** A system Node.js older than the package admits (Debian's is 20), to check the installed command refuses it cleanly. */
const OLD_NODE = ["/usr/bin/node", "/usr/local/bin/node"].find((candidate) => {
  const version = spawnSync(candidate, ["-p", "process.versions.node"], { encoding: "utf8" });
  return version.status === 0 && nodeVersionProblem(version.stdout.trim()) !== undefined;
});

function installed(args: readonly string[], command = "tandem"): Promise<ProcessResult> {
  return runProcess(join(prefix, "bin", command), args, { cwd: elsewhere, env });
}

describe("npm pack, npm i -g, then the installed tandem", { timeout: 2 * NPM_TIMEOUT_MS + 60_000 }, () => {
  before(async () => {
    mkdirSync(elsewhere);
    const packed = await runProcess("npm", ["pack", "--silent", "--pack-destination", scratch], {
      cwd: ROOT,
      env,
      timeoutMs: NPM_TIMEOUT_MS,
    });
    assert.equal(packed.code, 0, packed.stderr);
    const tarball = join(scratch, `${PACKAGE.name}-${PACKAGE.version}.tgz`);
    const install = [
      "install",
      "--global",
      "--prefix",
      prefix,
      "--prefer-offline",
      "--no-audit",
      "--no-fund",
      "--loglevel=error",
      tarball,
    ];
    const result = await runProcess("npm", install, { cwd: elsewhere, env, timeoutMs: NPM_TIMEOUT_MS });
    assert.equal(result.code, 0, result.stderr);
  });
  after(() => rmSync(scratch, { recursive: true, force: true }));

  it("the package holds the compiled command, not the sources or the tests", () => {
    const files = readdirSync(join(prefix, "lib/node_modules", PACKAGE.name), {
      recursive: true,
      encoding: "utf8",
    }).filter((file) => !file.startsWith("node_modules"));
    assert.ok(files.includes(join("dist", "cli", "bin.js")));
    assert.deepEqual(
      files.filter((file) => file.endsWith(".ts") || /(^|\/)test-[^/]*\.js$|\.test\.js$/.test(file)),
      [],
    );
  });

  it("tandem --version prints the package's version", async () => {
    assert.deepEqual(await installed(["--version"]), {
      code: 0,
      signal: null,
      stdout: `${PACKAGE.version}\n`,
      stderr: "",
    });
  });

  it("tandem validate checks a shipped example", async () => {
    const example = join(prefix, "lib/node_modules", PACKAGE.name, "deploy/examples/single-role.yaml");
    assert.deepEqual(await installed(["validate", example]), {
      code: 0,
      signal: null,
      stdout: `${example}: ModelServing/qwen-small: valid\n`,
      stderr: "",
    });
  });

  it("tandem crd prints the committed CRDs", async () => {
    assert.deepEqual(await installed(["crd"]), {
      code: 0,
      signal: null,
      stdout: readFileSync(join(ROOT, "deploy/crd.yaml"), "utf8"),
      stderr: "",
    });
  });

  it("the kubectl plugin shim runs the installed tandem", async () => {
    assert.deepEqual(await installed(["--version"], "kubectl-tandem"), {
      code: 0,
      signal: null,
      stdout: `${PACKAGE.version}\n`,
      stderr: "",
    });
  });

  it(
    "kubectl finds the plugin and its completer: kubectl tandem --version, kubectl tandem rollout status m -o <TAB>",
    { skip: spawnSync("kubectl", ["version", "--client"]).status === 0 ? false : "kubectl is not installed" },
    async () => {
      const result = await runProcess("kubectl", ["tandem", "--version"], { cwd: elsewhere, env, timeoutMs: 30_000 });
      assert.deepEqual(
        { code: result.code, stdout: result.stdout },
        { code: 0, stdout: `${PACKAGE.version}\n` },
        result.stderr,
      );
      const completion = await runProcess("kubectl", ["__complete", "tandem", "rollout", "status", "m", "-o", ""], {
        cwd: elsewhere,
        env,
        timeoutMs: 30_000,
      });
      assert.equal(completion.stdout, "json\nyaml\nwide\n:4\n", completion.stderr);
    },
  );

  it(
    "on a Node.js older than engines admits, one line says so and what to do, exit 1",
    { skip: OLD_NODE === undefined ? "no Node.js older than 22.19 on this machine" : false },
    async () => {
      const result = await runProcess(
        OLD_NODE ?? "",
        [join(prefix, "lib/node_modules", PACKAGE.name, "dist/cli/bin.js"), "--version"],
        { cwd: elsewhere, env },
      );
      assert.equal(result.code, 1);
      assert.equal(result.stdout, "");
      assert.match(
        result.stderr,
        /^tandem needs Node\.js 22\.19 or newer, and this is [0-9.]+: install a newer Node\.js \(https:\/\/nodejs\.org\), or put one first on PATH\n$/,
      );
    },
  );

  it("tandem demo finds its scenarios inside the installed package", async () => {
    const result = await installed(["demo", "--no-tty"]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /demo-lifecycle/);
  });
});
