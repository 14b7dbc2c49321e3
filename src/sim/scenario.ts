/**
 * Scenario files (DESIGN §6, contract): YAML → a validated `Scenario`, or problems naming the
 * field path and the reason (`steps[3].wait.for: must be one of ...`). Nothing runs unless the
 * whole file is valid. Unknown fields and unknown step kinds are errors.
 *
 * Each step is a mapping with exactly one key, its kind. ModelServings and ModelRoutes in `apply`
 * steps are validated as `tandem validate` would (a scenario cannot apply what the CRD would refuse);
 * merge patches can only be checked when they run. The totals the fields multiply into (nodes,
 * pods, router requests) are bounded up front (`limits.ts`).
 */
import { z } from "zod";
import { nestingProblem } from "../api/nesting.ts";
import { parseModelRoute, parseModelServing } from "../api/parse.ts";
import type { Problem } from "../api/problems.ts";
import { formatPath, problem, problemsFromZod } from "../api/problems.ts";
import { parseYamlDocument } from "../api/yaml.ts";
import { KINDS, isKind } from "../engine/ports.ts";
import { limitProblems } from "./limits.ts";
import type { LimitStep } from "./limits.ts";
import type { JsonObject } from "../engine/ports.ts";

/** Longest single wait or advance: one simulated week. */
export const MAX_STEP_SECONDS = 7 * 24 * 3600;
export const MAX_STEPS = 1000;
/** A wait without `timeoutSeconds` gives up after this long. */
export const DEFAULT_WAIT_TIMEOUT_SECONDS = 600;

const Seconds = z.number().min(0).max(MAX_STEP_SECONDS);
/** Times are kept in whole milliseconds, so the smallest positive duration is 0.001 s. */
const PositiveSeconds = z.number().min(0.001).max(MAX_STEP_SECONDS);
const Name = z.string().min(1).max(253);

const ClusterSchema = z.strictObject({
  nodes: z
    .array(
      z.strictObject({
        name: z
          .string()
          .regex(/^[a-z]([-a-z0-9]{0,40}[a-z0-9])?$/, "must be a lowercase DNS label of at most 42 characters"),
        count: z.int().min(1).max(10_000),
        gpus: z.int().min(0).max(1024),
      }),
    )
    .min(1)
    .optional(),
  timing: z
    .strictObject({
      scheduleSeconds: Seconds.optional(),
      pullSeconds: Seconds.optional(),
      startSeconds: Seconds.optional(),
      terminationSeconds: Seconds.optional(),
      nodeMonitorGraceSeconds: Seconds.optional(),
      podEvictionSeconds: Seconds.optional(),
    })
    .optional(),
  images: z
    .record(
      z.string().min(1),
      z.strictObject({
        crash: z.boolean().optional(),
        crashInPlace: z.boolean().optional(),
        pullSeconds: Seconds.optional(),
        startSeconds: Seconds.optional(),
        crashAfterSeconds: Seconds.optional(),
      }),
    )
    .optional(),
  router: z
    .strictObject({
      requestsPerSecond: z.number().min(0.001).max(100_000),
      requestSeconds: PositiveSeconds,
      replicas: z.int().min(1).optional(),
    })
    .optional(),
});
export type ScenarioCluster = z.infer<typeof ClusterSchema>;

const ObjectManifest = z.looseObject({
  apiVersion: z.string().min(1),
  kind: z.string().min(1),
  metadata: z.looseObject({ name: Name, namespace: z.string().min(1).optional() }),
});

const Count = z.int().min(0);
const RouterReplicaStep = z.strictObject({ replica: z.int().min(0) });

/** DESIGN §6 `expect`: what must hold when the step runs; at least one of its fields. */
const ExpectSchema = z
  .strictObject({
    /** Upper bounds on the legs so far, all roles together. */
    requests: z
      .strictObject({ failed: Count.optional(), cut: Count.optional(), incompatible: Count.optional() })
      .optional(),
    /** Exact counts so far, by role or `total`. */
    podsCreated: z.record(z.string().min(1), Count).optional(),
    podsDeleted: z.record(z.string().min(1), Count).optional(),
    /** A condition the stored status has now (of `name`, default the ModelServing applied last). */
    condition: z
      .strictObject({
        type: z.string().min(1),
        reason: z.string().min(1).optional(),
        status: z.enum(["True", "False", "Unknown"]).optional(),
        name: Name.optional(),
        namespace: z.string().min(1).optional(),
      })
      .optional(),
  })
  .refine(
    (value) => Object.keys(value).length > 0,
    "must name at least one of requests, podsCreated, podsDeleted, condition",
  );
export type Expectation = z.output<typeof ExpectSchema>;

/** The schema of each step kind's value. */
const STEP_SCHEMAS = {
  apply: ObjectManifest,
  wait: z.strictObject({
    for: z.enum(["Available", "RolloutComplete", "Seconds"]),
    timeoutSeconds: PositiveSeconds.default(DEFAULT_WAIT_TIMEOUT_SECONDS),
  }),
  snapshot: z.string().min(1).max(100),
  patch: z.strictObject({
    name: Name,
    namespace: z.string().min(1).optional(),
    merge: z.record(z.string(), z.unknown()),
  }),
  deletePods: z.strictObject({
    selector: z.string().min(1),
    count: z.int().min(1).max(10_000).default(1),
    groupPosition: z.int().min(0).optional(),
  }),
  failNode: z.strictObject({ name: Name }),
  recoverNode: z.strictObject({ name: Name }),
  restartController: z
    .strictObject({})
    .nullable()
    .transform(() => ({})),
  restart: z.strictObject({ name: Name, namespace: z.string().min(1).optional() }),
  recreate: z.strictObject({
    name: Name,
    namespace: z.string().min(1).optional(),
    group: z.int().min(0),
    role: z.string().min(1).optional(),
  }),
  rollback: z.strictObject({
    name: Name,
    namespace: z.string().min(1).optional(),
    toRevision: z.int().min(1).optional(),
  }),
  advance: z.strictObject({ seconds: PositiveSeconds }),
  crashRouter: RouterReplicaStep,
  restartRouter: RouterReplicaStep,
  expect: ExpectSchema,
} as const;

export type StepKind = keyof typeof STEP_SCHEMAS;
export const STEP_KINDS = Object.keys(STEP_SCHEMAS) as StepKind[];

/** A validated step: its kind and its value, defaults applied. */
export type Step = {
  [K in StepKind]: { readonly kind: K; readonly value: z.output<(typeof STEP_SCHEMAS)[K]> };
}[StepKind];

export interface Scenario {
  readonly name: string;
  readonly seed: number;
  readonly cluster: ScenarioCluster;
  readonly steps: readonly Step[];
}

const TopLevel = z.strictObject({
  name: z.string().min(1).max(200),
  seed: z.int().min(0).max(0xffffffff).default(1),
  cluster: ClusterSchema.default({}),
  steps: z.array(z.unknown()).min(1).max(MAX_STEPS),
});

export type ScenarioResult =
  { readonly ok: true; readonly scenario: Scenario } | { readonly ok: false; readonly problems: readonly Problem[] };

/** Parses scenario YAML text. YAML errors (duplicate keys, alias bombs included) are problems at `(root)`. */
export function parseScenarioText(text: string): ScenarioResult {
  const document = parseYamlDocument(text);
  if (!document.ok)
    return { ok: false, problems: document.errors.map((error) => problem([], `not valid YAML: ${error}`)) };
  return parseScenario(document.value);
}

/** Validates a scenario given as plain data (parsed YAML or JSON). */
export function parseScenario(input: unknown): ScenarioResult {
  const top = TopLevel.safeParse(input, { reportInput: true });
  if (!top.success) return { ok: false, problems: problemsFromZod(top.error.issues) };
  const problems: Problem[] = [];
  const steps: { step: Step; index: number }[] = [];
  const labels = new Set<string>();
  top.data.steps.forEach((raw, index) => {
    const step = parseStep(raw, ["steps", index], problems);
    if (step?.kind === "snapshot" && labels.has(step.value))
      problems.push(problem(["steps", index, "snapshot"], `label "${step.value}" is used by an earlier snapshot`));
    if (step?.kind === "snapshot") labels.add(step.value);
    if (step !== undefined) steps.push({ step, index });
  });
  const router = top.data.cluster.router;
  const replicas = router === undefined ? undefined : (router.replicas ?? 1);
  for (const { step, index } of steps)
    problems.push(...routerStepProblems(step, ["steps", index, step.kind], replicas));
  problems.push(
    ...limitProblems({ nodes: top.data.cluster.nodes, router: top.data.cluster.router, steps: steps.map(limitStep) }),
  );
  if (problems.length > 0) return { ok: false, problems };
  return {
    ok: true,
    scenario: {
      name: top.data.name,
      seed: top.data.seed,
      cluster: top.data.cluster,
      steps: steps.map(({ step }) => step),
    },
  };
}

/**
 * Steps that need the router: `crashRouter`/`restartRouter` name a replica that exists, `expect`
 * bounds requests only when there is traffic. `replicas` is undefined without `cluster.router`.
 */
function routerStepProblems(step: Step, path: readonly (string | number)[], replicas: number | undefined): Problem[] {
  if (step.kind === "expect" && step.value.requests !== undefined && replicas === undefined)
    return [problem([...path, "requests"], "needs cluster.router: without traffic there are no requests to count")];
  if (step.kind !== "crashRouter" && step.kind !== "restartRouter") return [];
  if (replicas === undefined) return [problem(path, "needs cluster.router: there is no router replica to act on")];
  if (step.value.replica >= replicas)
    return [
      problem(
        [...path, "replica"],
        `is ${step.value.replica}, but cluster.router.replicas is ${replicas}: replicas are numbered 0..${replicas - 1}`,
      ),
    ];
  return [];
}

/** What the limits read of a step. */
function limitStep({ step, index }: { readonly step: Step; readonly index: number }): LimitStep {
  const path = ["steps", index, step.kind];
  const maxSeconds =
    step.kind === "wait" ? step.value.timeoutSeconds : step.kind === "advance" ? step.value.seconds : 0;
  if (step.kind !== "apply" || step.value.kind !== "ModelServing") return { path, kind: step.kind, maxSeconds };
  const parsed = parseModelServing(step.value);
  return { path, kind: step.kind, maxSeconds, modelServing: parsed.ok ? parsed.value : undefined };
}

function parseStep(raw: unknown, path: readonly (string | number)[], problems: Problem[]): Step | undefined {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw) || Object.keys(raw).length !== 1) {
    problems.push(
      problem(path, `must be a mapping with exactly one key, the step kind (one of ${STEP_KINDS.join(", ")})`),
    );
    return undefined;
  }
  const [kind, value] = Object.entries(raw)[0] as [string, unknown];
  if (!isStepKind(kind)) {
    problems.push(problem([...path, kind], `is not a step kind; must be one of ${STEP_KINDS.join(", ")}`));
    return undefined;
  }
  // A step's value is an object as the API server would store it (or a patch of one): nested no deeper.
  const tooDeep = nestingProblem(value, [...path, kind]);
  if (tooDeep !== undefined) {
    problems.push(tooDeep);
    return undefined;
  }
  const parsed = STEP_SCHEMAS[kind].safeParse(value, { reportInput: true });
  if (!parsed.success) {
    for (const found of problemsFromZod(parsed.error.issues)) problems.push(prefixed([...path, kind], found));
    return undefined;
  }
  const step = { kind, value: parsed.data } as Step;
  if (step.kind === "apply")
    for (const found of applyProblems(step.value)) problems.push(prefixed([...path, kind], found));
  return step;
}

function isStepKind(kind: string): kind is StepKind {
  return Object.hasOwn(STEP_SCHEMAS, kind);
}

/** Kind and apiVersion must be one the simulator stores; a ModelServing or a ModelRoute must be valid. */
function applyProblems(value: z.output<typeof ObjectManifest>): Problem[] {
  if (!isKind(value.kind)) return [problem(["kind"], `must be one of ${Object.keys(KINDS).join(", ")}`)];
  if (value.apiVersion !== KINDS[value.kind].apiVersion)
    return [problem(["apiVersion"], `must be "${KINDS[value.kind].apiVersion}" for kind ${value.kind}`)];
  if (value.kind !== "ModelServing" && value.kind !== "ModelRoute") return [];
  const result = value.kind === "ModelServing" ? parseModelServing(value) : parseModelRoute(value);
  return result.ok ? [] : [...result.problems];
}

function prefixed(path: readonly (string | number)[], found: Problem): Problem {
  const prefix = formatPath(path);
  return {
    path:
      found.path === "(root)"
        ? prefix
        : found.path.startsWith("[")
          ? `${prefix}${found.path}`
          : `${prefix}.${found.path}`,
    reason: found.reason,
  };
}

/** The object of an `apply` step as JSON, namespace defaulted to "default" for namespaced kinds. */
export function applyObject(step: Extract<Step, { kind: "apply" }>): JsonObject {
  const object = structuredClone(step.value) as JsonObject & { kind: string; metadata: JsonObject };
  if (isKind(object.kind) && KINDS[object.kind].namespaced && object.metadata["namespace"] === undefined)
    object.metadata["namespace"] = "default";
  return object;
}
