/**
 * The controller at scale on a real kube-apiserver (`npm run scale:kube`): N ModelServings of the
 * multinode-decode example's shape (1 prefill pod + a decode instance of an entry and 3 workers per
 * ServingGroup), each in a namespace of its own, created and converged, then a decode image update of them all,
 * rolled out to completion. The controller runs in this process as its ServiceAccount; the real
 * scheduler places the pods on KWOK nodes (POD_SLOTS_PER_NODE pods of 8 GPUs each), which run them.
 *
 * Prints the controller's heap per pod (after a full GC, minus the heap before the first
 * ModelServing), its reconcile pass durations (p50/p99), its API requests per pod, by verb, and
 * the CPU seconds each process spent in each phase (the cluster's servers and this one).
 *
 * Usage: `npm run scale:kube -- [--servings 50] [--groups 40] [--workers 2] [--nodes N]
 * [--timeout-minutes 30] [--create-only] [--keep-unread]` (defaults:
 * 10,000 pods; the controller's workers as `tandem controller --workers`; enough KWOK nodes for
 * POD_SLOTS_PER_NODE pods each; `--keep-unread` caches objects whole, without the controller's
 * informer transform, to measure what it saves). Needs the
 * binaries of `bash hack/kube-testenv/build.sh` and Node's --expose-gc (the npm script passes it).
 */
import { readFileSync } from "node:fs";
import { processTreeCpuMs } from "../bench/proc-cpu.ts";
import { loadavg } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { parse } from "yaml";
import type { ReconcilePass } from "../src/engine/controller.ts";
import { startCluster } from "../test/e2e/cluster.ts";
import type { Cluster } from "../test/e2e/cluster.ts";
import { MODEL_SERVINGS } from "../test/e2e/client.ts";
import type { KubeObject } from "../src/engine/ports.ts";
import { dropControllerUnread } from "../src/kube/unread.ts";
import { ensureNamespace, installCrd, installRbac, startTestController } from "../test/e2e/env.ts";
import type { TestController } from "../test/e2e/env.ts";
import { PODS, pending, readState } from "../test/e2e/observe.ts";
import type { State, Target } from "../test/e2e/observe.ts";
import type { Pod } from "../src/api/kube.ts";
import { LABEL_ROLE } from "../src/api/wellknown.ts";
import { isPodReady } from "../src/core/health.ts";

/** The parts of the example this run reads or changes (the rest is passed through as it is). */
interface PodTemplate {
  readonly spec: { readonly containers: readonly { readonly image: string }[] };
}
interface Example {
  readonly spec: {
    readonly replicas: number;
    readonly template: {
      readonly roles: readonly { readonly name: string; entryTemplate: PodTemplate; workerTemplate?: PodTemplate }[];
    };
  };
}

const PODS_PER_GROUP = 5;
/** Pods of 8 GPUs one KWOK node holds (its pod capacity is 110). */
const POD_SLOTS_PER_NODE = 100;
const GPUS_PER_POD = 8;
/** The decode image the rollout moves to (the example runs v0.5.2). */
const NEW_IMAGE = "lmsysorg/sglang:v0.5.3";
/** How often waitAll reads every pending ModelServing, and prints. */
const POLL_MS = 5_000;
const PROGRESS_MS = 30_000;
const EXAMPLE = join(import.meta.dirname, "..", "deploy", "examples", "multinode-decode.yaml");

const { values } = parseArgs({
  options: {
    servings: { type: "string", default: "50" },
    groups: { type: "string", default: "40" },
    // `tandem controller`'s default.
    workers: { type: "string", default: "2" },
    nodes: { type: "string" },
    // How long each phase (creation, rollout) may take to converge.
    "timeout-minutes": { type: "string", default: "30" },
    // Stop after creation: measures creation and convergence only.
    "create-only": { type: "boolean", default: false },
    // The controller caches objects whole (no dropControllerUnread): the heap the transform saves.
    "keep-unread": { type: "boolean", default: false },
  },
});
const servings = positive(values.servings, "--servings");
const groups = positive(values.groups, "--groups");
const workers = positive(values.workers, "--workers");
const convergeTimeoutMs = positive(values["timeout-minutes"], "--timeout-minutes") * 60_000;
const pods = servings * groups * PODS_PER_GROUP;
const nodes = values.nodes === undefined ? Math.ceil(pods / POD_SLOTS_PER_NODE) : positive(values.nodes, "--nodes");
if (nodes * POD_SLOTS_PER_NODE < pods)
  throw new Error(
    `--nodes ${nodes} hold at most ${nodes * POD_SLOTS_PER_NODE} of the ${pods} pods (${POD_SLOTS_PER_NODE} per node)`,
  );
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("run with node --expose-gc (npm run scale:kube does)");

function positive(text: string, flag: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 1) throw new Error(`${flag} must be a positive integer, got "${text}"`);
  return value;
}

function heapUsedBytes(): number {
  gc?.();
  return process.memoryUsage().heapUsed;
}

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

/** Pods of a state that count as converged towards `target`: Ready, and for a rollout on the new image. */
function convergedPods(state: State, target: Target): number {
  return state.pods.filter(
    (pod) =>
      isPodReady(pod) &&
      (target === "Available" ||
        pod.spec.containers.every((container) => container.image === NEW_IMAGE) ||
        isPrefill(pod)),
  ).length;
}

function isPrefill(pod: Pod): boolean {
  return pod.metadata.labels?.[LABEL_ROLE] === "prefill";
}

/**
 * Resolves once every ModelServing reaches `target`, reading them every POLL_MS (each read lists
 * their pods: a shorter interval loads the API server the run measures); prints progress (elapsed
 * time, load average, ModelServings and pods converged) every PROGRESS_MS.
 */
async function waitAll(cluster: Cluster, names: readonly string[], target: Target): Promise<void> {
  const startMs = Date.now();
  const deadline = startMs + convergeTimeoutMs;
  const podsByName = new Map<string, number>();
  let left = [...names];
  let lastPrintMs = 0;
  while (left.length > 0) {
    if (Date.now() > deadline) throw new Error(`${left.length} ModelServing(s) not ${target} in time`);
    const done = await Promise.all(
      left.map(async (name) => {
        const state = await readState(cluster.admin, name, name);
        podsByName.set(name, convergedPods(state, target));
        return pending(state, target).length === 0;
      }),
    );
    left = left.filter((_name, index) => done[index] !== true);
    if (Date.now() - lastPrintMs > PROGRESS_MS) {
      const converged = [...podsByName.values()].reduce((sum, count) => sum + count, 0);
      console.log(
        `  ${((Date.now() - startMs) / 1000).toFixed(0)} s, load ${loadLine()}: ${names.length - left.length}/${names.length} ${target}, ${converged}/${pods} pods ${target === "Available" ? "Ready" : "Ready on the update"}`,
      );
      lastPrintMs = Date.now();
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/** The average JSON size of `namespace`'s pods as the API server lists them, and after the controller's transform. */
async function podJsonLine(cluster: Cluster, namespace: string): Promise<string> {
  const list = (await cluster.admin.list(PODS, namespace)) as { items: KubeObject[] };
  const listed = list.items;
  const size = (objects: readonly KubeObject[]): number =>
    objects.reduce((sum, object) => sum + JSON.stringify(object).length, 0) / Math.max(1, objects.length);
  const stored = size(listed);
  const kept = size(
    listed.map((object) => {
      const copy = structuredClone({ ...object, kind: "Pod" as const });
      dropControllerUnread(copy);
      return copy;
    }),
  );
  return `pod JSON: ${stored.toFixed(0)} B as listed, ${kept.toFixed(0)} B after dropControllerUnread (${namespace})`;
}

function loadLine(): string {
  return loadavg()
    .map((load) => load.toFixed(1))
    .join(" ");
}

/** `tandem_api_requests_total` by verb, from the controller's /metrics. */
async function apiRequests(metricsAddress: string): Promise<Map<string, number>> {
  const text = await (await fetch(`http://${metricsAddress}/metrics`)).text();
  const byVerb = new Map<string, number>();
  for (const [, verb = "", count] of text.matchAll(/^tandem_api_requests_total\{verb="(\w+)",kind="\w+"\} (\d+)$/gm))
    byVerb.set(verb, (byVerb.get(verb) ?? 0) + Number(count));
  return byVerb;
}

function perPod(byVerb: ReadonlyMap<string, number>, pods: number): string {
  const total = [...byVerb.values()].reduce((sum, count) => sum + count, 0);
  const verbs = [...byVerb].map(([verb, count]) => `${verb} ${(count / pods).toFixed(2)}`).join(", ");
  return `${(total / pods).toFixed(2)} (${verbs})`;
}

function difference(after: ReadonlyMap<string, number>, before: ReadonlyMap<string, number>): Map<string, number> {
  return new Map([...after].map(([verb, count]) => [verb, count - (before.get(verb) ?? 0)]));
}

/** CPU ms used so far by each of the cluster's servers (by name) and by this process (the controller and the script). */
function cpuByProcessMs(cluster: Cluster): Map<string, number> {
  const byName = new Map<string, number>();
  for (const pid of cluster.pids) {
    let name = String(pid);
    try {
      name = readFileSync(`/proc/${pid}/comm`, "utf8").trim();
    } catch {
      // Exited, or not Linux: the pid names it.
    }
    byName.set(name, processTreeCpuMs(pid));
  }
  const own = process.cpuUsage();
  byName.set("controller (this process)", (own.user + own.system) / 1000);
  return byName;
}

/** CPU seconds each process spent since `before`, largest first, with its share of their sum. */
function cpuLine(after: ReadonlyMap<string, number>, before: ReadonlyMap<string, number>): string {
  const spent = [...after].map(([name, ms]) => [name, ms - (before.get(name) ?? 0)] as const);
  const totalMs = spent.reduce((sum, [, ms]) => sum + ms, 0);
  return spent
    .sort((a, b) => b[1] - a[1])
    .map(([name, ms]) => `${name} ${(ms / 1000).toFixed(0)} s (${((100 * ms) / Math.max(1, totalMs)).toFixed(0)} %)`)
    .join(", ");
}

function passesLine(passes: readonly number[]): string {
  const sorted = [...passes].sort((a, b) => a - b);
  return `${sorted.length} passes, p50 ${quantile(sorted, 0.5).toFixed(1)} ms, p99 ${quantile(sorted, 0.99).toFixed(1)} ms`;
}

console.log(
  `scale run: ${servings} ModelServing(s) × ${groups} groups × ${PODS_PER_GROUP} pods = ${pods} pods on ${nodes} KWOK nodes, ${workers} controller worker(s), ${values["keep-unread"] ? "no informer transform" : "informer transform dropControllerUnread"}`,
);
let controller: TestController | undefined;
const cluster = await startCluster({
  startTimeoutMs: 600_000,
  nodes: { count: nodes, gpusPerNode: Math.ceil(pods / nodes) * GPUS_PER_POD, large: true },
});
try {
  await installCrd(cluster.admin);
  await installRbac(cluster.admin);
  const passes: number[] = [];
  controller = await startTestController(cluster, {
    metricsAddress: "127.0.0.1:0",
    keepUnread: values["keep-unread"],
    controller: { workers, onReconciled: (pass: ReconcilePass) => passes.push(pass.durationMs) },
  });
  const metricsAddress = controller.running.metricsAddress ?? "";
  const example = parse(readFileSync(EXAMPLE, "utf8")) as Example;
  // One namespace per ModelServing, named alike.
  const names = Array.from({ length: servings }, (_unused, index) => `ms-${index}`);
  for (const name of names) await ensureNamespace(cluster.admin, name);
  const heapBeforeBytes = heapUsedBytes();
  const cpuBeforeMs = cpuByProcessMs(cluster);
  const startMs = Date.now();
  for (const name of names)
    await cluster.admin.create(MODEL_SERVINGS, {
      ...example,
      metadata: { name, namespace: name },
      spec: { ...example.spec, replicas: groups },
    });
  await waitAll(cluster, names, "Available");
  const createdMs = Date.now() - startMs;
  const heapPerPodBytes = (heapUsedBytes() - heapBeforeBytes) / pods;
  const createRequests = await apiRequests(metricsAddress);
  console.log(`created and Available in ${(createdMs / 1000).toFixed(0)} s (load ${loadLine()})`);
  console.log(`  controller heap per pod: ${(heapPerPodBytes / 1024).toFixed(1)} KiB`);
  console.log(`  reconcile: ${passesLine(passes)}`);
  console.log(`  API requests per pod: ${perPod(createRequests, pods)}`);
  const cpuCreatedMs = cpuByProcessMs(cluster);
  console.log(`  CPU: ${cpuLine(cpuCreatedMs, cpuBeforeMs)}`);
  console.log(`  ${await podJsonLine(cluster, names[0] ?? "")}`);
  if (!values["create-only"])
    await rolloutAll(cluster, names, example, {
      passes,
      metricsAddress,
      createRequests,
      heapBeforeBytes,
      cpuBeforeMs: cpuCreatedMs,
    });
} finally {
  // Also after a failure: the controller's loops would go on against a stopped API server.
  await controller?.running.stop();
  await cluster.stop();
}

function withImage(template: PodTemplate, image: string): PodTemplate {
  return {
    ...template,
    spec: { ...template.spec, containers: template.spec.containers.map((c) => ({ ...c, image })) },
  };
}

/** The decode image update of every ModelServing, to RolloutComplete, with its reconcile and API figures. */
async function rolloutAll(
  cluster: Cluster,
  names: readonly string[],
  example: Example,
  measures: {
    readonly passes: number[];
    readonly metricsAddress: string;
    readonly createRequests: ReadonlyMap<string, number>;
    readonly heapBeforeBytes: number;
    readonly cpuBeforeMs: ReadonlyMap<string, number>;
  },
): Promise<void> {
  const { passes, metricsAddress, createRequests, heapBeforeBytes, cpuBeforeMs } = measures;
  passes.length = 0;
  const rolloutStartMs = Date.now();
  for (const name of names) {
    const roles = example.spec.template.roles.map((role) =>
      role.name !== "decode"
        ? role
        : {
            ...role,
            entryTemplate: withImage(role.entryTemplate, NEW_IMAGE),
            ...(role.workerTemplate === undefined ? {} : { workerTemplate: withImage(role.workerTemplate, NEW_IMAGE) }),
          },
    );
    await cluster.admin.mergePatch(
      MODEL_SERVINGS,
      { namespace: name, name },
      { spec: { template: { ...example.spec.template, roles } } },
    );
  }
  await waitAll(cluster, names, "RolloutComplete");
  console.log(
    `decode image update of all, complete in ${((Date.now() - rolloutStartMs) / 1000).toFixed(0)} s (load ${loadLine()})`,
  );
  console.log(`  controller heap per pod: ${((heapUsedBytes() - heapBeforeBytes) / pods / 1024).toFixed(1)} KiB`);
  console.log(`  reconcile: ${passesLine(passes)}`);
  console.log(`  API requests per pod: ${perPod(difference(await apiRequests(metricsAddress), createRequests), pods)}`);
  console.log(`  CPU: ${cpuLine(cpuByProcessMs(cluster), cpuBeforeMs)}`);
}
