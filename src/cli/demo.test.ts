import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, it } from "node:test";
import { DEFAULT_ACTS, runDemo } from "./demo.ts";

const SCENARIOS = join(import.meta.dirname, "../../deploy/examples/scenarios");

describe("tandem demo (--no-tty)", () => {
  it("plays both acts on the simulated cluster, shows the recovery and the decode-only update, and passes", async () => {
    let out = "";
    const code = await runDemo({ scenarios: DEFAULT_ACTS.map((act) => join(SCENARIOS, act)), speed: undefined, tty: false, write: (text) => (out += text) });
    assert.equal(code, 0, out);
    assert.match(out, /Failure injected: deleting 1 pod\(s\) matching tandem\.dev\/role=decode/);
    assert.match(out, /ok: Available after/);
    assert.match(out, /decode-only update: every decode pod replaced, every prefill pod untouched \(same UIDs\)/);
    assert.match(out, /demo-coordinated: PASS/);
    assert.match(out, /invariants: all 10 held/);
  });

  it("says why a scenario file cannot be played, and exits 1", async () => {
    let out = "";
    assert.equal(await runDemo({ scenarios: ["/nonexistent.yaml"], speed: undefined, tty: false, write: (text) => (out += text) }), 1);
    assert.match(out, /^\/nonexistent\.yaml: cannot read: ENOENT/);
  });
});
