/**
 * The Node.js version check of the installed command (src/cli/bin.ts). Imports nothing: it must
 * load on any Node, however old.
 */

/** The oldest Node.js the package runs on, as package.json `engines` says (undici and commander need it). */
export const MINIMUM_NODE = [22, 19] as const;

/** Why Node `version` (`process.versions.node`, e.g. "20.20.2") cannot run tandem; undefined when it can. */
export function nodeVersionProblem(version: string): string | undefined {
  const [major = 0, minor = 0] = version.split(".").map(Number);
  const [needMajor, needMinor] = MINIMUM_NODE;
  if (major > needMajor || (major === needMajor && minor >= needMinor)) return undefined;
  return `tandem needs Node.js ${needMajor}.${needMinor} or newer, and this is ${version}: install a newer Node.js (https://nodejs.org), or put one first on PATH`;
}
