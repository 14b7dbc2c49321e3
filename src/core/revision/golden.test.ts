/**
 * Golden revision hashes. Every running pod carries its revision name as a label; if the same
 * manifest ever hashes differently, a controller upgrade would see every pod as outdated and roll
 * the whole fleet. These tables pin revision format 1: the projection, the empty rules, the
 * canonical bytes and the hash.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { parse } from "yaml";
import { parseModelServing } from "../../api/index.ts";
import { decodeControllerRevision } from "./controller-revision.ts";
import { revisionBytes, revisionHash, revisionName, sameRevision } from "./hash.ts";
import { revisionData } from "./projection.ts";
import golden from "./golden-hashes.json" with { type: "json" };

const GOLDEN_DIR = new URL("../../../test/golden/revision/", import.meta.url);

const UPGRADE_WARNING =
  "Revision identity changed for a manifest that did not change. A controller upgrade must not roll pods: " +
  "every pod's tandem.dev/revision label names a revision computed by the old algorithm. Revert the change; " +
  "a deliberate change needs a new revision format that keeps reading format 1 (docs/design/revision-identity.md) " +
  "— only then update golden-hashes.json.";

function loadManifest(file: string) {
  const parsed = parseModelServing(parse(readFileSync(new URL(file, GOLDEN_DIR), "utf8")));
  if (!parsed.ok) assert.fail(`${file}: ${JSON.stringify(parsed.problems)}`);
  return parsed.value;
}

describe("golden revision hashes (format 1)", () => {
  const manifests = readdirSync(GOLDEN_DIR)
    .filter((file) => file.endsWith(".yaml"))
    .sort();

  it("has a golden entry for every manifest, and a manifest for every entry", () => {
    assert.deepEqual(Object.keys(golden).sort(), manifests);
  });

  for (const file of manifests) {
    it(`${file} keeps its revision name`, () => {
      const ms = loadManifest(file);
      const hash = revisionHash(revisionData(ms), 0);
      const expected = (golden as Record<string, { name: string; hash: string } | undefined>)[file];
      assert.deepEqual({ name: revisionName(ms.metadata.name, hash), hash }, expected, UPGRADE_WARNING);
    });
  }

  it('hashes exactly as documented: sha256 of the canonical bytes, then of bytes ‖ "\\n" ‖ count', () => {
    const bytes =
      '{"roles":[{"entryTemplate":{"spec":{"containers":[{"image":"vllm/vllm-openai:v0.11.0","name":"engine"}]}},"name":"server","workerReplicas":0}],"schedulerName":"default-scheduler"}';
    const data = revisionData(loadManifest("minimal.yaml"));
    assert.equal(revisionBytes(data), bytes, UPGRADE_WARNING);
    const sha = (input: string) => createHash("sha256").update(input, "utf8").digest("hex").slice(0, 10);
    assert.equal(revisionHash(data, 0), sha(bytes));
    assert.equal(revisionHash(data, 1), sha(`${bytes}\n1`));
  });

  it("keeps reading a stored format-1 ControllerRevision, and still finds it equal to its manifest", () => {
    const stored: unknown = JSON.parse(readFileSync(new URL("controllerrevision-format1.json", GOLDEN_DIR), "utf8"));
    const decoded = decodeControllerRevision(stored);
    assert.ok(decoded.ok, decoded.ok ? "" : `${decoded.reason}\n${UPGRADE_WARNING}`);
    assert.equal(decoded.revision.name, "llama-8f7cda3c03");
    const data = revisionData(loadManifest("pd-disaggregated.yaml"));
    assert.ok(sameRevision(decoded.revision, { hash: revisionHash(data, 0), data }), UPGRADE_WARNING);
  });
});
