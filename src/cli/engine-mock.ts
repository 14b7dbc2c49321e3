/**
 * `tandem engine-mock --listen HOST:PORT [--engine vllm|sglang] [--ttft-ms 50] [--tpot-ms 10]
 * [--kv-format NAME] [--max-running N] [--model NAME]` (DESIGN §7): runs the OpenAI-compatible
 * stand-in engine of src/router/engine-mock until SIGTERM or SIGINT (exit 0). It prints one line once
 * it listens, with the port it bound (`--listen 127.0.0.1:0` picks a free one). A bad flag or an
 * address it cannot bind is one line on stderr and exit 1.
 */
import type { Command } from "commander";
import { Engine } from "../api/route.ts";
import { parseAddress } from "../kube/server.ts";
import type { EngineMock, EngineMockOptions } from "../router/engine-mock/server.ts";
import { ENGINE_MOCK_DEFAULTS, startEngineMock } from "../router/engine-mock/server.ts";

export interface EngineMockFlags {
  readonly listen: string;
  readonly engine: string;
  readonly ttftMs: string;
  readonly tpotMs: string;
  readonly kvFormat: string;
  readonly maxRunning: string;
  readonly model?: string;
}

const KV_FORMAT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

function integerFlag(flag: string, value: string, minimum: number): number {
  const parsed = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(parsed) || parsed < minimum)
    throw new Error(`${flag} must be an integer ≥ ${minimum}, got "${value}"`);
  return parsed;
}

/** The engine's options from the flags; throws an Error naming the flag and the reason. */
export function engineMockOptionsOf(flags: EngineMockFlags): EngineMockOptions {
  const { host, port } = parseAddress(flags.listen, "--listen");
  const engine = Engine.safeParse(flags.engine);
  if (!engine.success) throw new Error(`--engine must be one of ${Engine.options.join(", ")}, got "${flags.engine}"`);
  if (!KV_FORMAT.test(flags.kvFormat))
    throw new Error(
      `--kv-format must be a name of letters, digits, '.', '_' and '-' (at most 63), got "${flags.kvFormat}"`,
    );
  if (flags.model?.trim() === "") throw new Error("--model must not be empty");
  return {
    host,
    port,
    engine: engine.data,
    ttftMs: integerFlag("--ttft-ms", flags.ttftMs, 0),
    tpotMs: integerFlag("--tpot-ms", flags.tpotMs, 0),
    kvFormat: flags.kvFormat,
    maxRunning: integerFlag("--max-running", flags.maxRunning, 1),
    model: flags.model,
  };
}

/** The line printed once the engine listens. */
export function listeningLine(mock: EngineMock): string {
  return `engine-mock: listening on ${mock.url} (${mock.engine}, kv-format ${mock.kvFormat})\n`;
}

/** A bind error's or a flag error's one-line text (EADDRINUSE and friends in words, with what to do). */
export function errorText(error: unknown): string {
  const code = (error as { code?: unknown }).code;
  if (code === "EADDRINUSE")
    return "address already in use (another process listens there: stop it, or choose another port)";
  if (code === "EADDRNOTAVAIL")
    return "address not available on this machine (use one of its addresses, 127.0.0.1, or 0.0.0.0 for all)";
  if (code === "EACCES") return "permission denied (ports below 1024 need privileges: choose a higher port)";
  return error instanceof Error ? error.message : String(error);
}

async function runEngineMock(flags: EngineMockFlags): Promise<number> {
  let options: EngineMockOptions;
  try {
    options = engineMockOptionsOf(flags);
  } catch (error) {
    process.stderr.write(`tandem engine-mock: ${errorText(error)}\n`);
    return 1;
  }
  let mock: EngineMock;
  try {
    mock = await startEngineMock(options);
  } catch (error) {
    process.stderr.write(`tandem engine-mock: cannot listen on ${flags.listen}: ${errorText(error)}\n`);
    return 1;
  }
  process.stdout.write(listeningLine(mock));
  await new Promise<void>((resolve) => {
    process.once("SIGTERM", resolve);
    process.once("SIGINT", resolve);
  });
  await mock.close();
  return 0;
}

export function registerEngineMock(program: Command): void {
  program
    .command("engine-mock")
    .description("Run an OpenAI-compatible stand-in engine (vLLM or SGLang shaped) for tests and demos.")
    .requiredOption("--listen <host:port>", "address to serve on; port 0 picks a free port")
    .option(
      "--engine <engine>",
      "vllm or sglang: metric names and disaggregation protocol",
      ENGINE_MOCK_DEFAULTS.engine,
    )
    .option("--ttft-ms <ms>", "time to the first token", String(ENGINE_MOCK_DEFAULTS.ttftMs))
    .option("--tpot-ms <ms>", "time per further token", String(ENGINE_MOCK_DEFAULTS.tpotMs))
    .option("--kv-format <name>", "KV format a prefill writes and a decode reads", ENGINE_MOCK_DEFAULTS.kvFormat)
    .option("--max-running <n>", "requests generating at once; the rest wait", String(ENGINE_MOCK_DEFAULTS.maxRunning))
    .option("--model <name>", "the model served (default: any model)")
    .action(async (flags: EngineMockFlags) => {
      process.exitCode = await runEngineMock(flags);
    });
}
