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
    if (manifests.errors.length === 0 && manifests.documents.length === 0)
      lines.push(`${file.path}: no ModelServing or ModelRoute found`);
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

/**
 * Reads a text file for a CLI command, turning an I/O error into a reason instead of an exception.
 * A file that is not UTF-8 text (a NUL byte, or bytes UTF-8 cannot decode) is refused with a short
 * escaped excerpt of its start: echoed whole, binary input would flood the terminal.
 */
export async function readSource(path: string): Promise<SourceFile> {
  try {
    return { path, text: textOf(await readFile(path)) };
  } catch (error) {
    return { path, text: { error: error instanceof Error ? error.message : String(error) } };
  }
}

/** The bytes as text; throws, saying so with an excerpt, when they are not UTF-8 text without NUL bytes. */
export function textOf(bytes: Buffer): string {
  const notText = new Error(`not a text file (it starts ${binaryExcerpt(bytes)}); give a YAML file`);
  if (bytes.includes(0)) throw notText;
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw notText;
  }
}

/** Bytes shown of a binary file. */
const EXCERPT_BYTES = 16;

/** The first bytes, printable ASCII as is and the rest as `\xHH`, in quotes. */
export function binaryExcerpt(bytes: Buffer): string {
  const shown = [...bytes.subarray(0, EXCERPT_BYTES)]
    .map((byte) =>
      byte >= 0x20 && byte < 0x7f && byte !== 0x22 && byte !== 0x5c
        ? String.fromCharCode(byte)
        : `\\x${byte.toString(16).padStart(2, "0")}`,
    )
    .join("");
  return `"${shown}"${bytes.length > EXCERPT_BYTES ? `… (${bytes.length} bytes)` : ""}`;
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
