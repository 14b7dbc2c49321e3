import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { MINIMUM_NODE, nodeVersionProblem } from "./node-version.ts";

describe("the installed command's Node.js version check", () => {
  it("admits 22.19 and later, refuses older ones saying what to do", () => {
    for (const version of ["22.19.0", "22.20.1", "23.0.0", "24.21.0", "30.1.2"])
      assert.equal(nodeVersionProblem(version), undefined, version);
    assert.equal(
      nodeVersionProblem("20.20.2"),
      "tandem needs Node.js 22.19 or newer, and this is 20.20.2: install a newer Node.js (https://nodejs.org), or put one first on PATH",
    );
    for (const version of ["22.18.9", "21.7.3", "18.0.0"])
      assert.ok(nodeVersionProblem(version)?.startsWith("tandem needs Node.js 22.19 or newer"), version);
  });

  it("says what package.json engines says", () => {
    const manifest = JSON.parse(readFileSync(join(import.meta.dirname, "../../package.json"), "utf8")) as {
      engines: { node: string };
    };
    assert.equal(manifest.engines.node, `>=${MINIMUM_NODE.join(".")}.0`);
  });
});
