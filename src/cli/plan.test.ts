import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { planCommand } from "./plan.ts";

const EXAMPLE = join(import.meta.dirname, "../../deploy/examples/coordinated-chain.yaml");
const text = readFileSync(EXAMPLE, "utf8");

describe("tandem plan", () => {
  it("prints the coordinated step table of the shipped example, exactly", () => {
    const output = planCommand({ file: { path: "chain.yaml", text } });
    assert.equal(output.exitCode, 0);
    assert.equal(
      output.stdout,
      [
        "ModelServing/vl-chain: coordinated rollout preview, per ServingGroup (1 group(s)), maxSkew 10%",
        "moving roles: encode (10 eligible), prefill (50 eligible), decode (100 eligible)",
        "dependencies: decode → prefill, prefill → encode",
        "step     encode    prefill     decode",
        "      new / old  new / old  new / old",
        "1         1 / 9     5 / 45    0 / 100",
        "2         1 / 9     5 / 45    10 / 90",
        "3         2 / 8    10 / 40    20 / 80",
        "4         3 / 7    15 / 35    30 / 70",
        "5         4 / 6    20 / 30    40 / 60",
        "6         5 / 5    25 / 25    50 / 50",
        "7         6 / 4    30 / 20    60 / 40",
        "8         7 / 3    35 / 15    70 / 30",
        "9         8 / 2    40 / 10    80 / 20",
        "10        9 / 1     45 / 5    90 / 10",
        "11        9 / 1     49 / 1    100 / 0",
        "12        9 / 1     50 / 0    100 / 0",
        "13       10 / 0     50 / 0    100 / 0",
        "complete after 13 step(s)",
        "",
      ].join("\n"),
    );
  });

  it("moves only the roles that differ between --from and --to", () => {
    const before = text.replaceAll("vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.10.2");
    const decodeOnly = text.replace(
      /(name: decode[\s\S]*?image: )vllm\/vllm-openai:v0\.11\.0/,
      "$1vllm/vllm-openai:v0.12.0",
    );
    const output = planCommand({
      file: { path: "chain.yaml", text },
      from: { path: "before.yaml", text },
      to: { path: "after.yaml", text: decodeOnly },
    });
    assert.match(output.stdout, /moving roles: decode \(100 eligible\)\n/);
    assert.match(output.stdout, /^1 +10 \/ 90$/m);
    assert.equal(
      planCommand({ file: { path: "chain.yaml", text }, from: { path: "before.yaml", text: before } }).exitCode,
      0,
    );
    assert.match(
      planCommand({ file: { path: "chain.yaml", text }, from: { path: "same.yaml", text } }).stdout,
      /No participating role changes/,
    );
  });

  it("exits 1 and names the fix when the order cannot be kept", () => {
    const single = text.replace("replicas: 10\n        maxUnavailable: 10%", "replicas: 1\n        maxUnavailable: 1");
    const output = planCommand({ file: { path: "chain.yaml", text: single } });
    assert.equal(output.exitCode, 1);
    assert.match(output.stdout, /blocked: role encode must keep an old instance .* set maxSurge on role encode/);
  });

  it("refuses a spec without coordination, naming the field", () => {
    const plain = text.replace(/ {4}coordination:[\s\S]*?(?= {2}template:)/, "");
    assert.deepEqual(planCommand({ file: { path: "p.yaml", text: plain } }), {
      exitCode: 1,
      stdout: "",
      stderr:
        "p.yaml: ModelServing/vl-chain: spec.rolloutStrategy.coordination is not set; tandem plan previews coordinated rollouts\n",
    });
  });
});
