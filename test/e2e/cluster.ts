/**
 * A throwaway control plane for the e2e tests and `npm run cluster`: etcd and kube-apiserver, built
 * by hack/kube-testenv/build.sh, on 127.0.0.1 with free ports, in a temporary directory; with
 * `nodes`, also kube-controller-manager, kube-scheduler and KWOK playing that many GPU nodes
 * (hack/kube-testenv/kwok/stages.yaml says what their "kubelets" report).
 *
 * Identity: static bearer tokens (`--token-auth-file`) and `--authorization-mode=RBAC`. The admin
 * token is in `system:masters`; the controller token authenticates as the ServiceAccount
 * `tandem-system/tandem-controller` and is allowed only what RBAC objects grant it, so the tests
 * exercise exactly the RBAC we ship. Without `nodes` there is no controller-manager, scheduler or
 * kubelet.
 *
 * `startCluster` either resolves with a ready cluster or cleans up everything it started and
 * rejects. `stop` is idempotent; until it runs, an exit or SIGINT/SIGTERM of this process kills the
 * servers and removes the directory. See docs/design/e2e-harness.md.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createHash, generateKeyPairSync, randomBytes } from "node:crypto";
import {
  closeSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:net";
import { homedir, tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { KubeClient, resourcePath } from "./client.ts";
import { StopWaiting, waitFor } from "./wait.ts";

const REPO_ROOT = join(import.meta.dirname, "..", "..");
const TESTENV_DIR = join(REPO_ROOT, "hack", "kube-testenv");
const LOOPBACK = "127.0.0.1";
const DIR_PREFIX = "tandem-e2e-";
/** File in a cluster directory naming the pid of the Node process that owns it. */
const OWNER_FILE = "owner.pid";

/** The ServiceAccount the controller runs as (namespace, name). */
export const CONTROLLER_NAMESPACE = "tandem-system";
export const CONTROLLER_SERVICE_ACCOUNT = "tandem-controller";
export const CONTROLLER_USER = `system:serviceaccount:${CONTROLLER_NAMESPACE}:${CONTROLLER_SERVICE_ACCOUNT}`;
/** The router's ServiceAccount (`tandem manifests` ships its RBAC), for router processes started by tests. */
export const ROUTER_USER = `system:serviceaccount:${CONTROLLER_NAMESPACE}:tandem-router`;
/**
 * A person who may only look: member of the group deploy/dashboard-binding.example.yaml binds to
 * the `tandem-dashboard` roles, and of nothing else.
 */
export const VIEWER_USER = "tandem-e2e-viewer";
export const VIEWER_GROUP = "tandem-dashboard-viewers";

export interface ClusterOptions {
  /** Directory holding `etcd` and `kube-apiserver`; default: `binDir()`. */
  readonly binDir?: string;
  /** Bound on etcd + kube-apiserver becoming ready. Default 120 000 (a busy 2-core machine). */
  readonly startTimeoutMs?: number;
  /** Bound on each server exiting after SIGTERM before it gets SIGKILL. Default 10 000. */
  readonly stopTimeoutMs?: number;
  /** Extra kube-apiserver flags (`--watch-cache=false`), after the harness's own. */
  readonly extraApiServerArgs?: readonly string[];
  /** KWOK nodes, and the scheduler and controller-manager that act on them. Default: none of the three. */
  readonly nodes?: NodesOptions;
}

/** The fake GPU nodes KWOK plays: `kwok-node-<i>`, each with its own pod CIDR on the loopback range. */
export interface NodesOptions {
  readonly count: number;
  /** `nvidia.com/gpu` capacity of each node. */
  readonly gpusPerNode: number;
  /**
   * Many nodes on a busy machine (the scale run): node Leases last LARGE_LEASE_SECONDS instead of
   * 40 s (KWOK renews at a quarter of it), a node is NotReady only after LARGE_GRACE_SECONDS without
   * a renewal instead of 20 s, KWOK renews 32 Leases and plays 16 stages at once instead of 4, and
   * logs warnings only. At 1,000 nodes KWOK's defaults cannot renew every Lease within 20 s on 2
   * loaded cores (739 of 1,000 nodes went NotReady), and the evictions that follow are not the
   * workload under test; nor are 1,000 renewals every 10 s (100 writes a second, several times
   * the controller's own).
   */
  readonly large?: boolean;
}

export interface Cluster {
  /** https://127.0.0.1:PORT */
  readonly server: string;
  /** http://127.0.0.1:PORT of etcd's client API (for compaction in tests). */
  readonly etcdUrl: string;
  /** PEM of the serving certificate chain the API server generated (`<dir>/pki/apiserver.crt`). */
  readonly caPem: string;
  /** Temporary directory: data, keys, tokens, logs, kubeconfigs. Removed by `stop`. */
  readonly dir: string;
  /** `system:masters`. */
  readonly admin: KubeClient;
  /** The controller's ServiceAccount identity; RBAC decides what it may do. */
  readonly controller: KubeClient;
  /** Kubeconfig files (JSON) for processes started by tests: `admin`, `controller`, `router` (ROUTER_USER) and `viewer` (VIEWER_USER). */
  readonly kubeconfigs: {
    readonly admin: string;
    readonly controller: string;
    readonly router: string;
    readonly viewer: string;
  };
  /** The KWOK nodes' names (empty without `nodes`). */
  readonly nodeNames: readonly string[];
  /** The pids of the servers it started (etcd, kube-apiserver, and with `nodes` the other three). */
  readonly pids: readonly number[];

  /** Stops kube-apiserver, then etcd, and removes `dir`. Safe to call more than once. */
  stop(): Promise<void>;
}

/**
 * The directory build.sh installs binaries into for the current go.sums: `$TANDEM_KUBE_BIN` if
 * set, else `${TANDEM_KUBE_CACHE:-$HOME/.cache/tandem/kube}/<key>/bin`, `<key>` the first 16 hex
 * digits of sha256(go.sum followed by kwok/go.sum).
 */
export function binDir(): string {
  const explicit = process.env["TANDEM_KUBE_BIN"];
  if (explicit !== undefined && explicit !== "") return explicit;
  const cacheRoot = process.env["TANDEM_KUBE_CACHE"] ?? join(homedir(), ".cache", "tandem", "kube");
  const hash = createHash("sha256");
  for (const file of ["go.sum", join("kwok", "go.sum")]) hash.update(readFileSync(join(TESTENV_DIR, file)));
  return join(cacheRoot, hash.digest("hex").slice(0, 16), "bin");
}

/**
 * Starts etcd and kube-apiserver and waits until the API server's /readyz answers 200; with
 * `nodes`, then kube-controller-manager, kube-scheduler and KWOK, creates the nodes and waits until
 * every node is Ready and the controller-manager has made the `default` ServiceAccount.
 */
export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const bin = options.binDir ?? binDir();
  const names = options.nodes === undefined ? ["etcd", "kube-apiserver"] : ["etcd", "kube-apiserver", ...NODE_BINARIES];
  for (const name of names) {
    if (!existsSync(join(bin, name)))
      throw new Error(`${join(bin, name)} not found; run: bash hack/kube-testenv/build.sh`);
  }
  const startTimeoutMs = options.startTimeoutMs ?? 120_000;
  const stopTimeoutMs = options.stopTimeoutMs ?? 10_000;
  removeAbandonedDirs();
  const dir = mkdtempSync(join(tmpdir(), DIR_PREFIX));
  writeFileSync(join(dir, OWNER_FILE), `${process.pid}\n`);
  const processes: ManagedProcess[] = [];
  const emergency = installEmergencyCleanup(processes, dir);
  const teardown = async (): Promise<void> => {
    for (const managed of [...processes].reverse()) await stopProcess(managed, stopTimeoutMs);
    keepLogs(dir);
    rmSync(dir, { recursive: true, force: true });
    emergency.uninstall();
  };
  try {
    const deadline = Date.now() + startTimeoutMs;
    const ports = await freePorts(3);
    const [etcdClientPort, etcdPeerPort, apiPort] = [ports[0]!, ports[1]!, ports[2]!];
    const secrets = writeCredentials(dir);
    const etcdUrl = `http://${LOOPBACK}:${etcdClientPort}`;
    processes.push(spawnLogged("etcd", join(bin, "etcd"), etcdArgs(dir, etcdClientPort, etcdPeerPort), dir));
    await waitForEtcd(etcdUrl, processes[0]!, deadline - Date.now());
    processes.push(
      spawnLogged(
        "kube-apiserver",
        join(bin, "kube-apiserver"),
        [...apiServerArgs(dir, etcdUrl, apiPort), ...(options.extraApiServerArgs ?? [])],
        dir,
      ),
    );
    const server = `https://${LOOPBACK}:${apiPort}`;
    const caPem = await waitForApiServer(server, dir, secrets.adminToken, processes[1]!, deadline - Date.now());
    const cluster = assemble({ server, etcdUrl, caPem, dir, secrets, teardown });
    const pids = () => processes.flatMap((managed) => managed.child.pid ?? []);
    if (options.nodes === undefined) return { ...cluster, pids: pids() };
    const nodeNames = await startNodes({ cluster, bin, nodes: options.nodes, processes, deadline });
    return { ...cluster, nodeNames, pids: pids() };
  } catch (error) {
    await teardown();
    throw error;
  }
}

interface Secrets {
  readonly adminToken: string;
  readonly controllerToken: string;
  readonly routerToken: string;
  readonly viewerToken: string;
}

interface AssembleInput {
  readonly server: string;
  readonly etcdUrl: string;
  readonly caPem: string;
  readonly dir: string;
  readonly secrets: Secrets;
  readonly teardown: () => Promise<void>;
}

function assemble(input: AssembleInput): Cluster {
  const admin = new KubeClient({ server: input.server, caPem: input.caPem, token: input.secrets.adminToken });
  const controller = new KubeClient({ server: input.server, caPem: input.caPem, token: input.secrets.controllerToken });
  const kubeconfigs = {
    admin: writeKubeconfig(input.dir, "admin", input.server, input.secrets.adminToken),
    controller: writeKubeconfig(input.dir, "controller", input.server, input.secrets.controllerToken),
    router: writeKubeconfig(input.dir, "router", input.server, input.secrets.routerToken),
    viewer: writeKubeconfig(input.dir, "viewer", input.server, input.secrets.viewerToken),
  };
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      admin.close();
      controller.close();
      await input.teardown();
    })();
    return stopped;
  };
  return {
    server: input.server,
    etcdUrl: input.etcdUrl,
    caPem: input.caPem,
    dir: input.dir,
    admin,
    controller,
    kubeconfigs,
    nodeNames: [],
    pids: [],
    stop,
  };
}

// ---------------------------------------------------------------------------------------------
// Nodes: kube-controller-manager, kube-scheduler, KWOK

const NODE_BINARIES = ["kube-controller-manager", "kube-scheduler", "kwok"] as const;
const NODES = { group: "", version: "v1", plural: "nodes", namespaced: false } as const;
const SERVICE_ACCOUNTS = { group: "", version: "v1", plural: "serviceaccounts", namespaced: true } as const;
/** The label every KWOK node carries (and KWOK's own convention: `type=kwok`). */
export const KWOK_NODE_LABEL = "type";
/** A pod annotation ("3s"): how long KWOK leaves the pod ContainerCreating (stages.yaml `pod-ready`). */
export const START_DELAY_ANNOTATION = "e2e.tandem.dev/start-delay";
/** Set to "true" on a node and its "kubelet" reports Ready=False (stages.yaml `node-down`); remove it to recover. */
export const NODE_DOWN_LABEL = "e2e.tandem.dev/node-down";

interface NodesInput {
  readonly cluster: Cluster;
  readonly bin: string;
  readonly nodes: NodesOptions;
  readonly processes: ManagedProcess[];
  readonly deadline: number;
}

/** Starts the controller-manager, scheduler and KWOK, creates the nodes, waits until all are Ready. */
async function startNodes(input: NodesInput): Promise<string[]> {
  const { cluster, bin, processes } = input;
  const admin = cluster.kubeconfigs.admin;
  processes.push(
    spawnLogged(
      "kube-controller-manager",
      join(bin, "kube-controller-manager"),
      controllerManagerArgs(admin, input.nodes.large === true),
      cluster.dir,
    ),
  );
  processes.push(spawnLogged("kube-scheduler", join(bin, "kube-scheduler"), componentArgs(admin), cluster.dir));
  processes.push(
    spawnLogged("kwok", join(bin, "kwok"), kwokArgs(admin, cluster.dir, input.nodes.large === true), cluster.dir),
  );
  const names = Array.from({ length: input.nodes.count }, (_, index) => `kwok-node-${index}`);
  for (const [index, name] of names.entries())
    await cluster.admin.create(NODES, nodeObject(name, index, input.nodes.gpusPerNode));
  const watched = processes.slice(-NODE_BINARIES.length);
  await waitFor(
    async () => {
      for (const managed of watched) assertRunning(managed);
      const list = await cluster.admin.list(NODES);
      const ready = (list.items as any[]).filter((node) =>
        node.status?.conditions?.some((c: any) => c.type === "Ready" && c.status === "True"),
      );
      return ready.length === names.length ? true : undefined;
    },
    { timeoutMs: input.deadline - Date.now(), intervalMs: 250, what: `${names.length} KWOK nodes Ready` },
  ).catch((error: unknown) => {
    throw withLog(error, watched[2]!);
  });
  // The ServiceAccount controller's first act: the controller-manager's controllers are running.
  await waitFor(
    async () =>
      (await cluster.admin.request("GET", resourcePath(SERVICE_ACCOUNTS, { namespace: "default", name: "default" })))
        .status === 200
        ? true
        : undefined,
    {
      timeoutMs: input.deadline - Date.now(),
      intervalMs: 250,
      what: "kube-controller-manager to create ServiceAccount default/default",
    },
  ).catch((error: unknown) => {
    throw withLog(error, watched[0]!);
  });
  return names;
}

/**
 * Node `index`: `nvidia.com/gpu` capacity, and a /24 pod CIDR of its own on the loopback range
 * (127.10.0.0/24, 127.10.1.0/24, ...) from which KWOK gives pods their IPs: a process started on a
 * pod IP (test/e2e/engine-pods.ts) is reachable, and nothing ever leaves the machine.
 */
function nodeObject(name: string, index: number, gpus: number): any {
  const capacity = { cpu: "64", memory: "512Gi", pods: "110", "nvidia.com/gpu": String(gpus) };
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name,
      labels: {
        [KWOK_NODE_LABEL]: "kwok",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
      },
      annotations: { "kwok.x-k8s.io/node": "fake" },
    },
    spec: { podCIDR: `127.${10 + (index >> 8)}.${index & 255}.0/24` },
    status: { capacity, allocatable: capacity },
  };
}

/** Flags kube-controller-manager and kube-scheduler share: no port (`--secure-port=0` serves nothing), one instance. */
function componentArgs(kubeconfig: string): string[] {
  return [
    `--kubeconfig=${kubeconfig}`,
    "--secure-port=0",
    "--leader-elect=false",
    "--kube-api-qps=200",
    "--kube-api-burst=400",
    "--v=1",
  ];
}

/**
 * Node lifecycle every 2 s with a 20 s grace (defaults 5 s and 50 s): a node that stops reporting
 * goes NotReady within a test's bounds. `large`: LARGE_GRACE_SECONDS (see NodesOptions).
 */
function controllerManagerArgs(kubeconfig: string, large: boolean): string[] {
  return [
    ...componentArgs(kubeconfig),
    "--use-service-account-credentials=false",
    "--allocate-node-cidrs=false",
    "--node-monitor-period=2s",
    `--node-monitor-grace-period=${large ? LARGE_GRACE_SECONDS : 20}s`,
  ];
}

/** `large` (NodesOptions): a node's Lease lasts 240 s, renewed every 60 s (a real kubelet: 40 s, every 10 s). */
const LARGE_LEASE_SECONDS = 240;
/** `large`: two renewals may be missed, and a third be late on a loaded machine, before a node is NotReady. */
const LARGE_GRACE_SECONDS = 180;

/** KWOK's options for `large` (NodesOptions), a configuration document beside the stages. */
const LARGE_KWOK_CONFIGURATION = `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  nodeLeaseParallelism: 32
  nodePlayStageParallelism: 16
  podPlayStageParallelism: 16
`;

/** KWOK manages every node (all are its own), no server (`--node-port=0`), stages from stages.yaml. */
function kwokArgs(kubeconfig: string, dir: string, large: boolean): string[] {
  const configuration = join(dir, "kwok-large.yaml");
  if (large) writeFileSync(configuration, LARGE_KWOK_CONFIGURATION);
  return [
    `--kubeconfig=${kubeconfig}`,
    `--config=${join(TESTENV_DIR, "kwok", "stages.yaml")}`,
    ...(large ? [`--config=${configuration}`, "--v=WARN"] : []),
    "--manage-all-nodes=true",
    `--node-ip=${LOOPBACK}`,
    "--node-port=0",
    "--cidr=127.9.0.0/16",
    `--node-lease-duration-seconds=${large ? LARGE_LEASE_SECONDS : 40}`,
  ];
}

// ---------------------------------------------------------------------------------------------
// Ports, credentials, flags

/**
 * `count` distinct free TCP ports on 127.0.0.1, found by listening on port 0 (all listeners are
 * open at once, so the ports differ). Another process may take one before we bind it: a small race
 * that shows up as a bind error in the server's log.
 */
export async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
          const server = createServer();
          server.once("error", reject);
          server.listen(0, LOOPBACK, () => resolve(server));
        }),
    ),
  );
  const ports = servers.map((server) => {
    const address = server.address();
    if (address === null || typeof address === "string") throw new Error("listening on port 0 gave no port");
    return address.port;
  });
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  return ports;
}

/**
 * Writes the ServiceAccount signing key pair (EC P-256, generated here) and the static token file
 * (`token,user,uid,"groups"`), and returns the random tokens.
 */
function writeCredentials(dir: string): Secrets {
  const { publicKey, privateKey } = generateKeyPairSync("ec", {
    namedCurve: "prime256v1",
    publicKeyEncoding: { type: "spki", format: "pem" },
    privateKeyEncoding: { type: "pkcs8", format: "pem" },
  });
  writeFileSync(join(dir, "sa.pub"), publicKey, { mode: 0o600 });
  writeFileSync(join(dir, "sa.key"), privateKey, { mode: 0o600 });
  const secrets = {
    adminToken: randomBytes(24).toString("hex"),
    controllerToken: randomBytes(24).toString("hex"),
    routerToken: randomBytes(24).toString("hex"),
    viewerToken: randomBytes(24).toString("hex"),
  };
  const serviceAccountGroups = `system:serviceaccounts,system:serviceaccounts:${CONTROLLER_NAMESPACE}`;
  const lines = [
    `${secrets.adminToken},tandem-e2e-admin,tandem-e2e-admin,"system:masters"`,
    `${secrets.controllerToken},${CONTROLLER_USER},tandem-controller-uid,"${serviceAccountGroups}"`,
    `${secrets.routerToken},${ROUTER_USER},tandem-router-uid,"${serviceAccountGroups}"`,
    `${secrets.viewerToken},${VIEWER_USER},tandem-e2e-viewer-uid,"${VIEWER_GROUP}"`,
  ];
  writeFileSync(join(dir, "tokens.csv"), lines.join("\n") + "\n", { mode: 0o600 });
  return secrets;
}

function etcdArgs(dir: string, clientPort: number, peerPort: number): string[] {
  const client = `http://${LOOPBACK}:${clientPort}`;
  const peer = `http://${LOOPBACK}:${peerPort}`;
  return [
    "--name=e2e",
    `--data-dir=${join(dir, "etcd")}`,
    `--listen-client-urls=${client}`,
    `--advertise-client-urls=${client}`,
    `--listen-peer-urls=${peer}`,
    `--initial-advertise-peer-urls=${peer}`,
    `--initial-cluster=e2e=${peer}`,
    "--unsafe-no-fsync=true", // throwaway data: no fsync makes writes ~10x faster
    "--log-level=warn",
  ];
}

function apiServerArgs(dir: string, etcdUrl: string, port: number): string[] {
  return [
    `--etcd-servers=${etcdUrl}`,
    `--bind-address=${LOOPBACK}`,
    `--advertise-address=${LOOPBACK}`,
    `--secure-port=${port}`,
    `--cert-dir=${join(dir, "pki")}`, // writes a self-signed apiserver.crt/.key
    `--token-auth-file=${join(dir, "tokens.csv")}`,
    "--authorization-mode=RBAC",
    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
    `--service-account-key-file=${join(dir, "sa.pub")}`,
    `--service-account-signing-key-file=${join(dir, "sa.key")}`,
    "--service-cluster-ip-range=10.96.0.0/24",
    // ServiceAccount: without `nodes` no controller-manager creates default ServiceAccounts, and with
    // it a pod created right after its namespace would race the creation. DefaultTolerationSeconds:
    // a pod on a node gone NotReady is evicted at once rather than after 300 s.
    "--disable-admission-plugins=ServiceAccount,DefaultTolerationSeconds",
    // Stricter than the default: creating a child with blockOwnerDeletion needs update on the
    // owner's finalizers, so the tests prove the shipped RBAC suffices on such clusters too.
    "--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
    "--allow-privileged=true",
    "--profiling=false",
    "--v=1",
  ];
}

function writeKubeconfig(dir: string, name: string, server: string, token: string): string {
  const path = join(dir, `${name}.kubeconfig`);
  const config = {
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "e2e", cluster: { server, "certificate-authority": join(dir, "pki", "apiserver.crt") } }],
    users: [{ name, user: { token } }],
    contexts: [{ name, context: { cluster: "e2e", user: name } }],
    "current-context": name,
  };
  writeFileSync(path, JSON.stringify(config, null, 2), { mode: 0o600 });
  return path;
}

// ---------------------------------------------------------------------------------------------
// Processes

interface ManagedProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly logPath: string;
  /** Resolves with the exit code (or the signal name) once the process has exited. */
  readonly exited: Promise<string>;
  /** Set once the process has exited. */
  exitStatus: string | undefined;
}

/**
 * Spawns `file args` with stdout and stderr appended to `<dir>/<name>.log`. Where util-linux
 * `setpriv` exists, the server is started through it with `--pdeathsig KILL` (setpriv execs, so the
 * pid is the server's): then even a SIGKILL of this Node process takes the server down with it.
 */
function spawnLogged(name: string, file: string, args: readonly string[], dir: string): ManagedProcess {
  const logPath = join(dir, `${name}.log`);
  const fd = openSync(logPath, "a");
  try {
    const setpriv = findOnPath("setpriv");
    const [command, argv] =
      setpriv === undefined ? [file, args] : [setpriv, ["--pdeathsig", "KILL", "--", file, ...args]];
    const child = spawn(command, argv, { cwd: dir, stdio: ["ignore", fd, fd] });
    const managed: ManagedProcess = {
      name,
      child,
      logPath,
      exitStatus: undefined,
      exited: new Promise((resolve) => {
        child.once("error", (error) => {
          managed.exitStatus = `spawn error: ${error.message}`;
          resolve(managed.exitStatus);
        });
        child.once("exit", (code, signal) => {
          managed.exitStatus = signal ?? `exit code ${code ?? "?"}`;
          resolve(managed.exitStatus);
        });
      }),
    };
    return managed;
  } finally {
    closeSync(fd);
  }
}

/** The absolute path of executable `name` on $PATH, if any (Linux only; elsewhere undefined). */
function findOnPath(name: string): string | undefined {
  if (process.platform !== "linux") return undefined;
  return (process.env["PATH"] ?? "")
    .split(delimiter)
    .map((entry) => join(entry, name))
    .find((path) => existsSync(path));
}

/** SIGTERM, then SIGKILL if the process is still running after `timeoutMs`. Resolves once it exited. */
async function stopProcess(managed: ManagedProcess, timeoutMs: number): Promise<void> {
  if (managed.exitStatus !== undefined || managed.child.pid === undefined) return;
  managed.child.kill("SIGTERM");
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), timeoutMs);
  });
  const outcome = await Promise.race([managed.exited, timedOut]);
  clearTimeout(timer);
  if (outcome === "timeout") {
    managed.child.kill("SIGKILL");
    await managed.exited;
  }
}

/** The last `lines` lines of a process's log, for error messages. */
function logTail(managed: ManagedProcess, lines = 30): string {
  try {
    return readFileSync(managed.logPath, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

/** Fails a wait at once when `managed` has exited, quoting its log. */
function assertRunning(managed: ManagedProcess): void {
  if (managed.exitStatus !== undefined) {
    throw new StopWaiting(`${managed.name} exited (${managed.exitStatus}); last log lines:\n${logTail(managed)}`);
  }
}

async function waitForEtcd(url: string, etcd: ManagedProcess, timeoutMs: number): Promise<void> {
  await waitFor(
    async () => {
      assertRunning(etcd);
      const response = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2_000) });
      const body = (await response.json()) as { health?: unknown };
      return response.ok && body.health === "true" ? true : undefined;
    },
    { timeoutMs, what: `etcd healthy at ${url}` },
  ).catch((error: unknown) => {
    throw withLog(error, etcd);
  });
}

/** Waits for /readyz = 200 (all post-start hooks, including RBAC bootstrap); resolves with the CA PEM. */
async function waitForApiServer(
  server: string,
  dir: string,
  adminToken: string,
  apiServer: ManagedProcess,
  timeoutMs: number,
): Promise<string> {
  const certPath = join(dir, "pki", "apiserver.crt");
  return waitFor(
    async () => {
      assertRunning(apiServer);
      if (!existsSync(certPath)) return undefined;
      const caPem = readFileSync(certPath, "utf8");
      const client = new KubeClient({ server, caPem, token: adminToken, requestTimeoutMs: 5_000 });
      try {
        const response = await client.request("GET", "/readyz");
        return response.status === 200 ? caPem : undefined;
      } finally {
        client.close();
      }
    },
    { timeoutMs, intervalMs: 250, what: `kube-apiserver /readyz at ${server}` },
  ).catch((error: unknown) => {
    throw withLog(error, apiServer);
  });
}

function withLog(error: unknown, managed: ManagedProcess): Error {
  if (error instanceof StopWaiting || !(error instanceof Error))
    return error instanceof Error ? error : new Error(String(error));
  return new Error(`${error.message}\n${managed.name} log (last lines):\n${logTail(managed)}`);
}

/** Copies the server logs to `$TANDEM_E2E_LOG_DIR/<dir name>/` when that variable is set. */
function keepLogs(dir: string): void {
  const target = process.env["TANDEM_E2E_LOG_DIR"];
  if (target === undefined || target === "") return;
  const into = join(target, dir.split("/").at(-1) ?? "cluster");
  mkdirSync(into, { recursive: true });
  for (const name of ["etcd", "kube-apiserver", ...NODE_BINARIES].map((server) => `${server}.log`)) {
    if (existsSync(join(dir, name))) copyFileSync(join(dir, name), join(into, name));
  }
}

/**
 * Removes cluster directories in the temp dir whose owner process is gone (left by a SIGKILLed test
 * run; their servers died with it through pdeathsig). Directories without an owner file are kept.
 */
function removeAbandonedDirs(): void {
  for (const entry of readdirSync(tmpdir())) {
    if (!entry.startsWith(DIR_PREFIX)) continue;
    const dir = join(tmpdir(), entry);
    let owner: number;
    try {
      owner = Number.parseInt(readFileSync(join(dir, OWNER_FILE), "utf8"), 10);
    } catch {
      continue;
    }
    if (Number.isInteger(owner) && !processAlive(owner)) rmSync(dir, { recursive: true, force: true });
  }
}

/** Whether process `pid` exists (EPERM: it does, owned by another user). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Until uninstalled: on process exit, SIGINT or SIGTERM, SIGKILL the servers and remove `dir`
 * synchronously, so an interrupted test run leaves no etcd or kube-apiserver behind. (A SIGKILL
 * of this process cannot be handled; the servers would then outlive it.)
 */
function installEmergencyCleanup(processes: readonly ManagedProcess[], dir: string): { uninstall(): void } {
  const killAll = (): void => {
    for (const managed of processes) if (managed.exitStatus === undefined) managed.child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    killAll();
    process.exit(signal === "SIGINT" ? 130 : 143);
  };
  process.on("exit", killAll);
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  return {
    uninstall(): void {
      process.off("exit", killAll);
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    },
  };
}
