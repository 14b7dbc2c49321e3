/** Hostile inputs for the tests that check every command reports them cleanly (issue #20). */

/** A "billion laughs" alias bomb: 9^9 strings once expanded, a few hundred bytes as written. */
export const ALIAS_BOMB = [
  "apiVersion: tandem.dev/v1alpha1",
  "kind: ModelServing",
  "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]",
  ..."bcdefghi"
    .split("")
    .map((name, i) => `${name}: &${name} [${Array.from({ length: 9 }, () => `*${"abcdefgh"[i] ?? ""}`).join(", ")}]`),
  "",
].join("\n");

/** A valid ModelServing manifest (one role, one container). */
export const VALID_MANIFEST = `apiVersion: tandem.dev/v1alpha1
kind: ModelServing
metadata: {name: good}
spec:
  template:
    roles:
      - name: server
        entryTemplate: {spec: {containers: [{name: c, image: "vllm:v1"}]}}
`;

/** `VALID_MANIFEST` with `extra` (YAML flow text) in its pod spec, 7 levels below the root. */
export function manifestWithExtra(extra: string): string {
  return VALID_MANIFEST.replace('image: "vllm:v1"}]}}', `image: "vllm:v1"}], extra: ${extra}}}`);
}

/** Lists nested `depth` deep as YAML flow text: `[[[...]]]`. */
export function nestedLists(depth: number): string {
  return `${"[".repeat(depth)}${"]".repeat(depth)}`;
}
