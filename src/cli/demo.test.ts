import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { DEFAULT_ACTS, runDemo } from "./demo.ts";

const SCENARIOS = join(import.meta.dirname, "../../deploy/examples/scenarios");

describe("tandem demo (--no-tty)", () => {
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
});
