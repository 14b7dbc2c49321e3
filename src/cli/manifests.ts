/**
 * Reading ModelServing manifests from YAML text: every document of a multi-document file, with
 * YAML errors (including duplicate keys, which would otherwise silently lose a value) reported
 * per document instead of thrown.
 */
import { parseAllDocuments } from "yaml";
import { API_GROUP, KIND } from "../api/schema.ts";

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
  /** YAML syntax problems, each `document N: <message>`. */
  readonly errors: readonly string[];
}

/** Splits YAML text into the documents Tandem owns; other kinds and empty documents are skipped. */
export function readManifests(text: string): ManifestFile {
  const documents: ManifestDocument[] = [];
  const errors: string[] = [];
  parseAllDocuments(text).forEach((document, position) => {
    const index = position + 1;
    if (document.errors.length > 0) {
      for (const error of document.errors) errors.push(`document ${index}: ${error.message.split("\n")[0] ?? error.message}`);
      return;
    }
    const value: unknown = document.toJS();
    if (isOurs(value)) documents.push({ index, label: labelOf(value), value });
  });
  return { documents, errors };
}

function isOurs(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null) return false;
  const { apiVersion, kind } = value as Record<string, unknown>;
  return kind === KIND || (typeof apiVersion === "string" && apiVersion.startsWith(`${API_GROUP}/`));
}

function labelOf(value: Record<string, unknown>): string {
  const kind = typeof value.kind === "string" ? value.kind : KIND;
  const metadata = value.metadata as Record<string, unknown> | undefined;
  const name = typeof metadata?.name === "string" && metadata.name !== "" ? metadata.name : "(unnamed)";
  return `${kind}/${name}`;
}
