/**
 * What the demo shows a person: one frame of a running simulation — a groups × roles grid of pod
 * states, per-role update progress bars, traffic counters and the latest events. Pure: a frame is
 * a function of its input, so it is tested as text.
 */
import { stripVTControlCharacters } from "node:util";
import type { KubeObject } from "../engine/ports.ts";
import type { Outcomes } from "../router/outcomes.ts";
import { ANNOTATION_DRAINING, LABEL_GROUP, LABEL_INSTANCE, LABEL_ROLE, LABEL_ROLE_HASH } from "../api/wellknown.ts";

export interface FrameInput {
  readonly title: string;
  /** Virtual seconds since the start. */
  readonly seconds: number;
  /** What the demo is doing now, e.g. "Decode-only image update". */
  readonly step: string;
  readonly roles: readonly string[];
  readonly groups: number;
  readonly pods: readonly KubeObject[];
  /** Per role, the role hash of the update revision: pods with it run the new role spec. */
  readonly updateRoleHashes: Readonly<Record<string, string>>;
  /**
   * Per role, the role hash of the revision the update came from (the one numbered just below
   * it); a role with the same hash in both is one the update does not change. Empty when there is
   * no earlier revision.
   */
  readonly previousRoleHashes: Readonly<Record<string, string>>;
  readonly requests: Readonly<Outcomes> | undefined;
  /** Latest events, oldest first, already formatted. */
  readonly events: readonly string[];
  readonly color: boolean;
}

/** A pod's state as one character, and its color. */
export type PodGlyph = { readonly char: string; readonly color: "green" | "yellow" | "red" | "cyan" | "dim" };

const ANSI: Readonly<Record<PodGlyph["color"], string>> = {
  green: "\x1b[32m",
  yellow: "\x1b[33m",
  red: "\x1b[31m",
  cyan: "\x1b[36m",
  dim: "\x1b[2m",
};
const RESET = "\x1b[0m";
/** How every color code starts (Control Sequence Introducer). */
const CSI = "\x1b[";
const BAR_WIDTH = 20;

export const LEGEND = "● Ready  ◐ starting  ○ pending  ↓ draining  ✕ failing  (new revision in cyan)";

function condition(pod: KubeObject, type: string): string | undefined {
  const conditions = (pod.status?.["conditions"] ?? []) as { type: string; status: string }[];
  return conditions.find((candidate) => candidate.type === type)?.status;
}

/** Whether the pod runs its role's spec of the update revision. */
function isNew(pod: KubeObject, updateRoleHashes: Readonly<Record<string, string>>): boolean {
  const labels = pod.metadata.labels ?? {};
  return (
    labels[LABEL_ROLE_HASH] !== undefined && labels[LABEL_ROLE_HASH] === updateRoleHashes[labels[LABEL_ROLE] ?? ""]
  );
}

/** The glyph of a pod; Ready pods running the update revision's role spec show in cyan. */
export function podGlyph(pod: KubeObject, updateRoleHashes: Readonly<Record<string, string>>): PodGlyph {
  const phase = pod.status?.["phase"];
  const statuses = (pod.status?.["containerStatuses"] ?? []) as { restartCount?: number; ready?: boolean }[];
  if (pod.metadata.deletionTimestamp !== undefined || pod.metadata.annotations?.[ANNOTATION_DRAINING] !== undefined)
    return { char: "↓", color: "yellow" };
  if (phase === "Failed" || statuses.some((status) => (status.restartCount ?? 0) > 0 && status.ready !== true))
    return { char: "✕", color: "red" };
  if (condition(pod, "Ready") === "True") return { char: "●", color: isNew(pod, updateRoleHashes) ? "cyan" : "green" };
  if (phase === "Running" || condition(pod, "PodScheduled") === "True") return { char: "◐", color: "yellow" };
  return { char: "○", color: "dim" };
}

function paint(glyph: PodGlyph, color: boolean): string {
  return color ? `${ANSI[glyph.color]}${glyph.char}${RESET}` : glyph.char;
}

/** The cell of one role in one group: instances separated by spaces, an instance's pods adjacent. */
function roleCell(pods: readonly KubeObject[], input: FrameInput): { text: string; width: number } {
  const byInstance = new Map<string, KubeObject[]>();
  for (const pod of [...pods].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name, "en", { numeric: true }))) {
    const instance = pod.metadata.labels?.[LABEL_INSTANCE] ?? "";
    byInstance.set(instance, [...(byInstance.get(instance) ?? []), pod]);
  }
  const parts = [...byInstance.values()].map((instancePods) =>
    instancePods.map((pod) => paint(podGlyph(pod, input.updateRoleHashes), input.color)).join(""),
  );
  const width =
    [...byInstance.values()].reduce((sum, instancePods) => sum + instancePods.length, 0) +
    Math.max(0, byInstance.size - 1);
  return { text: parts.join(" "), width };
}

function bar(fraction: number): string {
  const filled = Math.round(Math.max(0, Math.min(1, fraction)) * BAR_WIDTH);
  return `${"█".repeat(filled)}${"░".repeat(BAR_WIDTH - filled)}`;
}

function clock(seconds: number): string {
  const whole = Math.floor(seconds);
  const pad = (value: number) => String(value).padStart(2, "0");
  return `${pad(Math.floor(whole / 3600))}:${pad(Math.floor(whole / 60) % 60)}:${pad(whole % 60)}`;
}

/**
 * Per role: the share of its Ready pods that run the update revision's role spec, or that the
 * update does not change the role (its pods run the spec they ran before, not a new one).
 */
function progressLines(input: FrameInput): string[] {
  const width = Math.max(...input.roles.map((role) => role.length));
  return input.roles.map((role) => {
    const previous = input.previousRoleHashes[role];
    if (previous !== undefined && previous === input.updateRoleHashes[role])
      return `  ${role.padEnd(width)} unchanged by this update`;
    const ready = input.pods.filter(
      (pod) => pod.metadata.labels?.[LABEL_ROLE] === role && condition(pod, "Ready") === "True",
    );
    const updated = ready.filter((pod) => isNew(pod, input.updateRoleHashes)).length;
    const fraction = ready.length === 0 ? 0 : updated / ready.length;
    return `  ${role.padEnd(width)} ${bar(fraction)} ${String(Math.round(fraction * 100)).padStart(3)}% new`;
  });
}

/** A terminal's size in character cells. */
export interface TerminalSize {
  readonly rows: number;
  readonly columns: number;
}

/**
 * The group ordinals the grid shows, ascending: every one a pod's `tandem.dev/group` label names
 * (a surge group, or a group whose ordinal a surge group passed on: docs/design/succession.md),
 * and the lowest others until there are `input.groups` rows (groups with no pod yet).
 */
export function groupRows(input: Pick<FrameInput, "groups" | "pods">): number[] {
  const labelled = new Set<number>();
  for (const pod of input.pods) {
    const group = Number(pod.metadata.labels?.[LABEL_GROUP] ?? Number.NaN);
    if (Number.isSafeInteger(group) && group >= 0) labelled.add(group);
  }
  for (let group = 0; labelled.size < input.groups; group++) labelled.add(group);
  return [...labelled].sort((a, b) => a - b);
}

/** The parts of a frame, each a list of lines, before they are fitted to a terminal. */
interface FrameParts {
  readonly title: string;
  readonly gridHeader: string;
  readonly gridRows: readonly string[];
  readonly progress: readonly string[];
  readonly requests: readonly string[];
  readonly events: readonly string[];
}

/**
 * Renders one frame as lines of text (no trailing newline). With `size`, the frame fits it: at
 * most `rows - 1` lines (the demo writes a newline after the frame, which takes the last row) of
 * at most `columns` characters, cut with "…". Room is given up in this order: the oldest events,
 * the events, the legend and blank lines, then ServingGroups past those that fit ("… N more
 * ServingGroup(s)"), and last any line that still does not fit ("… N more line(s)").
 */
export function renderFrame(input: FrameInput, size?: TerminalSize): string {
  const rows = groupRows(input);
  const cells = rows.map((group) =>
    input.roles.map((role) =>
      roleCell(
        input.pods.filter(
          (pod) => pod.metadata.labels?.[LABEL_GROUP] === String(group) && pod.metadata.labels[LABEL_ROLE] === role,
        ),
        input,
      ),
    ),
  );
  const widths = input.roles.map((role, index) => Math.max(role.length, ...cells.map((row) => row[index]?.width ?? 0)));
  const parts: FrameParts = {
    title: `${input.title} · t=${clock(input.seconds)} (simulated) · ${input.step}`,
    gridHeader: `  group  ${input.roles.map((role, index) => role.padEnd(widths[index] ?? 0)).join("   ")}`,
    gridRows: cells.map(
      (row, index) =>
        `  ${String(rows[index] ?? "").padEnd(5)}  ${row.map((cell, index) => cell.text + " ".repeat(Math.max(0, (widths[index] ?? 0) - cell.width))).join("   ")}`,
    ),
    progress: progressLines(input),
    requests:
      input.requests === undefined
        ? []
        : [`  requests  ok ${input.requests.ok}  failed ${input.requests.failed}  cut ${input.requests.cut}`],
    events: input.events.map((event) => `    ${event}`),
  };
  const lines =
    size === undefined ? fullLayout(parts, parts.events.length) : fitRows(parts, Math.max(1, size.rows - 1));
  return (size === undefined ? lines : lines.map((line) => fitColumns(line, Math.max(1, size.columns)))).join("\n");
}

/** Every part with blank lines between, the legend, and the newest `eventCount` events. */
function fullLayout(parts: FrameParts, eventCount: number): string[] {
  const requests = parts.requests.length === 0 ? [] : ["", ...parts.requests];
  const events = eventCount === 0 ? [] : ["", "  events", ...parts.events.slice(parts.events.length - eventCount)];
  return [
    parts.title,
    "",
    parts.gridHeader,
    ...parts.gridRows,
    `  ${LEGEND}`,
    "",
    "  update progress",
    ...parts.progress,
    ...requests,
    ...events,
  ];
}

/** The richest layout of `parts` in at most `rows` lines (see `renderFrame`). */
function fitRows(parts: FrameParts, rows: number): string[] {
  const withoutEvents = fullLayout(parts, 0);
  const eventRoom = Math.min(parts.events.length, rows - withoutEvents.length - 2);
  if (eventRoom >= 1) return fullLayout(parts, eventRoom);
  if (withoutEvents.length <= rows) return withoutEvents;
  const compact = [parts.title, parts.gridHeader, ...parts.gridRows, ...parts.progress, ...parts.requests];
  if (compact.length <= rows) return compact;
  const groupRoom = rows - (compact.length - parts.gridRows.length) - 1;
  if (groupRoom >= 1) {
    const hidden = parts.gridRows.length - groupRoom;
    return [
      parts.title,
      parts.gridHeader,
      ...parts.gridRows.slice(0, groupRoom),
      `  … ${hidden} more ServingGroup(s)`,
      ...parts.progress,
      ...parts.requests,
    ];
  }
  return rows === 1 ? [parts.title] : [...compact.slice(0, rows - 1), `… ${compact.length - rows + 1} more line(s)`];
}

/**
 * `line` cut to `columns` visible characters, the last one "…" when cut (a character outside
 * the BMP counts as two: never too wide); the color codes are kept whole, and reset after a cut.
 */
function fitColumns(line: string, columns: number): string {
  if (stripVTControlCharacters(line).length <= columns) return line;
  let out = "";
  let visible = 0;
  let index = 0;
  while (index < line.length) {
    if (line.startsWith(CSI, index)) {
      const end = line.indexOf("m", index);
      const code = line.slice(index, end === -1 ? line.length : end + 1);
      out += code;
      index += code.length;
      continue;
    }
    const char = String.fromCodePoint(line.codePointAt(index) ?? 0);
    if (visible + char.length > columns - 1) break;
    out += char;
    visible += char.length;
    index += char.length;
  }
  return `${out}…${out.includes(CSI) ? RESET : ""}`;
}
