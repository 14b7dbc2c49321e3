/**
 * The engine's logger port: three levels with structured fields. The argument order (fields,
 * then message) is pino's, so the Kubernetes adapter can pass a pino logger as it is; the
 * simulator and tests use `MemoryLogger`.
 */

/** Structured fields of one log line; values are scalars so every sink can render them. */
export type LogFields = Readonly<Record<string, string | number | boolean>>;

export interface Logger {
  /** Something a person running the controller may want to know (a conflict, a requeue). */
  info(fields: LogFields, message: string): void;
  /** Something unexpected that the engine works around (an expectation timed out, a full queue). */
  warn(fields: LogFields, message: string): void;
  /** A failure that needs a person if it persists (a write that failed for a reason other than a conflict). */
  error(fields: LogFields, message: string): void;
}

export type LogLevel = "info" | "warn" | "error";

export interface LogLine {
  readonly level: LogLevel;
  readonly message: string;
  readonly fields: LogFields;
}

/** Lines kept by a MemoryLogger; older lines are dropped beyond this, keeping memory bounded. */
const MAX_LINES = 10_000;

/** Keeps log lines in memory, oldest first, for tests and simulation reports. */
export class MemoryLogger implements Logger {
  readonly #lines: LogLine[] = [];

  info(fields: LogFields, message: string): void {
    this.#push("info", fields, message);
  }

  warn(fields: LogFields, message: string): void {
    this.#push("warn", fields, message);
  }

  error(fields: LogFields, message: string): void {
    this.#push("error", fields, message);
  }

  /** The kept lines at `level` (all levels when absent), oldest first. */
  lines(level?: LogLevel): LogLine[] {
    return this.#lines.filter((line) => level === undefined || line.level === level);
  }

  #push(level: LogLevel, fields: LogFields, message: string): void {
    if (this.#lines.length >= MAX_LINES) this.#lines.shift();
    this.#lines.push({ level, message, fields: { ...fields } });
  }
}

/** Discards everything; the default when no logger is given. */
export const silentLogger: Logger = {
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};
