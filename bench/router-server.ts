/**
 * The Tandem router as the router benchmark runs it, in a process of its own: the real data plane
 * (`RequestRouter`, default engine scraper) with a `StaticDiscovery` of one aggregated route
 * (model `m`) and one Running, Ready, serving entry pod at `127.0.0.1:ENGINE_PORT`.
 * Usage: `node bench/router-server.ts ENGINE_PORT`; prints `listening on PORT` (a free port) and
 * stops on SIGTERM.
 */
import { StaticDiscovery } from "../src/router/discovery.ts";
import { RequestRouter } from "../src/router/proxy/router.ts";
import { aPod, aRoute } from "../src/router/test-fixtures.ts";
import { Prng } from "../src/sim/prng.ts";

const enginePort = Number(process.argv[2]);
if (!Number.isInteger(enginePort) || enginePort <= 0)
  throw new Error(`usage: node bench/router-server.ts ENGINE_PORT (got ${process.argv[2] ?? "nothing"})`);

const discovery = new StaticDiscovery({ routes: [aRoute()], pods: [aPod({ name: "engine-0", port: enginePort })] });
const router = new RequestRouter({ discovery, rng: new Prng(1) });
const address = await router.listen("127.0.0.1", 0);
process.stdout.write(`listening on ${address.port}\n`);
process.once("SIGTERM", () => {
  void router.close().then(() => process.exit(0));
});
