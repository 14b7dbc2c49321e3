/**
 * `tandem revision FILE`: prints the canonical revision of the first ModelServing in a YAML file —
 * its name (`<ms>-<hash>`, the ControllerRevision and pod label the controller would use), the hash,
 * and the canonical data it hashes (DESIGN §2.6).
 */
import { readFileSync } from "node:fs";
import type { Command } from "commander";
import { revisionBytes, revisionData, revisionHash, revisionName } from "../core/revision/index.ts";
import type { CommandOutput } from "./io.ts";
import { emit, fail, succeed } from "./io.ts";
import { loadModelServing } from "./manifests.ts";
import { textOf } from "./validate.ts";

export function registerRevision(program: Command): void {
  program
    .command("revision")
    .description("Print the canonical revision (name, hash, data) of the first ModelServing in FILE.")
    .argument("<file>", "YAML file; its first ModelServing document is used")
    .action((file: string) => {
      emit(revisionOfFile(file, readText));
    });
}

/** Reads `file` with `read` (which may throw) and runs `revisionCommand` on its text. */
export function revisionOfFile(file: string, read: (file: string) => string): CommandOutput {
  let text: string;
  try {
    text = read(file);
  } catch (error) {
    return fail(`${file}: cannot read: ${error instanceof Error ? error.message : String(error)}\n`);
  }
  return revisionCommand(file, text);
}

/**
 * The command's logic on the file's text. Exit 0 with `{name, hash, data}` as 2-space JSON (data
 * keys in canonical order); exit 1 with `FILE: ...` lines on stderr when the YAML is broken, holds
 * no ModelServing, or the ModelServing is invalid (`FILE: ModelServing/<name>: <path>: <reason>`).
 * The hash uses `status.collisionCount` when the document has one, as the controller would.
 */
export function revisionCommand(file: string, text: string): CommandOutput {
  const loaded = loadModelServing(file, text);
  if (!loaded.ok) return fail(loaded.lines.map((line) => `${line}\n`).join(""));
  const ms = loaded.value;
  const data = revisionData(ms);
  const hash = revisionHash(data, ms.status?.collisionCount ?? 0);
  // Re-reading the canonical bytes lists data's keys in canonical (sorted) order.
  const canonicalData = JSON.parse(revisionBytes(data)) as unknown;
  return succeed(
    `${JSON.stringify({ name: revisionName(ms.metadata.name, hash), hash, data: canonicalData }, null, 2)}\n`,
  );
}

function readText(file: string): string {
  return textOf(readFileSync(file));
}
