import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, it } from "node:test";
import { runProcess, runTandem } from "../../test/cli-process.ts";
import { buildProgram } from "./main.ts";

/** Whether `shell` is installed here (the zsh and fish checks skip, saying so, without it). */
function installed(shell: string): boolean {
  return spawnSync(shell, ["-c", "exit 0"]).status === 0;
}

/** What bash completes for the words typed so far (the last one being completed), from the generated script. */
async function bashCompletes(script: string, ...typed: string[]): Promise<string[]> {
  const words = typed.map((word) => `'${word}'`).join(" ");
  const program = `${script}\nCOMP_WORDS=(${words}); COMP_CWORD=${typed.length - 1}; _tandem_completion; printf '%s\\n' "\${COMPREPLY[@]}"`;
  const result = await runProcess("bash", ["--norc", "-c", program]);
  assert.equal(result.stderr, "");
  return result.stdout.split("\n").filter((line) => line !== "");
}

/**
 * What the generated zsh function offers for the words typed so far (the last one being
 * completed): it runs in `zsh -f` with zsh's completion helpers replaced by stand-ins that print
 * their candidates (`_describe` its array's `word:description` items, `compadd` its words,
 * `_files` "<files>"), since the real ones only work inside a completion widget.
 */
async function zshCompletes(script: string, ...typed: string[]): Promise<string[]> {
  const stubs =
    'compdef() { :; }; _describe() { local name=${@[-1]}; print -rl -- ${(P)name}; }; compadd() { [[ $1 == -- ]] && shift; print -rl -- "$@"; }; _files() { print -r -- "<files>"; }';
  const words = typed.map((word) => `'${word}'`).join(" ");
  const result = await runProcess("zsh", [
    "-f",
    "-c",
    `${stubs}\n${script}\nwords=(${words}); CURRENT=${typed.length}; _tandem`,
  ]);
  assert.deepEqual({ code: result.code, stderr: result.stderr }, { code: 0, stderr: "" });
  return result.stdout.split("\n").filter((line) => line !== "");
}

describe("tandem completion", () => {
  it("bash: commands, subcommands, flags and choices come from the command tree", async () => {
    const result = await runTandem(["completion", "bash"]);
    assert.equal(result.code, 0);
    assert.equal(result.stderr, "");
    const script = result.stdout;
    const commands = buildProgram()
      .commands.map((command) => command.name())
      .filter((name) => name !== "__complete"); // hidden
    assert.deepEqual(
      (await bashCompletes(script, "tandem", "")).filter((word) => !word.startsWith("-")),
      [...commands, "help"],
    );
    assert.deepEqual(await bashCompletes(script, "tandem", "rollout", "st"), ["status"]);
    assert.deepEqual(await bashCompletes(script, "tandem", "rollout", "status", "m", "-o", ""), [
      "json",
      "yaml",
      "wide",
    ]);
    assert.deepEqual(await bashCompletes(script, "tandem", "rollout", "history", "m", "--con"), ["--context"]);
    assert.deepEqual(await bashCompletes(script, "tandem", "completion", "z"), ["zsh"]);
    assert.deepEqual(await bashCompletes(script, "tandem", "--vers"), ["--version"]);
  });

  it(
    "zsh: the script is valid zsh (zsh -n), and loaded it offers the subcommands, choices and files of the path typed",
    { skip: !installed("zsh") ? "zsh is not installed (apt-get install zsh)" : false },
    async () => {
      const script = await runTandem(["completion", "zsh"]);
      assert.deepEqual({ code: script.code, stderr: script.stderr }, { code: 0, stderr: "" });
      assert.match(script.stdout, /^#compdef tandem\n/, "zsh's fpath autoloading needs the tag on the first line");
      const parsed = await runProcess("zsh", ["-f", "-n", "-c", script.stdout]);
      assert.deepEqual({ code: parsed.code, stderr: parsed.stderr }, { code: 0, stderr: "" });
      assert.deepEqual(
        (await zshCompletes(script.stdout, "tandem", "rollout", "st")).map((item) => item.split(":")[0]),
        ["status", "history", "undo", "restart", "pause", "resume", "help", "--help", "-h", "<files>"],
      );
      assert.deepEqual(await zshCompletes(script.stdout, "tandem", "rollout", "status", "m", "-o", ""), [
        "json",
        "yaml",
        "wide",
      ]);
      assert.deepEqual(await zshCompletes(script.stdout, "tandem", "demo", "--scenario", ""), ["<files>"]);
      const commands = buildProgram()
        .commands.map((command) => command.name())
        .filter((name) => name !== "__complete"); // hidden
      assert.deepEqual(
        (await zshCompletes(script.stdout, "tandem", ""))
          .map((item) => item.split(":")[0] ?? "")
          .filter((word) => !word.startsWith("-") && word !== "<files>"),
        [...commands, "help"],
      );
    },
  );

  it("fish: the script parses", { skip: !installed("fish") ? "fish is not installed" : false }, async () => {
    const script = await runTandem(["completion", "fish"]);
    assert.equal(script.code, 0);
    const parsed = await runProcess("fish", ["--no-execute", "-c", script.stdout]);
    assert.deepEqual({ code: parsed.code, stderr: parsed.stderr }, { code: 0, stderr: "" });
  });

  it(
    "fish: the path of subcommands selects the candidates",
    { skip: !installed("fish") ? "fish is not installed" : false },
    async () => {
      const script = await runTandem(["completion", "fish"]);
      const result = await runProcess("fish", [
        "--no-config",
        "-c",
        `${script.stdout}\ncomplete --do-complete 'tandem rollout status m -o '; complete --do-complete 'tandem rollout st'`,
      ]);
      assert.deepEqual(
        result.stdout
          .split("\n")
          .filter((line) => line !== "")
          .map((line) => line.split("\t")[0]),
        ["json", "wide", "yaml", "status"],
        "fish sorts the candidates",
      );
    },
  );

  it("tandem __complete (for kubectl plugin completion) answers in Cobra's format from the same tree", async () => {
    const complete = async (...typed: string[]) => {
      const result = await runTandem(["__complete", "--", ...typed]);
      assert.equal(result.code, 0);
      return result.stdout;
    };
    assert.equal(
      await complete("rollout", "st"),
      "status\tShow the rollout state; with --watch, one line per change until it completes (exit 1 if blocked or timed out).\n:4\n",
    );
    assert.equal(await complete("rollout", "status", "m", "-o", ""), "json\nyaml\nwide\n:4\n");
    assert.equal(
      await complete("rollout", "history", "m", "--kubeconfig", ""),
      ":0\n",
      "a file name: the shell completes it",
    );
    assert.doesNotMatch(await complete(""), /__complete/, "the command itself is hidden");
  });

  it("an unknown shell names the choices, exit 1", async () => {
    const result = await runTandem(["completion", "powershell"]);
    assert.equal(result.code, 1);
    assert.equal(result.stdout, "");
    assert.match(
      result.stderr,
      /^error: command-argument value 'powershell' is invalid for argument 'shell'. Allowed choices are bash, zsh, fish.\n/,
    );
  });
});
