/**
 * The story part of `tandem simulate`'s human output, read from the report: what each step did by
 * role (pods created and deleted, request legs ok, failed and cut), the totals by role with the
 * legs still in flight at the end, the final status with its conditions, and a verdict line that
 * says what the verdict does not cover — a `pass` with requests lost says how many, and whether an
 * `expect` step bounds them.
 */
import type { Report, StepRecord, StepRequests } from "../sim/report.ts";
import type { Scenario } from "../sim/scenario.ts";
import { isJsonObject } from "../sim/json.ts";
import { compareStrings } from "../core/maps.ts";

/** Under a step's line: one line per role that something happened to during the step, role names padded to `width`. */
export function stepActivityLines(step: StepRecord, indent: string, width: number): string[] {
  const requests = step.requests ?? {};
  const roles = [
    ...new Set([...Object.keys(step.podsCreated), ...Object.keys(step.podsDeleted), ...Object.keys(requests)]),
  ].sort(compareStrings);
  return roles.map((role) => {
    const legs = legsText(requests[role]);
    const parts = [
      podsText(step.podsCreated[role] ?? 0, step.podsDeleted[role] ?? 0),
      legs === "" ? "" : `requests ${legs}`,
    ].filter((part) => part !== "");
    return `${indent}${roleName(role).padEnd(width)}  ${parts.join("; ")}`;
  });
}

/** Every role the run created or deleted pods of or sent legs to, sorted. */
function reportRoles(report: Report): string[] {
  const { podsCreated, podsDeleted, requests } = report.metrics;
  return [
    ...new Set([
      ...Object.keys(podsCreated.byRole),
      ...Object.keys(podsDeleted.byRole),
      ...Object.keys(requests?.byRole ?? {}),
    ]),
  ].sort(compareStrings);
}

/** The width of the role column: the longest role name of the run. */
export function roleColumnWidth(report: Report): number {
  return Math.max(0, ...reportRoles(report).map((role) => roleName(role).length));
}

/** The whole run by role: pods created, deleted and restarted, and request legs with those still in flight at the end. */
export function roleTotalLines(report: Report): string[] {
  const { podsCreated, podsDeleted, containerRestarts, requests } = report.metrics;
  const roles = reportRoles(report);
  if (roles.length === 0) return ["by role: no pods, no requests"];
  const width = roleColumnWidth(report);
  return [
    "by role:",
    ...roles.map((role) => {
      const restarts = containerRestarts.byRole[role] ?? 0;
      const pods = `${podsText(podsCreated.byRole[role] ?? 0, podsDeleted.byRole[role] ?? 0) || "no pods created or deleted"}${restarts > 0 ? `, ${restarts} container restart(s)` : ""}`;
      const legs = requests?.byRole[role];
      const traffic =
        legs === undefined
          ? ""
          : `; requests ${legs.total}: ${legsText(legs) || "none ended"}${legs.inFlight > 0 ? `, ${legs.inFlight} in flight at the end` : ""}`;
      return `  ${roleName(role).padEnd(width)}  ${pods}${traffic}`;
    }),
  ];
}

interface StoredCondition {
  readonly type: string;
  readonly status: string;
  readonly reason: string;
  readonly message: string;
}

/** The stored status of the ModelServing applied last, as the run left it: revisions, readiness by role, and every condition. */
export function finalLines(report: Report): string[] {
  const status = report.final.status;
  if (!isJsonObject(status)) return ["final: no ModelServing status"];
  const text = (value: unknown): string =>
    typeof value === "string" || typeof value === "number" ? String(value) : "?";
  const current = text(status["currentRevision"]);
  const update = text(status["updateRevision"]);
  const revisions =
    current === update
      ? `revision ${current} (current and update)`
      : `current revision ${current}, update revision ${update}`;
  const roles = (Array.isArray(status["roles"]) ? status["roles"] : [])
    .filter(isJsonObject)
    .map(
      (role) =>
        `${text(role["name"])} ${text(role["ready"])} of ${text(role["replicas"])} instances Ready, ${text(role["updated"])} updated`,
    );
  const conditions: StoredCondition[] = (Array.isArray(status["conditions"]) ? status["conditions"] : [])
    .filter(isJsonObject)
    .map((condition) => ({
      type: text(condition["type"]),
      status: text(condition["status"]),
      reason: text(condition["reason"]),
      message: typeof condition["message"] === "string" ? condition["message"] : "",
    }));
  return [
    `final: ${revisions}; ${text(status["readyReplicas"])} of ${text(status["replicas"])} ServingGroups Ready${roles.map((role) => `; ${role}`).join("")}`,
    ...conditions.map(
      (condition) =>
        `  ${condition.type} ${condition.status} (${condition.reason})${condition.message === "" ? "" : `: ${condition.message}`}`,
    ),
  ];
}

/**
 * `verdict: pass|fail after Ns simulated`, and with traffic what the verdict does not say by
 * itself: how many legs failed or were cut, and whether an `expect` step on requests bounds them
 * (the verdict counts steps and invariants, not requests).
 */
export function verdictLine(scenario: Scenario, report: Report): string {
  const verdict = `verdict: ${report.verdict} after ${report.simulatedSeconds}s simulated`;
  const requests = report.metrics.requests;
  if (requests === undefined) return verdict;
  const lost = requests.failed + requests.cut;
  if (lost === 0)
    return `${verdict}; no request leg failed or was cut (${requests.total} legs, ${requests.inFlight} still in flight at the end)`;
  const share = `${lost} of ${requests.total} request legs (${percent(lost, requests.total)}) failed or were cut`;
  const guard = report.steps.findLast((step) => {
    const ran = scenario.steps[step.index];
    return ran?.kind === "expect" && ran.value.requests !== undefined;
  });
  if (guard === undefined)
    return `${verdict}, but ${share} and no expect step bounds them (add one with requests: {failed: 0, cut: 0} to fail the run on them)`;
  if (!guard.ok) return `${verdict}; ${share}, beyond the bounds of expect step [${guard.index}]`;
  const after = report.steps
    .filter((step) => step.index > guard.index)
    .reduce(
      (sum, step) =>
        sum + Object.values(step.requests ?? {}).reduce((legs, counts) => legs + counts.failed + counts.cut, 0),
      0,
    );
  if (after === 0) return `${verdict}; ${share}, within the bounds of expect step [${guard.index}]`;
  return `${verdict}, but ${share}, ${after} of them after the last expect step on requests ([${guard.index}]), which no step bounds`;
}

function percent(part: number, whole: number): string {
  const value = (part / whole) * 100;
  return value < 0.1 ? "under 0.1 %" : `${value.toFixed(1)} %`;
}

function podsText(created: number, deleted: number): string {
  const parts = [created > 0 ? `created ${created}` : "", deleted > 0 ? `deleted ${deleted}` : ""].filter(
    (part) => part !== "",
  );
  return parts.length === 0 ? "" : `pods ${parts.join(", ")}`;
}

/** `requests 96 ok, 2 failed, 26 cut` with the zero counts left out; "" when nothing ended. */
function legsText(counts: StepRequests | undefined): string {
  if (counts === undefined) return "";
  const parts = [
    counts.ok > 0 ? `${counts.ok} ok` : "",
    counts.failed > 0 ? `${counts.failed} failed` : "",
    counts.cut > 0 ? `${counts.cut} cut` : "",
  ].filter((part) => part !== "");
  return parts.join(", ");
}

function roleName(role: string): string {
  return role === "" ? "(no role)" : role;
}
