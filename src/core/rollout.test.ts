import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Pod } from "../api/kube.ts";
import { parseModelServing } from "../api/parse.ts";
import { applyRevision } from "./revision/apply.ts";
import { plan } from "./plan.ts";
import { surgeCount } from "./rollout.ts";
import type { SurgeInputs } from "./rollout.ts";
import {
  apply,
  deleteByOthers,
  idealCluster,
  observe,
  readyPod,
  servesReady,
  unschedulablePod,
} from "../../test/ideal-cluster.ts";
import type { IdealCluster } from "../../test/ideal-cluster.ts";

const NOW = Date.parse("2026-11-30T01:00:00Z");

const pod = (image: string) => ({ spec: { containers: [{ name: "vllm", image }] } });

function manifest(spec: Record<string, any>, roles: Record<string, any>[]) {
  return {
    apiVersion: "tandem.dev/v1alpha1",
    kind: "ModelServing",
    metadata: { name: "llm" },
    spec: { drain: { timeoutSeconds: 0 }, ...spec, template: { roles } },
  };
}

function pdManifest(spec: Record<string, any> = {}, decode: Record<string, any> = {}) {
  return manifest({ replicas: 3, ...spec }, [
    { name: "prefill", replicas: 2, entryTemplate: pod("vllm:v1") },
    {
      name: "decode",
      replicas: 2,
      workerReplicas: 1,
      entryTemplate: pod("vllm:v1"),
      workerTemplate: pod("vllm:v1"),
      ...decode,
    },
  ]);
}

const isReady = (p: Pod) =>
  p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true &&
  p.metadata.annotations?.["tandem.dev/draining"] === undefined;

/** The pods of `role` in group ordinal `group`, by their instance label. */
function podsByInstanceOf(cluster: IdealCluster, group: number, role: string): Map<string, Pod[]> {
  const byInstance = new Map<string, Pod[]>();
  for (const p of cluster.pods.values()) {
    const labels = p.metadata.labels ?? {};
    if (labels["tandem.dev/group"] !== String(group) || labels["tandem.dev/role"] !== role) continue;
    const key = labels["tandem.dev/instance"] ?? "";
    byInstance.set(key, [...(byInstance.get(key) ?? []), p]);
  }
  return byInstance;
}

/** Available instances of `role` in `group`: every pod present, Ready and not draining. */
function available(cluster: IdealCluster, group: number, role: string): number {
  const byInstance = podsByInstanceOf(cluster, group, role);
  const size = role === "decode" ? 2 : 1;
  return [...byInstance.values()].filter((pods) => pods.length === size && pods.every(isReady)).length;
}

function images(cluster: IdealCluster, prefix: string): string[] {
  return [...cluster.pods.values()]
    .filter((p) => p.metadata.name.startsWith(prefix))
    .map((p) => `${p.metadata.name}=${p.spec.containers[0]?.image ?? ""}`)
    .sort();
}

/** What `tandem rollout undo` does: the revision's versioned fields into the parsed spec. */
function rollBack(cluster: IdealCluster, data: any): void {
  const parsed = parseModelServing(cluster.modelServing);
  assert.ok(parsed.ok);
  cluster.modelServing.spec = applyRevision(parsed.value.spec, data);
  cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
}

/** Plans and applies until converged, calling `check` after every applied plan. */
function run(cluster: IdealCluster, check: (round: number) => void = () => undefined, maxRounds = 60): number {
  for (let round = 0; round < maxRounds; round++) {
    const { actions } = plan(observe(cluster), NOW + round * 1000);
    if (actions.length === 0) return round;
    apply(cluster, actions);
    check(round);
  }
  throw new Error("no convergence");
}

/** Plans and applies, one virtual second apart from `fromMs`, until `reached` holds; fails after ten rounds naming `what`. */
function planUntil(cluster: IdealCluster, reached: () => boolean, what: string, fromMs = NOW): void {
  for (let round = 0; !reached(); round++) {
    assert.ok(round < 10, `never reached: ${what}`);
    apply(cluster, plan(observe(cluster), fromMs + round * 1000).actions);
  }
}

/** `group`'s decode serves only through its first surge instance: the desired one is gone or starting. */
function carriedBySurge(cluster: IdealCluster, group: number): boolean {
  const ready = (name: string) => {
    const found = cluster.pods.get(name);
    return found !== undefined && isReady(found);
  };
  return ready(`llm-${group}-decode-1-0`) && !ready(`llm-${group}-decode-0-0`);
}

/**
 * The images of each instance of `role` in `group`, one string per instance (its pods' images in
 * pod index order), sorted: what runs there whichever ordinals the instances carry (a surge
 * instance that succeeded a desired one keeps its own, docs/design/succession.md).
 */
function unitImages(cluster: IdealCluster, group: number, role: string): string[] {
  const byInstance = podsByInstanceOf(cluster, group, role);
  return [...byInstance.values()]
    .map((pods) =>
      pods
        .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))
        .map((p) => p.spec.containers[0]?.image ?? "")
        .join(" "),
    )
    .sort();
}

/** The group ordinals the pods' labels name, ascending. */
function groupLabels(cluster: IdealCluster): number[] {
  const groups = new Set([...cluster.pods.values()].map((p) => Number(p.metadata.labels?.["tandem.dev/group"])));
  return [...groups].sort((a, b) => a - b);
}

function setDecodeImage(cluster: IdealCluster, image: string): void {
  const decode = cluster.modelServing.spec.template.roles[1];
  decode.entryTemplate = pod(image);
  decode.workerTemplate = pod(image);
  cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
}

/** A RoleRollingUpdate of prefill only (to vllm:v2), run to its end: the decode pods keep their older label. */
function afterPrefillOnlyRoleUpdate(): IdealCluster {
  const cluster = idealCluster(
    pdManifest({ rolloutStrategy: { type: "RoleRollingUpdate", rollingUpdateConfiguration: { maxUnavailable: 1 } } }),
  );
  run(cluster);
  cluster.modelServing.spec.template.roles[0].entryTemplate = pod("vllm:v2");
  cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
  run(cluster);
  return cluster;
}

/** RoleRollingUpdate of decode (1 instance, maxSurge 1) until at least two groups serve decode only through their v2 surge instance. */
function carriedBySurgeInTwoGroups(): IdealCluster {
  const cluster = idealCluster(
    pdManifest(
      {
        replicas: 3,
        rolloutStrategy: { type: "RoleRollingUpdate", rollingUpdateConfiguration: { maxUnavailable: 1 } },
      },
      { replicas: 1, maxUnavailable: 1, maxSurge: 1 },
    ),
  );
  run(cluster);
  setDecodeImage(cluster, "vllm:v2");
  planUntil(
    cluster,
    () => [0, 1, 2].filter((group) => carriedBySurge(cluster, group)).length >= 2,
    "two groups served through their v2 surge instance alone at once",
  );
  return cluster;
}

/** Groups with a role below its desired count of available instances (replicas 2 prefill, `decode` decode). */
const disruptedGroups = (cluster: IdealCluster, decode = 2) =>
  [0, 1, 2].filter((group) => available(cluster, group, "prefill") < 2 || available(cluster, group, "decode") < decode);

/** What a pending pod reports when no node has room for it. */
const unschedulable = {
  phase: "Pending" as const,
  conditions: [
    { type: "PodScheduled", status: "False" as const, reason: "Unschedulable", message: "0/1 nodes are available" },
  ],
};

/** One group of `replicas` prefill instances (maxUnavailable 0, maxSurge 1) at v1, the update to v2 applied. */
function prefillUpdated(replicas: number): IdealCluster {
  const cluster = idealCluster(
    manifest({ replicas: 1, rolloutStrategy: { type: "RoleRollingUpdate" } }, [
      { name: "prefill", replicas, maxUnavailable: 0, maxSurge: 1, entryTemplate: pod("vllm:v1") },
    ]),
  );
  run(cluster);
  cluster.modelServing.spec.template.roles[0].entryTemplate = pod("vllm:v2");
  cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
  return cluster;
}

describe("RoleRollingUpdate", () => {
  it("updates only decode, never touches prefill, and keeps each group's decode budget", () => {
    const cluster = idealCluster(
      pdManifest(
        { rolloutStrategy: { type: "RoleRollingUpdate", rollingUpdateConfiguration: { maxUnavailable: 3 } } },
        { maxUnavailable: 1 },
      ),
    );
    run(cluster);
    const prefillUids = [...cluster.pods.values()]
      .filter((p) => p.metadata.name.includes("prefill"))
      .map((p) => p.metadata.uid);
    setDecodeImage(cluster, "vllm:v2");
    run(cluster, () => {
      for (const group of [0, 1, 2])
        assert.ok(
          available(cluster, group, "decode") >= 1,
          `group ${group} lost more than maxUnavailable decode instances`,
        );
    });
    assert.deepEqual(
      [...cluster.pods.values()].filter((p) => p.metadata.name.includes("prefill")).map((p) => p.metadata.uid),
      prefillUids,
    );
    assert.ok(
      images(cluster, "llm-")
        .filter((i) => i.includes("decode"))
        .every((i) => i.endsWith("vllm:v2")),
    );
    const status = cluster.modelServing.status;
    assert.equal(status.currentRevision, status.updateRevision, "the update revision is promoted once complete");
    assert.equal(status.units, undefined, "no record is left once everything is current");
  });

  it("group-level maxUnavailable 1 keeps at most one group disrupted at any time", () => {
    const cluster = idealCluster(pdManifest({ rolloutStrategy: { type: "RoleRollingUpdate" } }, { maxUnavailable: 2 }));
    run(cluster);
    setDecodeImage(cluster, "vllm:v2");
    run(cluster, () => {
      const disrupted = [0, 1, 2].filter(
        (group) => available(cluster, group, "decode") < 2 || available(cluster, group, "prefill") < 2,
      );
      assert.ok(disrupted.length <= 1, `groups disrupted at once: ${disrupted.join(",")}`);
    });
    assert.ok(
      images(cluster, "llm-")
        .filter((i) => i.includes("decode"))
        .every((i) => i.endsWith("vllm:v2")),
    );
  });

  it("maxSurge 1, maxUnavailable 0: decode capacity never drops, and each surge instance succeeds an old one for good", () => {
    const cluster = idealCluster(
      pdManifest({ rolloutStrategy: { type: "RoleRollingUpdate" } }, { maxUnavailable: 0, maxSurge: 1 }),
    );
    run(cluster);
    setDecodeImage(cluster, "vllm:v2");
    let sawSurge = false;
    run(cluster, () => {
      sawSurge ||= cluster.pods.has("llm-0-decode-2-0");
      for (const group of [0, 1, 2])
        assert.ok(available(cluster, group, "decode") >= 2, `group ${group} decode capacity dropped`);
    });
    assert.ok(sawSurge);
    // Each surge instance succeeded an old one for good (docs/design/succession.md): two decode
    // instances per group are left, under whichever ordinals, and no old one was rebuilt.
    for (const group of [0, 1, 2]) {
      const instances = new Set(
        [...cluster.pods.values()]
          .filter((p) => p.metadata.labels?.["tandem.dev/group"] === String(group))
          .filter((p) => p.metadata.labels?.["tandem.dev/role"] === "decode")
          .map((p) => p.metadata.labels?.["tandem.dev/instance"]),
      );
      assert.equal(instances.size, 2, `group ${group}: ${[...instances].join(", ")}`);
    }
    assert.ok((cluster.modelServing.status.ordinals?.length ?? 0) > 0);
  });

  /**
   * One decode instance (maxUnavailable 0, maxSurge 1) in one group: starts the v2 update, plans
   * until `reached` holds, then switches to v3 at once and runs to the end, checking after every
   * plan that a decode instance serves.
   */
  function updateAgainWhen(reached: (cluster: IdealCluster) => boolean, what: string): void {
    const cluster = idealCluster(
      pdManifest(
        { replicas: 1, rolloutStrategy: { type: "RoleRollingUpdate" } },
        { replicas: 1, maxUnavailable: 0, maxSurge: 1 },
      ),
    );
    run(cluster);
    setDecodeImage(cluster, "vllm:v2");
    planUntil(cluster, () => reached(cluster), what);
    setDecodeImage(cluster, "vllm:v3");
    run(cluster, () =>
      assert.ok(available(cluster, 0, "decode") >= 1, "decode capacity dropped below replicas − maxUnavailable"),
    );
    assert.deepEqual(unitImages(cluster, 0, "decode"), ["vllm:v3 vllm:v3"]);
  }

  it("a new update while Ready surge instances run the last one: they are not counted as capacity (regression: every decode instance of a group went at once)", () => {
    updateAgainWhen(
      (cluster) => available(cluster, 0, "decode") === 2,
      "the v2 surge instance serves beside the v1 one",
    );
  });

  it("a new update right after the v2 surge instance succeeded the only v1 one (it serves alone while the v1 one drains): decode capacity never drops", () => {
    updateAgainWhen(
      (cluster) => carriedBySurge(cluster, 0),
      "the v2 surge instance serves alone while the v1 one it succeeded drains",
    );
  });
  it("a new update while groups serve only through surge instances of the last one: they are held, so no more groups go down than the group budget allows", () => {
    const cluster = idealCluster(
      pdManifest(
        {
          replicas: 3,
          rolloutStrategy: { type: "RoleRollingUpdate", rollingUpdateConfiguration: { maxUnavailable: 1 } },
        },
        { replicas: 1, maxUnavailable: 1, maxSurge: 1 },
      ),
    );
    run(cluster);
    setDecodeImage(cluster, "vllm:v2");
    planUntil(
      cluster,
      () => [0, 1, 2].filter((group) => carriedBySurge(cluster, group)).length >= 2,
      "two groups served through their v2 surge instance alone at once",
    );
    setDecodeImage(cluster, "vllm:v3");
    run(cluster, () =>
      assert.ok(
        [0, 1, 2].filter((group) => available(cluster, group, "decode") < 1).length <= 1,
        "more groups went down than the group budget allows",
      ),
    );
    assert.deepEqual(images(cluster, "llm-2-decode"), ["llm-2-decode-0-0=vllm:v3", "llm-2-decode-0-1=vllm:v3"]);
  });

  it("a held surge instance goes when the desired one it stands in for waits for its capacity and the group budget allows (no deadlock)", () => {
    const cluster = idealCluster(
      manifest({ replicas: 1, rolloutStrategy: { type: "RoleRollingUpdate" } }, [
        { name: "prefill", replicas: 1, entryTemplate: pod("vllm:v1") },
        { name: "decode", replicas: 1, maxUnavailable: 1, maxSurge: 1, entryTemplate: pod("vllm:v1") },
      ]),
    );
    run(cluster);
    const setImage = (image: string) => {
      cluster.modelServing.spec.template.roles[1].entryTemplate = pod(image);
      cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
    };
    setImage("vllm:v2");
    planUntil(cluster, () => carriedBySurge(cluster, 0), "decode served through its surge instance alone");
    setImage("vllm:v3");
    // One spare GPU: while the surge pod lives, the new desired pod cannot be placed.
    const starve = () => {
      if (!cluster.pods.has("llm-0-decode-1-0")) return;
      const desired = cluster.pods.get("llm-0-decode-0-0");
      if (desired !== undefined && !isReady(desired))
        cluster.pods.set(desired.metadata.name, unschedulablePod(desired));
    };
    for (let round = 0; cluster.pods.has("llm-0-decode-1-0"); round++) {
      assert.ok(round < 10, "the held surge instance never went: the desired instance waits for it forever");
      starve();
      apply(cluster, plan(observe(cluster), NOW + (100 + round) * 1000).actions);
    }
    // With the capacity back (a pod the test starved is placed now), the rollout completes.
    for (const [name, found] of cluster.pods)
      if (found.status?.phase === "Pending") cluster.pods.set(name, readyPod(found, false));
    run(cluster);
    assert.deepEqual(images(cluster, "llm-0-decode"), ["llm-0-decode-0-0=vllm:v3"]);
  });

  it("a surge instance that serves succeeds the last old one, so no replacement is built that could wait for the capacity the old one frees (the wait of fuzz-208 cannot arise here)", () => {
    const cluster = prefillUpdated(1);
    // The capacity the old desired pod frees goes elsewhere (another pending pod in a full cluster).
    for (let round = 0; round < 10; round++) {
      apply(cluster, plan(observe(cluster), NOW + round * 1000).actions);
      const desired = cluster.pods.get("llm-0-prefill-0-0");
      if (desired?.spec.containers[0]?.image === "vllm:v2" && !isReady(desired)) desired.status = unschedulable;
    }
    assert.deepEqual(
      images(cluster, "llm-0-prefill"),
      ["llm-0-prefill-1-0=vllm:v2"],
      "the successor alone, started once",
    );
    const progressing = cluster.modelServing.status.conditions.find((c: any) => c.type === "Progressing");
    assert.equal(progressing.reason, "Converged");
  });

  it("a group partition raised over groups that serve only through their surge instances: those stay until the desired ones serve", () => {
    const cluster = idealCluster(
      pdManifest(
        {
          replicas: 3,
          rolloutStrategy: { type: "RoleRollingUpdate", rollingUpdateConfiguration: { maxUnavailable: 1 } },
        },
        { replicas: 1, maxUnavailable: 1, maxSurge: 1 },
      ),
    );
    run(cluster);
    setDecodeImage(cluster, "vllm:v2");
    planUntil(
      cluster,
      () => carriedBySurge(cluster, 0) && carriedBySurge(cluster, 1),
      "groups 0 and 1 served through their v2 surge instance alone at once",
    );
    cluster.modelServing.spec.rolloutStrategy.rollingUpdateConfiguration = { maxUnavailable: 1, partition: 2 };
    run(cluster, () =>
      assert.ok(
        [0, 1, 2].filter((group) => available(cluster, group, "decode") < 1).length <= 1,
        "more groups went down than the group budget allows",
      ),
    );
    for (const group of [0, 1])
      assert.equal(unitImages(cluster, group, "decode").length, 1, `group ${group}: one decode instance at the end`);
  });

  it("a group partition raised over a group whose only serving instance is a held surge one: the surge instance stays until the desired one serves", () => {
    const cluster = idealCluster(
      pdManifest(
        { replicas: 2, rolloutStrategy: { type: "RoleRollingUpdate" } },
        { replicas: 1, maxUnavailable: 0, maxSurge: 1 },
      ),
    );
    run(cluster);
    setDecodeImage(cluster, "vllm:v2");
    planUntil(cluster, () => carriedBySurge(cluster, 0), "group 0 served through its v2 surge instance alone");
    setDecodeImage(cluster, "vllm:v3");
    cluster.modelServing.spec.rolloutStrategy.rollingUpdateConfiguration = { partition: 1 };
    run(cluster, () => assert.ok(available(cluster, 0, "decode") >= 1, "group 0's last serving decode instance went"));
    assert.deepEqual(
      unitImages(cluster, 0, "decode"),
      ["vllm:v2 vllm:v2"],
      "below the partition: the v2 successor stays at its recorded revision, alone",
    );
  });

  it("a role's maxSurge removed while groups serve only through its surge instances: those stay beyond the new bound until the desired ones serve (regression: dropped in every group at once)", () => {
    const cluster = carriedBySurgeInTwoGroups();
    delete cluster.modelServing.spec.template.roles[1].maxSurge;
    cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
    run(cluster, () =>
      assert.ok(
        disruptedGroups(cluster, 1).length <= 1,
        `groups disrupted at once: ${disruptedGroups(cluster, 1).join(",")}`,
      ),
    );
    assert.deepEqual(unitImages(cluster, 1, "decode"), ["vllm:v2 vllm:v2"], "one decode instance at the end");
  });
});

describe("surge", () => {
  it("surgeCount: up to maxSurge while units are unfinished; existing surge kept as far as the floor needs it; starved, only that", () => {
    // One role of 3 with floor 2 and one surge instance Ready; each row changes some inputs.
    const base: SurgeInputs = {
      paused: false,
      existing: 1,
      atUpdate: 1,
      maxSurge: 1,
      outdated: 1,
      unfinished: 1,
      availableBase: 2,
      floor: 2,
      starved: false,
      availableSurge: [0],
      firstStarvedSurge: undefined,
    };
    const table: [Partial<SurgeInputs>, number, string][] = [
      [{}, 1, "an unfinished unit"],
      [{ unfinished: 0, outdated: 0 }, 0, "all updated and available: surge goes"],
      [
        { unfinished: 0, outdated: 0, availableBase: 1 },
        1,
        "nothing eligible unfinished, desired below the floor (below a partition): kept",
      ],
      [{ unfinished: 0, availableBase: 1, existing: 0 }, 0, "never a new surge instance for the floor alone"],
      [
        { starved: true },
        0,
        "starved with the floor met: freed for the replacement, also while old units wait for permits — for budget (fuzz-4145), for the coordinator (fuzz-coordinated-69) — or the surge unit is placed in part too (fuzz-faults-53)",
      ],
      [{ starved: true, availableBase: 1 }, 1, "starved below the floor: kept"],
      [
        { starved: true, availableBase: 1, availableSurge: [] },
        0,
        "starved below the floor, the surge unit still starting: freed, it carries nothing (fuzz-12: it would take the replacements' capacity for good)",
      ],
      [
        { starved: true, availableBase: 0, existing: 2, maxSurge: 2, availableSurge: [1] },
        2,
        "starved below the floor: kept up to the one that serves",
      ],
      [{ availableBase: 1, availableSurge: [] }, 1, "not starved: a surge unit still starting stays"],
      [
        { unfinished: 0, outdated: 0, availableBase: 0, existing: 2, maxSurge: 0, availableSurge: [0, 1] },
        2,
        "floor surge beyond a maxSurge lowered mid-rollout: kept",
      ],
      [
        { availableBase: 0, maxSurge: 0, availableSurge: [] },
        0,
        "below the floor, a unit beyond the bound that does not serve (a group above a lowered replicas, its roles scaled up): it carries nothing and goes (fuzz-390)",
      ],
      [
        { unfinished: 0, availableBase: 0, existing: 2, maxSurge: 0, availableSurge: [1] },
        2,
        "below the floor: kept up to the one that serves",
      ],
      [
        { starved: true, availableBase: 1, maxSurge: 0 },
        1,
        "starved below the floor, maxSurge lowered: the serving surge unit kept",
      ],
      [
        { starved: true, existing: 0, maxSurge: 2, unfinished: 2 },
        0,
        "a replacement starved: no new surge unit to take its capacity (a surge freed for it was re-created at once: fuzz-coordinated-163)",
      ],
      [
        { maxSurge: 2, unfinished: 3, existing: 2, availableSurge: [], firstStarvedSurge: 0 },
        1,
        "the first surge unit waits for capacity: none beyond it (two each placed in part would both wait for good: fuzz-faults-53 with router traffic)",
      ],
      [
        { maxSurge: 2, unfinished: 3, existing: 2, availableSurge: [0], firstStarvedSurge: 1 },
        2,
        "the second waits while the first serves: it stays, alone in waiting",
      ],
      [
        { maxSurge: 2, unfinished: 3, existing: 2, availableBase: 0, availableSurge: [1], firstStarvedSurge: 0 },
        2,
        "below the floor, a serving surge unit beyond the waiting one still carries the floor",
      ],
      [{ paused: true, unfinished: 3, existing: 0, atUpdate: 0 }, 0, "paused: none added"],
      [{ paused: true }, 1, "paused: the rollout's own surge stays"],
      [
        { paused: true, atUpdate: 0 },
        0,
        "paused: a unit left above a lowered replicas at another revision is no surge: scaled down, never moved to the update revision",
      ],
      [
        { paused: true, atUpdate: 0, availableBase: 1 },
        1,
        "paused: such a unit that carries the floor stays (at its record)",
      ],
      [
        { paused: true, existing: 2, atUpdate: 2, maxSurge: 2, unfinished: 1 },
        1,
        "paused: never more than a running rollout keeps",
      ],
      [{ outdated: 0, existing: 0, unfinished: 2 }, 0, "creation or scale-up: never"],
      [{ maxSurge: 2, unfinished: 3 }, 2, "at most maxSurge"],
    ];
    for (const [change, expected, why] of table) assert.equal(surgeCount({ ...base, ...change }), expected, why);
  });

  it("never surges while creating from zero or scaling up (regression: the bench's decode surged at creation)", () => {
    for (const strategy of [
      { type: "RoleRollingUpdate" },
      { rollingUpdateConfiguration: { maxUnavailable: 0, maxSurge: 1 } },
    ]) {
      const cluster = idealCluster(
        pdManifest(
          { rolloutStrategy: strategy },
          strategy.type === "RoleRollingUpdate" ? { maxUnavailable: 0, maxSurge: 1 } : {},
        ),
      );
      // Pods stay unready for a few rounds, as a real start would.
      for (let round = 0; round < 5; round++) {
        const { actions } = plan(observe(cluster), NOW + round * 1000);
        assert.ok(
          !actions.some((a) => a.type === "CreatePod" && /-decode-2-|^llm-3-/.test(a.pod.metadata.name)),
          "a surge unit was created without a rollout",
        );
        apply(cluster, actions);
        for (const p of cluster.pods.values()) p.status = { phase: "Pending", conditions: [] };
      }
    }
  });
});

describe("ServingGroupRollingUpdate", () => {
  it("replaces whole groups, at most maxUnavailable (1) disrupted at any time", () => {
    const cluster = idealCluster(pdManifest({ replicas: 4 }));
    run(cluster);
    setDecodeImage(cluster, "vllm:v2");
    const prefillBefore = new Set(
      [...cluster.pods.values()].filter((p) => p.metadata.name.includes("prefill")).map((p) => p.metadata.uid),
    );
    run(cluster, () => {
      const disrupted = [0, 1, 2, 3].filter(
        (group) => available(cluster, group, "decode") < 2 || available(cluster, group, "prefill") < 2,
      );
      assert.ok(disrupted.length <= 1, `groups disrupted at once: ${disrupted.join(",")}`);
    });
    const prefillAfter = [...cluster.pods.values()]
      .filter((p) => p.metadata.name.includes("prefill"))
      .map((p) => p.metadata.uid);
    assert.ok(
      prefillAfter.every((uid) => !prefillBefore.has(uid)),
      "a group switches as a whole: prefill is rebuilt too",
    );
  });

  it("with maxSurge 1 and maxUnavailable 0, waits without deleting anything when the surge group never becomes Ready", () => {
    const cluster = idealCluster(
      pdManifest({ rolloutStrategy: { rollingUpdateConfiguration: { maxUnavailable: 0, maxSurge: 1 } } }),
    );
    run(cluster);
    setDecodeImage(cluster, "vllm:v2");
    const before = new Set([...cluster.pods.values()].map((p) => p.metadata.uid));
    for (let round = 0; round < 10; round++) {
      const { actions } = plan(observe(cluster), NOW + round * 1000);
      assert.ok(!actions.some((a) => a.type === "DeletePod"), "nothing is deleted while the surge group is not Ready");
      apply(cluster, actions);
      // No free GPU: the surge group's pods stay Pending.
      for (const p of cluster.pods.values())
        if (p.metadata.name.startsWith("llm-3-"))
          p.status = {
            phase: "Pending",
            conditions: [
              {
                type: "PodScheduled",
                status: "False",
                reason: "Unschedulable",
                message: "0/4 nodes have 8 free nvidia.com/gpu",
              },
            ],
          };
    }
    assert.ok([...before].every((uid) => [...cluster.pods.values()].some((p) => p.metadata.uid === uid)));
    const progressing = cluster.modelServing.status.conditions.find((c: any) => c.type === "Progressing");
    assert.equal(progressing.reason, "RolloutWaiting");
    assert.match(progressing.message, /Unschedulable: 0\/4 nodes have 8 free nvidia.com\/gpu/);
  });

  it("a new update while the surge group of the last one stands in for groups being replaced: it is held at its revision, so no more groups go down than the group budget allows", () => {
    const cluster = idealCluster(
      pdManifest({ replicas: 4, rolloutStrategy: { rollingUpdateConfiguration: { maxUnavailable: 1, maxSurge: 1 } } }),
    );
    run(cluster);
    setDecodeImage(cluster, "vllm:v2");
    const groupAvailable = (group: number) =>
      available(cluster, group, "prefill") === 2 && available(cluster, group, "decode") === 2;
    const down = () => [0, 1, 2, 3].filter((group) => !groupAvailable(group));
    planUntil(
      cluster,
      () => groupAvailable(4) && down().length === 2,
      "two groups replaced while the v2 surge group serves",
    );
    setDecodeImage(cluster, "vllm:v3");
    run(cluster, () => {
      const capacity = [0, 1, 2, 3, 4].filter(groupAvailable).length;
      assert.ok(
        capacity >= 3,
        `${capacity} groups available (surge included), fewer than replicas − maxUnavailable = 3`,
      );
    });
    assert.ok(images(cluster, "llm-").every((i) => i.endsWith("vllm:v3") || i.includes("prefill")));
    assert.equal(cluster.pods.has("llm-4-decode-0-0"), false, "the surge group is gone at the end");
  });

  it("every replacement waits for capacity below the floor while the surge group still starts: the surge group is freed, it carries nothing (fuzz-12: else, once Ready, it kept the GPUs for good)", () => {
    const cluster = idealCluster(
      pdManifest({ replicas: 2, rolloutStrategy: { rollingUpdateConfiguration: { maxUnavailable: 1, maxSurge: 1 } } }),
    );
    run(cluster);
    setDecodeImage(cluster, "vllm:v2");
    // Both groups lose a pod (faults): both are then replaced at v2, at no budget.
    cluster.pods.delete("llm-0-decode-0-1");
    cluster.pods.delete("llm-1-decode-0-1");
    const unschedulable = {
      phase: "Pending" as const,
      conditions: [
        { type: "PodScheduled", status: "False" as const, reason: "Unschedulable", message: "0/3 nodes are available" },
      ],
    };
    let sawSurge = false;
    for (let round = 0; !sawSurge || cluster.pods.has("llm-2-prefill-0-0"); round++) {
      assert.ok(round < 10, "the surge group, still starting, kept the capacity every replacement waits for");
      apply(cluster, plan(observe(cluster), NOW + round * 1000).actions);
      sawSurge ||= cluster.pods.has("llm-2-prefill-0-0");
      // The surge group's pods are placed but not started yet; the replacements cannot be placed.
      for (const p of cluster.pods.values()) {
        if (p.metadata.name.startsWith("llm-2-"))
          p.status = { phase: "Pending", conditions: [{ type: "PodScheduled", status: "True" }] };
        else if (p.metadata.labels?.["tandem.dev/revision"] === cluster.modelServing.status.updateRevision)
          p.status = unschedulable;
      }
    }
  });

  it("a serving surge group succeeds the last old group, so no replacement group is built that could wait for the capacity the old one frees", () => {
    const cluster = idealCluster(
      pdManifest({ replicas: 1, rolloutStrategy: { rollingUpdateConfiguration: { maxUnavailable: 0, maxSurge: 1 } } }),
    );
    run(cluster);
    setDecodeImage(cluster, "vllm:v2");
    run(cluster);
    assert.deepEqual(groupLabels(cluster), [1], "the surge group (ordinal 1) is the group now, started once");
    assert.deepEqual(unitImages(cluster, 1, "decode"), ["vllm:v2 vllm:v2", "vllm:v2 vllm:v2"]);
    const progressing = cluster.modelServing.status.conditions.find((c: any) => c.type === "Progressing");
    assert.equal(progressing.reason, "Converged");
    assert.deepEqual(cluster.modelServing.status.ordinals, [{ group: 0, ordinal: 1 }]);
  });

  it("a new update while a surge group of the last one stands in for a desired group being rebuilt: it is held at its revision until the desired group serves (fuzz-32)", () => {
    const cluster = idealCluster(
      pdManifest({ replicas: 2, rolloutStrategy: { rollingUpdateConfiguration: { maxUnavailable: 0, maxSurge: 1 } } }),
    );
    run(cluster);
    setDecodeImage(cluster, "vllm:v2");
    const rebuilt = () =>
      [...cluster.pods.values()].filter(
        (p) => p.metadata.name.startsWith("llm-1-") && p.spec.containers[0]?.image === "vllm:v2",
      );
    planUntil(cluster, () => rebuilt().length > 0, "group 1 rebuilt at v2 beside the v2 surge group");
    // Group 1's v2 pods are still starting: only group 0 (v1) and the surge group 2 (v2) serve.
    for (const p of rebuilt()) p.status = { phase: "Pending", conditions: [] };
    setDecodeImage(cluster, "vllm:v3");
    run(cluster, () => {
      const serving = [0, 1, 2].filter(
        (group) => available(cluster, group, "decode") === 2 && available(cluster, group, "prefill") === 2,
      );
      assert.ok(
        serving.length >= 2,
        `groups serving: ${serving.join(",")}; replicas 2 with maxUnavailable 0 must keep two`,
      );
    });
    assert.ok(
      images(cluster, "llm-")
        .filter((entry) => entry.includes("decode"))
        .every((entry) => entry.endsWith("=vllm:v3")),
      "every desired group at v3",
    );
    assert.equal(groupLabels(cluster).length, 2, "two groups at the end, whichever ordinals they carry");
  });
});

describe("strategy switched mid-rollout", () => {
  /** Starts v2 under `from`, plans once (records written), then switches to `to` with `change` and runs to the end. */
  function switchMidRollout(
    from: Record<string, any>,
    to: Record<string, any>,
    change: (cluster: IdealCluster) => void,
  ): IdealCluster {
    const cluster = idealCluster(pdManifest({ rolloutStrategy: from }));
    run(cluster);
    setDecodeImage(cluster, "vllm:v2");
    apply(cluster, plan(observe(cluster), NOW).actions);
    assert.ok((cluster.modelServing.status.units ?? []).length > 0, "the first plan wrote no record");
    cluster.modelServing.spec.rolloutStrategy = to;
    change(cluster);
    run(cluster);
    const { status } = cluster.modelServing;
    assert.equal(status.currentRevision, status.updateRevision);
    assert.equal(status.units, undefined, "records are left after promotion");
    return cluster;
  }

  it("group records of ServingGroupRollingUpdate never outlive a RoleRollingUpdate that changes the instances (regression: pods rolled back)", () => {
    const cluster = switchMidRollout({ type: "ServingGroupRollingUpdate" }, { type: "RoleRollingUpdate" }, (c) => {
      c.modelServing.spec.template.roles[1].workerReplicas = 2;
    });
    assert.ok(
      images(cluster, "llm-").filter((i) => i.includes("decode")).length === 3 * 2 * 3,
      "every decode instance has its entry and 2 workers",
    );
  });

  it("instance records of RoleRollingUpdate do not shadow a ServingGroupRollingUpdate group permit (regression: the rollout never finished)", () => {
    const cluster = switchMidRollout(
      { type: "RoleRollingUpdate", rollingUpdateConfiguration: { maxUnavailable: 1 } },
      { type: "ServingGroupRollingUpdate" },
      (c) => setDecodeImage(c, "vllm:v3"),
    );
    assert.ok(
      images(cluster, "llm-")
        .filter((i) => i.includes("decode"))
        .every((i) => i.endsWith("vllm:v3")),
    );
  });

  it("after a RoleRollingUpdate that changed prefill only, a switch to a group strategy leaves the decode pods (older label, same role spec) alone until a permit moves them (regression: every group's decode was replaced at once)", () => {
    for (const type of ["ServingGroupRollingUpdate", "InPlaceUpdate"]) {
      const cluster = idealCluster(
        pdManifest({
          rolloutStrategy: { type: "RoleRollingUpdate", rollingUpdateConfiguration: { maxUnavailable: 1 } },
        }),
      );
      run(cluster);
      cluster.modelServing.spec.template.roles[0].entryTemplate = pod("vllm:v2");
      cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
      run(cluster);
      const decodeUids = () =>
        [...cluster.pods.values()]
          .filter((p) => p.metadata.name.includes("decode"))
          .map((p) => p.metadata.uid)
          .sort();
      const before = decodeUids();
      cluster.modelServing.spec.rolloutStrategy = { type, rollingUpdateConfiguration: { maxUnavailable: 1 } };
      run(cluster, () =>
        assert.deepEqual(disruptedGroups(cluster), [], `${type}: a group was disrupted by the switch alone`),
      );
      assert.deepEqual(decodeUids(), before, `${type}: decode pods were replaced without a change`);
      setDecodeImage(cluster, "vllm:v3");
      run(cluster, () =>
        assert.ok(
          disruptedGroups(cluster).length <= 1,
          `${type}: groups disrupted at once: ${disruptedGroups(cluster).join(",")}`,
        ),
      );
      assert.ok(
        images(cluster, "llm-")
          .filter((i) => i.includes("decode"))
          .every((i) => i.endsWith("vllm:v3")),
      );
    }
  });

  it("after a RoleRollingUpdate that changed prefill only, a switch to ServingGroupRollingUpdate alone relabels the decode pods at the current revision, never restarting them (fuzz-409: their older label kept the rollout from ever looking complete)", () => {
    const cluster = afterPrefillOnlyRoleUpdate();
    const current = cluster.modelServing.status.currentRevision;
    assert.equal(current, cluster.modelServing.status.updateRevision, "the prefill-only update is promoted");
    const decode = () => [...cluster.pods.values()].filter((p) => p.metadata.name.includes("decode"));
    const uids = decode()
      .map((p) => p.metadata.uid)
      .sort();
    assert.ok(
      decode().every((p) => p.metadata.labels?.["tandem.dev/revision"] !== current),
      "RoleRollingUpdate leaves the decode pods at their older label",
    );
    cluster.modelServing.spec.rolloutStrategy = {
      type: "ServingGroupRollingUpdate",
      rollingUpdateConfiguration: { maxUnavailable: 1 },
    };
    cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
    run(cluster, () => assert.deepEqual(disruptedGroups(cluster), []));
    assert.deepEqual(
      decode()
        .map((p) => p.metadata.uid)
        .sort(),
      uids,
      "decode pods were replaced",
    );
    assert.deepEqual([...new Set(decode().map((p) => p.metadata.labels?.["tandem.dev/revision"]))], [current]);
  });

  it("a relabel whose write failed for a worker while its entry's went through is retried (fuzz-faults-coordinated-crash-gang-920: the entry's label made the instance look done, so the worker kept its older label and the rollout never completed)", () => {
    const cluster = afterPrefillOnlyRoleUpdate();
    const current = cluster.modelServing.status.currentRevision;
    cluster.modelServing.spec.rolloutStrategy = {
      type: "ServingGroupRollingUpdate",
      rollingUpdateConfiguration: { maxUnavailable: 1 },
    };
    cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
    const lost = "llm-0-decode-0-1";
    const first = plan(observe(cluster), NOW).actions;
    assert.ok(
      first.some((action) => action.type === "AnnotatePod" && action.name === lost),
      "the worker is relabelled with its entry",
    );
    apply(
      cluster,
      first.filter((action) => !(action.type === "AnnotatePod" && action.name === lost)),
    );
    assert.equal(
      cluster.pods.get("llm-0-decode-0-0")?.metadata.labels?.["tandem.dev/revision"],
      current,
      "the entry's relabel went through",
    );
    run(cluster);
    const decode = [...cluster.pods.values()].filter((p) => p.metadata.name.includes("decode"));
    assert.deepEqual([...new Set(decode.map((p) => p.metadata.labels?.["tandem.dev/revision"]))], [current]);
  });

  it("an update back to the current revision while a group strategy holds a group at another one, switched to RoleRollingUpdate, still moves that group (fuzz-faults-coordinated-crash-gang-925: the permits and surge instance at the current revision were dropped as redundant, so the group record kept every instance at the old revision and the rollout said Converged)", () => {
    const cluster = idealCluster(
      pdManifest({
        rolloutStrategy: { type: "ServingGroupRollingUpdate", rollingUpdateConfiguration: { maxUnavailable: 1 } },
      }),
    );
    run(cluster);
    setDecodeImage(cluster, "vllm:v2");
    run(cluster);
    const current = cluster.modelServing.status.currentRevision;
    setDecodeImage(cluster, "vllm:v1");
    const movedBack = () =>
      (cluster.modelServing.status.units ?? []).some(
        (unit: any) =>
          unit.role === undefined &&
          unit.revision !== current &&
          images(cluster, `llm-${unit.group}-decode`).every((image) => image.endsWith("vllm:v1")),
      );
    planUntil(cluster, movedBack, "a group rebuilt at the rolled-back revision");
    setDecodeImage(cluster, "vllm:v2");
    cluster.modelServing.spec.rolloutStrategy = {
      type: "RoleRollingUpdate",
      rollingUpdateConfiguration: { maxUnavailable: 1 },
    };
    cluster.modelServing.spec.template.roles[1].maxSurge = 1;
    run(cluster);
    assert.ok(
      images(cluster, "llm-")
        .filter((image) => image.includes("decode"))
        .every((image) => image.endsWith("vllm:v2")),
      images(cluster, "llm-").join(" "),
    );
    assert.equal(cluster.modelServing.status.currentRevision, current);
    assert.deepEqual(
      cluster.modelServing.status.units ?? [],
      [],
      "no record is left once every unit runs the current revision",
    );
  });

  it("under ServingGroupRecreate, an instance such an update back to the current revision moved is rebuilt alone when it fails: the rest of its group stays, below the role partition too (review of fuzz-925's fix)", () => {
    const cluster = idealCluster(
      pdManifest({
        recoveryPolicy: "ServingGroupRecreate",
        rolloutStrategy: { type: "ServingGroupRollingUpdate", rollingUpdateConfiguration: { maxUnavailable: 1 } },
      }),
    );
    run(cluster);
    setDecodeImage(cluster, "vllm:v2");
    run(cluster);
    const current = cluster.modelServing.status.currentRevision;
    setDecodeImage(cluster, "vllm:v1");
    planUntil(
      cluster,
      () =>
        (cluster.modelServing.status.units ?? []).some(
          (unit: any) => unit.role === undefined && unit.group === 2 && unit.revision !== current,
        ) &&
        images(cluster, "llm-2-decode").length === 4 &&
        images(cluster, "llm-2-decode").every((image) => image.endsWith("vllm:v1")),
      "group 2 rebuilt at the rolled-back revision",
    );
    setDecodeImage(cluster, "vllm:v2");
    cluster.modelServing.spec.rolloutStrategy = {
      type: "RoleRollingUpdate",
      rollingUpdateConfiguration: { maxUnavailable: 1 },
    };
    cluster.modelServing.spec.template.roles[1].partition = 1;
    run(cluster);
    assert.ok(
      images(cluster, "llm-2-decode-1").every((image) => image.endsWith("vllm:v2")),
      "decode-1 of group 2 moved back to the current revision",
    );
    const kept = [...cluster.pods.values()]
      .filter((p) => p.metadata.name.startsWith("llm-2-") && !p.metadata.name.startsWith("llm-2-decode-1"))
      .map((p) => p.metadata.uid)
      .sort();
    cluster.pods.delete("llm-2-decode-1-1");
    run(cluster);
    assert.deepEqual(
      [...cluster.pods.values()]
        .filter((p) => p.metadata.name.startsWith("llm-2-") && !p.metadata.name.startsWith("llm-2-decode-1"))
        .map((p) => p.metadata.uid)
        .sort(),
      kept,
      "prefill and decode-0 (below the partition) were rebuilt",
    );
  });

  it("a switch to a group strategy while groups serve only through role surge instances: those stay until the desired ones serve, and the group rollout keeps its budget (regression: dropped in every group at once)", () => {
    for (const type of ["ServingGroupRollingUpdate", "InPlaceUpdate"]) {
      const cluster = carriedBySurgeInTwoGroups();
      cluster.modelServing.spec.rolloutStrategy = { type, rollingUpdateConfiguration: { maxUnavailable: 1 } };
      // Role budgets apply only to RoleRollingUpdate: the spec drops them with the switch.
      delete cluster.modelServing.spec.template.roles[1].maxSurge;
      delete cluster.modelServing.spec.template.roles[1].maxUnavailable;
      cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
      run(cluster, () =>
        assert.ok(
          disruptedGroups(cluster, 1).length <= 1,
          `${type}: groups disrupted at once: ${disruptedGroups(cluster, 1).join(",")}`,
        ),
      );
      for (const group of groupLabels(cluster))
        assert.deepEqual(unitImages(cluster, group, "decode"), ["vllm:v2 vllm:v2"], `${type}: one decode instance`);
    }
  });

  it("a switch to a group strategy while groups serve only through role surge instances re-recorded at a newer update (their pods keep the older label, same role spec): the group rollout keeps its budget (fuzz-2180: every group was taken at once)", () => {
    for (const type of ["ServingGroupRollingUpdate", "InPlaceUpdate"]) {
      const cluster = carriedBySurgeInTwoGroups();
      // A prefill-only update re-records the decode surge instances at its revision; their pods keep the v2 label.
      cluster.modelServing.spec.template.roles[0].entryTemplate = pod("vllm:v3");
      cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
      apply(cluster, plan(observe(cluster), NOW + 20_000).actions);
      const update = cluster.modelServing.status.updateRevision;
      const reRecorded = (cluster.modelServing.status.units ?? [])
        .filter((unit: any) => unit.role === "decode" && unit.instance === 1 && unit.revision === update)
        .map((unit: any) => unit.group);
      // With successions, the v2 surge instances that serve already took the desired positions:
      // re-recorded ones (if any) are those still surge. The budget must hold either way.
      assert.ok(reRecorded.every((group: number) => group >= 0));
      cluster.modelServing.spec.rolloutStrategy = { type, rollingUpdateConfiguration: { maxUnavailable: 1 } };
      delete cluster.modelServing.spec.template.roles[1].maxSurge;
      delete cluster.modelServing.spec.template.roles[1].maxUnavailable;
      cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
      run(cluster, () =>
        assert.ok(
          disruptedGroups(cluster, 1).length <= 1,
          `${type}: groups disrupted at once: ${disruptedGroups(cluster, 1).join(",")}`,
        ),
      );
      assert.ok(
        images(cluster, "llm-").every((i) => i.endsWith(i.includes("prefill") ? "vllm:v3" : "vllm:v2")),
        `${type}: ${images(cluster, "llm-").join(" ")}`,
      );
    }
  });
});

describe("partition", () => {
  it("the seed's example: partition 2 keeps groups 0 and 1 on v1, even after losing every pod", () => {
    const cluster = idealCluster(pdManifest({ rolloutStrategy: { rollingUpdateConfiguration: { partition: 2 } } }));
    run(cluster);
    const v1 = cluster.modelServing.status.currentRevision;
    setDecodeImage(cluster, "vllm:v2");
    run(cluster);
    const labels = () =>
      [0, 1, 2].map((g) => cluster.pods.get(`llm-${g}-decode-0-0`)?.metadata.labels?.["tandem.dev/revision"]);
    const v2 = cluster.modelServing.status.updateRevision;
    assert.deepEqual(labels(), [v1, v1, v2]);
    // Every pod of group 1 is lost; the plan is stateless, so this is also a controller restart.
    for (const name of [...cluster.pods.keys()]) if (name.startsWith("llm-1-")) cluster.pods.delete(name);
    run(cluster);
    assert.deepEqual(labels(), [v1, v1, v2]);
  });

  it("a v1 → v2 → v3 chain: units still on v1 recover at v1 and GC keeps v1", () => {
    const cluster = idealCluster(
      pdManifest({ revisionHistoryLimit: 0, rolloutStrategy: { rollingUpdateConfiguration: { partition: 1 } } }),
    );
    run(cluster);
    const v1 = cluster.modelServing.status.currentRevision;
    setDecodeImage(cluster, "vllm:v2");
    run(cluster);
    setDecodeImage(cluster, "vllm:v3");
    run(cluster);
    for (const name of [...cluster.pods.keys()]) if (name.startsWith("llm-0-")) cluster.pods.delete(name);
    run(cluster);
    assert.equal(cluster.pods.get("llm-0-decode-0-0")?.metadata.labels?.["tandem.dev/revision"], v1);
    assert.ok(cluster.revisions.has(v1), "v1 is live (current revision) and never collected");
    assert.equal(cluster.revisions.size, 2, "v2 is no longer referenced and the history limit is 0");
  });
});

describe("partition raised mid-rollout (StatefulSet semantics: read at every pass)", () => {
  const DRAIN = { timeoutSeconds: 60 };
  const uids = (cluster: IdealCluster) =>
    [...cluster.pods.values()].map((p) => `${p.metadata.name}=${p.metadata.uid ?? ""}`).sort();
  const draining = (cluster: IdealCluster) =>
    [...cluster.pods.values()]
      .filter((p) => p.metadata.annotations?.["tandem.dev/draining"] !== undefined)
      .map((p) => p.metadata.name);
  const revisionOf = (cluster: IdealCluster, name: string) =>
    cluster.pods.get(name)?.metadata.labels?.["tandem.dev/revision"];

  /** Plans and applies once at `atMs`: the update's first permits are recorded and their drains begin. */
  function startUpdate(cluster: IdealCluster, atMs: number): void {
    setDecodeImage(cluster, "vllm:v2");
    apply(cluster, plan(observe(cluster), atMs).actions);
  }

  function raise(cluster: IdealCluster, change: (spec: Record<string, any>) => void): void {
    change(cluster.modelServing.spec);
    cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
  }

  it("over a group whose replacement is only draining: the permit is withdrawn and the drain cancelled; the group keeps its pods (regression: it was replaced at the update revision)", () => {
    const cluster = idealCluster(pdManifest({ drain: DRAIN }));
    run(cluster);
    const v1 = cluster.modelServing.status.currentRevision;
    const before = uids(cluster);
    startUpdate(cluster, NOW);
    assert.deepEqual(cluster.modelServing.status.units, [
      { group: 2, revision: cluster.modelServing.status.updateRevision },
    ]);
    assert.ok(draining(cluster).length > 0 && draining(cluster).every((name) => name.startsWith("llm-2-")));
    raise(cluster, (spec) => (spec.rolloutStrategy = { rollingUpdateConfiguration: { partition: 3 } }));
    // Within the drain timeout: nothing has been deleted yet.
    run(cluster, () => assert.deepEqual(uids(cluster), before, "no pod is deleted"));
    assert.deepEqual(draining(cluster), []);
    assert.equal(cluster.modelServing.status.units, undefined, "the withdrawn permit leaves no record");
    assert.ok([0, 1, 2].every((group) => revisionOf(cluster, `llm-${group}-decode-0-0`) === v1));
    assert.ok(
      [0, 1, 2].every(
        (group) => available(cluster, group, "decode") === 2 && available(cluster, group, "prefill") === 2,
      ),
    );
  });

  it("over a group some of whose instances are already deleted: the group goes back whole, those rebuilt at the revision the others run", () => {
    const cluster = idealCluster(pdManifest({ drain: DRAIN }));
    run(cluster);
    const v1 = cluster.modelServing.status.currentRevision;
    startUpdate(cluster, NOW);
    // The prefill drains ended first (their router acks came in): deleted and gone.
    for (const name of [...cluster.pods.keys()]) if (name.startsWith("llm-2-prefill-")) cluster.pods.delete(name);
    raise(cluster, (spec) => (spec.rolloutStrategy = { rollingUpdateConfiguration: { partition: 3 } }));
    run(cluster);
    assert.deepEqual(draining(cluster), []);
    assert.ok([...cluster.pods.values()].every((p) => p.metadata.labels?.["tandem.dev/revision"] === v1));
    assert.ok(available(cluster, 2, "prefill") === 2 && available(cluster, 2, "decode") === 2);
  });

  it("over a group whose pods are gone: it is rebuilt at its record, the update revision", () => {
    const cluster = idealCluster(pdManifest({ drain: DRAIN }));
    run(cluster);
    startUpdate(cluster, NOW);
    const v2 = cluster.modelServing.status.updateRevision;
    for (const name of [...cluster.pods.keys()]) if (name.startsWith("llm-2-")) cluster.pods.delete(name);
    raise(cluster, (spec) => (spec.rolloutStrategy = { rollingUpdateConfiguration: { partition: 3 } }));
    run(cluster);
    assert.equal(revisionOf(cluster, "llm-2-decode-0-0"), v2);
    assert.equal(revisionOf(cluster, "llm-2-prefill-0-0"), v2);
  });

  it("RoleRollingUpdate, over an instance being drained: it keeps its pods; instances above the role partition still move", () => {
    const cluster = idealCluster(
      pdManifest(
        {
          drain: DRAIN,
          rolloutStrategy: { type: "RoleRollingUpdate", rollingUpdateConfiguration: { maxUnavailable: 3 } },
        },
        { maxUnavailable: 2 },
      ),
    );
    run(cluster);
    const v1 = cluster.modelServing.status.currentRevision;
    const keeps = uids(cluster).filter((entry) => entry.includes("decode-0-"));
    startUpdate(cluster, NOW);
    assert.ok(
      draining(cluster).some((name) => name.includes("decode-0-")),
      "decode-0 is being drained",
    );
    raise(cluster, (spec) => (spec.template.roles[1].partition = 1));
    // Past the drain timeout of the decode-1 instances, which still move.
    for (let second = 1; second <= 90; second++) {
      apply(cluster, plan(observe(cluster), NOW + second * 1000).actions);
      assert.deepEqual(
        uids(cluster).filter((entry) => entry.includes("decode-0-")),
        keeps,
        "no decode-0 pod is deleted",
      );
    }
    const v2 = cluster.modelServing.status.updateRevision;
    assert.ok(
      [0, 1, 2].every(
        (group) =>
          revisionOf(cluster, `llm-${group}-decode-0-0`) === v1 &&
          revisionOf(cluster, `llm-${group}-decode-1-0`) === v2,
      ),
    );
    assert.deepEqual(draining(cluster), []);
  });
});

describe("rollback", () => {
  it("scale to 6 during an update, then roll back: 6 groups remain, on the old template", () => {
    const cluster = idealCluster(pdManifest());
    run(cluster);
    const v1Name = cluster.modelServing.status.currentRevision;
    const v1 = structuredClone(cluster.revisions.get(v1Name)!.data);
    setDecodeImage(cluster, "vllm:v2");
    apply(cluster, plan(observe(cluster), NOW).actions);
    cluster.modelServing.spec.replicas = 6;
    run(cluster);
    rollBack(cluster, v1);
    run(cluster);
    assert.equal(cluster.modelServing.spec.replicas, 6);
    assert.equal(new Set([...cluster.pods.values()].map((p) => p.metadata.labels?.["tandem.dev/group"])).size, 6);
    assert.ok(images(cluster, "llm-").every((i) => i.endsWith("vllm:v1")));
    assert.equal(cluster.modelServing.status.updateRevision, v1Name, "rollback re-uses the equal old revision");
    assert.equal(cluster.revisions.get(v1Name)?.revision, 3, "and advances its number");
  });

  it("changing workerReplicas and rolling back: the instance structure follows the revision", () => {
    const cluster = idealCluster(pdManifest({ replicas: 1 }));
    run(cluster);
    const v1 = structuredClone(cluster.revisions.get(cluster.modelServing.status.currentRevision)!.data);
    cluster.modelServing.spec.template.roles[1].workerReplicas = 3;
    run(cluster);
    assert.ok(cluster.pods.has("llm-0-decode-1-3"));
    rollBack(cluster, v1);
    run(cluster);
    assert.ok(!cluster.pods.has("llm-0-decode-1-2") && cluster.pods.has("llm-0-decode-1-1"));
  });
});

describe("coordinated RoleRollingUpdate (in the planner)", () => {
  function chainManifest(
    maxSkew: string,
    roles: {
      name: string;
      replicas: number;
      maxUnavailable?: number | string;
      maxSurge?: number;
      partition?: number;
    }[],
    dependencies?: { role: string; dependsOn: string[] }[],
  ) {
    return manifest(
      {
        replicas: 1,
        rolloutStrategy: {
          type: "RoleRollingUpdate",
          coordination: { maxSkew, ...(dependencies ? { dependencies } : {}) },
        },
      },
      roles.map((role) => ({ entryTemplate: pod("img:v1"), ...role })),
    );
  }

  function update(cluster: IdealCluster): void {
    for (const role of cluster.modelServing.spec.template.roles) role.entryTemplate = pod("img:v2");
    cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
  }

  it("the seed's example: from zero at 10%, roles of 100, 50 and 10 get 10, 5 and 1 start permits", () => {
    const cluster = idealCluster(
      chainManifest("10%", [
        { name: "a", replicas: 100, maxUnavailable: "100%" },
        { name: "b", replicas: 50, maxUnavailable: "100%" },
        { name: "c", replicas: 10, maxUnavailable: "100%" },
      ]),
    );
    run(cluster);
    update(cluster);
    apply(cluster, plan(observe(cluster), NOW).actions);
    const units: { role: string }[] = cluster.modelServing.status.units;
    assert.deepEqual(
      ["a", "b", "c"].map((role) => units.filter((unit) => unit.role === role).length),
      [10, 5, 1],
    );
    run(cluster);
    assert.ok([...cluster.pods.values()].every((p) => p.spec.containers[0]?.image === "img:v2"));
  });

  it("a chain a → b → c where c has one instance: c builds its new instance beside the old one (surge) and goes last", () => {
    const cluster = idealCluster(
      chainManifest(
        "50%",
        [
          { name: "a", replicas: 4 },
          { name: "b", replicas: 2 },
          { name: "c", replicas: 1, maxSurge: 1 },
        ],
        [
          { role: "a", dependsOn: ["b"] },
          { role: "b", dependsOn: ["c"] },
        ],
      ),
    );
    run(cluster);
    update(cluster);
    const oldServing = (role: string) =>
      [...cluster.pods.values()].filter(
        (p) => p.metadata.labels?.["tandem.dev/role"] === role && p.spec.containers[0]?.image === "img:v1",
      ).length;
    const newReady = (role: string) =>
      [...cluster.pods.values()].filter(
        (p) =>
          p.metadata.labels?.["tandem.dev/role"] === role && p.spec.containers[0]?.image === "img:v2" && isReady(p),
      ).length;
    run(cluster, () => {
      if (oldServing("a") < 4)
        assert.ok(
          newReady("b") > 0 && newReady("c") > 0,
          "a started before its whole dependency path had new Ready capacity",
        );
      if (oldServing("a") > 0) assert.ok(oldServing("b") >= 1, "the last old b went while old a remained");
      if (oldServing("b") > 0) assert.ok(oldServing("c") >= 1, "the last old c went while old b remained");
    });
    assert.ok([...cluster.pods.values()].every((p) => p.spec.containers[0]?.image === "img:v2"));
    assert.equal(unitImages(cluster, 0, "c").length, 1, "one c instance at the end, started once");
  });

  it("a serving surge instance yields to a starved replacement when maxSkew withholds the old instance's permit, and is not wanted back while it starves (fuzz-coordinated-69)", () => {
    const cluster = idealCluster(
      chainManifest("25%", [
        { name: "prefill", replicas: 1 },
        { name: "decode", replicas: 2, maxUnavailable: 1, maxSurge: 1 },
      ]),
    );
    run(cluster);
    update(cluster);
    // A full cluster: a replacement at the new image cannot be placed while the surge pod lives.
    const starve = () => {
      for (const instance of [0, 1]) {
        const desired = cluster.pods.get(`llm-0-decode-${instance}-0`);
        if (desired?.spec.containers[0]?.image === "img:v2" && !isReady(desired)) desired.status = unschedulable;
      }
    };
    let surgeSeen = false;
    for (let round = 0; round < 12; round++) {
      apply(cluster, plan(observe(cluster), NOW + round * 1000).actions);
      starve();
      surgeSeen ||= cluster.pods.has("llm-0-decode-2-0");
    }
    assert.ok(surgeSeen, "the rollout started with a surge instance");
    assert.ok(
      unitImages(cluster, 0, "decode").length <= 2,
      "a surge instance kept the capacity the starved replacement needs while the old one waited for maxSkew",
    );
    assert.ok(
      [...cluster.pods.values()].some((p) => p.metadata.labels?.["tandem.dev/role"] === "decode" && isReady(p)),
      "a decode instance serves on: the role's floor (the old one, or the surge instance that succeeded it)",
    );
    // With the capacity back, the rollout completes.
    for (const [name, found] of cluster.pods)
      if (found.status?.phase === "Pending") cluster.pods.set(name, readyPod(found, false));
    run(cluster);
    assert.deepEqual(unitImages(cluster, 0, "decode"), ["img:v2", "img:v2"]);
  });

  it("without surge, the chain waits with RolloutBlocked naming the role and the fix (once, however many groups say it), and never breaks the order", () => {
    const cluster = idealCluster({
      ...chainManifest(
        "50%",
        [
          { name: "a", replicas: 2 },
          { name: "c", replicas: 1 },
        ],
        [{ role: "a", dependsOn: ["c"] }],
      ),
    });
    cluster.modelServing.spec.replicas = 3;
    run(cluster);
    update(cluster);
    run(cluster);
    const blocked = cluster.modelServing.status.conditions.find((c: any) => c.type === "RolloutBlocked");
    assert.equal(blocked?.status, "True");
    assert.match(blocked.message, /role c must keep an old instance .* set maxSurge on role c/);
    assert.equal(blocked.message.split("role c must keep an old instance").length, 2, "said once, not once per group");
    assert.ok([...cluster.pods.values()].every((p) => p.spec.containers[0]?.image === "img:v1"));
  });

  it("decode (2) keeps one old instance for prefill, capping it at 1/2, which leaves prefill (3) at 10% short: RolloutBlocked with the smallest maxSkew, which then finishes", () => {
    const cluster = idealCluster(
      chainManifest(
        "10%",
        [
          { name: "prefill", replicas: 3, maxUnavailable: 1 },
          { name: "decode", replicas: 2 },
        ],
        [{ role: "prefill", dependsOn: ["decode"] }],
      ),
    );
    run(cluster);
    update(cluster);
    run(cluster);
    const conditions = (type: string) => cluster.modelServing.status.conditions.find((c: any) => c.type === type);
    assert.equal(conditions("RolloutBlocked")?.status, "True");
    assert.match(
      conditions("RolloutBlocked").message,
      /role prefill may start only 2 of its 3 .* role decode keeps an old instance .* set maxSurge on role decode \(e\.g\. 1\), raise maxSkew to at least 17%, or remove the dependency on role decode/,
    );
    assert.deepEqual(
      [conditions("Progressing")?.status, conditions("Progressing")?.reason],
      ["False", "RolloutBlocked"],
      "not Converged",
    );
    assert.deepEqual(images(cluster, "llm-0-"), [
      "llm-0-decode-0-0=img:v1",
      "llm-0-decode-1-0=img:v2",
      "llm-0-prefill-0-0=img:v1",
      "llm-0-prefill-1-0=img:v2",
      "llm-0-prefill-2-0=img:v2",
    ]);
    cluster.modelServing.spec.rolloutStrategy.coordination.maxSkew = "17%";
    run(cluster);
    assert.ok([...cluster.pods.values()].every((p) => p.spec.containers[0]?.image === "img:v2"));
    assert.equal(
      cluster.modelServing.status.conditions.find((c: any) => c.type === "RolloutBlocked"),
      undefined,
    );
  });

  it("prefill-0 below prefill's partition keeps decode's last old instance and its surge: Progressing says so until the partition is lowered", () => {
    const cluster = idealCluster(
      chainManifest(
        "100%",
        [
          { name: "prefill", replicas: 3, partition: 1 },
          { name: "decode", replicas: 1, maxSurge: 1 },
        ],
        [{ role: "prefill", dependsOn: ["decode"] }],
      ),
    );
    run(cluster);
    update(cluster);
    run(cluster);
    assert.deepEqual(images(cluster, "llm-0-"), [
      "llm-0-decode-0-0=img:v1",
      "llm-0-decode-1-0=img:v2",
      "llm-0-prefill-0-0=img:v1",
      "llm-0-prefill-1-0=img:v2",
      "llm-0-prefill-2-0=img:v2",
    ]);
    const progressing = cluster.modelServing.status.conditions.find((c: any) => c.type === "Progressing");
    assert.deepEqual(
      [progressing?.status, progressing?.reason],
      ["True", "RolloutWaiting"],
      "not Converged: the surge instance and decode-0 wait for the partition",
    );
    assert.match(
      progressing.message,
      /group 0 role decode: keeps its last old instance \(and any surge instance beside it\) while role\(s\) prefill that depend on it run old instances below their partition: lower the partition of prefill/,
    );
    cluster.modelServing.spec.template.roles[0].partition = 0;
    run(cluster);
    assert.ok([...cluster.pods.values()].every((p) => p.spec.containers[0]?.image === "img:v2"));
    assert.equal(unitImages(cluster, 0, "decode").length, 1, "one decode instance at the end");
    assert.equal(
      cluster.modelServing.status.conditions.find((c: any) => c.type === "Progressing")?.reason,
      "Converged",
    );
  });
});

describe("waits that only capacity or a larger maxUnavailable end (starved)", () => {
  /** Plans `rounds` rounds; the pod `name` re-created after `lostUid` went cannot be scheduled. */
  function starve(cluster: IdealCluster, name: string, lostUid: string, fromMs: number, rounds = 10): void {
    for (let round = 0; round < rounds; round++) {
      apply(cluster, plan(observe(cluster), fromMs + round * 1000).actions);
      const rebuilt = cluster.pods.get(name);
      if (rebuilt !== undefined && rebuilt.metadata.uid !== lostUid) rebuilt.status = unschedulable;
    }
  }
  const progressing = (cluster: IdealCluster) =>
    cluster.modelServing.status.conditions.find((c: any) => c.type === "Progressing");

  it("a retired instance whose lost successor cannot be scheduled stays, and the rollout says why and how to unblock it (succession.md)", () => {
    const cluster = prefillUpdated(2);
    planUntil(
      cluster,
      () => cluster.modelServing.status?.ordinals?.some((entry: any) => entry.retired === true) === true,
      "prefill-2 (surge) succeeds prefill-1",
    );
    const successor = cluster.pods.get("llm-0-prefill-2-0") as Pod;
    deleteByOthers(cluster, "llm-0-prefill-2-0");
    starve(cluster, "llm-0-prefill-2-0", successor.metadata.uid ?? "", NOW + 20_000);
    assert.ok(cluster.pods.has("llm-0-prefill-1-0"), "the retired instance stays: it carries the floor");
    assert.equal(progressing(cluster).reason, "RolloutWaiting");
    assert.match(
      progressing(cluster).message,
      /^group 0 role prefill: 1 of 2 desired instance\(s\) available with maxUnavailable 0: the rest wait for capacity while the retired unit\(s\) prefill-1 of group 0, succeeded and due to go, carry the floor, and draining them would break the budget; add capacity or raise maxUnavailable; /,
    );
  });

  it("an instance below a partition raised mid-rollout, lost and rebuilt at its record, cannot be scheduled: the serving surge instance stays and the rollout says why (starvedMessage)", () => {
    const cluster = prefillUpdated(2);
    // prefill-2 succeeds prefill-1; prefill-1's ordinal, freed, carries the next surge instance.
    planUntil(
      cluster,
      () => {
        const surge = cluster.pods.get("llm-0-prefill-1-0");
        return surge?.spec.containers[0]?.image === "vllm:v2" && servesReady(surge);
      },
      "the second surge instance (ordinal 1) serves at v2",
    );
    cluster.modelServing.spec.template.roles[0].partition = 1;
    cluster.modelServing.metadata.generation = Number(cluster.modelServing.metadata.generation) + 1;
    const lost = cluster.pods.get("llm-0-prefill-0-0") as Pod;
    assert.equal(lost.spec.containers[0]?.image, "vllm:v1");
    deleteByOthers(cluster, "llm-0-prefill-0-0");
    starve(cluster, "llm-0-prefill-0-0", lost.metadata.uid ?? "", NOW + 20_000);
    assert.deepEqual(
      images(cluster, "llm-0-prefill"),
      ["llm-0-prefill-0-0=vllm:v1", "llm-0-prefill-1-0=vllm:v2", "llm-0-prefill-2-0=vllm:v2"],
      "rebuilt at its record below the partition; the surge instance stays",
    );
    assert.equal(progressing(cluster).reason, "RolloutWaiting");
    assert.match(
      progressing(cluster).message,
      /^group 0 role prefill: 1 of 2 desired instance\(s\) available with maxUnavailable 0: the rest wait for capacity while 1 surge instance\(s\) carry the floor, and scaling those down would break the budget; add capacity or raise maxUnavailable\. Not Ready: prefill-0 of group 0: /,
    );
  });
});
