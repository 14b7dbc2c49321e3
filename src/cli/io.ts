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
 * Why `path` could not be written, in words with what to do (for `--out` flags); other errors
 * by their message.
 */
export function writeErrorText(path: string, error: unknown): string {
  const code = (error as { code?: unknown }).code;
  if (code === "ENOENT") return `the directory ${dirname(path)} does not exist (create it, or choose another path)`;
  if (code === "EISDIR") return "it is a directory (name a file)";
  if (code === "EACCES" || code === "EPERM") return "permission denied (choose a path you may write)";
  if (code === "ENOTDIR") return `a part of ${dirname(path)} is a file, not a directory`;
  return error instanceof Error ? error.message : String(error);
}

/**
 * A generated document: printed when `out` is undefined, else written to `out` with a one-line
 * confirmation; a write error becomes `<command>: cannot write <out>: <reason>` and exit 1.
 */
export function printOrWrite(
  command: string,
  text: string,
  out: string | undefined,
  write: WriteTextFile = writeTextFile,
): CommandOutput {
  if (out === undefined) return succeed(text);
  try {
    write(out, text);
  } catch (error) {
    return fail(`${command}: cannot write ${out}: ${writeErrorText(out, error)}\n`);
  }
  return succeed(`Wrote ${out}\n`);
}
