/**
 * `tandem crd [--out FILE]`: prints the ModelServing CustomResourceDefinition generated from the
 * zod schema, or writes it to FILE (`npm run crd` keeps deploy/crd.yaml current this way).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import type { Command } from "commander";
import { renderCrdYaml } from "../api/crd.ts";
import type { CommandOutput } from "./io.ts";
import { emit, fail, succeed } from "./io.ts";

export interface CrdOptions {
  /** File to write instead of printing; its directory is created if missing. */
  readonly out?: string;
}

/** Writes `text` to the file at `path`; injected so tests can stand in for the file system. */
export type WriteTextFile = (path: string, text: string) => void;

function writeTextFile(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text, "utf8");
}

/** The CRD YAML on stdout, or written to `options.out` with a one-line confirmation. */
export function runCrd(options: CrdOptions, write: WriteTextFile = writeTextFile): CommandOutput {
  const yaml = renderCrdYaml();
  if (options.out === undefined) return succeed(yaml);
  try {
    write(options.out, yaml);
  } catch (error) {
    return fail(`tandem crd: cannot write ${options.out}: ${error instanceof Error ? error.message : String(error)}\n`);
  }
  return succeed(`Wrote ${options.out}\n`);
}

export function registerCrd(program: Command): void {
  program
    .command("crd")
    .description("Print the ModelServing CustomResourceDefinition (generated from the API schema).")
    .option("--out <file>", "write the CRD to FILE instead of stdout")
    .action((options: CrdOptions) => {
      emit(runCrd(options));
    });
}
