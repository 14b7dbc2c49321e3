/**
 * `npm run cluster -- up` / `down` (scripts/cluster.ts) as a user runs them: `up` prints
 * `export KUBECONFIG=<file>` last; kubectl from the build cache shows the KWOK GPU nodes Ready; an
 * applied example converges (the controller and router run as local processes); `down` leaves no
 * process naming the cluster's directory, no listening port and no file behind. Bad flags and a
 * second `up` are refused with a clear message.
 *
 * Needs the binaries from `bash hack/kube-testenv/build.sh`. Run: node --test test/e2e/cluster-cli.e2e.ts
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { processesNaming } from "../../scripts/cluster.ts";
import { binDir } from "./cluster.ts";
import { waitFor } from "./wait.ts";

const REPO_ROOT = join(import.meta.dirname, "..", "..");
const SCRIPT = join(REPO_ROOT, "scripts", "cluster.ts");
const run = promisify(execFile);
const TEST_TIMEOUT_MS = 240_000;

interface Result {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `cluster.ts ARGS...` with its state in `stateDir`; resolves with its exit code and output. */
async function cluster(stateDir: string, ...args: string[]): Promise<Result> {
  const env = { ...process.env, TANDEM_CLUSTER_STATE: stateDir };
  try {
    const { stdout, stderr } = await run(process.execPath, [SCRIPT, ...args], { env, timeout: TEST_TIMEOUT_MS });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return {
      code: typeof failed.code === "number" ? failed.code : -1,
      stdout: failed.stdout ?? "",
      stderr: failed.stderr ?? "",
    };
  }
}

async function kubectl(kubeconfig: string, ...args: string[]): Promise<string> {
  const { stdout } = await run(join(binDir(), "kubectl"), args, {
    env: { ...process.env, KUBECONFIG: kubeconfig },
    timeout: 30_000,
  });
  return stdout;
}

function portOpen(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port) });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

describe("npm run cluster -- up / down", { timeout: 3 * TEST_TIMEOUT_MS }, () => {
  const stateDir = join(mkdtempSync(join(tmpdir(), "tandem-cluster-test-")), "state");

  after(async () => {
    await cluster(stateDir, "down");
    rmSync(join(stateDir, ".."), { recursive: true, force: true });
  });

  before(async () => {
    const bad = await cluster(stateDir, "up", "--nodes", "0");
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /--nodes must be a whole number from 1 to 5000, got "0"/);
  });

  test(
    "up: GPU nodes Ready, an example converges; a second up is refused; down leaves nothing",
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const upped = await cluster(stateDir, "up", "--nodes", "2", "--gpus", "4");
      assert.equal(upped.code, 0, upped.stderr);
      const last = upped.stdout.trimEnd().split("\n").at(-1) ?? "";
      const kubeconfig = /^export KUBECONFIG=(\S+)$/.exec(last)?.[1];
      assert.ok(kubeconfig !== undefined && existsSync(kubeconfig), `the last line exports a kubeconfig: ${last}`);
      const state = JSON.parse(readFileSync(join(stateDir, "state.json"), "utf8")) as {
        dir: string;
        server: string;
        routerUrl: string;
        controllerMetricsUrl: string;
      };

      const nodes = JSON.parse(await kubectl(kubeconfig, "get", "nodes", "-o", "json")).items as any[];
      assert.equal(nodes.length, 2);
      for (const node of nodes) {
        assert.equal(node.status.capacity["nvidia.com/gpu"], "4");
        assert.equal(node.status.conditions.find((condition: any) => condition.type === "Ready")?.status, "True");
      }
      await kubectl(kubeconfig, "apply", "-f", join(REPO_ROOT, "deploy", "examples", "single-role.yaml"));
      await waitFor(
        async () => {
          const object = JSON.parse(
            await kubectl(kubeconfig, "get", "modelserving", "qwen-small", "-n", "default", "-o", "json"),
          );
          const available = object.status?.conditions?.find((condition: any) => condition.type === "Available");
          return available?.status === "True" && object.status.readyReplicas === 2 ? true : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 500, what: "qwen-small Available with 2 ready groups" },
      );

      const again = await cluster(stateDir, "up");
      assert.equal(again.code, 1);
      assert.match(again.stderr, /a cluster is already up \(supervisor pid \d+\); run: npm run cluster -- down/);

      const downed = await cluster(stateDir, "down");
      assert.equal(downed.code, 0, downed.stderr);
      assert.deepEqual(processesNaming(state.dir), [], "no process of the cluster is left");
      for (const url of [state.server, state.routerUrl, state.controllerMetricsUrl])
        assert.equal(await portOpen(url), false, `${url} is closed`);
      assert.equal(existsSync(state.dir), false, `${state.dir} is removed`);
      assert.equal(existsSync(stateDir), false, `${stateDir} is removed`);
    },
  );
});
