/**
 * How deeply input may nest objects and lists. Pod templates and plugin config are free-form, so
 * without a bound a hostile object (a few kilobytes of `{"x":{"x":...}}`) reaches code that walks
 * values recursively — the revision hash's canonical JSON, `structuredClone`, deep freezing — and
 * overflows the call stack. Every entry point that parses a ModelServing or a scenario step checks
 * this first, so such input is refused with its path instead.
 */
import type { Problem } from "./problems.ts";
import { problem } from "./problems.ts";

/**
 * Most levels of objects and lists within each other, counted from the object's root (a value at
 * path `spec.template.roles[0].entryTemplate.spec` is 6 levels deep). The deepest real pod
 * templates (affinity terms, projected volumes) reach about 20; 100 leaves five times that, and
 * stays far below the depth at which the recursive walks above run out of stack (about 2,000 for
 * `structuredClone`).
 */
export const MAX_NESTING_DEPTH = 100;

interface Frame {
  readonly value: object;
  readonly depth: number;
  readonly parent: Frame | undefined;
  readonly key: string | number | undefined;
}

/**
 * The first object or list found nested deeper than `MAX_NESTING_DEPTH` levels in `value`, as a
 * problem at its container's path (after `prefix`, where `value` sits in its file; the depth is
 * counted from `value`); undefined when there is none. Iterative (an explicit stack), so it measures
 * any depth without running out of stack itself; an object met again (shared, or a cycle) is
 * walked again only when met at a smaller depth, so shared parts cost no more than a tree.
 */
export function nestingProblem(value: unknown, prefix: readonly PropertyKey[] = []): Problem | undefined {
  if (!isContainer(value)) return undefined;
  const shallowest = new Map<object, number>();
  const pending: Frame[] = [{ value, depth: 0, parent: undefined, key: undefined }];
  for (let frame = pending.pop(); frame !== undefined; frame = pending.pop()) {
    const seen = shallowest.get(frame.value);
    if (seen !== undefined && seen <= frame.depth) continue;
    shallowest.set(frame.value, frame.depth);
    for (const [key, member] of members(frame.value)) {
      if (!isContainer(member)) continue;
      if (frame.depth === MAX_NESTING_DEPTH)
        return problem(
          [...prefix, ...pathOf(frame)],
          `nests objects and lists more than ${MAX_NESTING_DEPTH} levels deep`,
        );
      pending.push({ value: member, depth: frame.depth + 1, parent: frame, key });
    }
  }
  return undefined;
}

function isContainer(value: unknown): value is object {
  return typeof value === "object" && value !== null;
}

function members(container: object): Iterable<[string | number, unknown]> {
  return Array.isArray(container) ? container.entries() : Object.entries(container);
}

function pathOf(frame: Frame): (string | number)[] {
  const path: (string | number)[] = [];
  for (let at: Frame | undefined = frame; at?.key !== undefined; at = at.parent) path.push(at.key);
  return path.reverse();
}
