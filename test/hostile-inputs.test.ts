/**
 * Hostile input on every command that reads a file (issue #20): each gets a clear error naming the
 * file and the reason and a non-zero exit, never an exception, and loses nothing of other inputs.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { planCommand } from "../src/cli/plan.ts";
import { revisionCommand } from "../src/cli/revision.ts";
import { simulateText } from "../src/cli/simulate.ts";
import { validateFiles } from "../src/cli/validate.ts";
import { ALIAS_BOMB, VALID_MANIFEST, manifestWithExtra, nestedLists } from "./hostile.ts";

const TOO_MANY_ALIASES =
  'not valid YAML: too many aliases (expanding them would exceed 100 alias uses, as in a "billion laughs" attack)';

describe("an alias bomb", () => {
  it("tandem validate: a per-file error, and the other file's result is still printed", () => {
    const output = validateFiles([
      { path: "good.yaml", text: VALID_MANIFEST },
      { path: "bomb.yaml", text: ALIAS_BOMB },
    ]);
    assert.equal(output.stdout, `good.yaml: ModelServing/good: valid\nbomb.yaml: document 1: ${TOO_MANY_ALIASES}\n`);
    assert.equal(output.exitCode, 1);
  });

  it("tandem revision", () => {
    assert.deepEqual(revisionCommand("bomb.yaml", ALIAS_BOMB), {
      exitCode: 1,
      stdout: "",
      stderr: `bomb.yaml: document 1: ${TOO_MANY_ALIASES}\n`,
    });
  });

  it("tandem plan, as FILE and as --from", async () => {
    assert.deepEqual(await planCommand({ file: { path: "bomb.yaml", text: ALIAS_BOMB } }), {
      exitCode: 1,
      stdout: "",
      stderr: `bomb.yaml: document 1: ${TOO_MANY_ALIASES}\n`,
    });
    const coordinated = readFileSync(join(import.meta.dirname, "../deploy/examples/coordinated-chain.yaml"), "utf8");
    assert.deepEqual(
      await planCommand({
        file: { path: "ms.yaml", text: coordinated },
        from: { path: "bomb.yaml", text: ALIAS_BOMB },
      }),
      { exitCode: 1, stdout: "", stderr: `bomb.yaml: document 1: ${TOO_MANY_ALIASES}\n` },
    );
  });

  it("tandem simulate", async () => {
    const { output } = await simulateText("bomb.yaml", ALIAS_BOMB);
    assert.deepEqual(output, { exitCode: 1, stdout: "", stderr: `bomb.yaml: (root): ${TOO_MANY_ALIASES}\n` });
  });
});

describe("a huge string", () => {
  const huge = "q".repeat(1024 * 1024);

  it("tandem validate echoes at most a short excerpt of a huge name or image", () => {
    const output = validateFiles([
      { path: "name.yaml", text: VALID_MANIFEST.replace("name: good", `name: ${huge}`) },
      { path: "image.yaml", text: VALID_MANIFEST.replace('image: "vllm:v1"', `image: "a ${huge}"`) },
    ]);
    assert.equal(output.exitCode, 1);
    const lines = output.stdout.trimEnd().split("\n");
    assert.equal(lines.length, 2, output.stdout.slice(0, 2000));
    for (const line of lines) assert.ok(line.length < 400, line.slice(0, 400));
    assert.match(lines[0] ?? "", /^name\.yaml: ModelServing\/"q{80}"… \(1048576 characters\): metadata\.name: /);
    assert.match(
      lines[1] ?? "",
      /^image\.yaml: ModelServing\/good: spec\.template\.roles\[0\]\.entryTemplate\.spec\.containers\[0\]\.image: must not contain spaces \("a q{78}"… \(1048578 characters\)\)$/,
    );
  });

  it("tandem validate echoes at most a short excerpt of a huge name in a rule's message (coordination, gang policy, plugins)", () => {
    const spec = `spec:\n  rolloutStrategy: {type: RoleRollingUpdate, coordination: {maxSkew: 10%, roles: [${huge}], dependencies: [{role: ${huge}, dependsOn: [${huge}]}]}}\n  plugins: [{name: p, scope: {roles: [${huge}]}}]\n`;
    const text = VALID_MANIFEST.replace("spec:\n", spec).replace(
      "  template:\n",
      `  template:\n    gangPolicy: {minRoleReplicas: {${huge}: 1}}\n`,
    );
    const output = validateFiles([{ path: "rules.yaml", text }]);
    assert.equal(output.exitCode, 1);
    const lines = output.stdout.trimEnd().split("\n");
    assert.ok(lines.length >= 4, output.stdout.slice(0, 2000));
    for (const line of lines) assert.ok(line.length < 500, line.slice(0, 500));
  });
});

describe("deep nesting and self-reference", () => {
  const deep = manifestWithExtra(nestedLists(500));
  const tooDeep =
    /^deep\.yaml: ModelServing\/good: spec\.template\.roles\[0\]\.entryTemplate\.spec\.extra(\[0\]){93}: nests objects and lists more than 100 levels deep\n$/;

  it("tandem validate, revision and plan refuse a pod template nested 500 deep, naming where", async () => {
    assert.match(validateFiles([{ path: "deep.yaml", text: deep }]).stdout, tooDeep);
    assert.match(revisionCommand("deep.yaml", deep).stderr, tooDeep);
    assert.match((await planCommand({ file: { path: "deep.yaml", text: deep } })).stderr, tooDeep);
    const revisionJson = `{"data": {"schedulerName": "s", "roles": [{"name": "r", "workerReplicas": 0, "entryTemplate": {"spec": {"containers": [{"name": "c", "image": "i"}], "extra": ${nestedLists(500)}}}}]}}`;
    const coordinated = readFileSync(join(import.meta.dirname, "../deploy/examples/coordinated-chain.yaml"), "utf8");
    assert.match(
      (
        await planCommand({
          file: { path: "ms.yaml", text: coordinated },
          from: { path: "deep.json", text: revisionJson },
        })
      ).stderr,
      /^deep\.json: data\.roles\[0\]\.entryTemplate\.spec\.extra(\[0\]){94}: nests objects and lists more than 100 levels deep\n$/,
    );
  });

  it("tandem simulate refuses any step nested too deep: a ModelServing, another kind, a patch", async () => {
    const steps = [
      `{apply: {apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: ${nestedLists(500)}}}`,
      `{patch: {name: good, merge: {spec: ${nestedLists(500)}}}}`,
    ];
    const { output } = await simulateText(
      "deep.yaml",
      `name: deep\nsteps:\n${steps.map((step) => `  - ${step}\n`).join("")}`,
    );
    assert.equal(output.exitCode, 1);
    assert.match(
      output.stderr,
      /^deep\.yaml: steps\[0\]\.apply\.data(\[0\]){99}: nests objects and lists more than 100 levels deep\ndeep\.yaml: steps\[1\]\.patch\.merge\.spec(\[0\]){98}: nests objects and lists more than 100 levels deep\n$/,
    );
  });

  it("an alias inside its own anchor (a collection containing itself) is not valid YAML", () => {
    const output = validateFiles([{ path: "cycle.yaml", text: manifestWithExtra("&loop [*loop]") }]);
    assert.equal(
      output.stdout,
      "cycle.yaml: document 1: not valid YAML: an alias refers to a collection it is part of, so the data would be infinite\n",
    );
  });
});
