/**
 * Reading ModelServing manifests from YAML text: every document of a multi-document file, with
 * YAML errors (including duplicate keys, which would otherwise silently lose a value, and alias
 * bombs) reported per document instead of thrown (`parseYamlDocuments`).
 */
import { parseModelServing } from "../api/parse.ts";
import { quote } from "../api/problems.ts";
import type { ModelServing } from "../api/schema.ts";
import { API_GROUP, KIND } from "../api/schema.ts";
import { parseYamlDocuments } from "../api/yaml.ts";

/** One YAML document that claims to be a ModelServing (by kind or by API group). */
export interface ManifestDocument {
  /** 1-based position of the document in its file. */
  readonly index: number;
  /** `ModelServing/<name>` as far as the document says. */
  readonly label: string;
  readonly value: unknown;
}

export interface ManifestFile {
  readonly documents: readonly ManifestDocument[];
  /** YAML problems, each `document N: not valid YAML: <reason>`. */
  readonly errors: readonly string[];
}

/** Splits YAML text into the documents Tandem owns; other kinds and empty documents are skipped. */
export function readManifests(text: string): ManifestFile {
  const documents: ManifestDocument[] = [];
  const errors: string[] = [];
  parseYamlDocuments(text).forEach((document, position) => {
    const index = position + 1;
    if (!document.ok) {
      for (const error of document.errors) errors.push(`document ${index}: not valid YAML: ${error}`);
      return;
    }
    if (isOurs(document.value)) documents.push({ index, label: labelOf(document.value), value: document.value });
  });
  return { documents, errors };
}

function isOurs(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null) return false;
  const { apiVersion, kind } = value as Record<string, unknown>;
  return kind === KIND || (typeof apiVersion === "string" && apiVersion.startsWith(`${API_GROUP}/`));
}

/** `<kind>/<name>`; a kind or name that is no Kubernetes name (too long, odd characters) is shown quoted and cut. */
function labelOf(value: Record<string, unknown>): string {
  const kind = typeof value.kind === "string" ? value.kind : KIND;
  const metadata = value.metadata as Record<string, unknown> | undefined;
  const name = typeof metadata?.name === "string" && metadata.name !== "" ? metadata.name : "(unnamed)";
  return `${shown(kind)}/${shown(name)}`;
}

function shown(text: string): string {
  return /^[-.()A-Za-z0-9]{1,253}$/.test(text) ? text : quote(text);
}

export type LoadResult = { readonly ok: true; readonly value: ModelServing } | { readonly ok: false; readonly lines: readonly string[] };

/**
 * The first ModelServing in YAML `text`, parsed and validated; otherwise the reasons as
 * `FILE: ...` lines (YAML errors, no ModelServing, or `FILE: ModelServing/<name>: <path>: <reason>`).
 */
export function loadModelServing(file: string, text: string): LoadResult {
  const manifests = readManifests(text);
  if (manifests.errors.length > 0) return { ok: false, lines: manifests.errors.map((error) => `${file}: ${error}`) };
  const document = manifests.documents[0];
  if (document === undefined) return { ok: false, lines: [`${file}: no ${KIND} found`] };
  const parsed = parseModelServing(document.value);
  if (!parsed.ok) return { ok: false, lines: parsed.problems.map((problem) => `${file}: ${document.label}: ${problem.path}: ${problem.reason}`) };
  return { ok: true, value: parsed.value };
}
