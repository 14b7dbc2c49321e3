#!/usr/bin/env node
/**
 * The installed `tandem` command (package.json `bin`, compiled to dist/cli/bin.js). It checks the
 * Node.js version before loading the command: on an older Node than the dependencies need, they
 * fail while loading, with a stack trace that does not say why. Development runs
 * src/cli/main.ts directly on the pinned Node 24.
 */
import { nodeVersionProblem } from "./node-version.ts";

const problem = nodeVersionProblem(process.versions.node);
if (problem === undefined) {
  await (await import("./main.ts")).run();
} else {
  process.stderr.write(`${problem}\n`);
  process.exitCode = 1;
}
