/**
 * `tandem revision FILE`: prints the canonical revision of the first ModelServing in a YAML file —
 * its name (`<ms>-<hash>`, the ControllerRevision and pod label the controller would use), the hash,
 * and the canonical data it hashes (DESIGN §2.6).
 */
import { readFileSync } from "node:fs";
import type { Command } from "commander";
import { parseAllDocuments } from "yaml";
import { KIND, parseModelServing } from "../api/index.ts";
import { revisionBytes, revisionData, revisionHash, revisionName } from "../core/revision/index.ts";
import type { CommandOutput } from "./io.ts";
import { emit, fail, succeed } from "./io.ts";

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
  const documents = parseAllDocuments(text);
  const errors = documents.flatMap((document) => document.errors);
  if (errors.length > 0) return fail(errors.map((error) => `${file}: ${error.message}\n`).join(""));
  const input = documents.map((document) => document.toJS() as unknown).find(isModelServingDocument);
  if (input === undefined) return fail(`${file}: no ${KIND} document found\n`);
  const parsed = parseModelServing(input);
  if (!parsed.ok) {
    const subject = `${KIND}/${nameOf(input)}`;
    return fail(parsed.problems.map((problem) => `${file}: ${subject}: ${problem.path}: ${problem.reason}\n`).join(""));
  }
  const ms = parsed.value;
  const data = revisionData(ms);
  const hash = revisionHash(data, ms.status?.collisionCount ?? 0);
  // Re-reading the canonical bytes lists data's keys in canonical (sorted) order.
  const canonicalData = JSON.parse(revisionBytes(data)) as unknown;
  return succeed(`${JSON.stringify({ name: revisionName(ms.metadata.name, hash), hash, data: canonicalData }, null, 2)}\n`);
}

function isModelServingDocument(value: unknown): boolean {
  return typeof value === "object" && value !== null && (value as { kind?: unknown }).kind === KIND;
}

function nameOf(input: unknown): string {
  const name = (input as { metadata?: { name?: unknown } }).metadata?.name;
  return typeof name === "string" && name !== "" ? name : "(unnamed)";
}

function readText(file: string): string {
  return readFileSync(file, "utf8");
}
