import type { Command } from "commander";

export function registerCrd(program: Command): void {
  void program;
}
