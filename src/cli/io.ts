/**
 * What a CLI command produces. Command logic returns a `CommandOutput` instead of printing, so
 * tests assert on exact output and exit codes without spawning processes.
 */
export interface CommandOutput {
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
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
