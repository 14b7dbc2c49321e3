/**
 * `tandem plan FILE [--from BEFORE] [--to AFTER]`: the step table of a coordinated rollout,
 * computed by the controller's own coordinator without running anything — the preview a reviewer
 * wants before applying. FILE gives the runtime parameters (replicas, budgets, partitions,
 * coordination); the roles that move are those whose spec differs between BEFORE and AFTER (both
 * ModelServing manifests, or `tandem revision` output; AFTER defaults to FILE, and without BEFORE
 * every role moves).
 */
import type { Command } from "commander";
import { resolveRoleBudget } from "../api/budgets.ts";
import { nestingProblem } from "../api/nesting.ts";
import type { ModelServing } from "../api/schema.ts";
import { parseYamlDocuments } from "../api/yaml.ts";
import type { PreviewRole, Preview } from "../core/coordination-preview.ts";
import { previewCoordinatedRollout } from "../core/coordination-preview.ts";
import type { RevisionData } from "../core/revision/format.ts";
import { RevisionDataSchema } from "../core/revision/format.ts";
import { revisionData } from "../core/revision/projection.ts";
import { sameRoleSpec } from "../core/role-hash.ts";
import type { CommandOutput } from "./io.ts";
import { emit, fail } from "./io.ts";
import { loadModelServing } from "./manifests.ts";
import { readSource } from "./validate.ts";

export interface PlanInputs {
  readonly file: { readonly path: string; readonly text: string };
  readonly from?: { readonly path: string; readonly text: string } | undefined;
  readonly to?: { readonly path: string; readonly text: string } | undefined;
}

type Loaded<T> = { ok: true; value: T } | { ok: false; lines: readonly string[] };

/**
 * Revision data from a ModelServing manifest or from `tandem revision` JSON output (its first
 * document; YAML errors are reported by `loadModelServing`).
 */
function loadRevisionData(path: string, text: string): Loaded<RevisionData> {
  const first = parseYamlDocuments(text)[0];
  const candidate = first?.ok === true ? (first.value as { data?: unknown } | null | undefined)?.data : undefined;
  const tooDeep = nestingProblem({ data: candidate }); // counted from the document's root
  if (tooDeep !== undefined) return { ok: false, lines: [`${path}: ${tooDeep.path}: ${tooDeep.reason}`] };
  const data = RevisionDataSchema.safeParse(candidate);
  if (data.success) return { ok: true, value: data.data };
  const loaded = loadModelServing(path, text);
  return loaded.ok ? { ok: true, value: revisionData(loaded.value) } : loaded;
}

/** The command's logic: exit 0 with the table, 1 when the rollout would block or input is bad. */
export function planCommand(inputs: PlanInputs): CommandOutput {
  const loaded = loadModelServing(inputs.file.path, inputs.file.text);
  if (!loaded.ok) return fail(lines(loaded.lines));
  const ms = loaded.value;
  const coordination = ms.spec.rolloutStrategy.coordination;
  if (coordination === undefined)
    return fail(
      `${inputs.file.path}: ModelServing/${ms.metadata.name}: spec.rolloutStrategy.coordination is not set; tandem plan previews coordinated rollouts\n`,
    );
  const after =
    inputs.to === undefined
      ? { ok: true as const, value: revisionData(ms) }
      : loadRevisionData(inputs.to.path, inputs.to.text);
  const before = inputs.from === undefined ? undefined : loadRevisionData(inputs.from.path, inputs.from.text);
  if (!after.ok) return fail(lines(after.lines));
  if (before !== undefined && !before.ok) return fail(lines(before.lines));
  const listed = coordination.roles ?? [];
  const participants = ms.spec.template.roles.filter((role) => listed.length === 0 || listed.includes(role.name));
  const moving = participants.filter(
    (role) => before === undefined || !sameRoleSpec(before.value, after.value, role.name),
  );
  const roles = moving.map((role): PreviewRole => {
    const budget = resolveRoleBudget(role);
    const protectedCount = Math.min(budget.partition, role.replicas);
    return {
      role: role.name,
      eligible: role.replicas - protectedCount,
      protected: protectedCount,
      maxUnavailable: budget.maxUnavailable,
      maxSurge: budget.maxSurge,
    };
  });
  // A dependency that does not change already has all its new capacity: its edge gates nothing.
  const names = new Set(roles.map((role) => role.role));
  const dependsOn = new Map(
    (coordination.dependencies ?? [])
      .filter((dependency) => names.has(dependency.role))
      .map((dependency) => [dependency.role, dependency.dependsOn.filter((target) => names.has(target))]),
  );
  const preview = previewCoordinatedRollout(roles, {
    maxSkewPercent: Number.parseInt(coordination.maxSkew, 10),
    dependsOn,
  });
  const table = renderPreview(ms, coordination.maxSkew, roles, dependsOn, preview);
  return { exitCode: preview.blocked === undefined ? 0 : 1, stdout: table, stderr: "" };
}

function lines(items: readonly string[]): string {
  return items.map((line) => `${line}\n`).join("");
}

/** A fixed-width table: one row per step, a `new`/`old` column pair per moving role. */
export function renderPreview(
  ms: ModelServing,
  maxSkew: string,
  roles: readonly PreviewRole[],
  dependsOn: ReadonlyMap<string, readonly string[]>,
  preview: Preview,
): string {
  const out: string[] = [
    `ModelServing/${ms.metadata.name}: coordinated rollout preview, per ServingGroup (${ms.spec.replicas} group(s)), maxSkew ${maxSkew}`,
  ];
  if (roles.length === 0) return `${out[0] ?? ""}\nNo participating role changes: nothing to roll out.\n`;
  out.push(
    `moving roles: ${roles.map((role) => `${role.role} (${role.eligible} eligible${role.protected > 0 ? `, ${role.protected} below partition` : ""})`).join(", ")}`,
  );
  const edges = [...dependsOn].flatMap(([role, targets]) => targets.map((target) => `${role} → ${target}`));
  if (edges.length > 0) out.push(`dependencies: ${edges.join(", ")}`);
  const width = Math.max(...roles.map((role) => Math.max(role.role.length, 9)));
  const cell = (text: string) => text.padStart(width);
  out.push(`${"step".padEnd(6)}${roles.map((role) => cell(role.role)).join("  ")}`);
  out.push(`${"".padEnd(6)}${roles.map(() => cell("new / old")).join("  ")}`);
  preview.steps.forEach((step, index) => {
    out.push(
      `${String(index + 1).padEnd(6)}${roles.map((role) => cell(`${step.started[role.role] ?? 0} / ${step.old[role.role] ?? 0}`)).join("  ")}`,
    );
  });
  out.push(
    preview.blocked === undefined ? `complete after ${preview.steps.length} step(s)` : `blocked: ${preview.blocked}`,
  );
  return `${out.join("\n")}\n`;
}

export function registerPlan(program: Command): void {
  program
    .command("plan")
    .description("Print the step table of a coordinated rollout without running it.")
    .argument("<file>", "the ModelServing (runtime parameters and coordination)")
    .option(
      "--from <file>",
      "the spec before the change (ModelServing or `tandem revision` output); default: every role changes",
    )
    .option("--to <file>", "the spec after the change; default: FILE")
    .action(async (file: string, options: { from?: string; to?: string }) => {
      const paths = [file, options.from, options.to];
      const read = await Promise.all(
        paths.map((path) => (path === undefined ? Promise.resolve(undefined) : readSource(path))),
      );
      const unreadable = read.flatMap((source) =>
        source !== undefined && typeof source.text !== "string"
          ? [`${source.path}: cannot read: ${source.text.error}\n`]
          : [],
      );
      if (unreadable.length > 0) {
        emit(fail(unreadable.join("")));
        return;
      }
      const [main, from, to] = read as [
        { path: string; text: string },
        { path: string; text: string } | undefined,
        { path: string; text: string } | undefined,
      ];
      emit(planCommand({ file: main, from, to }));
    });
}
