/**
 * The router benchmark (`npm run bench`, or `npm run bench -- router` alone): what a proxy adds on
 * loopback in front of one engine-mock (ttft 0: it answers at once; tpot 1 ms; its own process),
 * measured side by side in one run by one load generator (Debian's `wrk`, a Lua script for the
 * POST body) against: the engine directly; Tandem's router (bench/router-server.ts: `tandem router`
 * over a one-pod stand-in API server) at its default log level (one access-log line per request),
 * with `--workers 2`, and with `--log-level warn` (no line for a request that succeeds); nginx
 * (`proxy_pass` to a keep-alive upstream, one worker, generated config in a temp dir, not a
 * daemon); SGLang's Rust router (`sglang-router` 0.3.2 from PyPI, in a venv under .cache/) at its
 * default level (info: two lines per request) and at `--log-level error` (none). Every log goes
 * to /dev/null, formatted and written as in production.
 * It installs nothing: a missing peer is skipped with the command that installs it.
 *
 * Tandem is compared with SGLang's router like for like (`PAIRS`): both at their defaults, both
 * quiet. Latency and throughput run in `ROUNDS` rounds, each over every target (in reverse order
 * every other round, so drift in the machine's load falls on all alike); a ratio is taken per
 * round and its median printed with its range, as the machine is shared and one run swings.
 *
 * Figures (method in docs/design/router.md, "Benchmark"):
 * - added latency p50/p99: wrk cannot hold a fixed request rate (wrk2 can; it is not in Debian),
 *   so latency is measured at a fixed low concurrency instead — one connection, one request at a
 *   time — and "added" is the target's percentile minus the direct one's in the same round;
 * - closed-loop throughput (requests/s at THROUGHPUT_CONNECTIONS connections), as ratios to nginx
 *   and to SGLang's router, with the CPU time each proxy's processes spent per request (from
 *   /proc: robust to a loaded machine, where wall-clock figures are not);
 * - streaming tokens/s (STREAM_TOKENS tokens per SSE response), as a ratio to direct.
 * Every process shares the machine's cores, the load generator included: ratios measured in the
 * same run are what compares, not the absolute figures. The load averages before and after are
 * printed with them.
 */
import { spawn, spawnSync } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { processTreeCpuMs } from "./proc-cpu.ts";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

const ROOT = join(import.meta.dirname, "..");
const SGLANG_PYTHON = join(ROOT, ".cache/sglang-venv/bin/python");
const SGLANG_INSTALL = "python3 -m venv .cache/sglang-venv && .cache/sglang-venv/bin/pip install sglang-router==0.3.2";
/** Wall seconds of each wrk run (`BENCH_SECONDS` overrides). */
const RUN_SECONDS = Number(process.env["BENCH_SECONDS"] ?? 3);
/** The workers of the second Tandem target (`tandem router --workers`). */
const TANDEM_WORKERS = 2;
/** Wall seconds of each target's warm-up before anything is measured. */
const WARM_UP_SECONDS = 2;
/** Rounds of the latency and throughput runs (`BENCH_ROUNDS` overrides). */
const ROUNDS = Number(process.env["BENCH_ROUNDS"] ?? 5);
/**
 * Tandem's targets and the SGLang router target each is compared with: the same logging, so the
 * ratio is the proxies' own cost (both at their default level; both logging nothing per request).
 */
const PAIRS: ReadonlyMap<string, string> = new Map([
  ["tandem", "sglang"],
  [`tandem-w${TANDEM_WORKERS}`, "sglang"],
  ["tandem-warn", "sglang-error"],
]);
const THROUGHPUT_CONNECTIONS = 32;
const STREAM_CONNECTIONS = 8;
const STREAM_TOKENS = 64;
const TARGET_ADDED_P50_MS = 0.3;
const TARGET_ADDED_P99_MS = 1;
const READY_TIMEOUT_MS = 30_000;
/** Target names are padded to this in the tables. */
const NAME_WIDTH = 12;

interface Target {
  readonly name: string;
  readonly url: string;
  /** The proxy's process (its children included: workers); absent for the engine itself. */
  readonly pid?: number | undefined;
}

interface WrkResult {
  readonly requestsPerSecond: number;
  /** Latency percentiles in ms (50, 99). */
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Requests completed in the run. */
  readonly requests: number;
  /** Non-2xx answers and socket errors. */
  readonly errors: number;
  /** CPU µs the target's processes spent per completed request (targets with a pid, on Linux). */
  readonly cpuUsPerRequest?: number | undefined;
}

/** Runs the whole router benchmark; prints what it measured and what it skipped. */
export async function benchRouter(): Promise<void> {
  console.log(
    `\nrouter benchmark: loopback, one engine-mock (ttft 0, tpot 1 ms), wrk, ${RUN_SECONDS} s per run; every process shares the same cores`,
  );
  if (!hasCommand("wrk", ["-v"])) {
    console.log("  skipped: wrk is not installed (apt-get install nginx wrk)");
    return;
  }
  const children: ChildProcess[] = [];
  const dir = await mkdtemp(join(tmpdir(), "tandem-bench-"));
  try {
    const enginePort = Number(
      await startChild(
        children,
        process.execPath,
        [join(ROOT, "src/cli/main.ts"), "engine-mock", "--listen", "127.0.0.1:0", "--ttft-ms", "0", "--tpot-ms", "1"],
        /listening on http:\/\/127\.0\.0\.1:(\d+)/,
      ),
    );
    const tandem = async (name: string, workers: number, logLevel = "info"): Promise<Target> => {
      const args = [join(ROOT, "bench/router-server.ts"), String(enginePort), "--workers", String(workers)];
      args.push("--log-level", logLevel);
      const port = await startChild(children, process.execPath, [...args, "--log", "/dev/null"], /listening on (\d+)/);
      const target = { name, url: `http://127.0.0.1:${port}`, pid: children.at(-1)?.pid };
      // Listening is not routing yet: every worker must have synced and registered.
      await untilAnswering(target.url, name);
      return target;
    };
    const targets: Target[] = [
      { name: "direct", url: `http://127.0.0.1:${enginePort}` },
      await tandem("tandem", 1),
      await tandem(`tandem-w${TANDEM_WORKERS}`, TANDEM_WORKERS),
      // The access log's info lines off (`--log-level warn`): what one line per request costs.
      await tandem("tandem-warn", 1, "warn"),
    ];
    for (const start of [
      () => startNginx(children, dir, enginePort),
      () => startSglang(children, enginePort, "sglang", "info"),
      () => startSglang(children, enginePort, "sglang-error", "error"),
    ]) {
      const peer = await start().catch((error: unknown) => {
        // A peer that is installed but does not come up is skipped, not the whole benchmark.
        console.log(`  skipped a peer: ${error instanceof Error ? error.message : String(error)}`);
        return undefined;
      });
      if (peer !== undefined) targets.push(peer);
    }
    console.log(`  load average before: ${loadAverage()}`);
    await measureAll(targets, dir);
    console.log(`  load average after: ${loadAverage()}`);
  } finally {
    for (const child of children) child.kill("SIGTERM");
    await Promise.all(
      children
        .filter((child) => child.exitCode === null && child.signalCode === null)
        .map((child) => new Promise((resolve) => child.once("exit", resolve))),
    );
    await rm(dir, { recursive: true, force: true });
  }
}

/** The three measurements: latency and throughput in rounds over every target, then streaming once. */
async function measureAll(targets: readonly Target[], dir: string): Promise<void> {
  const plain = join(dir, "plain.lua");
  const stream = join(dir, "stream.lua");
  await writeFile(plain, wrkScript({ model: "m", prompt: "hello", max_tokens: 1 }));
  await writeFile(stream, wrkScript({ model: "m", prompt: "hello", max_tokens: STREAM_TOKENS, stream: true }));
  // Warm-up, results dropped: a Node target's first seconds run code the JIT has not optimized yet
  // (its p99 at one connection read 4.3 ms cold against 2.6 ms after 2 s of load, ad hoc).
  for (const target of targets) runWrk(target, plain, THROUGHPUT_CONNECTIONS, WARM_UP_SECONDS);
  reportLatency(targets, inRounds(targets, plain, 1));
  reportThroughput(targets, inRounds(targets, plain, THROUGHPUT_CONNECTIONS));
  reportStreaming(targets, stream);
}

/** Each round's result per target name: `ROUNDS` runs over every target, every other round reversed. */
function inRounds(targets: readonly Target[], script: string, connections: number): Map<string, WrkResult>[] {
  const rounds: Map<string, WrkResult>[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const results = new Map<string, WrkResult>();
    for (const target of round % 2 === 0 ? targets : [...targets].reverse())
      results.set(target.name, runWrk(target, script, connections));
    rounds.push(results);
  }
  return rounds;
}

function reportLatency(targets: readonly Target[], rounds: readonly Map<string, WrkResult>[]): void {
  console.log(
    `  latency, 1 connection, one request at a time, ${ROUNDS} rounds (wrk cannot hold a fixed rate; see docs/design/router.md); medians, added = minus direct in the same round:`,
  );
  for (const target of targets) {
    const p50 = medianOf(rounds, target.name, (result) => result.p50Ms);
    const p99 = medianOf(rounds, target.name, (result) => result.p99Ms);
    if (p50 === undefined || p99 === undefined) continue;
    const addedP50 = medianOf(rounds, target.name, (result, round) => result.p50Ms - (round.get("direct")?.p50Ms ?? 0));
    const addedP99 = medianOf(rounds, target.name, (result, round) => result.p99Ms - (round.get("direct")?.p99Ms ?? 0));
    const added =
      target.name === "direct" || addedP50 === undefined || addedP99 === undefined
        ? ""
        : `, added p50 ${fmtMs(addedP50)} p99 ${fmtMs(addedP99)}`;
    const met = (addedP50 ?? Infinity) <= TARGET_ADDED_P50_MS && (addedP99 ?? Infinity) <= TARGET_ADDED_P99_MS;
    const verdict = target.name.startsWith("tandem")
      ? `  (target ≤ ${TARGET_ADDED_P50_MS} ms p50, ≤ ${TARGET_ADDED_P99_MS} ms p99: ${met ? "met" : "missed"})`
      : "";
    console.log(
      `    ${target.name.padEnd(NAME_WIDTH)} p50 ${fmtMs(p50)} p99 ${fmtMs(p99)}${added}${cpuOf(rounds, target.name)}${errorsOf(rounds, target.name)}${verdict}`,
    );
  }
}

function reportThroughput(targets: readonly Target[], rounds: readonly Map<string, WrkResult>[]): void {
  console.log(
    `  closed-loop throughput, ${THROUGHPUT_CONNECTIONS} connections, ${ROUNDS} rounds, medians (CPU: the proxy's processes, workers included, per request):`,
  );
  for (const target of targets) {
    const rate = medianOf(rounds, target.name, (result) => result.requestsPerSecond);
    if (rate !== undefined)
      console.log(
        `    ${target.name.padEnd(NAME_WIDTH)} ${rate.toFixed(0)} req/s${cpuOf(rounds, target.name)}${errorsOf(rounds, target.name)}`,
      );
  }
  for (const ours of targets.filter((target) => target.name.startsWith("tandem"))) {
    const sglang = PAIRS.get(ours.name);
    for (const peer of ["nginx", ...(sglang === undefined ? [] : [sglang])]) {
      const ratios = perRound(rounds, (round) => {
        const mine = round.get(ours.name);
        const other = round.get(peer);
        return mine === undefined || other === undefined ? undefined : mine.requestsPerSecond / other.requestsPerSecond;
      });
      if (ratios.length === 0) continue;
      const cpu = perRound(rounds, (round) => {
        const mine = round.get(ours.name)?.cpuUsPerRequest;
        const other = round.get(peer)?.cpuUsPerRequest;
        return mine === undefined || other === undefined ? undefined : mine / other;
      });
      const median = medianValue(ratios);
      const verdict = peer === sglang ? `  (target ≥ 1×: ${median >= 1 ? "met" : "missed"})` : "";
      const cpuRatio = cpu.length === 0 ? "" : `; CPU per request ${medianValue(cpu).toFixed(2)}× (${rangeOf(cpu)})`;
      console.log(`    ${ours.name} / ${peer}: ${median.toFixed(2)}× (rounds ${rangeOf(ratios)})${cpuRatio}${verdict}`);
    }
  }
}

function reportStreaming(targets: readonly Target[], script: string): void {
  console.log(`  streaming, ${STREAM_TOKENS} tokens per SSE response, ${STREAM_CONNECTIONS} connections:`);
  // One round: the figure to read is the ratio to direct, which stays near 1 for every proxy.
  const round = new Map(targets.map((target) => [target.name, runWrk(target, script, STREAM_CONNECTIONS)]));
  const tokensPerSecond = (name: string): number => (round.get(name)?.requestsPerSecond ?? 0) * STREAM_TOKENS;
  for (const target of targets)
    console.log(
      `    ${target.name.padEnd(NAME_WIDTH)} ${tokensPerSecond(target.name).toFixed(0)} tokens/s${cpuOf([round], target.name)}${errorsOf([round], target.name)}`,
    );
  for (const target of targets)
    if (target.name !== "direct")
      console.log(
        `    ${target.name} / direct: ${(tokensPerSecond(target.name) / tokensPerSecond("direct")).toFixed(2)}×`,
      );
}

/** `value` of each round that has it. */
function perRound(
  rounds: readonly Map<string, WrkResult>[],
  value: (round: Map<string, WrkResult>) => number | undefined,
): number[] {
  return rounds.flatMap((round) => value(round) ?? []);
}

/** The median over the rounds of `value` of `name`'s result; undefined when no round has one. */
function medianOf(
  rounds: readonly Map<string, WrkResult>[],
  name: string,
  value: (result: WrkResult, round: Map<string, WrkResult>) => number | undefined,
): number | undefined {
  const values = perRound(rounds, (round) => {
    const result = round.get(name);
    return result === undefined ? undefined : value(result, round);
  });
  return values.length === 0 ? undefined : medianValue(values);
}

/** The median of a non-empty list (the lower middle of an even one). */
function medianValue(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] ?? Number.NaN;
}

function rangeOf(values: readonly number[]): string {
  return `${Math.min(...values).toFixed(2)}–${Math.max(...values).toFixed(2)}`;
}

function cpuOf(rounds: readonly Map<string, WrkResult>[], name: string): string {
  const cpu = medianOf(rounds, name, (result) => result.cpuUsPerRequest);
  return cpu === undefined ? "" : `, ${cpu.toFixed(0)} µs CPU/request`;
}

function errorsOf(rounds: readonly Map<string, WrkResult>[], name: string): string {
  const errors = perRound(rounds, (round) => round.get(name)?.errors).reduce((sum, count) => sum + count, 0);
  return errors === 0 ? "" : ` (${errors} errors!)`;
}

/** A wrk script sending `body` as a JSON POST to /v1/completions. */
function wrkScript(body: Record<string, unknown>): string {
  const lua = JSON.stringify(JSON.stringify(body));
  return `wrk.method = "POST"\nwrk.path = "/v1/completions"\nwrk.body = ${lua}\nwrk.headers["Content-Type"] = "application/json"\n`;
}

/** One wrk run, one thread (the load generator should not take the cores it measures), with the target's CPU per request. */
function runWrk(target: Target, script: string, connections: number, seconds = RUN_SECONDS): WrkResult {
  const cpuBeforeMs = target.pid === undefined ? 0 : processTreeCpuMs(target.pid);
  const run = spawnSync("wrk", ["-t1", `-c${connections}`, `-d${seconds}s`, "--latency", "-s", script, target.url], {
    encoding: "utf8",
  });
  if (run.status !== 0) throw new Error(`wrk against ${target.name} failed: ${run.stderr || run.stdout}`);
  const result = parseWrk(run.stdout);
  if (target.pid === undefined) return result;
  const cpuMs = processTreeCpuMs(target.pid) - cpuBeforeMs;
  return { ...result, cpuUsPerRequest: (1000 * cpuMs) / Math.max(1, result.requests) };
}

/** Requests/s, the 50th and 99th latency percentiles and the error counts of wrk's report. */
export function parseWrk(text: string): WrkResult {
  const percentile = (p: number): number => {
    const match = new RegExp(`^\\s+${p}%\\s+([\\d.]+)(us|ms|s)\\s*$`, "m").exec(text);
    if (match === null) throw new Error(`wrk printed no ${p}% latency:\n${text}`);
    return Number(match[1]) * ({ us: 0.001, ms: 1, s: 1000 } as const)[match[2] as "us" | "ms" | "s"];
  };
  const rate = /^Requests\/sec:\s+([\d.]+)/m.exec(text);
  const requests = /^\s*(\d+) requests in /m.exec(text);
  if (rate === null) throw new Error(`wrk printed no Requests/sec:\n${text}`);
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(text)?.[1] ?? 0);
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(text);
  const socketErrors = socket === null ? 0 : socket.slice(1).reduce((sum, value) => sum + Number(value), 0);
  return {
    requestsPerSecond: Number(rate[1]),
    p50Ms: percentile(50),
    p99Ms: percentile(99),
    requests: Number(requests?.[1] ?? 0),
    errors: non2xx + socketErrors,
  };
}

/** The 1, 5 and 15 minute load averages, as `uptime` prints them, and the cores they share. */
function loadAverage(): string {
  return `${loadavg()
    .map((load) => load.toFixed(2))
    .join(", ")} (${availableParallelism()} cores)`;
}

function fmtMs(ms: number): string {
  return `${ms.toFixed(3)} ms`;
}

function hasCommand(command: string, args: readonly string[]): boolean {
  return spawnSync(command, args, { stdio: "ignore" }).error === undefined;
}

/** Spawns a child and resolves with the first capture of `ready` in its output. */
function startChild(
  children: ChildProcess[],
  command: string,
  args: readonly string[],
  ready: RegExp,
): Promise<string> {
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let output = "";
    const onData = (chunk: Buffer): void => {
      output += chunk.toString("utf8");
      const match = ready.exec(output);
      if (match !== null) resolve(match[1] ?? "");
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.once("error", reject);
    child.once("exit", (code) => {
      reject(new Error(`${command} ${args.join(" ")} exited (${String(code)}) before it was ready:\n${output}`));
    });
  });
}

/** nginx with one worker in front of the engine, keep-alive upstream, unbuffered; undefined when not installed. */
async function startNginx(children: ChildProcess[], dir: string, enginePort: number): Promise<Target | undefined> {
  if (!hasCommand("nginx", ["-v"])) {
    console.log("  nginx: skipped, not installed (apt-get install nginx wrk)");
    return undefined;
  }
  const port = await freePort();
  await mkdir(join(dir, "nginx"), { recursive: true });
  const temp = (name: string): string => `${name}_temp_path ${join(dir, "nginx", name)};`;
  const config = [
    ...(process.getuid?.() === 0 ? ["user root;"] : []),
    "worker_processes 1;",
    "daemon off;",
    `pid ${join(dir, "nginx/nginx.pid")};`,
    `error_log ${join(dir, "nginx/error.log")} warn;`,
    "events { worker_connections 4096; }",
    "http {",
    "  access_log off;",
    `  ${["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map(temp).join(" ")}`,
    `  upstream engine { server 127.0.0.1:${enginePort}; keepalive 128; }`,
    `  server { listen 127.0.0.1:${port}; location / { proxy_pass http://engine; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_buffering off; } }`,
    "}",
  ].join("\n");
  await writeFile(join(dir, "nginx.conf"), config);
  const child = spawn("nginx", ["-p", dir, "-c", join(dir, "nginx.conf")], { stdio: "ignore" });
  children.push(child);
  const url = `http://127.0.0.1:${port}`;
  await untilAnswering(url, "nginx");
  return { name: "nginx", url, pid: child.pid };
}

/** SGLang's router in front of the engine at `logLevel`; undefined when its venv is missing. */
async function startSglang(
  children: ChildProcess[],
  enginePort: number,
  name: string,
  logLevel: "info" | "error",
): Promise<Target | undefined> {
  if (!existsSync(SGLANG_PYTHON) || !hasCommand(SGLANG_PYTHON, ["-c", "import sglang_router"])) {
    console.log(`  sglang: skipped, sglang-router is not installed (${SGLANG_INSTALL})`);
    return undefined;
  }
  const port = await freePort();
  const child = spawn(
    SGLANG_PYTHON,
    [
      "-m",
      "sglang_router.launch_router",
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      "--worker-urls",
      `http://127.0.0.1:${enginePort}`,
      "--log-level",
      logLevel,
      // Its metrics listener too on loopback, on a port of its own (the default is fixed: 29000).
      "--prometheus-host",
      "127.0.0.1",
      "--prometheus-port",
      String(await freePort()),
    ],
    // Its lines go to /dev/null, as Tandem's do.
    { stdio: "ignore" },
  );
  children.push(child);
  const url = `http://127.0.0.1:${port}`;
  await untilAnswering(url, name);
  return { name, url, pid: child.pid };
}

/** Polls a completion until it answers 200 (a peer's start-up has no line to wait for). */
async function untilAnswering(url: string, name: string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    try {
      const response = await fetch(`${url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", prompt: "hi", max_tokens: 1 }),
      });
      await response.arrayBuffer();
      if (response.ok) return;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) throw new Error(`${name} did not answer on ${url} within ${READY_TIMEOUT_MS / 1000} s`);
    await sleep(100);
  }
}

/** A port free now on 127.0.0.1 (for peers that cannot report the one they bound). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}
