/** `tandem validate FILE...`: checks ModelServing and ModelRoute manifests without a cluster. */
import { readFile } from "node:fs/promises";
import type { Command } from "commander";
import type { CommandOutput } from "./io.ts";
import { emit } from "./io.ts";
import { parseManifest, readManifests } from "./manifests.ts";

export interface SourceFile {
  readonly path: string;
  /** The file's text, or the reason it could not be read. */
  readonly text: string | { readonly error: string };
}

/**
 * Validates every ModelServing and ModelRoute in `files`. Output: one line per problem,
 * `FILE: <kind>/<name>: <path>: <reason>`, and `FILE: <kind>/<name>: valid` for each valid object.
 * Exit code 0 when every object is valid and every file has at least one, 1 otherwise.
 */
export function validateFiles(files: readonly SourceFile[]): CommandOutput {
  const lines: string[] = [];
  let failed = false;
  for (const file of files) {
    if (typeof file.text !== "string") {
      lines.push(`${file.path}: cannot read: ${file.text.error}`);
      failed = true;
      continue;
    }
    const manifests = readManifests(file.text);
    for (const error of manifests.errors) lines.push(`${file.path}: ${error}`);
    if (manifests.errors.length === 0 && manifests.documents.length === 0) lines.push(`${file.path}: no ModelServing or ModelRoute found`);
    failed ||= manifests.errors.length > 0 || manifests.documents.length === 0;
    for (const document of manifests.documents) {
      const result = parseManifest(document);
      if (result.ok) lines.push(`${file.path}: ${document.label}: valid`);
      else for (const p of result.problems) lines.push(`${file.path}: ${document.label}: ${p.path}: ${p.reason}`);
      failed ||= !result.ok;
    }
  }
  return { exitCode: failed ? 1 : 0, stdout: lines.map((line) => `${line}\n`).join(""), stderr: "" };
}

/** Reads a file for a CLI command, turning an I/O error into a reason instead of an exception. */
export async function readSource(path: string): Promise<SourceFile> {
  try {
    return { path, text: await readFile(path, "utf8") };
  } catch (error) {
    return { path, text: { error: error instanceof Error ? error.message : String(error) } };
  }
}

export function registerValidate(program: Command): void {
  program
    .command("validate")
    .description("Validate ModelServing and ModelRoute manifests (multi-document YAML); exit 1 if any is invalid.")
    .argument("<files...>", "YAML files to check")
    .action(async (paths: string[]) => {
      emit(validateFiles(await Promise.all(paths.map(readSource))));
    });
}
