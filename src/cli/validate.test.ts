import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { loadModelServing } from "./manifests.ts";
import { readSource, validateFiles } from "./validate.ts";

const EXAMPLES = join(import.meta.dirname, "../../deploy/examples");

const valid = `apiVersion: tandem.dev/v1alpha1
kind: ModelServing
metadata: {name: a}
spec:
  template:
    roles:
      - name: server
        entryTemplate: {spec: {containers: [{name: c, image: "vllm:v1"}]}}
`;

describe("tandem validate", () => {
  it("accepts every shipped example", async () => {
    const paths = readdirSync(EXAMPLES)
      .filter((f) => f.endsWith(".yaml"))
      .map((f) => join(EXAMPLES, f));
    assert.ok(paths.length >= 6);
    const output = validateFiles(await Promise.all(paths.map(readSource)));
    assert.equal(
      output.stdout.split("\n").filter((line) => !line.endsWith(": valid") && line !== "").length,
      0,
      output.stdout,
    );
    assert.equal(output.exitCode, 0);
  });

  it("prints one line per problem as FILE: kind/name: path: reason and exits 1", () => {
    const bad = valid
      .replace("metadata: {name: a}", "metadata: {name: b}")
      .replace("name: server", "name: Server")
      .replace('image: "vllm:v1"', 'image: ""');
    const other = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: skipped}\n";
    const output = validateFiles([{ path: "m.yaml", text: `${valid}---\n${other}---\n${bad}` }]);
    assert.equal(output.exitCode, 1);
    assert.equal(
      output.stdout,
      [
        "m.yaml: ModelServing/a: valid",
        "m.yaml: ModelServing/b: spec.template.roles[0].name: must be a DNS-1035 label: lowercase letters, digits and '-', starting with a letter and ending with a letter or digit",
        "m.yaml: ModelServing/b: spec.template.roles[0].entryTemplate.spec.containers[0].image: must not be empty",
        "",
      ].join("\n"),
    );
  });

  it("reports YAML errors, duplicate keys, files without a ModelServing and unreadable files", async () => {
    const output = validateFiles([
      { path: "dup.yaml", text: valid.replace("metadata: {name: a}", "metadata: {name: a}\nmetadata: {name: b}") },
      { path: "empty.yaml", text: "apiVersion: v1\nkind: ConfigMap\n" },
      await readSource("/nonexistent/x.yaml"),
    ]);
    assert.equal(output.exitCode, 1);
    const lines = output.stdout.trimEnd().split("\n");
    assert.match(lines[0] ?? "", /^dup\.yaml: document 1: not valid YAML: Map keys must be unique/);
    assert.equal(lines[1], "empty.yaml: no ModelServing or ModelRoute found");
    assert.match(lines[2] ?? "", /^\/nonexistent\/x\.yaml: cannot read: ENOENT/);
  });

  it("checks ModelRoutes beside ModelServings; a file of routes alone is fine", () => {
    const route =
      "apiVersion: tandem.dev/v1alpha1\nkind: ModelRoute\nmetadata: {name: r}\nspec: {model: m, modelServing: a, engine: vllm, roles: {serve: server}}\n";
    const bad = route.replace("name: r", "name: s").replace("{serve: server}", "{serve: server, decode: d}");
    const output = validateFiles([
      { path: "routes.yaml", text: route },
      { path: "both.yaml", text: `${valid}---\n${bad}` },
    ]);
    assert.equal(
      output.stdout,
      [
        "routes.yaml: ModelRoute/r: valid",
        "both.yaml: ModelServing/a: valid",
        "both.yaml: ModelRoute/s: spec.roles.decode: cannot be set with serve: a route is aggregated {serve} or disaggregated {prefill, decode}",
        "",
      ].join("\n"),
    );
    assert.equal(output.exitCode, 1);
  });

  it("names a kind of Tandem's API group that is neither ModelServing nor ModelRoute", () => {
    const output = validateFiles([
      { path: "t.yaml", text: "apiVersion: tandem.dev/v1alpha1\nkind: ModelRoutes\nmetadata: {name: r}\n" },
    ]);
    assert.equal(
      output.stdout,
      't.yaml: ModelRoutes/r: kind: must be "ModelServing" or "ModelRoute" (it is "ModelRoutes")\n',
    );
    assert.equal(output.exitCode, 1);
  });

  it("commands that read one ModelServing skip the routes beside it", () => {
    const route =
      "apiVersion: tandem.dev/v1alpha1\nkind: ModelRoute\nmetadata: {name: r}\nspec: {model: m, modelServing: a, engine: vllm, roles: {serve: server}}\n";
    const loaded = loadModelServing("f.yaml", `${route}---\n${valid}`);
    assert.ok(loaded.ok);
    assert.equal(loaded.value.metadata.name, "a");
    assert.deepEqual(loadModelServing("r.yaml", route), { ok: false, lines: ["r.yaml: no ModelServing found"] });
  });

  it("validates a ModelServing written for another API group by kind", () => {
    const output = validateFiles([
      { path: "k.yaml", text: valid.replace("tandem.dev/v1alpha1", "workload.serving.volcano.sh/v1alpha1") },
    ]);
    assert.equal(output.stdout, 'k.yaml: ModelServing/a: apiVersion: must be "tandem.dev/v1alpha1"\n');
    assert.equal(output.exitCode, 1);
  });
});
