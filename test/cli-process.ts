/**
 * Runs `tandem` as a child process, as a user would, for the CLI tests that check stdout, stderr
 * and the exit code together. Every run is bounded: a child still running after `timeoutMs` is
 * killed and the run reports it.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";

/** The development entry point (the TypeScript sources, run by this Node). */
export const SOURCE_MAIN = join(import.meta.dirname, "../src/cli/main.ts");

export interface ProcessResult {
  /** The exit code; null when a signal ended the child. */
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface RunOptions {
  readonly cwd?: string;
  /** Replaces the environment (the parent's when absent). */
  readonly env?: NodeJS.ProcessEnv;
  /** Written to the child's stdin, which is then closed (stdin is empty when absent). */
  readonly input?: string | Uint8Array;
  /** Killed with SIGKILL after this long; 30 s when absent. */
  readonly timeoutMs?: number;
}

/** Runs `command args` and resolves when it has exited and its output is read. */
export function runProcess(command: string, args: readonly string[], options: RunOptions = {}): Promise<ProcessResult> {
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env ?? process.env,
    stdio: ["pipe", "pipe", "pipe"],
  });
  const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 30_000);
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  child.stdin.on("error", () => undefined); // a child that exits without reading its input
  child.stdin.end(options.input ?? "");
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** Runs the development `tandem` (the sources) with `args`. */
export function runTandem(args: readonly string[], options: RunOptions = {}): Promise<ProcessResult> {
  return runProcess(process.execPath, [SOURCE_MAIN, ...args], options);
}
