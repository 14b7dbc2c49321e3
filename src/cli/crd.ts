import type { Command } from "commander";

/** Placeholder until the command lands; registers nothing. */
export function registerCrd(program: Command): Command {
  return program;
}
