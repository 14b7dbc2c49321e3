/**
 * `tandem rollout status|history|undo|pause|resume|restart NAME [-n NAMESPACE] [--kubeconfig FILE]
 * [--context NAME]` against a real cluster, on the port-based commands of
 * src/engine/rollout-commands.ts (the simulator runs the same ones); `status` and `history` take
 * `-o json|yaml|wide`, `status --watch` follows the rollout one line per change. Reads come from
 * a fresh snapshot (SnapshotReader), writes go through KubeWriter. Also works as `kubectl tandem
 * rollout ...` with the `kubectl-tandem` shim.
 */
import { rfc3339 } from "../core/drain.ts";
import { randomUUID } from "node:crypto";
import { Option } from "commander";
import type { Command } from "commander";
import { stringify } from "yaml";
import { quote } from "../api/problems.ts";
import type { ClusterWriter } from "../engine/ports.ts";
import {
  MAX_PENDING_LINES,
  requestRecreate,
  restart,
  rollback,
  rolloutHistory,
  rolloutStatus,
  setPaused,
  statusLines,
} from "../engine/rollout-commands.ts";
import type { RolloutStatusReport, RolloutTarget } from "../engine/rollout-commands.ts";
import { contextNamespace, loadKubeConfig } from "../kube/config.ts";
import { ROLLOUT_PERMISSIONS } from "../kube/resources.ts";
import { SnapshotReader } from "../kube/snapshot.ts";
import { KubeTransport, clientNodeSend } from "../kube/transport.ts";
import { KubeWriter } from "../kube/writer.ts";
import type { CommandOutput } from "./io.ts";
import { FlagError, emit, fail, succeed } from "./io.ts";

/** What the commands need from a cluster: a snapshot reader of one ModelServing and a writer. */
export interface RolloutClient {
  readonly reader: Pick<SnapshotReader, "refresh" | "get" | "list">;
  readonly writer: ClusterWriter;
}

/** `-o`: machine-readable JSON or YAML, or the human text with nothing left out (`wide`). */
export const OUTPUT_FORMATS = ["json", "yaml", "wide"] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** Time for `--watch`; injected so tests run in virtual time. */
export interface WatchClock {
  nowMs(): number;
  sleep(delayMs: number): Promise<void>;
}

const REAL_CLOCK: WatchClock = {
  nowMs: () => Date.now(),
  sleep: (delayMs) => new Promise((resolve) => setTimeout(resolve, delayMs)),
};

export interface StatusOptions {
  /** Follow the rollout (polling every `pollMs`), one line per change, until it completes, is blocked or `timeoutSeconds` pass. */
  readonly watch?: boolean;
  readonly timeoutSeconds?: number;
  readonly pollMs?: number;
  /** Undefined: the human text. */
  readonly output?: OutputFormat | undefined;
  /** Where `--watch` writes each change as it happens (stdout when absent). */
  readonly write?: (text: string) => void;
  /** Where `--watch` says a read failed and will be retried (stderr when absent). */
  readonly warn?: (text: string) => void;
  readonly clock?: WatchClock;
}

/**
 * Prints the rollout state. With `watch`, writes one line (`-o json`: one JSON object; `-o yaml`:
 * one document) each time the state changes, like `kubectl rollout status`, and ends with exit 0
 * once the rollout is complete, 1 when the controller says it is blocked (waiting cannot finish
 * it) or after `timeoutSeconds`. A failed read of the cluster while watching is said and retried
 * at the next poll (an API server restarting does not end the watch); a ModelServing gone or
 * invalid ends it.
 */
export async function statusCommand(
  client: RolloutClient,
  target: RolloutTarget,
  options: StatusOptions = {},
): Promise<CommandOutput> {
  const first = await readStatus(client, target);
  if (!first.ok) return fail(`${first.message}\n`);
  if (options.watch !== true) return succeed(renderStatus(first.report, options.output));
  const write = options.write ?? ((text: string) => void process.stdout.write(text));
  const clock = options.clock ?? REAL_CLOCK;
  const timeoutSeconds = options.timeoutSeconds ?? 600;
  const deadlineMs = clock.nowMs() + timeoutSeconds * 1_000;
  let written = "";
  for (let report = first.report; ;) {
    const entry = watchEntry(report, options.output);
    if (entry !== written) write(entry);
    written = entry;
    if (report.complete) return succeed("");
    if (report.blocked)
      return fail(
        `tandem rollout: ${target.namespace}/${target.name} is blocked: ${blockedReason(report)}; change the spec (or roll back: tandem rollout undo ${target.name})\n`,
      );
    if (clock.nowMs() >= deadlineMs)
      return fail(
        `tandem rollout: timed out after ${timeoutSeconds}s waiting for the rollout of ${target.namespace}/${target.name} (--timeout sets how long)\n`,
      );
    await clock.sleep(options.pollMs ?? 1_000);
    const next = await readStatus(client, target);
    if (next.ok) report = next.report;
    else if (next.retry)
      (options.warn ?? ((text: string) => void process.stderr.write(text)))(`${next.message}; retrying\n`);
    else return fail(`${next.message}\n`);
  }
}

/** The state, or why it could not be read: `retry` when reading the cluster failed (not what it holds). */
async function readStatus(
  client: RolloutClient,
  target: RolloutTarget,
): Promise<{ ok: true; report: RolloutStatusReport } | { ok: false; retry: boolean; message: string }> {
  const refreshed = await refresh(client);
  if (refreshed !== undefined) return { ok: false, retry: true, message: refreshed };
  const result = rolloutStatus(client.reader, target);
  return result.ok ? result : { ...result, retry: false };
}

function renderStatus(report: RolloutStatusReport, output: OutputFormat | undefined): string {
  if (output === "json") return `${JSON.stringify(report, null, 2)}\n`;
  if (output === "yaml") return stringify(report);
  return statusLines(report, output === "wide" ? Infinity : MAX_PENDING_LINES)
    .map((line) => `${line}\n`)
    .join("");
}

/** What `--watch` writes for one state: a progress line, a compact JSON object or a YAML document. */
function watchEntry(report: RolloutStatusReport, output: OutputFormat | undefined): string {
  if (output === "json") return `${JSON.stringify(report)}\n`;
  if (output === "yaml") return `---\n${stringify(report)}`;
  return `${progressLine(report, output === "wide")}\n`;
}

/** One line of progress, as `kubectl rollout status` prints: counts, then what it waits for (all of it when `wide`). */
export function progressLine(report: RolloutStatusReport, wide = false): string {
  if (report.complete) return `rollout of ${report.name} complete`;
  const roles = report.roles
    .map((role) => `${role.name} ${role.updated}/${role.replicas} updated, ${role.ready} ready`)
    .join("; ");
  const counts = `${report.groups.updated} of ${report.groups.desired} groups updated, ${report.groups.ready} ready${roles === "" ? "" : ` (${roles})`}`;
  const waiting = wide ? report.waitingFor.join("; ") : (report.waitingFor[0] ?? "");
  if (report.paused)
    return `rollout of ${report.name} paused (tandem rollout resume ${report.name} continues it): ${counts}`;
  return `Waiting for rollout of ${report.name} to finish: ${counts}${waiting === "" ? "" : `: ${waiting}`}`;
}

function blockedReason(report: RolloutStatusReport): string {
  const condition = report.conditions.find((found) => found.type === "RolloutBlocked" && found.status === "True");
  return `${condition?.reason ?? "RolloutBlocked"}: ${condition?.message ?? ""}`;
}

/** A table of revisions: number, name (and hash with `-o wide`), images per role, and which is update/current; or the entries as JSON or YAML. */
export async function historyCommand(
  client: RolloutClient,
  target: RolloutTarget,
  output?: OutputFormat,
): Promise<CommandOutput> {
  const refreshed = await refresh(client);
  if (refreshed !== undefined) return fail(`${refreshed}\n`);
  const result = rolloutHistory(client.reader, target);
  if (!result.ok) return fail(`${result.message}\n`);
  const unreadable = result.unreadable.map((line) => `unreadable revision ${line}\n`).join("");
  const document = {
    namespace: target.namespace,
    name: target.name,
    revisions: result.entries,
    unreadable: result.unreadable,
  };
  if (output === "json") return succeed(`${JSON.stringify(document, null, 2)}\n`);
  if (output === "yaml") return succeed(stringify(document));
  const wide = output === "wide";
  const header = ["REVISION", "NAME", ...(wide ? ["HASH"] : []), "IMAGES", ""];
  const rows = [
    header,
    ...result.entries.map((entry) => [
      String(entry.revision),
      entry.name,
      ...(wide ? [entry.hash] : []),
      entry.images,
      entry.marks,
    ]),
  ];
  const widths = header.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? "").length)));
  const text = rows
    .map((row) =>
      row
        .map((cell, column) => (column < header.length - 1 ? cell.padEnd(widths[column] ?? 0) : cell))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
  return { exitCode: 0, stdout: `${text}\n`, stderr: unreadable };
}

/** Rolls back to the previous revision, or `toRevision`; the controller carries it out. */
export async function undoCommand(
  client: RolloutClient,
  target: RolloutTarget,
  toRevision: number | undefined,
): Promise<CommandOutput> {
  const refreshed = await refresh(client);
  if (refreshed !== undefined) return fail(`${refreshed}\n`);
  const result = await rollback(
    { reader: client.reader, writer: client.writer, refresh: () => client.reader.refresh() },
    { ...target, toRevision },
  );
  return result.ok ? succeed(`${result.message}\n`) : fail(`${result.message}\n`);
}

/** What `tandem rollout restart` asks: a restart of every pod, or the explicit recreate of one unit. */
export type RestartMode =
  | { readonly recreate: false }
  | { readonly recreate: true; readonly group: number; readonly role?: string | undefined };

/** Injected so tests are deterministic: the restart time and the recreate request's id. */
export interface RestartSources {
  readonly nowIso: () => string;
  readonly newId: () => string;
}

const REAL_SOURCES: RestartSources = {
  nowIso: () => rfc3339(Date.now()),
  newId: () => randomUUID(),
};

/**
 * `tandem rollout restart NAME`: a new revision with `tandem.dev/restartedAt`, rolled out by the
 * strategy; with `--recreate --group G [--role R]`, the request to rebuild that unit by
 * replacement. A request that does not fit names the flag at fault.
 */
export async function restartCommand(
  client: RolloutClient,
  target: RolloutTarget,
  mode: RestartMode,
  sources: RestartSources = REAL_SOURCES,
): Promise<CommandOutput> {
  const refreshed = await refresh(client);
  if (refreshed !== undefined) return fail(`${refreshed}\n`);
  const ports = { reader: client.reader, writer: client.writer, refresh: () => client.reader.refresh() };
  const result = mode.recreate
    ? await requestRecreate(ports, { ...target, id: sources.newId(), group: mode.group, role: mode.role })
    : await restart(ports, { ...target, restartedAt: sources.nowIso() });
  if (result.ok) return succeed(`${result.message}\n`);
  const flag =
    !mode.recreate || result.field === undefined
      ? ""
      : result.field === "group"
        ? `--group ${mode.group}: `
        : `--role ${mode.role ?? ""}: `;
  return fail(`tandem rollout restart: ${flag}${result.message}\n`);
}

export async function pauseCommand(
  client: RolloutClient,
  target: RolloutTarget,
  paused: boolean,
): Promise<CommandOutput> {
  const result = await setPaused(client.writer, target, paused);
  return result.ok ? succeed(`${result.message}\n`) : fail(`${result.message}\n`);
}

/** The restart's mode from its flags: `--recreate` and `--group` go together, `--role` only with them. */
function restartMode(flags: { recreate?: boolean; group?: string; role?: string }): RestartMode {
  if (flags.recreate !== true) {
    if (flags.group !== undefined)
      throw new FlagError(
        "--group",
        "needs --recreate: a restart without it restarts every group through a new revision",
      );
    if (flags.role !== undefined)
      throw new FlagError("--role", "needs --recreate --group G: it names the role to rebuild in that group");
    return { recreate: false };
  }
  if (flags.group === undefined)
    throw new FlagError("--recreate", "needs --group G: the ServingGroup (index) to rebuild");
  if (!/^(0|[1-9][0-9]{0,8})$/.test(flags.group))
    throw new FlagError("--group", `must be a ServingGroup index (0 or more), not ${quote(flags.group)}`);
  if (flags.role === "") throw new FlagError("--role", "must be a role name");
  return { recreate: true, group: Number(flags.group), role: flags.role };
}

/** Undefined when the snapshot was read; else why not. */
async function refresh(client: RolloutClient): Promise<string | undefined> {
  try {
    await client.reader.refresh();
    return undefined;
  } catch (error) {
    return `reading from the cluster failed: ${error instanceof Error ? error.message : String(error)}`;
  }
}

interface ClusterFlags {
  readonly namespace?: string;
  readonly kubeconfig?: string;
  readonly context?: string;
}

/** A client for `name` from the flags (kubeconfig, namespace as kubectl resolves them). */
function connect(name: string, flags: ClusterFlags): { client: RolloutClient; target: RolloutTarget } {
  const config = loadKubeConfig(flags.kubeconfig, flags.context);
  const namespace = flags.namespace ?? contextNamespace(config);
  const transport = new KubeTransport(clientNodeSend(config), { permissions: ROLLOUT_PERMISSIONS });
  return {
    client: { reader: new SnapshotReader(transport, namespace, name), writer: new KubeWriter(transport) },
    target: { namespace, name },
  };
}

function withClusterFlags(command: Command): Command {
  return command
    .argument("<name>", "ModelServing name")
    .option("-n, --namespace <namespace>", "namespace (default: the kubeconfig context's, else default)")
    .option("--kubeconfig <file>", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
    .option("--context <name>", "kubeconfig context to use (default: its current context)");
}

function outputOption(): Option {
  return new Option("-o, --output <format>", "json, yaml, or wide (the text with nothing left out)").choices(
    OUTPUT_FORMATS,
  );
}

/** Runs `work` with a client for `name`; a kubeconfig problem becomes exit code 1. */
async function run(
  name: string,
  flags: ClusterFlags,
  work: (client: RolloutClient, target: RolloutTarget) => Promise<CommandOutput>,
): Promise<void> {
  let connected: ReturnType<typeof connect>;
  try {
    connected = connect(name, flags);
  } catch (error) {
    emit(fail(`tandem rollout: ${error instanceof Error ? error.message : String(error)}\n`));
    return;
  }
  emit(await work(connected.client, connected.target));
}

export function registerRollout(program: Command): void {
  const rollout = program
    .command("rollout")
    .description("Inspect and steer the rollout of a ModelServing on a cluster.");
  withClusterFlags(
    rollout
      .command("status")
      .description(
        "Show the rollout state; with --watch, one line per change until it completes (exit 1 if blocked or timed out).",
      ),
  )
    .addOption(outputOption())
    .option("-w, --watch", "follow the rollout until it completes, is blocked, or --timeout passes")
    .option("--timeout <seconds>", "with --watch, give up after this long", "600")
    .action((name: string, flags: ClusterFlags & { watch?: boolean; timeout: string; output?: OutputFormat }) => {
      const timeoutSeconds = Number(flags.timeout);
      if (flags.timeout.trim() === "" || !Number.isFinite(timeoutSeconds) || timeoutSeconds < 0)
        throw new FlagError("--timeout", `must be a number of seconds, 0 or more, not ${quote(flags.timeout)}`);
      return run(name, flags, (client, target) =>
        statusCommand(client, target, { watch: flags.watch === true, timeoutSeconds, output: flags.output }),
      );
    });
  withClusterFlags(rollout.command("history").description("List the revisions with their images."))
    .addOption(outputOption())
    .action((name: string, flags: ClusterFlags & { output?: OutputFormat }) =>
      run(name, flags, (client, target) => historyCommand(client, target, flags.output)),
    );
  withClusterFlags(
    rollout
      .command("undo")
      .description("Roll back to the previous revision (or --to-revision); runtime fields are kept."),
  )
    .option("--to-revision <n>", "revision number to roll back to")
    .action((name: string, flags: ClusterFlags & { toRevision?: string }) => {
      const toRevision = flags.toRevision === undefined ? undefined : Number(flags.toRevision);
      if (flags.toRevision !== undefined && !/^[1-9][0-9]{0,8}$/.test(flags.toRevision))
        throw new FlagError("--to-revision", `must be a revision number (1 or more), not ${quote(flags.toRevision)}`);
      return run(name, flags, (client, target) => undoCommand(client, target, toRevision));
    });
  withClusterFlags(
    rollout
      .command("restart")
      .description(
        "Restart every pod through a new revision the strategy rolls out; with --recreate --group G [--role R], rebuild that unit by replacement, once.",
      ),
  )
    .option(
      "--recreate",
      "rebuild one unit by replacement (e.g. one an in-place update left on a bad image); needs --group",
    )
    .option("--group <index>", "with --recreate: the ServingGroup to rebuild")
    .option("--role <name>", "with --recreate: only this role's instances in the group")
    .action((name: string, flags: ClusterFlags & { recreate?: boolean; group?: string; role?: string }) => {
      const mode = restartMode(flags);
      return run(name, flags, (client, target) => restartCommand(client, target, mode));
    });
  withClusterFlags(rollout.command("pause").description("Pause the rollout: no new updates start.")).action(
    (name: string, flags: ClusterFlags) => run(name, flags, (client, target) => pauseCommand(client, target, true)),
  );
  withClusterFlags(rollout.command("resume").description("Resume a paused rollout.")).action(
    (name: string, flags: ClusterFlags) => run(name, flags, (client, target) => pauseCommand(client, target, false)),
  );
}
