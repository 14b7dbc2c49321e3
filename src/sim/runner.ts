/**
 * Runs a scenario (DESIGN §6) in virtual time: a `SimCluster` from the scenario's `cluster`, the
 * real engine (`Controller`) with the core's `plan`, the simulated router when `cluster.router` is
 * set, and the invariant checker after every instant. Returns the report.
 *
 * Step semantics:
 * - `apply` creates the object or updates it (with its resourceVersion) through a client named
 *   "user", so `metrics.apiWrites` counts the controller's writes only; namespace "default".
 * - `patch` sends the JSON merge patch to the named ModelServing (namespace "default" unless
 *   given) — refused, as the CRD's validation would, when the result is not a valid ModelServing.
 * - `wait` runs until its target holds, checked after every timer firing, or `timeoutSeconds`:
 *   `Available` and `RolloutComplete` are judged for **every** ModelServing the scenario has
 *   applied that still exists (predicates in `src/core/invariants.ts`); `Seconds` just advances.
 *   A wait that times out fails with the pending reasons.
 * - `deletePods`, `failNode`, `recoverNode` inject faults (they open a fault window for the budget
 *   invariants, see `checker.ts`); `deletePods` fails when nothing matched. Its `groupPosition`
 *   keeps only pods of the ServingGroup at that position of their ModelServing, read from its
 *   `status.ordinals` (`placePod`): after a succession the group there may carry another ordinal.
 * - `restartController` stops the controller and its informer and starts new ones (no memory).
 * - `rollback` runs `rollback()` from `src/engine/rollout-commands.ts` as user "user"; `restart`
 *   runs its `restart()` (stamped with the virtual time) and `recreate` its `requestRecreate()`
 *   (ids `recreate-1`, `recreate-2`, ...), as `tandem rollout restart [--recreate]` would.
 * - `snapshot` records every pod under its label.
 * - `crashRouter` / `restartRouter` crash a router replica (its requests in flight are cut, its
 *   Lease stays but is no longer renewed) and start it again (empty cache; it takes over its Lease).
 * - `expect` compares counts so far and the stored status now (DESIGN §6); every difference is
 *   named in the failed step's message.
 *
 * **The run stops at the first failed step** (later steps would start from an unknown state); the
 * report lists the steps that ran. Total simulated time is bounded by `MAX_SIMULATED_SECONDS`.
 */
import type { Pod } from "../api/kube.ts";
import type { Clock, JsonObject, KubeObject, ObjectRef } from "../engine/ports.ts";
import { isApiError } from "../engine/ports.ts";
import { Controller } from "../engine/controller.ts";
import { requestRecreate, restart, rollback } from "../engine/rollout-commands.ts";
import type { PlanFunction } from "../engine/reconciler.ts";
import { parseModelServing } from "../api/parse.ts";
import { LABEL_MODEL_SERVING } from "../api/wellknown.ts";
import { placePod } from "../core/invariants.ts";
import { InvariantChecker } from "./checker.ts";
import { SimCluster } from "./cluster.ts";
import type { SimInformer } from "./informer.ts";
import { mergePatch } from "./json.ts";
import {
  byRole,
  canonical,
  controllerEventRecords,
  controllerWrites,
  eventRecords,
  eventsByRole,
  podRecords,
  requestsDuring,
} from "./report.ts";
import type { Metrics, PodRecord, Report, StepRecord, StepRequests } from "./report.ts";
import type { Prng } from "./prng.ts";
import { attachRouter } from "./router.ts";
import type { SimRouter } from "./router.ts";
import { MAX_SIMULATED_SECONDS, podsOf, podsReason } from "./limits.ts";
import { applyObject } from "./scenario.ts";
import type { Expectation, Scenario, Step } from "./scenario.ts";
import { rfc3339 } from "../core/drain.ts";
import { compareStrings } from "../core/maps.ts";

export interface RunOptions {
  /** Overrides the scenario's seed. */
  readonly seed?: number | undefined;
  /** Check `podsMatchTheirRevision` (costs a pod build per new pod version). Default true. */
  readonly podSpecs?: boolean;
  /** The controller's planning function; the core's `plan` by default (tests inject faulty ones). */
  readonly plan?: PlanFunction;
  /** Watches the run as it goes (the demo renders from it); it must not change the cluster. */
  readonly observer?: RunObserver;
  /**
   * The controller's `minReconcileIntervalMs` (see ControllerOptions): coalesces the events of a
   * key over this much virtual time into one pass. Default 0, the production behaviour; reports
   * differ from the default's when set.
   */
  readonly minReconcileIntervalMs?: number;
  /** Faults for the controller's API calls and watches while the first steps run (the fault fuzz). */
  readonly chaos?: Chaos;
  /**
   * Jitter added to pull and start times, in percent (`SimClusterOptions.jitterPercent`, default
   * 10). The rollout bench and `tandem plan` set 0: every unit starts in exactly the scenario's
   * timing, so a wave of starts ends at one instant and a rollout's lower bound is exact.
   */
  readonly jitterPercent?: number;
}

/**
 * While the steps before `untilStep` run, each API request of the controller fails with
 * `percent` % chance — a Conflict, a server error or a timeout (after the write was applied, half
 * of the time), as many of each — and every watch drops (all clients relist) with `percent` %
 * chance at each step. From step `untilStep` on nothing fails, so the steps from there check that
 * the rollout finishes after the faults stop. Draws come from the "chaos" streams only.
 */
export interface Chaos {
  readonly percent: number;
  readonly untilStep: number;
}

type StepOutcome = { readonly ok: boolean; readonly message: string };

/** The pod event count and the cumulative leg counts by role (with a router) at a point of the run. */
interface ActivityMark {
  readonly events: number;
  readonly requests: Readonly<Record<string, StepRequests>> | undefined;
}

/**
 * Hooks for watching a run without changing it: the cluster and router once built, and each step
 * as it starts and ends. A hook may await (the demo paces itself in wall time); the simulation
 * waits for it, so virtual time and the report are unaffected. One observer acts on the cluster:
 * `demo --serve`'s, which is the run's router (its Lease and drain confirmations), as a component
 * of the cluster would.
 */
export interface RunObserver {
  attach?(cluster: SimCluster, router: SimRouter | undefined): void;
  stepStarted?(index: number, step: Step): Promise<void> | void;
  stepEnded?(record: StepRecord): Promise<void> | void;
  /** At the end of every instant (when the invariant checker runs), with the cluster as it stands. */
  instantEnded?(cluster: SimCluster): void;
}

/** Runs `scenario` to its end or its first failed step; the report is a pure function of the inputs. */
export async function runScenario(scenario: Scenario, options: RunOptions = {}): Promise<Report> {
  const run = new ScenarioRun(scenario, options);
  try {
    return await run.execute();
  } finally {
    await run.close();
  }
}

class ScenarioRun {
  readonly #scenario: Scenario;
  readonly #seed: number;
  readonly #cluster: SimCluster;
  readonly #checker: InvariantChecker;
  readonly #router: SimRouter | undefined;
  readonly #plan: PlanFunction | undefined;
  readonly #observer: RunObserver | undefined;
  readonly #minReconcileIntervalMs: number;
  readonly #chaos: { readonly options: Chaos; readonly watchDrops: Prng } | undefined;
  readonly #applied: { namespace: string; name: string }[] = [];
  readonly #snapshots: Record<string, PodRecord[]> = {};
  #controller: { controller: Controller; informer: SimInformer; unhook: () => void } | undefined;
  #controllerStarts = 0;
  /** Recreate steps so far: their request ids are `recreate-<n>`. */
  #recreateRequests = 0;
  /**
   * The controller's Clock: the virtual clock on the epoch the simulator renders its timestamps
   * in (`VirtualClock.onEpoch`). The core compares `nowMs` with timestamps others wrote (the
   * kubelet's condition times, the API server's), so both must count from the same epoch; the bare
   * `VirtualClock.nowMs()` counts from virtual 0 (1970 when rendered by the core).
   */
  readonly #controllerClock: Clock;
  #lastPending: { version: string; reasons: string[] } | undefined;

  constructor(scenario: Scenario, options: RunOptions) {
    this.#scenario = scenario;
    this.#seed = options.seed ?? scenario.seed;
    this.#plan = options.plan;
    this.#minReconcileIntervalMs = options.minReconcileIntervalMs ?? 0;
    const { nodes, timing, images, router } = scenario.cluster;
    this.#cluster = new SimCluster({
      seed: this.#seed,
      ...(nodes === undefined ? {} : { nodes }),
      ...(timing === undefined ? {} : { timing }),
      ...(images === undefined ? {} : { images }),
      ...(options.jitterPercent === undefined ? {} : { jitterPercent: options.jitterPercent }),
    });
    this.#controllerClock = this.#cluster.clock.onEpoch();
    this.#checker = new InvariantChecker(this.#cluster.server, {
      podSpecs: options.podSpecs ?? true,
      faultActive: () => this.#crashedNodeHoldsPods(),
      epochNowMs: () => this.#controllerClock.nowMs(),
      nowMs: () => this.#cluster.clock.nowMs(),
    });
    this.#startController();
    this.#chaos =
      options.chaos === undefined
        ? undefined
        : { options: options.chaos, watchDrops: this.#cluster.rng("chaos-watch") };
    if (options.chaos !== undefined) this.#startChaos(options.chaos.percent);
    this.#router = router === undefined ? undefined : attachRouter(this.#cluster, router);
    this.#observer = options.observer;
    this.#observer?.attach?.(this.#cluster, this.#router);
  }

  async execute(): Promise<Report> {
    const steps: StepRecord[] = [];
    for (const [index, step] of this.#scenario.steps.entries()) {
      const startedAt = this.#seconds();
      const before = this.#activityMark();
      this.#chaosAt(index);
      await this.#observer?.stepStarted?.(index, step);
      const outcome = await this.#runStep(step);
      // Finish the instant the step acted in (timers due now included), checking what it did.
      await this.#advance(0);
      const record = {
        index,
        kind: step.kind,
        ok: outcome.ok,
        startedAt,
        endedAt: this.#seconds(),
        message: outcome.message,
        ...this.#activitySince(before),
      };
      steps.push(record);
      await this.#observer?.stepEnded?.(record);
      if (!outcome.ok) break;
    }
    return this.#report(steps);
  }

  /** Where the pod events and the leg counters stand, for `#activitySince`. */
  #activityMark(): ActivityMark {
    return { events: this.#cluster.podEvents.count(), requests: this.#router?.metrics().byRole };
  }

  /** What happened since `mark`, by role: pods created and deleted, and legs ended (with a router). */
  #activitySince(mark: ActivityMark): Pick<StepRecord, "podsCreated" | "podsDeleted" | "requests"> {
    const events = this.#cluster.events(mark.events);
    const pods = {
      podsCreated: eventsByRole(events, "PodCreated").byRole,
      podsDeleted: eventsByRole(events, "PodDeleted").byRole,
    };
    const requests = this.#router?.metrics().byRole;
    return requests === undefined ? pods : { ...pods, requests: requestsDuring(mark.requests ?? {}, requests) };
  }

  async close(): Promise<void> {
    this.#router?.stop();
    await this.#stopController();
    this.#cluster.stop();
  }

  // -------------------------------------------------------------------------------------------
  // Chaos (RunOptions.chaos)

  /** Fails `percent` % of the controller's requests: as many Conflicts, server errors and timeouts. */
  #startChaos(percent: number): void {
    const { faults } = this.#cluster.server;
    const share = percent / 4;
    for (const [error, applied] of [
      ["Conflict", false],
      ["ServerError", false],
      ["Timeout", false],
      ["Timeout", true],
    ] as const) {
      // In hundredths of a percent: the four rules add up to `percent` for any whole percent.
      faults.failWithChance({ client: "controller" }, Math.round(share * 100), 10_000, {
        error,
        applied,
        stream: `chaos-${error}-${String(applied)}`,
      });
    }
  }

  /** Before step `index`: drops every watch now and then, or ends the chaos at `untilStep`. */
  #chaosAt(index: number): void {
    if (this.#chaos === undefined) return;
    const { options, watchDrops } = this.#chaos;
    if (index === options.untilStep) this.#cluster.server.faults.clear();
    else if (index < options.untilStep && watchDrops.chance(Math.round(options.percent * 100), 10_000))
      this.#cluster.server.dropWatches();
  }

  // -------------------------------------------------------------------------------------------
  // Steps

  async #runStep(step: Step): Promise<StepOutcome> {
    const budgetMs = MAX_SIMULATED_SECONDS * 1000 - this.#cluster.clock.nowMs();
    try {
      switch (step.kind) {
        case "apply":
          return await this.#apply(applyObject(step));
        case "wait":
          return await this.#wait(step.value.for, Math.min(Math.round(step.value.timeoutSeconds * 1000), budgetMs));
        case "snapshot":
          this.#snapshots[step.value] = this.#pods();
          return {
            ok: true,
            message: `recorded ${this.#snapshots[step.value]?.length ?? 0} pod(s) as "${step.value}"`,
          };
        case "patch":
          return await this.#patch(step.value);
        case "deletePods":
          return await this.#deletePods(step.value.selector, step.value.count, step.value.groupPosition);
        case "failNode":
        case "recoverNode":
          return this.#node(step.kind, step.value.name);
        case "restartController":
          await this.#stopController();
          this.#startController();
          return {
            ok: true,
            message: `controller restarted (instance ${this.#controllerStarts}); its queue, cache and expectations start empty`,
          };
        case "rollback":
          return await this.#rollback(step.value);
        case "restart":
          return await this.#restart(step.value);
        case "recreate":
          return await this.#recreate(step.value);
        case "advance":
          await this.#advance(Math.min(Math.round(step.value.seconds * 1000), budgetMs));
          return { ok: true, message: `advanced ${step.value.seconds}s` };
        case "crashRouter":
        case "restartRouter":
          return this.#routerReplica(step.kind, step.value.replica);
        case "expect":
          return this.#expect(step.value);
      }
    } catch (error) {
      return { ok: false, message: `${step.kind} failed: ${error instanceof Error ? error.message : String(error)}` };
    }
  }

  async #apply(object: JsonObject): Promise<StepOutcome> {
    const manifest = object as unknown as KubeObject;
    const user = this.#cluster.writer("user");
    const ref: ObjectRef = {
      kind: manifest.kind,
      name: manifest.metadata.name,
      ...(manifest.metadata.namespace === undefined ? {} : { namespace: manifest.metadata.namespace }),
    };
    const label = `${manifest.kind} ${ref.namespace === undefined ? "" : `${ref.namespace}/`}${ref.name}`;
    if (
      manifest.kind === "ModelServing" &&
      !this.#applied.some((entry) => entry.namespace === ref.namespace && entry.name === ref.name)
    ) {
      this.#applied.push({ namespace: ref.namespace ?? "default", name: ref.name });
    }
    const existing = this.#stored(ref);
    if (existing === undefined) {
      await user.create(manifest);
      return { ok: true, message: `created ${label}` };
    }
    await user.update({
      ...manifest,
      metadata: { ...manifest.metadata, resourceVersion: existing.metadata.resourceVersion ?? "" },
    });
    return { ok: true, message: `updated ${label}` };
  }

  async #patch(value: Extract<Step, { kind: "patch" }>["value"]): Promise<StepOutcome> {
    const ref = { kind: "ModelServing", namespace: value.namespace ?? "default", name: value.name } as const;
    const existing = this.#stored(ref);
    if (existing === undefined) return { ok: false, message: `ModelServing ${ref.namespace}/${ref.name} not found` };
    const merged = mergePatch(existing as unknown as JsonObject, value.merge as JsonObject);
    const parsed = parseModelServing(merged);
    if (!parsed.ok)
      return {
        ok: false,
        message: `patch refused, the result is invalid: ${parsed.problems.map((found) => `${found.path}: ${found.reason}`).join("; ")}`,
      };
    const tooMany = podsReason(podsOf(parsed.value), podsOf(parsed.value) + this.#podsOfOthers(ref));
    if (tooMany !== undefined) return { ok: false, message: `patch refused: the result ${tooMany}` };
    const written = await this.#cluster.writer("user").patch(ref, value.merge as JsonObject);
    return {
      ok: true,
      message: `patched ModelServing ${ref.namespace}/${ref.name} (generation ${written.metadata.generation ?? "?"})`,
    };
  }

  async #deletePods(selector: string, count: number, groupPosition: number | undefined): Promise<StepOutcome> {
    // The window opens before the deletions: they are not the controller's (`drainHonoured`).
    this.#checker.faultInjected();
    const before = this.#cluster.server.list("Pod", { labelSelector: selector }).items as unknown as Pod[];
    const among = groupPosition === undefined ? undefined : (pod: KubeObject) => this.#atGroup(pod, groupPosition);
    const names = await this.#cluster.deletePods(selector, count, among);
    this.#checker.faultInjected(before.filter((pod) => names.includes(pod.metadata.name)));
    const matched = `"${selector}"${groupPosition === undefined ? "" : ` in group position ${groupPosition}`}`;
    if (names.length === 0) return { ok: false, message: `no pod matches ${matched} (not already being deleted)` };
    return { ok: true, message: `deleted ${names.join(", ")}` };
  }

  /** `pod` belongs to the ServingGroup at `position` of its ModelServing (`placePod`: by `status.ordinals`). */
  #atGroup(pod: KubeObject, position: number): boolean {
    const name = pod.metadata.labels?.[LABEL_MODEL_SERVING];
    const namespace = pod.metadata.namespace ?? "default";
    const stored =
      name === undefined ? undefined : this.#cluster.server.peek({ kind: "ModelServing", namespace, name });
    const parsed = stored === undefined ? undefined : parseModelServing(stored);
    if (parsed?.ok !== true) return false;
    return placePod(parsed.value, pod as unknown as Pod)?.id.group === position;
  }

  #node(kind: "failNode" | "recoverNode", name: string): StepOutcome {
    if (this.#stored({ kind: "Node", name }) === undefined) {
      const nodes = this.#cluster.server.stored("Node").map((node) => node.metadata.name);
      return { ok: false, message: `no node ${name}; nodes are ${nodes.join(", ")}` };
    }
    const hit =
      kind === "failNode"
        ? (this.#cluster.server.stored("Pod") as unknown as Pod[]).filter((pod) => pod.spec.nodeName === name)
        : [];
    if (kind === "failNode") this.#cluster.failNode(name);
    else this.#cluster.recoverNode(name);
    this.#checker.faultInjected(hit);
    return { ok: true, message: kind === "failNode" ? `node ${name} crashed` : `node ${name} recovered` };
  }

  /** Parsing has checked that the router and the replica exist. */
  #routerReplica(kind: "crashRouter" | "restartRouter", replica: number): StepOutcome {
    const router = this.#router;
    if (router === undefined) return { ok: false, message: "no cluster.router" };
    const wasDown = router.replicaDown(replica);
    const refused = kind === "crashRouter" ? router.crashReplica(replica) : router.restartReplica(replica);
    if (refused !== undefined) return { ok: false, message: refused };
    const id = router.replicaIds()[replica] ?? "";
    if (kind === "crashRouter")
      return {
        ok: true,
        message: `router replica ${id} crashed: its requests in flight are cut, its Lease is no longer renewed`,
      };
    if (wasDown) return { ok: true, message: `router replica ${id} restarted with an empty cache` };
    return {
      ok: true,
      message: `router replica ${id} restarting cleanly: no new requests, those in flight finish, its Lease is deleted, then it starts with an empty cache`,
    };
  }

  /** DESIGN §6 `expect`: every difference named, or what held. */
  #expect(expectation: Expectation): StepOutcome {
    const differences: string[] = [];
    const requests = this.#router?.metrics();
    for (const [key, bound] of Object.entries(expectation.requests ?? {})) {
      const actual = requests?.[key as "failed" | "cut" | "incompatible"] ?? 0;
      if (actual > bound) differences.push(`requests.${key} is ${actual}, expected at most ${bound}`);
    }
    const events = eventRecords(this.#cluster.events());
    for (const field of ["podsCreated", "podsDeleted"] as const) {
      const counts = eventsByRole(events, field === "podsCreated" ? "PodCreated" : "PodDeleted");
      for (const [role, expected] of Object.entries(expectation[field] ?? {})) {
        const actual = role === "total" ? counts.total : (counts.byRole[role] ?? 0);
        if (actual !== expected) differences.push(`${field}.${role} is ${actual}, expected ${expected}`);
      }
    }
    if (expectation.condition !== undefined) differences.push(...this.#conditionDifferences(expectation.condition));
    if (differences.length > 0) return { ok: false, message: `expect failed: ${differences.join("; ")}` };
    return { ok: true, message: `as expected: ${Object.keys(expectation).join(", ")}` };
  }

  #conditionDifferences(expected: NonNullable<Expectation["condition"]>): string[] {
    const primary = this.#applied.at(-1);
    const ref =
      expected.name === undefined ? primary : { namespace: expected.namespace ?? "default", name: expected.name };
    if (ref === undefined) return ["condition: no ModelServing has been applied"];
    const label = `ModelServing ${ref.namespace}/${ref.name}`;
    const stored = this.#stored({ kind: "ModelServing", ...ref });
    if (stored === undefined) return [`condition: ${label} does not exist`];
    const conditions =
      (stored.status as { conditions?: { type?: string; status?: string; reason?: string }[] } | undefined)
        ?.conditions ?? [];
    const found = conditions.find((condition) => condition.type === expected.type);
    if (found === undefined) return [`condition ${expected.type}: not in the status of ${label}`];
    const differences: string[] = [];
    if (expected.status !== undefined && found.status !== expected.status)
      differences.push(
        `condition ${expected.type} has status ${found.status ?? "(none)"}, expected ${expected.status}`,
      );
    if (expected.reason !== undefined && found.reason !== expected.reason)
      differences.push(
        `condition ${expected.type} has reason ${found.reason ?? "(none)"}, expected ${expected.reason}`,
      );
    return differences;
  }

  async #rollback(value: Extract<Step, { kind: "rollback" }>["value"]): Promise<StepOutcome> {
    const target = { namespace: value.namespace ?? "default", name: value.name, toRevision: value.toRevision };
    const result = await rollback(this.#userPorts(), target);
    return { ok: result.ok, message: result.message };
  }

  /** `tandem rollout restart NAME`, stamped with the virtual time. */
  async #restart(value: Extract<Step, { kind: "restart" }>["value"]): Promise<StepOutcome> {
    const restartedAt = rfc3339(this.#controllerClock.nowMs());
    const result = await restart(this.#userPorts(), {
      namespace: value.namespace ?? "default",
      name: value.name,
      restartedAt,
    });
    return { ok: result.ok, message: result.message };
  }

  /** `tandem rollout restart NAME --recreate --group G [--role R]`, with ids `recreate-1`, `recreate-2`, ... */
  async #recreate(value: Extract<Step, { kind: "recreate" }>["value"]): Promise<StepOutcome> {
    this.#recreateRequests += 1;
    const request = { ...value, namespace: value.namespace ?? "default", id: `recreate-${this.#recreateRequests}` };
    const result = await requestRecreate(this.#userPorts(), request);
    return {
      ok: result.ok,
      message: result.ok || result.field === undefined ? result.message : `recreate.${result.field}: ${result.message}`,
    };
  }

  /** The rollout commands' ports as user "user", reading the server directly. */
  #userPorts() {
    const server = this.#cluster.server;
    const reader = {
      get: <K extends KubeObject["kind"]>(kind: K, namespace: string | undefined, name: string) =>
        this.#stored({ kind, name, ...(namespace === undefined ? {} : { namespace }) }) as KubeObject<K> | undefined,
      list: <K extends KubeObject["kind"]>(kind: K, options?: { namespace?: string; labelSelector?: string }) =>
        server.list(kind, options).items as KubeObject<K>[],
    };
    return { reader, writer: this.#cluster.writer("user") };
  }

  async #wait(target: "Available" | "RolloutComplete" | "Seconds", timeoutMs: number): Promise<StepOutcome> {
    if (target === "Seconds") {
      await this.#advance(timeoutMs);
      return { ok: true, message: `waited ${timeoutMs / 1000}s` };
    }
    const startedMs = this.#cluster.clock.nowMs();
    const held = await this.#cluster.waitFor(
      () => this.#check() && this.#instantEnded() && this.#pending(target, 1).length === 0,
      timeoutMs,
    );
    const tookSeconds = (this.#cluster.clock.nowMs() - startedMs) / 1000;
    if (held) return { ok: true, message: `${target} after ${tookSeconds}s` };
    return { ok: false, message: `${target} not reached after ${tookSeconds}s: ${this.#pending(target).join("; ")}` };
  }

  async #advance(ms: number): Promise<void> {
    await this.#cluster.waitFor(() => !this.#check(), ms);
  }

  /**
   * Runs the invariant checker at the end of each instant (when no other timer is due at the
   * same millisecond); always true, so it can lead a predicate.
   */
  #check(): boolean {
    if (!this.#instantEnded()) return true;
    this.#checker.check();
    this.#observer?.instantEnded?.(this.#cluster);
    return true;
  }

  /** No timer is due at the current millisecond: everything that happens at this instant has. */
  #instantEnded(): boolean {
    const clock = this.#cluster.clock;
    return clock.nextDueMs() !== clock.nowMs();
  }

  /**
   * Reasons the target does not hold yet, over every applied ModelServing that exists (with
   * `limit`, each one's reasons stop there: the wait asks only whether any is left); computed
   * again only when something was committed.
   */
  #pending(target: "Available" | "RolloutComplete", limit?: number): string[] {
    const version = `${target}@${this.#cluster.server.resourceVersion()}@${limit ?? "all"}`;
    if (this.#lastPending?.version === version) return this.#lastPending.reasons;
    const reasons: string[] = this.#applied.length === 0 ? ["no ModelServing has been applied"] : [];
    for (const { namespace, name } of this.#applied) {
      const stored = this.#cluster.server.peek({ kind: "ModelServing", namespace, name });
      if (stored === undefined) continue;
      const pending = this.#checker.pending(stored, target, limit);
      if (pending === undefined) reasons.push(`${name}: the stored object is not a valid ModelServing`);
      else reasons.push(...pending);
    }
    this.#lastPending = { version, reasons };
    return reasons;
  }

  /** The pods the applied ModelServings other than `except` ask for, as stored now (the limit of `podsReason`). */
  #podsOfOthers(except: { namespace: string; name: string }): number {
    let pods = 0;
    for (const { namespace, name } of this.#applied) {
      if (namespace === except.namespace && name === except.name) continue;
      const parsed = parseModelServing(this.#cluster.server.peek({ kind: "ModelServing", namespace, name }));
      if (parsed.ok) pods += podsOf(parsed.value);
    }
    return pods;
  }

  /** Some crashed node still has pods bound to it (not yet evicted): its failure is still unfolding. */
  #crashedNodeHoldsPods(): boolean {
    const kubelet = this.#cluster.kubelet;
    return this.#cluster.server.stored("Pod").some((pod) => {
      const node = pod.spec?.["nodeName"];
      return typeof node === "string" && kubelet.isNodeDown(node);
    });
  }

  // -------------------------------------------------------------------------------------------
  // Controller lifecycle

  #startController(): void {
    this.#controllerStarts += 1;
    const informer = this.#cluster.reader();
    const ports = {
      reader: informer,
      writer: this.#cluster.writer(),
      clock: this.#controllerClock,
      recorder: this.#cluster.recorder(),
      rng: this.#cluster.rng(`controller-${this.#controllerStarts}`),
    };
    const interval = this.#minReconcileIntervalMs === 0 ? {} : { minReconcileIntervalMs: this.#minReconcileIntervalMs };
    const controller = new Controller(ports, {
      ...(this.#plan === undefined ? {} : { plan: this.#plan }),
      ...interval,
    });
    controller.start();
    const unhook = this.#cluster.onSettle(() => controller.idle());
    this.#controller = { controller, informer, unhook };
  }

  async #stopController(): Promise<void> {
    const current = this.#controller;
    if (current === undefined) return;
    this.#controller = undefined;
    current.unhook();
    await current.controller.stop();
    current.informer.stop();
  }

  // -------------------------------------------------------------------------------------------
  // Report

  #report(steps: StepRecord[]): Report {
    const events = eventRecords(this.#cluster.events());
    const invariants = this.#checker.results();
    const ok =
      steps.length === this.#scenario.steps.length &&
      steps.every((step) => step.ok) &&
      invariants.every((result) => result.violations === 0);
    const primary = this.#applied.at(-1);
    const stored = primary === undefined ? undefined : this.#stored({ kind: "ModelServing", ...primary });
    return {
      scenario: this.#scenario.name,
      seed: this.#seed,
      verdict: ok ? "pass" : "fail",
      simulatedSeconds: this.#seconds(),
      steps,
      invariants,
      metrics: this.#metrics(events),
      snapshots: this.#snapshots,
      final: { status: canonical(stored?.status ?? null), pods: this.#pods(), revisions: this.#revisionList() },
      events,
      controllerEvents: controllerEventRecords(
        this.#cluster.server.stored("Event"),
        (timestamp) => this.#cluster.clock.parseRfc3339(timestamp) / 1000,
      ),
    };
  }

  #metrics(events: Report["events"]): Metrics {
    const metrics: Metrics = {
      podsCreated: eventsByRole(events, "PodCreated"),
      podsDeleted: eventsByRole(events, "PodDeleted"),
      containerRestarts: byRole(this.#cluster.kubelet.restartsByRole()),
      apiWrites: controllerWrites(this.#cluster.server.apiWriteCounts()),
    };
    if (this.#router !== undefined) {
      const { total, ok, failed, cut, inFlight, incompatible, byRole: roles } = this.#router.metrics();
      const byRoleCounts = Object.fromEntries(
        Object.entries(roles).map(([role, counts]) => [
          role,
          {
            total: counts.total,
            ok: counts.ok,
            failed: counts.failed,
            cut: counts.cut,
            inFlight: counts.total - counts.ok - counts.failed - counts.cut,
          },
        ]),
      );
      metrics.requests = { total, ok, failed, cut, inFlight, incompatible, byRole: byRoleCounts };
    }
    return metrics;
  }

  #revisionList(): { name: string; revision: number }[] {
    return this.#cluster.server
      .stored("ControllerRevision")
      .map((stored) => ({
        name: stored.metadata.name,
        revision: typeof stored["revision"] === "number" ? stored["revision"] : 0,
      }))
      .sort((a, b) => a.revision - b.revision || compareStrings(a.name, b.name));
  }

  #pods(): PodRecord[] {
    return podRecords(this.#cluster.server.stored("Pod"));
  }

  #stored(ref: ObjectRef): KubeObject | undefined {
    try {
      return this.#cluster.server.get(ref);
    } catch (error) {
      if (isApiError(error, "NotFound")) return undefined;
      throw error;
    }
  }

  #seconds(): number {
    return this.#cluster.clock.nowMs() / 1000;
  }
}
