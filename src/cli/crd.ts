/**
 * `tandem crd [--out FILE]`: prints the ModelServing CustomResourceDefinition generated from the
 * zod schema, or writes it to FILE (`npm run crd` keeps deploy/crd.yaml current this way).
 */
import type { Command } from "commander";
import { renderCrdYaml } from "../api/crd.ts";
import type { CommandOutput, WriteTextFile } from "./io.ts";
import { emit, printOrWrite } from "./io.ts";

export interface CrdOptions {
  /** File to write instead of printing; its directory is created if missing. */
  readonly out?: string;
}

/** The CRD YAML on stdout, or written to `options.out` with a one-line confirmation. */
export function runCrd(options: CrdOptions, write?: WriteTextFile): CommandOutput {
  return printOrWrite("tandem crd", renderCrdYaml(), options.out, write);
}

export function registerCrd(program: Command): void {
  program
    .command("crd")
    .description("Print the CustomResourceDefinitions of ModelServing and ModelRoute (generated from the API schemas).")
    .option("--out <file>", "write the CRD to FILE instead of stdout")
    .action((options: CrdOptions) => {
      emit(runCrd(options));
    });
}
