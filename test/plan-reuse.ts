/**
 * The property test of incremental planning (issue #22 item 1): a planning function that makes
 * every plan twice, with `plan` (which reuses per-group work of earlier plans) and with
 * `planFromScratch` (which reuses nothing), hands the engine the first and records every plan
 * where the two differ. Run under generated scenarios (src/sim/fuzz.ts), faults and controller
 * restarts included, it compares incremental and from-scratch plans over random histories.
 */
import type { Plan } from "../src/core/actions.ts";
import type { Observed } from "../src/core/observed.ts";
import { plan, planFromScratch } from "../src/core/plan.ts";
import { canonicalJson } from "../src/core/revision/canonical.ts";
import type { JsonValue } from "../src/core/revision/canonical.ts";
import { fuzzChaos, fuzzScenario } from "../src/sim/fuzz.ts";
import type { FuzzOptions } from "../src/sim/fuzz.ts";
import { runScenario } from "../src/sim/runner.ts";
import { parseScenario } from "../src/sim/scenario.ts";

/** One plan where incremental and from-scratch planning disagreed. */
export interface Mismatch {
  readonly nowMs: number;
  readonly incremental: string;
  readonly fromScratch: string;
}

/** What one run compared. */
export interface Compared {
  readonly name: string;
  readonly plans: number;
  readonly mismatches: readonly Mismatch[];
}

/** Runs fuzz scenario `generatorSeed` at scenario seed `seed`, every plan made both ways. */
export async function comparePlans(generatorSeed: number, seed: number, options: FuzzOptions): Promise<Compared> {
  const scenario = fuzzScenario(generatorSeed, options);
  const parsed = parseScenario(scenario);
  if (!parsed.ok) throw new Error(`generator bug: ${JSON.stringify(parsed.problems)}`);
  let plans = 0;
  const mismatches: Mismatch[] = [];
  const compared = (observed: Observed, nowMs: number): Plan => {
    const incremental = plan(observed, nowMs);
    const fromScratch = planFromScratch(observed, nowMs);
    plans++;
    const a = canonicalJson(incremental as unknown as JsonValue);
    const b = canonicalJson(fromScratch as unknown as JsonValue);
    if (a !== b) mismatches.push({ nowMs, incremental: a, fromScratch: b });
    return incremental;
  };
  const chaos = options.faults === true ? { chaos: fuzzChaos(parsed.scenario) } : {};
  await runScenario(parsed.scenario, { seed, plan: compared, ...chaos });
  return { name: `${String(scenario["name"])} seed ${seed}`, plans, mismatches };
}
