import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { describe, it } from "node:test";
import { buildProgram } from "./main.ts";
import { engineMockOptionsOf } from "./engine-mock.ts";
import type { EngineMockFlags } from "./engine-mock.ts";

const MAIN = join(import.meta.dirname, "main.ts");
const DEFAULT_FLAGS: EngineMockFlags = {
  listen: "127.0.0.1:0",
  engine: "vllm",
  ttftMs: "50",
  tpotMs: "10",
  kvFormat: "v1",
  maxRunning: "256",
};
/** A child that has not ended by then is killed, so the test stops by itself. */
const CHILD_TIMEOUT_MS = 30_000;

describe("tandem engine-mock flags", () => {
  it("turns the flags into the engine's options", () => {
    assert.deepEqual(
      engineMockOptionsOf({
        ...DEFAULT_FLAGS,
        listen: "[::1]:8001",
        engine: "sglang",
        ttftMs: "0",
        kvFormat: "fp8-e4m3",
        maxRunning: "1",
      }),
      {
        host: "::1",
        port: 8001,
        engine: "sglang",
        ttftMs: 0,
        tpotMs: 10,
        kvFormat: "fp8-e4m3",
        maxRunning: 1,
        model: undefined,
      },
    );
  });

  it("names the flag and the reason for a bad value", () => {
    const cases: [Partial<EngineMockFlags>, string][] = [
      [{ listen: "bogus" }, '--listen "bogus" is not host:port'],
      [{ listen: "127.0.0.1:99999" }, '--listen "127.0.0.1:99999" is not host:port'],
      [{ engine: "trtllm" }, '--engine must be one of vllm, sglang, got "trtllm"'],
      [{ ttftMs: "-5" }, '--ttft-ms must be an integer ≥ 0, got "-5"'],
      [{ tpotMs: "1.5" }, '--tpot-ms must be an integer ≥ 0, got "1.5"'],
      [{ maxRunning: "0" }, '--max-running must be an integer ≥ 1, got "0"'],
      [{ kvFormat: "v 1" }, `--kv-format must be a name of letters, digits, '.', '_' and '-' (at most 63), got "v 1"`],
    ];
    for (const [flags, message] of cases)
      assert.throws(() => engineMockOptionsOf({ ...DEFAULT_FLAGS, ...flags }), { message });
  });

  it("is registered with the flags of DESIGN §7", () => {
    const command = buildProgram().commands.find((candidate) => candidate.name() === "engine-mock");
    assert.ok(command);
    assert.deepEqual(
      command.options.map((option) => option.long),
      ["--listen", "--engine", "--ttft-ms", "--tpot-ms", "--kv-format", "--max-running", "--model"],
    );
  });
});

function run(args: readonly string[]): ChildProcess {
  const child = spawn(process.execPath, [MAIN, "engine-mock", ...args], { stdio: ["ignore", "pipe", "pipe"] });
  const timer = setTimeout(() => child.kill("SIGKILL"), CHILD_TIMEOUT_MS);
  child.once("exit", () => {
    clearTimeout(timer);
  });
  return child;
}

async function ended(child: ChildProcess): Promise<{ code: number | null; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const [code] = (await once(child, "exit")) as [number | null];
  return { code, stdout, stderr };
}

/** The first line the child prints on stdout. */
async function firstLine(child: ChildProcess): Promise<string> {
  let text = "";
  for await (const chunk of child.stdout as AsyncIterable<Buffer>) {
    text += chunk.toString();
    if (text.includes("\n")) break;
  }
  return text.split("\n")[0] ?? "";
}

describe("tandem engine-mock as a process", () => {
  it("prints the port it bound for --listen 127.0.0.1:0, serves, refuses a second engine on that port, and stops cleanly on SIGTERM", async () => {
    const child = run([
      "--listen",
      "127.0.0.1:0",
      "--engine",
      "sglang",
      "--kv-format",
      "v2",
      "--ttft-ms",
      "0",
      "--tpot-ms",
      "0",
    ]);
    const end = ended(child);
    const line = await firstLine(child);
    const match = /^engine-mock: listening on http:\/\/127\.0\.0\.1:(\d+) \(sglang, kv-format v2\)$/.exec(line);
    assert.ok(match, line);
    const port = Number(match[1]);
    assert.ok(port > 0);
    const answer: any = await (
      await fetch(`http://127.0.0.1:${port}/v1/completions`, {
        method: "POST",
        body: JSON.stringify({ prompt: "hi", max_tokens: 2 }),
      })
    ).json();
    assert.equal(answer.usage.completion_tokens, 2);

    const second = await ended(run(["--listen", `127.0.0.1:${port}`]));
    assert.deepEqual(second, {
      code: 1,
      stdout: "",
      stderr: `tandem engine-mock: cannot listen on 127.0.0.1:${port}: address already in use (another process listens there: stop it, or choose another port)\n`,
    });

    child.kill("SIGTERM");
    const { code, stderr } = await end;
    assert.deepEqual([code, stderr], [0, ""]);
  });

  it("exits 1 with one line naming the flag for a bad flag", async () => {
    const { code, stdout, stderr } = await ended(run(["--listen", "bogus"]));
    assert.deepEqual([code, stdout, stderr], [1, "", 'tandem engine-mock: --listen "bogus" is not host:port\n']);
  });
});
