/**
 * What a CLI command produces. Command logic returns a `CommandOutput` instead of printing, so
 * tests assert on exact output and exit codes without spawning processes.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";

export interface CommandOutput {
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * A flag's value cannot be used. Thrown by a command's flag parsing; `main` prints the message
 * (`--workers: must be ...`) and exits 1, so a typo never ends in a stack trace.
 */
export class FlagError extends Error {
  constructor(flag: string, reason: string) {
    super(`${flag}: ${reason}`);
    this.name = "FlagError";
  }
}

export function succeed(stdout: string): CommandOutput {
  return { exitCode: 0, stdout, stderr: "" };
}

export function fail(stderr: string, exitCode = 1): CommandOutput {
  return { exitCode, stdout: "", stderr };
}

/** Writes a command's output and records its exit code for the process. */
export function emit(output: CommandOutput): void {
  if (output.stdout !== "") process.stdout.write(output.stdout);
  if (output.stderr !== "") process.stderr.write(output.stderr);
  process.exitCode = output.exitCode;
}

/** Writes `text` to the file at `path`; injected so tests can stand in for the file system. */
export type WriteTextFile = (path: string, text: string) => void;

/** Writes a file, creating its directory when missing. */
function writeTextFile(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text, "utf8");
}

/**
 * A generated document: printed when `out` is undefined, else written to `out` with a one-line
 * confirmation; a write error becomes `<command>: cannot write <out>: <reason>` and exit 1.
 */
export function printOrWrite(command: string, text: string, out: string | undefined, write: WriteTextFile = writeTextFile): CommandOutput {
  if (out === undefined) return succeed(text);
  try {
    write(out, text);
  } catch (error) {
    return fail(`${command}: cannot write ${out}: ${error instanceof Error ? error.message : String(error)}\n`);
  }
  return succeed(`Wrote ${out}\n`);
}
