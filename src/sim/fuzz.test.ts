import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { fuzzChaos, fuzzScenario } from "./fuzz.ts";
import { parseScenario } from "./scenario.ts";
import { parseModelServing } from "../api/parse.ts";
import type { JsonObject } from "../engine/ports.ts";
import { mergePatch } from "./json.ts";

/** Problems of each spec version the scenario's merge patches make (the runner refuses an invalid one). */
function specProblems(scenario: Record<string, unknown>): string[] {
  let stored: unknown;
  const problems: string[] = [];
  for (const [index, step] of (scenario["steps"] as readonly Record<string, unknown>[]).entries()) {
    if ("apply" in step) stored = step["apply"];
    else if ("patch" in step) stored = mergePatch(stored as JsonObject, (step["patch"] as { merge: JsonObject }).merge);
    else continue;
    const parsed = parseModelServing({ ...(stored as object), metadata: { name: "m", namespace: "default" } });
    if (!parsed.ok) problems.push(`step ${index}: ${JSON.stringify(parsed.problems)}`);
  }
  return problems;
}

describe("fuzzScenario", () => {
  it("gives a valid scenario for every generator seed: a parse failure would be the generator's bug", () => {
    for (let seed = 0; seed < 300; seed++) {
      const parsed = parseScenario(fuzzScenario(seed));
      assert.ok(parsed.ok, `seed ${seed}: ${JSON.stringify(parsed.ok ? [] : parsed.problems)}`);
      assert.deepEqual(
        parsed.scenario.steps.slice(-2).map((step) => JSON.stringify(step).includes("RolloutComplete")),
        [true, false],
        `seed ${seed}: ends waiting for RolloutComplete, then Available`,
      );
      assert.deepEqual(specProblems(fuzzScenario(seed)), [], `seed ${seed}: every spec version is valid`);
    }
  });

  it("deletes a pod only right after waiting for Available, when group 0 surely has one that is not being deleted (fuzz-25), naming the group by position: after a succession no group may carry ordinal 0 (fuzz-faults-910001)", () => {
    for (let seed = 0; seed < 300; seed++) {
      const steps = fuzzScenario(seed)["steps"] as readonly Record<string, unknown>[];
      steps.forEach((step, index) => {
        if (!("deletePods" in step)) return;
        assert.deepEqual(step["deletePods"], { selector: "tandem.dev/modelserving=m", count: 1, groupPosition: 0 });
        assert.deepEqual(
          steps[index - 1],
          { wait: { for: "Available", timeoutSeconds: 1800 } },
          `seed ${seed}: step ${index} deletes a pod without waiting for Available first`,
        );
      });
    }
  });

  it("is a function of the seed: the same seed gives the same scenario, others differ", () => {
    assert.deepEqual(fuzzScenario(42), fuzzScenario(42));
    const texts = new Set(Array.from({ length: 50 }, (_, seed) => JSON.stringify({ ...fuzzScenario(seed), name: "" })));
    assert.ok(texts.size >= 45, `only ${texts.size} distinct scenarios of 50`);
  });

  describe("with faults", () => {
    const FAULT_KINDS = ["failNode", "recoverNode", "restartController", "rollback", "crashRouter", "restartRouter"];
    const kindOf = (step: unknown): string => Object.keys(step as object)[0] ?? "";
    /** The roles' images an apply or patch step sets, as one string; none for other steps. */
    const imagesOf = (step: Record<string, unknown>): string[] => {
      const object = (step["apply"] ?? (step["patch"] as { merge?: unknown } | undefined)?.merge) as
        | { spec?: { template?: { roles?: { entryTemplate: { spec: { containers: { image: string }[] } } }[] } } }
        | undefined;
      const roles = object?.spec?.template?.roles;
      return roles === undefined
        ? []
        : [
            roles
              .map((role) => role.entryTemplate.spec.containers.map((container) => container.image).join(","))
              .join(" "),
          ];
    };

    it("is the same scenario with faults added: every change and wait of it, in order, a valid scenario that ends with the same two waits", () => {
      for (let seed = 0; seed < 200; seed++) {
        const plain = fuzzScenario(seed)["steps"] as readonly unknown[];
        const faulty = fuzzScenario(seed, { faults: true });
        const parsed = parseScenario(faulty);
        assert.ok(parsed.ok, `seed ${seed}: ${JSON.stringify(parsed.ok ? [] : parsed.problems)}`);
        let at = 0;
        for (const step of faulty["steps"] as readonly unknown[])
          if (at < plain.length && JSON.stringify(step) === JSON.stringify(plain[at])) at += 1;
        assert.equal(at, plain.length, `seed ${seed}: step ${at} of the plain scenario is missing`);
        assert.deepEqual((faulty["steps"] as readonly unknown[]).slice(-2), plain.slice(-2));
      }
    });

    it("recovers every failed node before its next step that is not a wait for some seconds, and ends every fault before the last two waits", () => {
      let outages = 0;
      for (let seed = 0; seed < 200; seed++) {
        const scenario = fuzzScenario(seed, { faults: true });
        const steps = scenario["steps"] as readonly Record<string, unknown>[];
        assert.ok(
          steps.slice(-2).every((step) => !FAULT_KINDS.includes(kindOf(step)) && kindOf(step) !== "deletePods"),
          `seed ${seed}`,
        );
        assert.equal(fuzzChaos(scenario as { steps: unknown[] }).untilStep, steps.length - 2);
        steps.forEach((step, index) => {
          if (!("failNode" in step)) return;
          outages += 1;
          assert.equal(kindOf(steps[index + 1]), "wait", `seed ${seed}: step ${index + 1}`);
          assert.deepEqual(
            steps[index + 2],
            { recoverNode: step["failNode"] },
            `seed ${seed}: step ${index + 2} recovers the node`,
          );
        });
      }
      assert.ok(outages > 50, `only ${outages} outages in 200 scenarios`);
    });

    it("crashes a router replica now and then, only with router traffic, and restarts it after a wait", () => {
      let episodes = 0;
      for (let seed = 0; seed < 200; seed++) {
        const scenario = fuzzScenario(seed, { faults: true });
        const steps = scenario["steps"] as readonly Record<string, unknown>[];
        const router = (scenario["cluster"] as { router?: { replicas?: number } }).router;
        steps.forEach((step, index) => {
          if (!("crashRouter" in step)) return;
          episodes += 1;
          assert.ok(router !== undefined, `seed ${seed}: a crash without a router`);
          const { replica } = step["crashRouter"] as { replica: number };
          assert.ok(replica < (router.replicas ?? 1));
          assert.equal(kindOf(steps[index + 1]), "wait", `seed ${seed}: step ${index + 1}`);
          assert.deepEqual(
            steps[index + 2],
            { restartRouter: { replica } },
            `seed ${seed}: step ${index + 2} restarts it`,
          );
        });
      }
      assert.ok(episodes > 50, `only ${episodes} router crashes in 200 scenarios`);
    });

    it("rolls back only once the images have changed, and deletes pods only right after waiting for Available", () => {
      for (let seed = 0; seed < 200; seed++) {
        const steps = fuzzScenario(seed, { faults: true })["steps"] as readonly Record<string, unknown>[];
        steps.forEach((step, index) => {
          if ("deletePods" in step)
            assert.deepEqual(
              steps[index - 1],
              { wait: { for: "Available", timeoutSeconds: 1800 } },
              `seed ${seed}: step ${index}`,
            );
          if ("rollback" in step)
            assert.ok(
              new Set(steps.slice(0, index).flatMap(imagesOf)).size > 1,
              `seed ${seed}: step ${index} rolls back before any image changed`,
            );
        });
      }
    });
  });

  describe("with crashes", () => {
    type Step = Record<string, any>;
    const imagesOfStep = (step: Step): string[] =>
      (step["patch"]?.merge.spec.template.roles ?? []).flatMap((role: Step) =>
        [role["entryTemplate"], role["workerTemplate"]]
          .filter(Boolean)
          .map((template: Step) => template["spec"].containers[0].image as string),
      );
    const crashes = (step: Step): boolean => imagesOfStep(step).some((image) => image.includes(":crash-"));

    it("is a valid scenario for every seed and mode, the plain one's changes and waits in order (fault rollbacks aside) with crash episodes added", () => {
      for (let seed = 0; seed < 200; seed++) {
        for (const mode of [{}, { faults: true }, { coordination: true }]) {
          const scenario = fuzzScenario(seed, { ...mode, crash: true });
          const parsed = parseScenario(scenario);
          assert.ok(
            parsed.ok,
            `seed ${seed} ${JSON.stringify(mode)}: ${JSON.stringify(parsed.ok ? [] : parsed.problems)}`,
          );
          assert.deepEqual(specProblems(scenario), [], `seed ${seed} ${JSON.stringify(mode)}`);
          // A fault rollback right after a crash was recovered would go back to the crash: it is left out (FaultSteps).
          const plainSteps = fuzzScenario(seed, mode)["steps"] as Step[];
          const plain = plainSteps
            .filter((step, index) => !("rollback" in step) && !("rollback" in (plainSteps[index + 1] ?? {})))
            .map((step) => JSON.stringify(step));
          let at = 0;
          for (const step of scenario["steps"] as unknown[])
            if (at < plain.length && JSON.stringify(step) === plain[at]) at += 1;
          assert.equal(
            at,
            plain.length,
            `seed ${seed} ${JSON.stringify(mode)}: step ${at} of the plain scenario is missing`,
          );
        }
      }
    });

    it("crashes at least once per scenario, each crash image declared crashing; every crash patch waits some seconds, then recovers (a rollback after a 10 s wait before the patch, or a patch to images that do not crash) and waits for RolloutComplete", () => {
      for (let seed = 0; seed < 300; seed++) {
        const scenario = fuzzScenario(seed, { crash: true });
        const steps = scenario["steps"] as Step[];
        const images = (scenario["cluster"] as Step)["images"] as Record<string, Step>;
        const episodes = steps.flatMap((step, index) => (crashes(step) ? [index] : []));
        assert.ok(episodes.length > 0, `seed ${seed}: no crash`);
        for (const index of episodes) {
          for (const image of imagesOfStep(steps[index]!).filter((name) => name.includes(":crash-")))
            assert.equal(images[image]?.["crash"], true, `seed ${seed}: ${image}`);
          assert.equal(
            steps[index]?.["patch"].merge.spec.rolloutStrategy.paused,
            false,
            `seed ${seed}: step ${index} is paused`,
          );
          assert.equal(steps[index + 1]?.["wait"]?.for, "Seconds", `seed ${seed}: step ${index + 1}`);
          const recovery = steps[index + 2]!;
          if ("rollback" in recovery)
            assert.deepEqual(
              steps[index - 1],
              { wait: { for: "Seconds", timeoutSeconds: 10 } },
              `seed ${seed}: step ${index - 1}`,
            );
          else assert.ok("patch" in recovery && !crashes(recovery), `seed ${seed}: step ${index + 2} recovers`);
          assert.deepEqual(
            steps[index + 3],
            { wait: { for: "RolloutComplete", timeoutSeconds: 1800 } },
            `seed ${seed}: step ${index + 3}`,
          );
        }
      }
    });
  });

  it("with gang: a valid scenario for every seed, with a gang policy (naming every role) in some spec versions and removed in others; never without it", () => {
    let ganged = 0;
    let removed = 0;
    for (let seed = 0; seed < 300; seed++) {
      const scenario = fuzzScenario(seed, { gang: true });
      assert.ok(parseScenario(scenario).ok, `seed ${seed}`);
      assert.deepEqual(specProblems(scenario), [], `seed ${seed}: a gang minimum beyond its role's replicas?`);
      const text = JSON.stringify(scenario);
      if (text.includes('"minRoleReplicas"')) ganged += 1;
      if (text.includes('"gangPolicy":null')) removed += 1;
      assert.ok(
        !JSON.stringify(fuzzScenario(seed)).includes('"gangPolicy"'),
        `seed ${seed}: a gang policy without the option`,
      );
    }
    assert.ok(ganged > 150 && removed > 30, `${ganged} of 300 scenarios set a gang policy, ${removed} remove one`);
  });

  it("with coordination: a valid scenario for every seed, coordinating the roles of some (RoleRollingUpdate with both roles); never without it", () => {
    let coordinated = 0;
    for (let seed = 0; seed < 300; seed++) {
      const scenario = fuzzScenario(seed, { coordination: true });
      const parsed = parseScenario(scenario);
      assert.ok(parsed.ok, `seed ${seed}: ${JSON.stringify(parsed.ok ? [] : parsed.problems)}`);
      if (JSON.stringify(scenario).includes('"coordination"')) coordinated += 1;
      assert.deepEqual(specProblems(scenario), [], `seed ${seed}`);
      assert.ok(
        !JSON.stringify(fuzzScenario(seed)).includes('"coordination"'),
        `seed ${seed}: coordination without the option`,
      );
    }
    assert.ok(coordinated > 50, `only ${coordinated} of 300 scenarios coordinate`);
  });
});
