/**
 * Reading Tandem manifests (ModelServing, ModelRoute) from YAML text: every document of a
 * multi-document file, with YAML errors (including duplicate keys, which would otherwise silently
 * lose a value, and alias bombs) reported per document instead of thrown (`parseYamlDocuments`).
 */
import type { ParseResult } from "../api/parse.ts";
import { parseModelRoute, parseModelServing } from "../api/parse.ts";
import { problem, quote } from "../api/problems.ts";
import { ROUTE_KIND } from "../api/route.ts";
import type { ModelServing } from "../api/schema.ts";
import { API_GROUP, KIND } from "../api/schema.ts";
import { parseYamlDocuments } from "../api/yaml.ts";

/** One YAML document that claims to be a Tandem object (a kind of ours, or our API group). */
export interface ManifestDocument {
  /** 1-based position of the document in its file. */
  readonly index: number;
  /** The kind the document says, or ModelServing when it says none. */
  readonly kind: string;
  /** `<kind>/<name>` as far as the document says. */
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
    if (isOurs(document.value))
      documents.push({ index, kind: kindOf(document.value), label: labelOf(document.value), value: document.value });
  });
  return { documents, errors };
}

function isOurs(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null) return false;
  const { apiVersion, kind } = value as Record<string, unknown>;
  return (
    kind === KIND || kind === ROUTE_KIND || (typeof apiVersion === "string" && apiVersion.startsWith(`${API_GROUP}/`))
  );
}

function kindOf(value: Record<string, unknown>): string {
  return typeof value.kind === "string" ? value.kind : KIND;
}

/** `<kind>/<name>`; a kind or name that is no Kubernetes name (too long, odd characters) is shown quoted and cut. */
function labelOf(value: Record<string, unknown>): string {
  const kind = kindOf(value);
  const metadata = value.metadata as Record<string, unknown> | undefined;
  const name = typeof metadata?.name === "string" && metadata.name !== "" ? metadata.name : "(unnamed)";
  return `${shown(kind)}/${shown(name)}`;
}

function shown(text: string): string {
  return /^[-.()A-Za-z0-9]{1,253}$/.test(text) ? text : quote(text);
}

/**
 * Parses a document as the kind it says: a ModelRoute as a route, a ModelServing (or a document of
 * ours without a kind) as a ModelServing; another kind in our API group is named as such.
 */
export function parseManifest(document: ManifestDocument): ParseResult<unknown> {
  if (document.kind === ROUTE_KIND) return parseModelRoute(document.value);
  if (document.kind === KIND) return parseModelServing(document.value);
  return {
    ok: false,
    problems: [problem(["kind"], `must be "${KIND}" or "${ROUTE_KIND}" (it is ${quote(document.kind)})`)],
  };
}

export type LoadResult =
  { readonly ok: true; readonly value: ModelServing } | { readonly ok: false; readonly lines: readonly string[] };

/**
 * The first ModelServing in YAML `text`, parsed and validated; otherwise the reasons as
 * `FILE: ...` lines (YAML errors, no ModelServing, or `FILE: ModelServing/<name>: <path>: <reason>`).
 */
export function loadModelServing(file: string, text: string): LoadResult {
  const manifests = readManifests(text);
  if (manifests.errors.length > 0) return { ok: false, lines: manifests.errors.map((error) => `${file}: ${error}`) };
  const document = manifests.documents.find((candidate) => candidate.kind !== ROUTE_KIND);
  if (document === undefined) return { ok: false, lines: [`${file}: no ${KIND} found`] };
  const parsed = parseModelServing(document.value);
  if (!parsed.ok)
    return {
      ok: false,
      lines: parsed.problems.map((problem) => `${file}: ${document.label}: ${problem.path}: ${problem.reason}`),
    };
  return { ok: true, value: parsed.value };
}
