/**
 * `tandem demo` (`npm start`): Tandem at work on the embedded simulated cluster, in under a
 * minute, with nothing to install. Each act is a scenario file played by the same runner as
 * `tandem simulate` (real engine, real core, invariants checked): in a terminal it is paced in
 * scaled real time and drawn as a live groups × roles view; otherwise (`--no-tty`, or when stdout
 * is not a terminal) it prints plain lines at full speed, for logs.
 */
import { isAbsolute, join, relative } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { Command } from "commander";
import { quote } from "../api/problems.ts";
import { LABEL_MODEL_SERVING } from "../api/wellknown.ts";
import { decodeControllerRevision } from "../core/revision/controller-revision.ts";
import type { StoredRevision } from "../core/revision/controller-revision.ts";
import { roleHash } from "../core/role-hash.ts";
import type { KubeObject } from "../engine/ports.ts";
import type { SimCluster } from "../sim/cluster.ts";
import type { Report, StepRecord } from "../sim/report.ts";
import type { SimRouter } from "../sim/router.ts";
import type { RunObserver } from "../sim/runner.ts";
import { runScenario } from "../sim/runner.ts";
import type { Scenario, Step } from "../sim/scenario.ts";
import { parseScenarioText } from "../sim/scenario.ts";
import { alongside, SimFeed } from "../dashboard/sim-feed.ts";
import { DEFAULT_LISTEN, openDashboard, untilSignal } from "./dashboard.ts";
import { emptyTotals, runServe } from "./demo-serve.ts";
import type { RequestTotals as DashboardRequestTotals } from "../dashboard/requests.ts";
import { renderFrame } from "./demo-view.ts";
import type { TerminalSize } from "./demo-view.ts";
import { FlagError } from "./io.ts";
import { readSource } from "./validate.ts";

const SCENARIOS = join(import.meta.dirname, "../../deploy/examples/scenarios");
/** The default acts, in order. */
export const DEFAULT_ACTS = ["demo-lifecycle.yaml", "demo-coordinated.yaml"] as const;
/** The scenario `demo --serve` plays when `--scenario` is not given. */
export const DEFAULT_SERVE_SCENARIO = "demo-serve.yaml";
/** Wall seconds one act should take in a terminal when `--speed` is not given. */
const ACT_WALL_SECONDS = 20;
const FRAME_WALL_MS = 100;
const EVENT_LINES = 6;

export interface DemoOptions {
  readonly scenarios: readonly string[];
  /** Simulated seconds per wall second; undefined = fit each act into ACT_WALL_SECONDS. */
  readonly speed: number | undefined;
  readonly tty: boolean;
  /** Without a TTY: print pod events as they happen, not when the step ends (real-time runs). */
  readonly liveEvents?: boolean;
  /** The terminal's size now, read for each frame (it may be resized); frames fit it. */
  readonly terminalSize?: () => TerminalSize | undefined;
  readonly write: (text: string) => void;
  /** `--ui`: the browser dashboard watches each act too. */
  readonly ui?: DemoUi;
}

/** The dashboard's hook into the demo: an observer per act (`speed`: pace it, nothing else does). */
export interface DemoUi {
  /** `requests`: the timeline's request totals when they do not come from the simulated router. */
  observe(
    title: string,
    speed: number | undefined,
    requests?: () => DashboardRequestTotals,
  ): RunObserver & { ended(): void };
}

/** What each step of an act is doing, for people. */
export function describeStep(step: Step): string {
  switch (step.kind) {
    case "apply": {
      const name = (step.value.metadata as { name?: unknown } | undefined)?.name;
      return `Applying ${typeof name === "string" ? `${step.value.kind} ${name}` : "an object"}`;
    }
    case "wait":
      return step.value.for === "Seconds" ? `Waiting ${step.value.timeoutSeconds}s` : `Waiting for ${step.value.for}`;
    case "deletePods":
      return `Failure injected: deleting ${step.value.count} pod(s) matching ${step.value.selector}`;
    case "failNode":
      return `Failure injected: node ${step.value.name} fails`;
    case "recoverNode":
      return `Node ${step.value.name} recovers`;
    case "patch":
      return `Updating ModelServing ${step.value.name}`;
    case "rollback":
      return `Rolling back ${step.value.name}${step.value.toRevision === undefined ? "" : ` to revision ${step.value.toRevision}`}`;
    case "restart":
      return `Restarting every pod of ${step.value.name} (tandem rollout restart)`;
    case "recreate":
      return `Rebuilding ${step.value.role === undefined ? "" : `role ${step.value.role} in `}group ${step.value.group} of ${step.value.name} by replacement (tandem rollout restart --recreate)`;
    case "restartController":
      return "Restarting the controller (all memory lost)";
    case "snapshot":
      return `Snapshot ${step.value}`;
    case "advance":
      return `Letting ${step.value.seconds}s pass`;
    case "crashRouter":
      return `Failure injected: router replica ${step.value.replica} crashes`;
    case "restartRouter":
      return `Router replica ${step.value.replica} restarts`;
    case "expect":
      return "Checking expectations";
  }
}

/** Renders frames (terminal) or plain lines (logs) while the runner plays an act. */
class ActView implements RunObserver {
  #cluster: SimCluster | undefined;
  #router: SimRouter | undefined;
  #step = "Starting";
  #lastFrameMs = 0;
  #eventsShown = 0;
  readonly #recent: string[] = [];

  readonly title: string;
  readonly options: DemoOptions;
  /** Simulated seconds per wall second. */
  readonly speed: number;

  constructor(title: string, options: DemoOptions, speed: number) {
    this.title = title;
    this.options = options;
    this.speed = speed;
  }

  attach(cluster: SimCluster, router: SimRouter | undefined): void {
    this.#cluster = cluster;
    this.#router = router;
    if (this.options.tty) cluster.onSettle(() => this.#tick());
    else if (this.options.liveEvents === true) {
      cluster.onSettle(() => {
        this.#collectEvents();
        return Promise.resolve();
      });
    }
  }

  stepStarted(_index: number, step: Step): void {
    this.#step = describeStep(step);
    if (!this.options.tty && step.kind !== "snapshot") this.options.write(`${clock(this.#seconds())}  ${this.#step}\n`);
  }

  stepEnded(record: StepRecord): void {
    this.#collectEvents();
    if (!this.options.tty && record.kind !== "snapshot")
      this.options.write(`${clock(record.endedAt)}  ${record.ok ? "ok" : "FAILED"}: ${record.message}\n`);
  }

  #seconds(): number {
    return (this.#cluster?.clock.nowMs() ?? 0) / 1000;
  }

  /** New pod events since the last look: kept for the frame, printed as lines without a TTY. */
  #collectEvents(): void {
    const events = this.#cluster?.events() ?? [];
    for (const event of events.slice(this.#eventsShown)) {
      const line = `${clock(event.t)}  ${event.type.padEnd(11)} ${event.pod}`;
      this.#recent.push(line);
      if (!this.options.tty) this.options.write(`${line}\n`);
    }
    this.#eventsShown = events.length;
    this.#recent.splice(0, Math.max(0, this.#recent.length - EVENT_LINES));
  }

  /** At most one frame per FRAME_WALL_MS of wall time, paced by `speed`. */
  async #tick(): Promise<void> {
    const nowMs = this.#cluster?.clock.nowMs() ?? 0;
    const frameMs = FRAME_WALL_MS * this.speed;
    if (nowMs - this.#lastFrameMs < frameMs) return;
    const waitMs = Math.min(1000, (nowMs - this.#lastFrameMs) / this.speed);
    this.#lastFrameMs = nowMs;
    this.#collectEvents();
    this.options.write(`\x1b[H\x1b[2J${this.frame()}\n`);
    await sleep(waitMs);
  }

  frame(): string {
    const pods = (this.#cluster?.server.stored("Pod") ?? []) as KubeObject[];
    const msList = (this.#cluster?.server.stored("ModelServing") ?? []) as KubeObject[];
    const ms = msList[0];
    const spec = ms?.spec as { replicas?: number; template?: { roles?: { name: string }[] } } | undefined;
    const status = ms?.status as { updateRevision?: string } | undefined;
    const roles = spec?.template?.roles?.map((role) => role.name) ?? [];
    const requests = this.#router?.metrics();
    const revisions = (this.#cluster?.server.stored("ControllerRevision") ?? []).filter(
      (revision) => revision.metadata.labels?.[LABEL_MODEL_SERVING] === ms?.metadata.name,
    );
    const hashes = rolloutRoleHashes(revisions, status?.updateRevision, roles);
    return renderFrame(
      {
        title: this.title,
        seconds: this.#seconds(),
        step: this.#step,
        roles,
        groups: spec?.replicas ?? 0,
        pods,
        updateRoleHashes: hashes.update,
        previousRoleHashes: hashes.previous,
        requests: requests === undefined ? undefined : { ok: requests.ok, failed: requests.failed, cut: requests.cut },
        events: this.#recent,
        color: true,
      },
      this.options.terminalSize?.(),
    );
  }
}

/**
 * Role hashes of the update revision `updateName` and of the revision numbered just below it —
 * the one the update came from (a rollback renumbers the revision it restores, so this holds for
 * it too) — read from `revisions`, the stored ControllerRevisions of one ModelServing. A revision
 * that cannot be read, or is not there, gives no hashes.
 */
function rolloutRoleHashes(
  revisions: readonly KubeObject[],
  updateName: string | undefined,
  roles: readonly string[],
): { update: Record<string, string>; previous: Record<string, string> } {
  const decoded = revisions.flatMap((object) => {
    const result = decodeControllerRevision(object);
    return result.ok ? [result.revision] : [];
  });
  const update = decoded.find((revision) => revision.name === updateName);
  const previous =
    update === undefined
      ? undefined
      : decoded.filter((revision) => revision.revision < update.revision).sort((a, b) => b.revision - a.revision)[0];
  return { update: roleHashesOf(update, roles), previous: roleHashesOf(previous, roles) };
}

/** The role hash of each of `roles` in `revision` (none without it). */
function roleHashesOf(revision: StoredRevision | undefined, roles: readonly string[]): Record<string, string> {
  if (revision === undefined) return {};
  return Object.fromEntries(
    roles.flatMap((role) => {
      const hash = roleHash(revision.data, role);
      return hash === undefined ? [] : [[role, hash]];
    }),
  );
}

function clock(seconds: number): string {
  const whole = Math.floor(seconds);
  const pad = (value: number) => String(value).padStart(2, "0");
  return `${pad(Math.floor(whole / 60))}:${pad(whole % 60)}`;
}

/** The closing summary of one act, from its report; `replay` is the path of its scenario file for the replay command. */
export function summarize(report: Report, replay: string): string {
  const lines = [
    `${report.scenario}: ${report.verdict === "pass" ? "PASS" : "FAIL"} after ${Math.round(report.simulatedSeconds)}s simulated (seed ${report.seed})`,
  ];
  const { podsCreated, podsDeleted, requests } = report.metrics;
  const roles = Object.keys({ ...podsCreated.byRole, ...podsDeleted.byRole }).sort();
  lines.push(
    `  pods created/deleted by role: ${roles.map((role) => `${role} ${podsCreated.byRole[role] ?? 0}/${podsDeleted.byRole[role] ?? 0}`).join(", ")}`,
  );
  if (requests !== undefined)
    lines.push(
      `  requests: ${requests.total} total, ${requests.ok} ok, ${requests.failed} failed, ${requests.cut} cut (in flight on a pod that went away), ${requests.inFlight} in flight at the end`,
    );
  const violated = report.invariants.filter((result) => result.violations > 0);
  lines.push(
    violated.length === 0
      ? `  invariants: all ${report.invariants.length} held`
      : `  invariants violated: ${violated.map((result) => result.name).join(", ")}`,
  );
  const untouched = untouchedPrefill(report);
  if (untouched !== undefined) lines.push(`  ${untouched}`);
  lines.push(`  replay: tandem simulate ${shellWord(replay)} --seed ${report.seed}`);
  return `${lines.join("\n")}\n`;
}

/** `path` as the replay command names it: relative to `cwd` when it is under it, else as given. */
export function replayPath(path: string, cwd: string): string {
  if (!isAbsolute(path)) return path;
  const under = relative(cwd, path);
  return under === "" || under.startsWith("..") || isAbsolute(under) ? path : under;
}

/** `word` as one shell word: as it is when it needs no quoting, else in single quotes. */
function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;
}

/** For the lifecycle act: whether every prefill pod kept its UID through the decode update. */
function untouchedPrefill(report: Report): string | undefined {
  const before = report.snapshots["before-update"];
  const after = report.snapshots["after-update"];
  if (before === undefined || after === undefined) return undefined;
  const uids = (pods: typeof before) =>
    pods
      .filter((pod) => pod.role === "prefill")
      .map((pod) => pod.uid)
      .sort()
      .join(",");
  const decodeChanged = before
    .filter((pod) => pod.role === "decode")
    .every((pod) => !after.some((other) => other.uid === pod.uid));
  return uids(before) === uids(after) && decodeChanged
    ? "decode-only update: every decode pod replaced, every prefill pod untouched (same UIDs)"
    : "decode-only update: prefill pods changed (unexpected)";
}

async function loadAct(path: string): Promise<Scenario | string> {
  const { text } = await readSource(path);
  if (typeof text !== "string") return `${path}: cannot read: ${text.error}`;
  const parsed = parseScenarioText(text);
  return parsed.ok
    ? parsed.scenario
    : parsed.problems.map((problem) => `${path}: ${problem.path}: ${problem.reason}`).join("\n");
}

/** Plays every act; returns the exit code (0 when every act passed). */
export async function runDemo(options: DemoOptions): Promise<number> {
  let failed = false;
  const summaries: string[] = [];
  for (const path of options.scenarios) {
    const scenario = await loadAct(path);
    if (typeof scenario === "string") {
      options.write(`${scenario}\n`);
      return 1;
    }
    // The run is deterministic, so a quick silent run tells how long the act is in simulated time.
    const speed =
      options.speed ??
      (options.tty || options.ui !== undefined
        ? Math.max(1, (await runScenario(scenario)).simulatedSeconds / ACT_WALL_SECONDS)
        : 1);
    const title = `Tandem demo · ${scenario.name}`;
    if (!options.tty) options.write(`\n== ${title} ==\n`);
    const view = new ActView(title, options, speed);
    const ui = options.ui?.observe(title, options.tty ? undefined : speed);
    const report = await runScenario(scenario, { observer: ui === undefined ? view : alongside(view, ui) });
    ui?.ended();
    if (options.tty) options.write(`\x1b[H\x1b[2J${view.frame()}\n\n`);
    summaries.push(summarize(report, replayPath(path, process.cwd())));
    options.write(summaries.at(-1) ?? "");
    failed ||= report.verdict !== "pass";
  }
  if (summaries.length > 1) options.write(`\nSummary\n${summaries.join("")}`);
  return failed ? 1 : 0;
}

function parseSpeed(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const speed = Number(value);
  if (!Number.isFinite(speed) || speed <= 0)
    throw new FlagError("--speed", `must be a positive number of simulated seconds per second, not ${quote(value)}`);
  return speed;
}

function parsePort(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65_535)
    throw new FlagError("--port", `must be a TCP port, 0 to 65535 (0: any free port), not ${quote(value)}`);
  return port;
}

interface DemoFlags {
  scenario?: string;
  speed?: string;
  tty: boolean;
  serve?: boolean;
  port: string;
  clients: string;
  ui?: boolean;
  listen: string;
}

/** At most this many built-in clients: each holds a connection and a request at a time. */
const MAX_CLIENTS = 256;

function parseClients(value: string): number {
  const count = Number(value);
  if (!Number.isInteger(count) || count < 0 || count > MAX_CLIENTS)
    throw new FlagError("--clients", `must be a whole number of clients, 0 to ${MAX_CLIENTS}, not ${quote(value)}`);
  return count;
}

/** The model of the first ModelRoute the scenario applies: what the built-in clients ask for. */
function servedModel(scenario: Scenario): string | undefined {
  for (const step of scenario.steps) {
    if (step.kind !== "apply" || step.value["kind"] !== "ModelRoute") continue;
    const spec = step.value["spec"];
    const model = typeof spec === "object" && spec !== null ? (spec as Record<string, unknown>)["model"] : undefined;
    if (typeof model === "string") return model;
  }
  return undefined;
}

/** `demo --serve`: one scenario in real time (or `--speed`) behind the real router, until it ends or a signal. */
async function serve(flags: DemoFlags, write: (text: string) => void, ui: DemoUi | undefined): Promise<number> {
  const path = flags.scenario ?? join(SCENARIOS, DEFAULT_SERVE_SCENARIO);
  const port = parsePort(flags.port);
  const speed = parseSpeed(flags.speed) ?? 1;
  const clientCount = parseClients(flags.clients);
  const scenario = await loadAct(path);
  if (typeof scenario === "string") {
    write(`${scenario}\n`);
    return 1;
  }
  const model = servedModel(scenario);
  if (clientCount > 0 && model === undefined)
    throw new FlagError(
      "--clients",
      `needs a scenario that applies a ModelRoute (the clients ask for its model); ${path} applies none`,
    );
  const clients = model === undefined ? undefined : { count: clientCount, model };
  const stop = new AbortController();
  const onSignal = (): void => {
    stop.abort();
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    write(`== Tandem demo --serve · ${scenario.name} (${speed}× real time) ==\n`);
    const plain = new ActView(scenario.name, { scenarios: [path], speed, tty: false, liveEvents: true, write }, speed);
    // The dashboard's timeline counts the real router's answers.
    const totals = emptyTotals();
    const feed = ui?.observe(scenario.name, undefined, () => ({
      ok: totals.ok,
      failed: Object.values(totals.failedByStatus).reduce((sum, count) => sum + count, 0),
      cut: totals.aborted,
    }));
    const view = feed === undefined ? plain : alongside(plain, feed);
    const code = await runServe({
      scenario,
      port,
      speed,
      view,
      write,
      totals,
      signal: stop.signal,
      ...(clients === undefined ? {} : { clients }),
    });
    feed?.ended();
    return code;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

/**
 * Runs `play` with the dashboard when `--ui` is set: it serves before the first act and stays up
 * after the last until SIGINT/SIGTERM, so the end can be looked at.
 */
async function withUi(
  flags: DemoFlags,
  write: (text: string) => void,
  play: (ui: DemoUi | undefined) => Promise<number>,
): Promise<void> {
  if (flags.ui !== true) {
    process.exitCode = await play(undefined);
    return;
  }
  let server: Awaited<ReturnType<typeof openDashboard>>;
  try {
    server = await openDashboard(flags.listen, write);
  } catch (error) {
    if (error instanceof FlagError) throw error;
    write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
    return;
  }
  const ui: DemoUi = {
    observe: (title, speed, requests) =>
      new SimFeed({
        title,
        speed,
        ...(requests === undefined ? {} : { requests }),
        describe: describeStep,
        publish: (state) => {
          server.publish(state);
        },
      }),
  };
  try {
    process.exitCode = await play(ui);
    write(`the demo ended; the dashboard stays up at ${server.url} — Ctrl-C to stop\n`);
    await untilSignal();
  } finally {
    await server.close();
  }
}

export function registerDemo(program: Command): void {
  program
    .command("demo")
    .description(
      "Watch Tandem serve, recover, update and roll back on the embedded simulated cluster (under a minute).",
    )
    .option("--scenario <file>", "play this scenario instead of the built-in acts")
    .option("--speed <x>", "simulated seconds per wall second (default: fit each act into ~20 s; with --serve, 1)")
    .option("--no-tty", "print plain lines at full speed, for logs")
    .option(
      "--serve",
      "play one scenario in real time behind the real router, every entry pod an engine-mock on 127.0.0.1",
    )
    .option("--port <port>", "with --serve: the router's port on 127.0.0.1", "8000")
    .option(
      "--clients <n>",
      "with --serve: built-in clients streaming requests through the router from the first wait on (the totals then show what the rollout did to them)",
      "0",
    )
    .option("--ui", "also serve the live dashboard in the browser (on --listen), kept up after the end until Ctrl-C")
    .option("--listen <host:port>", "with --ui: where the dashboard listens", DEFAULT_LISTEN)
    .action(async (flags: DemoFlags) => {
      const write = (text: string): void => {
        process.stdout.write(text);
      };
      await withUi(flags, write, async (ui) => {
        if (flags.serve === true) return serve(flags, write, ui);
        const scenarios =
          flags.scenario === undefined ? DEFAULT_ACTS.map((act) => join(SCENARIOS, act)) : [flags.scenario];
        const tty = flags.tty && process.stdout.isTTY;
        const terminalSize = (): TerminalSize => ({ rows: process.stdout.rows, columns: process.stdout.columns });
        return runDemo({
          scenarios,
          speed: parseSpeed(flags.speed),
          tty,
          terminalSize,
          write,
          ...(ui === undefined ? {} : { ui }),
        });
      });
    });
}
