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
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { runProcess } from "../cli-process.ts";
import type { ProcessResult } from "../cli-process.ts";

const ROOT = join(import.meta.dirname, "../..");
const PACKAGE = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { name: string; version: string };
const NPM_TIMEOUT_MS = 240_000;
const scratch = mkdtempSync(join(tmpdir(), "tandem-install-"));
const prefix = join(scratch, "prefix");
const elsewhere = join(scratch, "elsewhere");
/** This Node first on PATH: npm, its prepack build and the installed `#!/usr/bin/env node` all run on it. */
const env = { ...process.env, PATH: [join(prefix, "bin"), dirname(process.execPath), process.env["PATH"] ?? ""].join(delimiter) };

function installed(args: readonly string[], command = "tandem"): Promise<ProcessResult> {
  return runProcess(join(prefix, "bin", command), args, { cwd: elsewhere, env });
}

describe("npm pack, npm i -g, then the installed tandem", { timeout: 2 * NPM_TIMEOUT_MS + 60_000 }, () => {
  before(async () => {
    mkdirSync(elsewhere);
    const packed = await runProcess("npm", ["pack", "--silent", "--pack-destination", scratch], { cwd: ROOT, env, timeoutMs: NPM_TIMEOUT_MS });
    assert.equal(packed.code, 0, packed.stderr);
    const tarball = join(scratch, `${PACKAGE.name}-${PACKAGE.version}.tgz`);
    const install = ["install", "--global", "--prefix", prefix, "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error", tarball];
    const result = await runProcess("npm", install, { cwd: elsewhere, env, timeoutMs: NPM_TIMEOUT_MS });
    assert.equal(result.code, 0, result.stderr);
  });
  after(() => rmSync(scratch, { recursive: true, force: true }));

  it("tandem --version prints the package's version", async () => {
    assert.deepEqual(await installed(["--version"]), { code: 0, signal: null, stdout: `${PACKAGE.version}\n`, stderr: "" });
  });

  it("tandem validate checks a shipped example", async () => {
    const example = join(prefix, "lib/node_modules", PACKAGE.name, "deploy/examples/single-role.yaml");
    assert.deepEqual(await installed(["validate", example]), { code: 0, signal: null, stdout: `${example}: ModelServing/qwen-small: valid\n`, stderr: "" });
  });

  it("tandem crd prints the committed CRDs", async () => {
    assert.deepEqual(await installed(["crd"]), { code: 0, signal: null, stdout: readFileSync(join(ROOT, "deploy/crd.yaml"), "utf8"), stderr: "" });
  });

  it("the kubectl plugin shim runs the installed tandem", async () => {
    assert.deepEqual(await installed(["--version"], "kubectl-tandem"), { code: 0, signal: null, stdout: `${PACKAGE.version}\n`, stderr: "" });
  });

  it("tandem demo finds its scenarios inside the installed package", async () => {
    const result = await installed(["demo", "--no-tty"]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /demo-lifecycle/);
  });
});
