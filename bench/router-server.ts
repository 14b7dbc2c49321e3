/**
 * The Tandem router as the router benchmark (and the `--workers` tests) run it, in a process of
 * its own: `tandem router` itself (`serveRouter`: discovery, selection, data plane, metrics, the
 * access log, the Lease and drain confirmations, `--workers`), over a stand-in API server with one
 * aggregated route (model `m`) and one ready entry pod at `127.0.0.1:ENGINE_PORT`
 * (`onePodCluster`).
 *
 * Usage: `node bench/router-server.ts ENGINE_PORT [--workers N|auto] [--log FILE] [--log-level L]`; the access
 * log and every other line go to FILE (default stdout; the benchmark gives /dev/null: the lines
 * are formatted and written as in production, and thrown away), `listening on PORT` goes to
 * stderr once it serves (a free port on 127.0.0.1). SIGTERM stops it as it stops `tandem router`:
 * requests in flight finish, exit 0. The router id is `bench` (workers `bench-w<index>`).
 */
import { parseArgs } from "node:util";
import { accessLogDestination, serveRouter } from "../src/cli/router.ts";
import { openSync } from "node:fs";
import { createLogger, LOG_LEVELS } from "../src/kube/logger.ts";
import type { LogLevelName } from "../src/kube/logger.ts";
import { onePodCluster } from "./one-pod-cluster.ts";
import { parseWorkerCount } from "../src/router/workers.ts";
import { availableParallelism } from "node:os";

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    workers: { type: "string", default: "1" },
    log: { type: "string" },
    "log-level": { type: "string", default: "info" },
  },
});
const enginePort = Number(positionals[0]);
if (!Number.isInteger(enginePort) || enginePort <= 0)
  throw new Error(
    `usage: node bench/router-server.ts ENGINE_PORT [--workers N|auto] [--log FILE] [--log-level L] (got ${positionals[0] ?? "nothing"})`,
  );
const level = values["log-level"];
if (!(LOG_LEVELS as readonly string[]).includes(level))
  throw new Error(`--log-level must be one of ${LOG_LEVELS.join(", ")}, got "${level}"`);
// As `tandem router` writes its lines (to stdout there).
const destination = accessLogDestination(values.log === undefined ? 1 : openSync(values.log, "a"));

process.exitCode = await serveRouter(
  {
    send: onePodCluster(enginePort),
    listen: "127.0.0.1:0",
    id: "bench",
    leaseNamespace: "default",
    workers: parseWorkerCount(values.workers, availableParallelism()),
    logger: (routerId) =>
      createLogger(level as LogLevelName, destination, { component: "tandem-router", router: routerId }),
  },
  (address) => {
    process.stderr.write(`listening on ${address.split(":").at(-1) ?? ""}\n`);
  },
);
// Keep-alive sockets may hold the event loop for a while; the work is done.
setTimeout(() => process.exit(), 2_000).unref();
