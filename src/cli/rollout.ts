/**
 * `tandem rollout status|history|undo|pause|resume NAME [-n NAMESPACE] [--kubeconfig FILE]`
 * against a real cluster, on the port-based commands of src/engine/rollout-commands.ts (the
 * simulator runs the same ones). Reads come from a fresh snapshot (SnapshotReader), writes go
 * through KubeWriter. Also works as `kubectl tandem rollout ...` with the `kubectl-tandem` shim.
 */
import type { Command } from "commander";
import { quote } from "../api/problems.ts";
import type { ClusterWriter } from "../engine/ports.ts";
import { rollback, rolloutHistory, rolloutStatus, setPaused } from "../engine/rollout-commands.ts";
import type { RolloutTarget } from "../engine/rollout-commands.ts";
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

export interface StatusOptions {
  /** Wait until the rollout completes (polling every `pollMs`), failing after `timeoutSeconds`. */
  readonly watch?: boolean;
  readonly timeoutSeconds?: number;
  readonly pollMs?: number;
}

/** Prints the rollout state; with `watch`, exits 0 once complete and 1 on timeout. */
export async function statusCommand(client: RolloutClient, target: RolloutTarget, options: StatusOptions = {}): Promise<CommandOutput> {
  const deadlineMs = Date.now() + (options.timeoutSeconds ?? 600) * 1_000;
  for (;;) {
    const refreshed = await refresh(client);
    if (refreshed !== undefined) return refreshed;
    const result = rolloutStatus(client.reader, target);
    if (!result.ok) return fail(`${result.message}\n`);
    const text = result.lines.map((line) => `${line}\n`).join("");
    if (options.watch !== true || result.complete) return succeed(text);
    if (Date.now() >= deadlineMs) return { exitCode: 1, stdout: text, stderr: `timed out waiting for the rollout of ${target.namespace}/${target.name}\n` };
    await new Promise((resolve) => setTimeout(resolve, options.pollMs ?? 1_000));
  }
}

/** A table of revisions: number, name, images per role, and which is update/current. */
export async function historyCommand(client: RolloutClient, target: RolloutTarget): Promise<CommandOutput> {
  const refreshed = await refresh(client);
  if (refreshed !== undefined) return refreshed;
  const result = rolloutHistory(client.reader, target);
  if (!result.ok) return fail(`${result.message}\n`);
  const rows = [["REVISION", "NAME", "IMAGES", ""], ...result.entries.map((entry) => [String(entry.revision), entry.name, entry.images, entry.marks])];
  const widths = [0, 1, 2].map((column) => Math.max(...rows.map((row) => (row[column] ?? "").length)));
  const text = rows.map((row) => row.map((cell, column) => (column < 3 ? cell.padEnd(widths[column] ?? 0) : cell)).join("  ").trimEnd()).join("\n");
  const unreadable = result.unreadable.map((line) => `unreadable revision ${line}\n`).join("");
  return { exitCode: 0, stdout: `${text}\n`, stderr: unreadable };
}

/** Rolls back to the previous revision, or `toRevision`; the controller carries it out. */
export async function undoCommand(client: RolloutClient, target: RolloutTarget, toRevision: number | undefined): Promise<CommandOutput> {
  const refreshed = await refresh(client);
  if (refreshed !== undefined) return refreshed;
  const result = await rollback({ reader: client.reader, writer: client.writer, refresh: () => client.reader.refresh() }, { ...target, toRevision });
  return result.ok ? succeed(`${result.message}\n`) : fail(`${result.message}\n`);
}

export async function pauseCommand(client: RolloutClient, target: RolloutTarget, paused: boolean): Promise<CommandOutput> {
  const result = await setPaused(client.writer, target, paused);
  return result.ok ? succeed(`${result.message}\n`) : fail(`${result.message}\n`);
}

/** Undefined when the snapshot was read; else the failure as the command's output. */
async function refresh(client: RolloutClient): Promise<CommandOutput | undefined> {
  try {
    await client.reader.refresh();
    return undefined;
  } catch (error) {
    return fail(`reading from the cluster failed: ${error instanceof Error ? error.message : String(error)}\n`);
  }
}

interface ClusterFlags {
  readonly namespace?: string;
  readonly kubeconfig?: string;
}

/** A client for `name` from the flags (kubeconfig, namespace as kubectl resolves them). */
function connect(name: string, flags: ClusterFlags): { client: RolloutClient; target: RolloutTarget } {
  const config = loadKubeConfig(flags.kubeconfig);
  const namespace = flags.namespace ?? contextNamespace(config);
  const transport = new KubeTransport(clientNodeSend(config), { permissions: ROLLOUT_PERMISSIONS });
  return { client: { reader: new SnapshotReader(transport, namespace, name), writer: new KubeWriter(transport) }, target: { namespace, name } };
}

function withClusterFlags(command: Command): Command {
  return command.argument("<name>", "ModelServing name").option("-n, --namespace <namespace>", "namespace (default: the kubeconfig context's, else default)").option("--kubeconfig <file>", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)");
}

/** Runs `work` with a client for `name`; a kubeconfig problem becomes exit code 1. */
async function run(name: string, flags: ClusterFlags, work: (client: RolloutClient, target: RolloutTarget) => Promise<CommandOutput>): Promise<void> {
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
  const rollout = program.command("rollout").description("Inspect and steer the rollout of a ModelServing on a cluster.");
  withClusterFlags(rollout.command("status").description("Show the rollout state; with --watch, wait until it completes."))
    .option("-w, --watch", "wait until the rollout completes")
    .option("--timeout <seconds>", "give up waiting after this long", "600")
    .action((name: string, flags: ClusterFlags & { watch?: boolean; timeout: string }) => {
      const timeoutSeconds = Number(flags.timeout);
      if (flags.timeout.trim() === "" || !Number.isFinite(timeoutSeconds) || timeoutSeconds < 0) throw new FlagError("--timeout", `must be a number of seconds, 0 or more, not ${quote(flags.timeout)}`);
      return run(name, flags, (client, target) => statusCommand(client, target, { watch: flags.watch === true, timeoutSeconds }));
    });
  withClusterFlags(rollout.command("history").description("List the revisions with their images."))
    .action((name: string, flags: ClusterFlags) => run(name, flags, historyCommand));
  withClusterFlags(rollout.command("undo").description("Roll back to the previous revision (or --to-revision); runtime fields are kept."))
    .option("--to-revision <n>", "revision number to roll back to")
    .action((name: string, flags: ClusterFlags & { toRevision?: string }) => {
      const toRevision = flags.toRevision === undefined ? undefined : Number(flags.toRevision);
      if (flags.toRevision !== undefined && !/^[1-9][0-9]{0,8}$/.test(flags.toRevision)) throw new FlagError("--to-revision", `must be a revision number (1 or more), not ${quote(flags.toRevision)}`);
      return run(name, flags, (client, target) => undoCommand(client, target, toRevision));
    });
  withClusterFlags(rollout.command("pause").description("Pause the rollout: no new updates start."))
    .action((name: string, flags: ClusterFlags) => run(name, flags, (client, target) => pauseCommand(client, target, true)));
  withClusterFlags(rollout.command("resume").description("Resume a paused rollout."))
    .action((name: string, flags: ClusterFlags) => run(name, flags, (client, target) => pauseCommand(client, target, false)));
}
