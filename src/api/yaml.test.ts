import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ALIAS_BOMB } from "../../test/hostile.ts";
import { parseYamlDocument, parseYamlDocuments } from "./yaml.ts";

function errorsOf(text: string): readonly string[] {
  const document = parseYamlDocument(text);
  if (document.ok) assert.fail("expected an error");
  return document.errors;
}

describe("parseYamlDocuments", () => {
  it("reports an alias bomb as too many aliases instead of throwing", () => {
    assert.deepEqual(errorsOf(ALIAS_BOMB), [
      'too many aliases (expanding them would exceed 100 alias uses, as in a "billion laughs" attack)',
    ]);
  });

  it("reports what building the data throws: an alias without its anchor", () => {
    assert.deepEqual(errorsOf("a: *x\n"), ["Unresolved alias (the anchor must be set before the alias): x"]);
  });

  it("reports nesting too deep for the parser once, not once per level", () => {
    assert.deepEqual(errorsOf(`a: ${"[".repeat(5000)}${"]".repeat(5000)}\n`), [
      "collections are nested too deeply to parse",
    ]);
  });

  it("keeps each document's errors to itself, one line each", () => {
    const documents = parseYamlDocuments(`a: 1\n---\n${ALIAS_BOMB}---\nb: [\n`);
    assert.deepEqual(documents[0], { ok: true, value: { a: 1 } });
    assert.equal(documents[1]?.ok, false);
    assert.equal(documents[2]?.ok, false);
    for (const document of documents)
      if (!document.ok) for (const error of document.errors) assert.doesNotMatch(error, /\n/);
  });

  it("yields JSON data only: YAML 1.1 merge keys, timestamps, binary and sets are not resolved", () => {
    const document = parseYamlDocument(
      "%YAML 1.1\n---\nbase: &b {x: 1}\nm: {<<: *b}\nt: 2001-12-14\nexplicit: !!timestamp 2001-12-14\nbin: !!binary aGk=\ns: !!set {a}\n",
    );
    assert.deepEqual(document, {
      ok: true,
      value: {
        base: { x: 1 },
        m: { "<<": { x: 1 } },
        t: "2001-12-14",
        explicit: "2001-12-14",
        bin: "aGk=",
        s: { a: null },
      },
    });
  });

  it("refuses duplicate keys and, for one document, a second one", () => {
    assert.match(errorsOf("a: 1\na: 2\n")[0] ?? "", /^Map keys must be unique/);
    assert.match(errorsOf("a: 1\n---\nb: 2\n")[0] ?? "", /multiple documents/);
  });
});
