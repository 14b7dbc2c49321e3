/**
 * `KubeRecorder`: the Recorder port as `events.k8s.io/v1` Events. Fire-and-forget: `record`
 * returns at once; a write that fails is dropped and counted. A repeat of the same event (same
 * object, type, reason and message) within `seriesWindowMs` is folded into the first one's
 * `series` (count and lastObservedTime) by a merge patch instead of a new Event.
 */
import { V1MicroTime } from "@kubernetes/client-node";
import type { Clock, EventRecord, Recorder } from "../engine/ports.ts";
import { KINDS } from "../engine/ports.ts";
import { MERGE_PATCH } from "./writer.ts";
import type { KubeTransport } from "./transport.ts";

export interface RecorderOptions {
  readonly transport: KubeTransport;
  readonly clock: Clock;
  /** `reportingController` of every Event. */
  readonly controller: string;
  /** `reportingInstance`: this process (pod name). */
  readonly instance: string;
  /** Repeats within this window join a series. Default 360 000 (client-go's 6 minutes). */
  readonly seriesWindowMs?: number;
}

/** Series remembered at once; the oldest is forgotten beyond this. */
const MAX_SERIES = 4_096;

interface Series {
  readonly namespace: string;
  readonly name: string;
  count: number;
  readonly firstMs: number;
}

export class KubeRecorder implements Recorder {
  readonly #options: RecorderOptions;
  readonly #series = new Map<string, Series>();
  #sequence = 0;
  #droppedCount = 0;

  constructor(options: RecorderOptions) {
    this.#options = options;
  }

  record(event: EventRecord): void {
    const nowMs = this.#options.clock.nowMs();
    const key = JSON.stringify([event.regarding.kind, event.regarding.namespace, event.regarding.name, event.regarding.uid, event.type, event.reason, event.message]);
    const series = this.#series.get(key);
    if (series !== undefined && nowMs - series.firstMs <= (this.#options.seriesWindowMs ?? 360_000)) {
      series.count++;
      this.#send(this.#patchSeries(series, nowMs));
      return;
    }
    const created = this.#create(event, nowMs);
    this.#remember(key, created);
  }

  /** Events that could not be written. */
  droppedCount(): number {
    return this.#droppedCount;
  }

  #create(event: EventRecord, nowMs: number): Series {
    const { regarding } = event;
    const namespace = regarding.namespace ?? "default";
    const name = `${regarding.name}.${nowMs.toString(16)}${(this.#sequence++).toString(16)}`;
    const body = {
      apiVersion: "events.k8s.io/v1",
      kind: "Event",
      metadata: { name, namespace },
      eventTime: new V1MicroTime(nowMs).toISOString(),
      reportingController: this.#options.controller,
      reportingInstance: this.#options.instance,
      action: event.reason,
      reason: event.reason,
      note: event.message.slice(0, 1_000),
      type: event.type,
      regarding: { apiVersion: KINDS[regarding.kind].apiVersion, kind: regarding.kind, name: regarding.name, ...(regarding.namespace === undefined ? {} : { namespace: regarding.namespace }), ...(regarding.uid === undefined ? {} : { uid: regarding.uid }) },
    };
    this.#send(this.#options.transport.request({ verb: "create", kind: "Event", target: { namespace }, body }));
    return { namespace, name, count: 1, firstMs: nowMs };
  }

  #patchSeries(series: Series, nowMs: number): Promise<unknown> {
    const body = { series: { count: series.count, lastObservedTime: new V1MicroTime(nowMs).toISOString() } };
    return this.#options.transport.request({ verb: "patch", kind: "Event", target: { namespace: series.namespace, name: series.name }, body, contentType: MERGE_PATCH });
  }

  #remember(key: string, series: Series): void {
    this.#series.delete(key);
    this.#series.set(key, series);
    if (this.#series.size > MAX_SERIES) {
      const oldest = this.#series.keys().next();
      if (oldest.done !== true) this.#series.delete(oldest.value);
    }
  }

  #send(request: Promise<unknown>): void {
    request.catch(() => {
      this.#droppedCount++;
    });
  }
}
