import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { renderCrdYaml } from "../api/crd.ts";
import { runCrd } from "./crd.ts";
import { buildProgram } from "./main.ts";

test("tandem crd prints the CRD YAML", () => {
  assert.deepEqual(runCrd({}), { exitCode: 0, stdout: renderCrdYaml(), stderr: "" });
});

test("tandem crd --out writes the file, creating its directory", () => {
  const dir = mkdtempSync(join(tmpdir(), "tandem-crd-"));
  try {
    const file = join(dir, "deploy", "crd.yaml");
    assert.deepEqual(runCrd({ out: file }), { exitCode: 0, stdout: `Wrote ${file}\n`, stderr: "" });
    assert.equal(readFileSync(file, "utf8"), renderCrdYaml());
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("tandem crd --out reports a write failure with exit code 1", () => {
  const output = runCrd({ out: "/x/crd.yaml" }, () => {
    throw new Error("EACCES: permission denied");
  });
  assert.deepEqual(output, {
    exitCode: 1,
    stdout: "",
    stderr: "tandem crd: cannot write /x/crd.yaml: EACCES: permission denied\n",
  });
});

test("the crd command is registered with its --out option", () => {
  const command = buildProgram().commands.find((candidate) => candidate.name() === "crd");
  assert.ok(command);
  assert.deepEqual(
    command.options.map((option) => option.long),
    ["--out"],
  );
});
