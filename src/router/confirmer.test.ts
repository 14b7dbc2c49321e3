import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { setImmediate as nextTurn } from "node:timers/promises";
import { MemoryLogger } from "../engine/logger.ts";
import { ApiError } from "../engine/ports.ts";
import { VirtualClock } from "../sim/clock.ts";
import { InFlight } from "./proxy/inflight.ts";
import { DrainConfirmer, SYNC_CHECK_MS } from "./confirmer.ts";
import type { ConfirmerDiscovery, EngineProbe } from "./confirmer.ts";
import { StaticDiscovery } from "./discovery.ts";
import type { DiscoveredPod } from "./endpoints.ts";
import type { EngineQueue } from "./engine-metrics.ts";
import { aPod, aRoute, RecordingWriter } from "./test-fixtures.ts";

const IDLE: EngineQueue = { ok: true, running: 0, waiting: 0 };

async function runTo(clock: VirtualClock, targetMs: number): Promise<void> {
  await nextTurn();
  while (clock.fireNext(targetMs)) await nextTurn();
  clock.runUntil(targetMs);
  await nextTurn();
}

/** Scrapes that finish when the test says, numbered as the EngineScraper numbers them. */
class FakeProbe implements EngineProbe {
  #seq = 0;
  readonly #pending = new Map<string, number>();
  readonly #last = new Map<string, { seq: number; queue: EngineQueue }>();
  readonly #listeners = new Set<(key: string) => void>();
  /** Keys asked for, in order. */
  readonly asked: string[] = [];
  /** What `scrapeSoon` answers when no scrape is in flight (0: it starts one). */
  dueInMs = 0;

  sequence(): number {
    return this.#seq;
  }

  queueAfter(key: string, after: number): EngineQueue | undefined {
    const last = this.#last.get(key);
    return last !== undefined && last.seq > after ? last.queue : undefined;
  }

  scrapeSoon(target: { key: string }): number {
    this.asked.push(target.key);
    if (this.#pending.has(target.key)) return 0;
    if (this.dueInMs > 0) return this.dueInMs;
    this.#pending.set(target.key, ++this.#seq);
    return 0;
  }

  onScrape(listener: (key: string) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  inFlight(key: string): boolean {
    return this.#pending.has(key);
  }

  /** Finishes `key`'s scrape in flight (or one started now, when none is) with `queue`. */
  finish(key: string, queue: EngineQueue): void {
    const seq = this.#pending.get(key) ?? ++this.#seq;
    this.#pending.delete(key);
    this.#last.set(key, { seq, queue });
    for (const listener of this.#listeners) listener(key);
  }
}

class FakeDiscovery extends StaticDiscovery implements ConfirmerDiscovery {
  synced = true;
  readonly #listeners = new Set<() => void>();

  hasSynced(): boolean {
    return this.synced;
  }

  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  change(pods: readonly DiscoveredPod[]): void {
    this.set({ pods });
    for (const listener of this.#listeners) listener();
  }
}

function marked(name: string, annotations: Record<string, string> = {}): DiscoveredPod {
  const discovered = aPod({ name, draining: true, annotations });
  return { ...discovered, pod: { ...discovered.pod, metadata: { ...discovered.pod.metadata, uid: `uid-${name}` } } };
}

function setup(pods: readonly DiscoveredPod[]) {
  const clock = new VirtualClock();
  const writer = new RecordingWriter(() => clock.nowMs());
  const discovery = new FakeDiscovery({ routes: [aRoute()], pods });
  const legs = new InFlight();
  const engine = new FakeProbe();
  const logger = new MemoryLogger();
  const confirmed: string[] = [];
  const confirmer = new DrainConfirmer({
    routerId: "r1",
    discovery,
    legs,
    engine,
    writer,
    clock,
    logger,
    onConfirmed: (pod) => confirmed.push(pod.metadata.name),
  });
  return { clock, writer, discovery, legs, engine, logger, confirmed, confirmer };
}

describe("DrainConfirmer", () => {
  it("confirms only once its own legs on the pod are done and a scrape begun after it saw the mark reports an idle engine", async () => {
    const { clock, writer, legs, engine, confirmed, confirmer } = setup([marked("a")]);
    engine.finish("ns/a", IDLE); // before the mark was seen: does not count
    const release = legs.begin("ns/a");
    confirmer.start();
    await runTo(clock, 1_000);
    assert.deepEqual([writer.calls.length, engine.asked], [0, []], "a leg in flight: nothing to ask the engine yet");
    release();
    await runTo(clock, 1_000);
    assert.deepEqual(engine.asked, ["ns/a"]);
    engine.finish("ns/a", { ok: true, running: 1, waiting: 0 });
    await runTo(clock, 1_000);
    assert.equal(writer.calls.length, 0, "another router's request still runs");
    assert.ok(engine.inFlight("ns/a"), "asked again");
    engine.finish("ns/a", IDLE);
    await runTo(clock, 1_000);
    assert.deepEqual(
      writer.calls.map((call) => [call.verb, call.kind, call.name, call.body]),
      [["patch", "Pod", "a", { metadata: { uid: "uid-a", annotations: { "drained.tandem.dev/r1": "true" } } }]],
    );
    assert.deepEqual(confirmed, ["a"]);
    engine.finish("ns/a", IDLE);
    await runTo(clock, 5_000);
    assert.equal(writer.calls.length, 1, "once per mark");
    await confirmer.stop();
  });

  it("a scrape not yet due is asked for again when it is, not before", async () => {
    const { clock, engine, confirmer } = setup([marked("a")]);
    engine.dueInMs = 700;
    confirmer.start();
    await runTo(clock, 699);
    assert.equal(engine.asked.length, 1);
    engine.dueInMs = 0;
    await runTo(clock, 700);
    assert.equal(engine.asked.length, 2);
    assert.ok(engine.inFlight("ns/a"));
    await runTo(clock, 10_000);
    assert.equal(engine.asked.length, 2, "no polling while the scrape is in flight");
    await confirmer.stop();
  });

  it("retries Conflict, ServerError and Timeout with capped exponential backoff; NotFound ends it", async () => {
    const { clock, writer, engine, logger, confirmer, discovery } = setup([marked("a")]);
    const failures = [new ApiError("Conflict", "uid"), new ApiError("ServerError", "x"), new ApiError("Timeout", "y")];
    writer.answer = () => failures.shift();
    confirmer.start();
    await runTo(clock, 0);
    engine.finish("ns/a", IDLE);
    await runTo(clock, 10_000);
    assert.deepEqual(
      writer.calls.map((call) => call.atMs),
      [0, 200, 600, 1_400],
    );
    assert.equal(logger.lines().filter((line) => line.message === "drain confirmation failed; retrying").length, 3);
    discovery.change([marked("b")]);
    writer.answer = () => new ApiError("NotFound", "pods b");
    await runTo(clock, 10_000);
    engine.finish("ns/b", IDLE);
    await runTo(clock, 60_000);
    assert.deepEqual(
      writer.calls.slice(4).map((call) => call.name),
      ["b"],
    );
    await confirmer.stop();
  });

  it("a restarted replica confirms every marked pod in scope once its caches have synced, and leaves those it confirmed before", async () => {
    const { clock, writer, discovery, engine, confirmed, confirmer } = setup([
      marked("a"),
      marked("b"),
      marked("c", { "drained.tandem.dev/r1": "true" }),
      aPod({ name: "unmarked" }),
    ]);
    discovery.synced = false;
    confirmer.start();
    await runTo(clock, 1_000);
    assert.deepEqual(engine.asked, [], "nothing before the caches have synced");
    discovery.synced = true;
    await runTo(clock, 1_000 + SYNC_CHECK_MS);
    assert.deepEqual(engine.asked.sort(), ["ns/a", "ns/b"]);
    engine.finish("ns/a", IDLE);
    engine.finish("ns/b", IDLE);
    await runTo(clock, 2_000);
    assert.deepEqual(confirmed.sort(), ["a", "b"]);
    assert.deepEqual(writer.calls.map((call) => call.name).sort(), ["a", "b"]);
    await confirmer.stop();
  });

  it("a new mark is confirmed afresh, with a scrape after it; a cancelled drain is forgotten", async () => {
    const { clock, writer, discovery, engine, confirmer } = setup([marked("a")]);
    confirmer.start();
    await runTo(clock, 0);
    engine.finish("ns/a", IDLE);
    await runTo(clock, 0);
    assert.equal(writer.calls.length, 1);
    discovery.change([aPod({ name: "a" })]);
    await runTo(clock, 100);
    const again = marked("a");
    discovery.change([
      {
        ...again,
        pod: {
          ...again.pod,
          metadata: { ...again.pod.metadata, annotations: { "tandem.dev/draining": "2026-01-01T00:05:00Z" } },
        },
      },
    ]);
    await runTo(clock, 200);
    assert.equal(writer.calls.length, 1, "a fresh scrape is needed for the new mark");
    engine.finish("ns/a", IDLE);
    await runTo(clock, 300);
    assert.equal(writer.calls.length, 2);
    await confirmer.stop();
  });
});
