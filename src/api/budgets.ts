/**
 * Resolution of IntOrString budgets against a total (DESIGN §1): `maxUnavailable` rounds down,
 * `maxSurge` and `partition` round up. Integer arithmetic only, so 33% of 3 is exactly 0 (down)
 * or 1 (up) on every machine.
 */
import type { IntOrPercent, ModelServingSpec, Role } from "./schema.ts";

export type Rounding = "down" | "up";

/** Resolves an integer or a percent of `total` (a non-negative integer). */
export function resolveIntOrPercent(value: IntOrPercent, total: number, rounding: Rounding): number {
  if (typeof value === "number") return value;
  const percent = Number.parseInt(value.slice(0, -1), 10);
  const scaled = percent * total;
  return rounding === "down" ? Math.floor(scaled / 100) : Math.ceil(scaled / 100);
}

/** A level's budgets resolved to instance (or group) counts. */
export interface ResolvedBudget {
  readonly maxUnavailable: number;
  readonly maxSurge: number;
  readonly partition: number;
}

/** Role-level defaults when a field is omitted: one unavailable, no surge, no partition. */
export const ROLE_BUDGET_DEFAULTS = { maxUnavailable: 1, maxSurge: 0, partition: 0 } as const;

/** The group-level budget, resolved against `spec.replicas` groups. */
export function resolveGroupBudget(spec: ModelServingSpec): ResolvedBudget {
  const config = spec.rolloutStrategy.rollingUpdateConfiguration;
  return resolveBudget(config, spec.replicas);
}

/** A role's budget within each group, resolved against the role's `replicas` instances. */
export function resolveRoleBudget(role: Role): ResolvedBudget {
  return resolveBudget(
    {
      maxUnavailable: role.maxUnavailable ?? ROLE_BUDGET_DEFAULTS.maxUnavailable,
      maxSurge: role.maxSurge ?? ROLE_BUDGET_DEFAULTS.maxSurge,
      partition: role.partition ?? ROLE_BUDGET_DEFAULTS.partition,
    },
    role.replicas,
  );
}

/** The available instances a role keeps in each group during a rollout: `replicas − maxUnavailable`. */
export function roleFloor(role: Role): number {
  return role.replicas - resolveRoleBudget(role).maxUnavailable;
}

function resolveBudget(
  config: { maxUnavailable: IntOrPercent; maxSurge: IntOrPercent; partition: IntOrPercent },
  total: number,
): ResolvedBudget {
  return {
    maxUnavailable: resolveIntOrPercent(config.maxUnavailable, total, "down"),
    maxSurge: resolveIntOrPercent(config.maxSurge, total, "up"),
    partition: resolveIntOrPercent(config.partition, total, "up"),
  };
}
