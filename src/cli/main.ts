#!/usr/bin/env node
/** The `tandem` command line. Each subcommand lives in its own module and registers itself here. */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Command, CommanderError } from "commander";
import { registerCompletion } from "./completion.ts";
import { registerController } from "./controller.ts";
import { registerCrd } from "./crd.ts";
import { registerDashboard } from "./dashboard.ts";
import { registerDemo } from "./demo.ts";
import { registerEngineMock } from "./engine-mock.ts";
import { registerManifests } from "./install.ts";
import { registerPlan } from "./plan.ts";
import { registerRevision } from "./revision.ts";
import { registerRollout } from "./rollout.ts";
import { registerRouter } from "./router.ts";
import { registerSimulate } from "./simulate.ts";
import { FlagError } from "./io.ts";
import { registerValidate } from "./validate.ts";

/** The version in package.json, which sits two levels up from both src/cli and the installed dist/cli. */
export function packageVersion(): string {
  const manifest = JSON.parse(readFileSync(join(import.meta.dirname, "../../package.json"), "utf8")) as {
    version: string;
  };
  return manifest.version;
}

export function buildProgram(): Command {
  const program = new Command("tandem")
    .description("Workload controller and request router for multi-role, multi-node LLM inference on Kubernetes.")
    .version(packageVersion(), "-V, --version", "print the version of tandem")
    .showHelpAfterError()
    .exitOverride();
  registerValidate(program);
  registerCrd(program);
  registerRevision(program);
  registerPlan(program);
  registerDemo(program);
  registerSimulate(program);
  registerController(program);
  registerManifests(program);
  registerRollout(program);
  registerEngineMock(program);
  registerRouter(program);
  registerDashboard(program);
  registerCompletion(program);
  return program;
}

/** Runs the CLI; commander's own exits (help, usage errors) and bad flag values become exit codes, not exceptions. */
export async function main(argv: readonly string[]): Promise<number> {
  try {
    await buildProgram().parseAsync(argv, { from: "user" });
    return typeof process.exitCode === "number" ? process.exitCode : 0;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode;
    if (error instanceof FlagError) {
      process.stderr.write(`tandem: ${error.message}\n`);
      return 1;
    }
    throw error;
  }
}

/**
 * Output into a pipe whose reader has gone (`tandem crd | head -1`): the reader has what it
 * wanted, so the command stops at once, quietly, with exit 0 (not an unhandled EPIPE error).
 */
function stopQuietlyWhenThePipeCloses(stream: NodeJS.WriteStream): void {
  stream.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") throw error;
    process.exit(0);
  });
}

/** Runs the command line of this process (`node src/cli/main.ts ARGS`, or the installed bin.ts). */
export async function run(): Promise<void> {
  stopQuietlyWhenThePipeCloses(process.stdout);
  stopQuietlyWhenThePipeCloses(process.stderr);
  process.exitCode = await main(process.argv.slice(2));
}

if (import.meta.main) await run();
