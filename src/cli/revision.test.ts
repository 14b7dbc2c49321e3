import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { revisionCommand, revisionOfFile } from "./revision.ts";

const MANIFEST = `
apiVersion: v1
kind: ConfigMap
metadata: {name: unrelated}
---
apiVersion: tandem.dev/v1alpha1
kind: ModelServing
metadata:
  name: tiny
spec:
  replicas: 3
  template:
    roles:
      - name: server
        entryTemplate:
          spec:
            containers:
              - name: engine
                image: vllm/vllm-openai:v0.11.0
`;

describe("tandem revision", () => {
  it("prints name, hash and canonical data of the first ModelServing as 2-space JSON", () => {
    const output = revisionCommand("ms.yaml", MANIFEST);
    assert.equal(output.exitCode, 0);
    assert.equal(output.stderr, "");
    assert.equal(
      output.stdout,
      `${JSON.stringify(
        {
          name: "tiny-e5658d507c",
          hash: "e5658d507c",
          data: {
            roles: [
              {
                entryTemplate: { spec: { containers: [{ image: "vllm/vllm-openai:v0.11.0", name: "engine" }] } },
                name: "server",
                workerReplicas: 0,
              },
            ],
            schedulerName: "default-scheduler",
          },
        },
        null,
        2,
      )}\n`,
    );
  });

  it("uses status.collisionCount, as the controller does", () => {
    const output = revisionCommand("ms.yaml", `${MANIFEST}status: {collisionCount: 1}\n`);
    assert.match(output.stdout, /"hash": "9f7c82dc6d"/);
  });

  it("reports each problem of an invalid ModelServing on its own line and exits 1", () => {
    const invalid = MANIFEST.replace("replicas: 3", "replicas: -1")
      .replace("schedulerName", "")
      .replace("name: server", "name: Server");
    const output = revisionCommand("ms.yaml", invalid);
    assert.equal(output.exitCode, 1);
    assert.equal(output.stdout, "");
    const lines = output.stderr.trimEnd().split("\n");
    assert.equal(lines.length, 2);
    assert.equal(lines[0], "ms.yaml: ModelServing/tiny: spec.replicas: must be 0 or more");
    assert.match(
      lines[1] ?? "",
      /^ms\.yaml: ModelServing\/tiny: spec\.template\.roles\[0\]\.name: must be a DNS-1035 label/,
    );
  });

  it("reports semantic problems too (controller env in a template)", () => {
    const invalid = MANIFEST.replace(
      "name: engine",
      "name: engine\n                env: [{name: GROUP_SIZE, value: '1'}]",
    );
    const output = revisionCommand("ms.yaml", invalid);
    assert.equal(output.exitCode, 1);
    assert.match(
      output.stderr,
      /^ms\.yaml: ModelServing\/tiny: spec\.template\.roles\[0\]\.entryTemplate\.spec\.containers\[0\]\.env\[0\]\.name: GROUP_SIZE is set by the controller/,
    );
  });

  it("names an unnamed ModelServing as such", () => {
    const output = revisionCommand(
      "ms.yaml",
      "apiVersion: tandem.dev/v1alpha1\nkind: ModelServing\nmetadata: {}\nspec: {}\n",
    );
    assert.equal(output.exitCode, 1);
    assert.match(output.stderr, /^ms\.yaml: ModelServing\/\(unnamed\): metadata\.name: is required$/m);
  });

  it("fails on broken YAML, a file without a ModelServing, and an unreadable file", () => {
    const broken = revisionCommand("bad.yaml", "kind: [unclosed\n");
    assert.equal(broken.exitCode, 1);
    assert.match(broken.stderr, /^bad\.yaml: /);
    assert.deepEqual(revisionCommand("cm.yaml", "kind: ConfigMap\n"), {
      exitCode: 1,
      stdout: "",
      stderr: "cm.yaml: no ModelServing found\n",
    });
    assert.deepEqual(revisionCommand("empty.yaml", ""), {
      exitCode: 1,
      stdout: "",
      stderr: "empty.yaml: no ModelServing found\n",
    });
    const missing = revisionOfFile("nope.yaml", () => {
      throw new Error("ENOENT: no such file or directory");
    });
    assert.deepEqual(missing, {
      exitCode: 1,
      stdout: "",
      stderr: "nope.yaml: cannot read: ENOENT: no such file or directory\n",
    });
  });
});
