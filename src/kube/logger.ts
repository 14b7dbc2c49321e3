/**
 * JSON logs with pino. The engine's Logger (`info|warn|error(fields, message)`) has pino's
 * argument order, so a pino logger is passed to the engine as it is.
 */
import { pino } from "pino";
import type { Logger } from "../engine/logger.ts";

/** The levels `--log-level` takes. */
export const LOG_LEVELS = ["debug", "info", "warn", "error"] as const;
export type LogLevelName = (typeof LOG_LEVELS)[number];

/**
 * A pino logger writing one JSON object per line to `destination` (default stdout); `base` is on
 * every line (default `{component: "tandem-controller"}`).
 */
export function createLogger(
  level: LogLevelName = "info",
  destination?: pino.DestinationStream,
  base: Readonly<Record<string, string>> = { component: "tandem-controller" },
): Logger & pino.Logger {
  const options = { level, base, timestamp: pino.stdTimeFunctions.isoTime };
  return destination === undefined ? pino(options) : pino(options, destination);
}
