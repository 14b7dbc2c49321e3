/**
 * `npm run cluster -- up [--nodes N] [--gpus G]` / `npm run cluster -- down`: a local Kubernetes
 * control plane without containers, to watch Tandem work on a real API server. `up` builds (or
 * finds in the cache) the binaries of hack/kube-testenv, then starts in the background, all on
 * 127.0.0.1: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK playing N nodes
 * of G `nvidia.com/gpu` each (test/e2e/cluster.ts, the e2e tests' harness), installs Tandem's CRDs
 * and RBAC, and runs `tandem controller` and `tandem router` as local processes under their
 * ServiceAccount identities. Its last line is `export KUBECONFIG=<file>` (the admin identity).
 * `down` stops every process `up` started and removes every file it wrote.
 *
 * A detached supervisor process (`cluster.ts supervise`) owns the cluster: the servers die with it
 * (pdeathsig), and so do the controller and router (SIGTERM). State: `$TANDEM_CLUSTER_STATE`
 * (default ~/.cache/tandem/cluster): `state.json` and the supervisor's log. See README "A local
 * cluster".
 */
import { spawn, spawnSync } from "node:child_process";
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { binDir, CONTROLLER_NAMESPACE, freePorts, processAlive, startCluster } from "../test/e2e/cluster.ts";
import { installCrd, installRbac } from "../test/e2e/env.ts";

const REPO_ROOT = join(import.meta.dirname, "..");
const STATE_DIR = process.env["TANDEM_CLUSTER_STATE"] ?? join(homedir(), ".cache", "tandem", "cluster");
const STATE_FILE = join(STATE_DIR, "state.json");
const LOG_FILE = join(STATE_DIR, "cluster.log");
const UP_TIMEOUT_MS = 240_000;
const DOWN_TIMEOUT_MS = 30_000;
const USAGE = "usage: npm run cluster -- up [--nodes N] [--gpus G] | down";

/** What `up` leaves for `down` (and for a person: where things are). */
interface State {
  readonly supervisorPid: number;
  /** Every process it started: the servers, the controller and the router. */
  readonly pids: readonly number[];
  /** The cluster's directory (data, logs, kubeconfigs); every server's command line names it. */
  readonly dir: string;
  readonly kubeconfig: string;
  readonly server: string;
  readonly routerUrl: string;
  readonly controllerMetricsUrl: string;
  readonly nodes: number;
  readonly gpus: number;
}

function fail(message: string): never {
  process.stderr.write(`cluster: ${message}\n`);
  process.exit(1);
}

/** A positive integer flag, or a clear error naming it. */
function count(value: string | undefined, flag: string, fallback: number): number {
  if (value === undefined) return fallback;
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1 || parsed > 5000)
    fail(`--${flag} must be a whole number from 1 to 5000, got "${value}"`);
  return parsed;
}

function readState(): State | undefined {
  try {
    return JSON.parse(readFileSync(STATE_FILE, "utf8")) as State;
  } catch {
    return undefined;
  }
}

/** Pids of processes whose command line mentions `text` (Linux /proc), other than this one. */
export function processesNaming(text: string): number[] {
  if (!existsSync("/proc")) return [];
  return readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry) && Number(entry) !== process.pid)
    .map(Number)
    .filter((pid) => commandLineNames(pid, text));
}

/** Whether process `pid` runs with `text` in its command line (false once it is gone). */
function commandLineNames(pid: number, text: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(text);
  } catch {
    return false;
  }
}

/**
 * The processes `up` recorded that still run. Each names the cluster's directory in its command
 * line, so a pid the system has since given to another process is never signalled.
 */
function recordedAlive(state: State): number[] {
  return state.pids.filter((pid) => commandLineNames(pid, state.dir));
}

async function up(nodes: number, gpus: number): Promise<void> {
  const existing = readState();
  if (existing !== undefined && processAlive(existing.supervisorPid)) {
    fail(`a cluster is already up (supervisor pid ${existing.supervisorPid}); run: npm run cluster -- down`);
  }
  const build = spawnSync("bash", [join(REPO_ROOT, "hack", "kube-testenv", "build.sh")], {
    stdio: ["ignore", "ignore", "inherit"],
  });
  if (build.status !== 0) fail("building the control plane failed (hack/kube-testenv/build.sh, output above)");
  rmSync(STATE_DIR, { recursive: true, force: true });
  mkdirSync(STATE_DIR, { recursive: true });
  const log = openSync(LOG_FILE, "a");
  const args = [import.meta.filename, "supervise", "--nodes", String(nodes), "--gpus", String(gpus)];
  const supervisor = spawn(process.execPath, args, { detached: true, stdio: ["ignore", log, log] });
  closeSync(log);
  supervisor.unref();
  const deadline = Date.now() + UP_TIMEOUT_MS;
  let state = readState();
  while (state === undefined) {
    if (supervisor.exitCode !== null || !processAlive(supervisor.pid ?? 0))
      fail(`the cluster did not start; its log (${LOG_FILE}):\n${tail(LOG_FILE)}`);
    if (Date.now() > deadline) {
      // Not up in time: the supervisor goes too (its SIGTERM handler removes what it started), so
      // nothing is left that `down` could not find.
      process.kill(supervisor.pid ?? 0, "SIGTERM");
      for (let waited = 0; waited < 30_000 && processAlive(supervisor.pid ?? 0); waited += 250) await sleep(250);
      fail(`the cluster was not up within ${UP_TIMEOUT_MS / 1000} s; see ${LOG_FILE}`);
    }
    await sleep(250);
    state = readState();
  }
  const lines = [
    `cluster up: ${state.nodes} KWOK node(s) with ${state.gpus} nvidia.com/gpu each, API server ${state.server}`,
    `controller: tandem controller as ${CONTROLLER_NAMESPACE}/tandem-controller (metrics ${state.controllerMetricsUrl}/metrics)`,
    `router: tandem router as ${CONTROLLER_NAMESPACE}/tandem-router, OpenAI API at ${state.routerUrl} (metrics ${state.routerUrl}/metrics)`,
    `dashboard: npm run tandem -- dashboard --router-metrics ${state.routerUrl}/metrics`,
    `kubectl: export PATH="${binDir()}:$PATH"`,
    `logs: ${state.dir}/*.log, ${LOG_FILE}; stop with: npm run cluster -- down`,
    `export KUBECONFIG=${state.kubeconfig}`,
  ];
  process.stdout.write(lines.join("\n") + "\n");
}

function tail(file: string): string {
  try {
    return readFileSync(file, "utf8").trimEnd().split("\n").slice(-30).join("\n");
  } catch {
    return "(no log)";
  }
}

/**
 * `tandem ARGS...` as a child that gets SIGTERM when the supervisor dies (util-linux setpriv), with
 * its output in `<dir>/<name>.log`.
 */
function startTandemProcess(
  name: string,
  dir: string,
  args: readonly string[],
  env: Record<string, string> = {},
): number {
  const log = openSync(join(dir, `${name}.log`), "a");
  const script = [join(REPO_ROOT, "src", "cli", "main.ts"), ...args];
  const setpriv = spawnSync("sh", ["-c", "command -v setpriv"], { encoding: "utf8" }).stdout.trim();
  const [file, argv] =
    setpriv === "" ? [process.execPath, script] : [setpriv, ["--pdeathsig", "TERM", "--", process.execPath, ...script]];
  const child = spawn(file, argv, { stdio: ["ignore", log, log], env: { ...process.env, ...env } });
  closeSync(log);
  return child.pid ?? 0;
}

async function waitReady(url: string, what: string, deadline: number): Promise<void> {
  while (Date.now() < deadline) {
    const status = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2_000) }).then(
      (response) => response.status,
      () => 0,
    );
    if (status === 200) return;
    await sleep(250);
  }
  throw new Error(`${what} not ready at ${url}/readyz`);
}

async function supervise(nodes: number, gpus: number): Promise<void> {
  const deadline = Date.now() + UP_TIMEOUT_MS;
  const cluster = await startCluster({ nodes: { count: nodes, gpusPerNode: gpus }, startTimeoutMs: UP_TIMEOUT_MS });
  const [controllerPort, routerPort] = (await freePorts(2)) as [number, number];
  const controllerMetricsUrl = `http://127.0.0.1:${controllerPort}`;
  const routerUrl = `http://127.0.0.1:${routerPort}`;
  await installCrd(cluster.admin);
  await installRbac(cluster.admin);
  const controllerPid = startTandemProcess("tandem-controller", cluster.dir, [
    "controller",
    "--kubeconfig",
    cluster.kubeconfigs.controller,
    "--metrics-addr",
    controllerMetricsUrl.slice(7),
  ]);
  const routerPid = startTandemProcess(
    "tandem-router",
    cluster.dir,
    ["router", "--kubeconfig", cluster.kubeconfigs.router, "--listen", routerUrl.slice(7), "--id", "local"],
    {
      POD_NAME: "tandem-router-local",
      POD_NAMESPACE: CONTROLLER_NAMESPACE,
    },
  );
  await waitReady(controllerMetricsUrl, "tandem controller", deadline);
  await waitReady(routerUrl, "tandem router", deadline);
  const state: State = {
    supervisorPid: process.pid,
    pids: [...cluster.pids, controllerPid, routerPid],
    dir: cluster.dir,
    kubeconfig: cluster.kubeconfigs.admin,
    server: cluster.server,
    routerUrl,
    controllerMetricsUrl,
    nodes,
    gpus,
  };
  writeFileSync(STATE_FILE, JSON.stringify(state, null, 2) + "\n");
  process.stdout.write(`up: ${JSON.stringify(state)}\n`);
  // Until SIGTERM: the harness's handler then SIGKILLs the servers, removes the directory and exits;
  // the tandem processes get SIGTERM from setpriv when this process is gone.
  await new Promise(() => undefined);
}

/** Stops the supervisor (and so everything), waits until every process it recorded is gone, removes the state. */
async function down(): Promise<void> {
  const state = readState();
  if (state === undefined) {
    rmSync(STATE_DIR, { recursive: true, force: true });
    process.stdout.write("cluster down: none was up\n");
    return;
  }
  if (processAlive(state.supervisorPid)) process.kill(state.supervisorPid, "SIGTERM");
  const deadline = Date.now() + DOWN_TIMEOUT_MS;
  let left = recordedAlive(state);
  while ((left.length > 0 || processAlive(state.supervisorPid)) && Date.now() < deadline) {
    await sleep(200);
    left = recordedAlive(state);
  }
  for (const pid of left) process.kill(pid, "SIGKILL");
  rmSync(state.dir, { recursive: true, force: true });
  rmSync(STATE_DIR, { recursive: true, force: true });
  process.stdout.write(
    `cluster down: stopped${left.length > 0 ? ` (${left.length} process(es) killed after ${DOWN_TIMEOUT_MS / 1000} s)` : ""}, removed ${state.dir} and ${STATE_DIR}\n`,
  );
}

async function main(): Promise<void> {
  const { positionals, values } = (() => {
    try {
      return parseArgs({ allowPositionals: true, options: { nodes: { type: "string" }, gpus: { type: "string" } } });
    } catch (error) {
      return fail(`${(error as Error).message}\n${USAGE}`);
    }
  })();
  const nodes = count(values.nodes, "nodes", 4);
  const gpus = count(values.gpus, "gpus", 8);
  const command = positionals[0];
  if (command === "up") await up(nodes, gpus);
  else if (command === "down") await down();
  else if (command === "supervise") await supervise(nodes, gpus);
  else fail(command === undefined ? USAGE : `unknown command "${command}"\n${USAGE}`);
}

if (import.meta.main) await main();
