import type { Command } from "commander";

/** Placeholder until the command lands; registers nothing. */
export function registerRevision(program: Command): Command {
  return program;
}
