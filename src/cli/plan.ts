/**
 * `tandem plan FILE [--from BEFORE] [--to AFTER] [--timing [SCENARIO]]`: the step table of a
 * rollout of any strategy, before it is applied. The table is not computed by a planner of its
 * own: the real controller plays the rollout in the simulator on an idealised cluster (room for
 * every pod, every unit starting in one fixed cycle, no faults, no jitter) and the table is the
 * sequence of unit starts it recorded (`src/sim/rollout-preview.ts`), so it can never disagree with
 * what the controller decides.
 *
 * FILE gives the runtime parameters (replicas, budgets, partitions, strategy, coordination); the
 * versioned fields come from BEFORE and AFTER (ModelServing manifests or `tandem revision` output;
 * AFTER defaults to FILE; without BEFORE every container image changes, so every unit moves).
 * `--timing` plays it again on a scenario's cluster (its nodes, timing, images and seed; without
 * SCENARIO the simulator's default timing) for an estimated makespan, beside the lower bound.
 * Exit 0 with the table of a rollout that completes, 1 when it would not complete or input is bad.
 */
import type { Command } from "commander";
import { nestingProblem } from "../api/nesting.ts";
import { parseModelServing } from "../api/parse.ts";
import type { ModelServing, ModelServingSpec, PodTemplateSpec } from "../api/schema.ts";
import { parseYamlDocuments } from "../api/yaml.ts";
import { applyRevision } from "../core/revision/apply.ts";
import type { RevisionData } from "../core/revision/format.ts";
import { RevisionDataSchema } from "../core/revision/format.ts";
import { revisionData } from "../core/revision/projection.ts";
import { sameRevisionData } from "../core/role-hash.ts";
import { rolloutBound } from "../sim/rollout-bound.ts";
import { IDEAL_START_SECONDS, idealCluster, playRollout } from "../sim/rollout-preview.ts";
import { parseScenarioText } from "../sim/scenario.ts";
import type { ScenarioCluster } from "../sim/scenario.ts";
import type { CommandOutput } from "./io.ts";
import { emit, fail } from "./io.ts";
import { loadModelServing } from "./manifests.ts";
import { renderPlan, renderTiming } from "./plan-table.ts";
import { readSource } from "./validate.ts";

export interface SourceText {
  readonly path: string;
  readonly text: string;
}

export interface PlanInputs {
  readonly file: SourceText;
  readonly from?: SourceText | undefined;
  readonly to?: SourceText | undefined;
  /** `--timing SCENARIO` (the scenario file), `--timing` alone (`"default"`), or no timing. */
  readonly timing?: SourceText | "default" | undefined;
}

/** The image every container has in the "before" of a plan without `--from`: one no spec names. */
export const PLAN_BEFORE_IMAGE = "tandem-plan.invalid/before:0";

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

/** FILE's ModelServing with the versioned fields of `data`, validated; problems name `label`. */
function withVersioned(ms: ModelServing, spec: ModelServingSpec, label: string): Loaded<ModelServing> {
  const parsed = parseModelServing({
    apiVersion: ms.apiVersion,
    kind: ms.kind,
    metadata: { name: ms.metadata.name },
    spec,
  });
  if (parsed.ok) return { ok: true, value: parsed.value };
  return { ok: false, lines: parsed.problems.map((found) => `${label}: ${found.path}: ${found.reason}`) };
}

/** `template` with every container's image set to `PLAN_BEFORE_IMAGE`. */
function beforeImages(template: PodTemplateSpec): PodTemplateSpec {
  const containers = template.spec.containers.map((container) => ({ ...container, image: PLAN_BEFORE_IMAGE }));
  return { ...template, spec: { ...template.spec, containers } };
}

/** The specs before and after the change, from the inputs; or the lines saying why not. */
function bothSides(ms: ModelServing, inputs: PlanInputs): Loaded<{ before: ModelServing; after: ModelServing }> {
  const to = inputs.to === undefined ? undefined : loadRevisionData(inputs.to.path, inputs.to.text);
  if (to !== undefined && !to.ok) return to;
  const from = inputs.from === undefined ? undefined : loadRevisionData(inputs.from.path, inputs.from.text);
  if (from !== undefined && !from.ok) return from;
  const after = withVersioned(
    ms,
    to === undefined ? ms.spec : applyRevision(ms.spec, to.value),
    inputs.to?.path ?? inputs.file.path,
  );
  if (!after.ok) return after;
  const beforeSpec =
    from === undefined
      ? {
          ...after.value.spec,
          template: {
            ...after.value.spec.template,
            roles: after.value.spec.template.roles.map((role) => ({
              ...role,
              entryTemplate: beforeImages(role.entryTemplate),
              ...(role.workerTemplate === undefined ? {} : { workerTemplate: beforeImages(role.workerTemplate) }),
            })),
          },
        }
      : applyRevision(ms.spec, from.value);
  const before = withVersioned(ms, beforeSpec, inputs.from?.path ?? `${inputs.file.path} (before)`);
  return before.ok ? { ok: true, value: { before: before.value, after: after.value } } : before;
}

/** The cluster `--timing` plays on, and its seed; or the lines saying why the scenario cannot give one. */
function timingCluster(
  timing: SourceText | "default",
  before: ModelServing,
  after: ModelServing,
): Loaded<{ cluster: ScenarioCluster; seed: number; label: string }> {
  if (timing === "default")
    return {
      ok: true,
      value: {
        cluster: { nodes: idealCluster(before, after).nodes },
        seed: 1,
        label: "the simulator's default timing",
      },
    };
  const parsed = parseScenarioText(timing.text);
  if (!parsed.ok)
    return {
      ok: false,
      lines: parsed.problems.map((found) => `--timing ${timing.path}: ${found.path}: ${found.reason}`),
    };
  const { cluster, seed } = parsed.scenario;
  return { ok: true, value: { cluster, seed, label: `the cluster of ${timing.path} (seed ${seed})` } };
}

/** The command's logic: exit 0 with the table, 1 when the rollout would not complete or input is bad. */
export async function planCommand(inputs: PlanInputs): Promise<CommandOutput> {
  const loaded = loadModelServing(inputs.file.path, inputs.file.text);
  if (!loaded.ok) return fail(lines(loaded.lines));
  const sides = bothSides(loaded.value, inputs);
  if (!sides.ok) return fail(lines(sides.lines));
  const { before, after } = sides.value;
  const timing = inputs.timing === undefined ? undefined : timingCluster(inputs.timing, before, after);
  if (timing !== undefined && !timing.ok) return fail(lines(timing.lines));
  if (sameRevisionData(revisionData(before), revisionData(after)))
    return {
      exitCode: 0,
      stdout: `ModelServing/${after.metadata.name}: no role changes: nothing to roll out.\n`,
      stderr: "",
    };
  const played = await playRollout(before, after);
  let stdout = renderPlan(after, played, rolloutBound(before, after, idealCluster(before, after)), IDEAL_START_SECONDS);
  if (timing?.ok === true) {
    const { cluster, seed, label } = timing.value;
    const estimate = await playRollout(before, after, { cluster, seed });
    stdout += renderTiming(label, estimate, rolloutBound(before, after, cluster));
  }
  return { exitCode: played.complete ? 0 : 1, stdout, stderr: "" };
}

function lines(items: readonly string[]): string {
  return items.map((line) => `${line}\n`).join("");
}

export function registerPlan(program: Command): void {
  program
    .command("plan")
    .description(
      "Print the step table of a rollout (any strategy) as the controller plays it in the simulator, without a cluster.",
    )
    .argument("<file>", "the ModelServing (runtime parameters: replicas, strategy, budgets, partitions, coordination)")
    .option(
      "--from <file>",
      "the spec before the change (ModelServing or `tandem revision` output); default: every container image changes",
    )
    .option("--to <file>", "the spec after the change; default: FILE")
    .option(
      "--timing [scenario]",
      "also estimate the makespan on a scenario's cluster (its nodes, timing, images, seed; default: the simulator's defaults) beside the lower bound",
    )
    .addHelpText(
      "after",
      "\nExit status: 0 with the table of a rollout that completes; 1 when it would not, or on bad input.",
    )
    .action(async (file: string, options: { from?: string; to?: string; timing?: string | true }) => {
      const scenario = typeof options.timing === "string" ? options.timing : undefined;
      const paths = [file, options.from, options.to, scenario];
      const read = await Promise.all(
        paths.map((path) => (path === undefined ? Promise.resolve(undefined) : readSource(path))),
      );
      const flags = ["FILE", "--from", "--to", "--timing"];
      const unreadable = read.flatMap((source, index) =>
        source !== undefined && typeof source.text !== "string"
          ? [`${flags[index] ?? ""} ${source.path}: cannot read: ${source.text.error}\n`]
          : [],
      );
      if (unreadable.length > 0) {
        emit(fail(unreadable.join("")));
        return;
      }
      const [main, from, to, timing] = read as [
        SourceText,
        SourceText | undefined,
        SourceText | undefined,
        SourceText | undefined,
      ];
      emit(await planCommand({ file: main, from, to, timing: options.timing === true ? "default" : timing }));
    });
}
