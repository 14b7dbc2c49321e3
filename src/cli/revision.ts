import type { Command } from "commander";

export function registerRevision(program: Command): void {
  void program;
}
