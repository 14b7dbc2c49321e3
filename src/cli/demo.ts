/**
 * `tandem demo`: until the embedded simulator and controller land (issues "simulator" and
 * "lifecycle"), the demo explains what it will show and prints the command overview.
 */
import type { Command } from "commander";
import { emit, succeed } from "./io.ts";

const PLANNED_DEMO = `Tandem demo (coming with the embedded simulated cluster):
  two ServingGroups of 2 prefill + 1 decode instance, decode spanning 2 nodes, on 4 GPU nodes;
  live groups x roles view of pod states, progress bars and events; a node failure and its recovery;
  a Decode-only image update with Prefill untouched, then a rollback — all in under a minute.

Available today:
`;

export function registerDemo(program: Command): void {
  program
    .command("demo")
    .description("Run the demo on the embedded simulated cluster.")
    .action(() => {
      emit(succeed(PLANNED_DEMO + program.helpInformation()));
    });
}
