/** CPU time of processes from Linux's /proc, for figures robust to a loaded machine. */
import { readFileSync, readdirSync } from "node:fs";

/**
 * User + system CPU ms used so far by `pid` and its live descendants (Linux /proc; 0 elsewhere).
 * A process's own figure only: a worker that exited takes its CPU with it, none does here.
 */
export function processTreeCpuMs(pid: number): number {
  const ticksPerSecond = 100; // USER_HZ, 100 on every Linux ABI Node runs on
  const stats = new Map<number, { ppid: number; ticks: number }>();
  let entries: string[];
  try {
    entries = readdirSync("/proc").filter((name) => /^\d+$/.test(name));
  } catch {
    return 0;
  }
  for (const name of entries) {
    try {
      // Fields after the command (in parentheses, which may hold spaces): state ppid ... utime(14) stime(15).
      const fields = readFileSync(`/proc/${name}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
      stats.set(Number(name), { ppid: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) });
    } catch {
      // The process exited meanwhile.
    }
  }
  const tree = new Set([pid]);
  for (let grew = true; grew;) {
    grew = false;
    for (const [child, { ppid }] of stats)
      if (tree.has(ppid) && !tree.has(child)) {
        tree.add(child);
        grew = true;
      }
  }
  let ticks = 0;
  for (const member of tree) ticks += stats.get(member)?.ticks ?? 0;
  return (ticks * 1000) / ticksPerSecond;
}
