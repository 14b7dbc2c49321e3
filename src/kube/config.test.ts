import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { loadKubeConfig } from "./config.ts";

describe("loadKubeConfig", () => {
  const dir = mkdtempSync(join(tmpdir(), "tandem-kubeconfig-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("says in one line which file cannot be loaded and why: binary garbage, empty, a directory", () => {
    const garbage = join(dir, "garbage");
    writeFileSync(garbage, Buffer.from([0x7b, 0x0a, 0x00, 0xff, 0x3a, 0x0a, 0x20, 0x5b]));
    const empty = join(dir, "empty");
    writeFileSync(empty, "");
    for (const [path, reason] of [
      [garbage, /null byte/],
      [empty, /input is empty/],
      [dir, /EISDIR/],
    ] as const) {
      assert.throws(
        () => loadKubeConfig(path),
        (error: Error) =>
          error.message.startsWith(`cannot load ${path}: `) &&
          reason.test(error.message) &&
          !error.message.includes("\n"),
      );
    }
  });

  it("--context replaces the current context; a context the file lacks is named with the ones it has", () => {
    const file = join(dir, "two-contexts");
    const cluster = (name: string) => `  - {name: ${name}, cluster: {server: "https://${name}.example:6443"}}`;
    writeFileSync(
      file,
      [
        "apiVersion: v1",
        "kind: Config",
        "current-context: staging",
        "clusters:",
        cluster("staging"),
        cluster("prod"),
        "users: [{name: u, user: {token: t}}]",
        "contexts:",
        "  - {name: staging, context: {cluster: staging, user: u}}",
        "  - {name: prod, context: {cluster: prod, user: u}}",
        "",
      ].join("\n"),
    );
    assert.equal(loadKubeConfig(file).getCurrentCluster()?.server, "https://staging.example:6443");
    assert.equal(loadKubeConfig(file, "prod").getCurrentCluster()?.server, "https://prod.example:6443");
    assert.throws(
      () => loadKubeConfig(file, "dev"),
      new Error(`--context: no context "dev" in ${file} (it has staging, prod)`),
    );
  });
});
