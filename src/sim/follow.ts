/**
 * Following the stored objects of one kind with no lag, as simulated components that stand for
 * the cluster itself do (the kubelet, the report's event log, the router's ground truth): a watch
 * for every change, and a re-synchronisation from the store when the stream closes, because a
 * dropped watch loses the events it had not delivered.
 */
import type { Kind, KubeObject } from "../engine/ports.ts";
import type { WatchHandlers, WatchOptions, WatchStream } from "./watch.ts";

/** The part of the API server a follower needs. */
export interface FollowedServer {
  watch(kind: Kind, options: WatchOptions, handlers: WatchHandlers): WatchStream;
  stored(kind: Kind): readonly KubeObject[];
}

export interface FollowHandlers {
  /** An object's current state: after each change, and for every object on a resync. */
  seen(object: KubeObject): void;
  /** An object known to the follower is gone (deleted, or missing on a resync). */
  gone(uid: string): void;
  /** The UIDs the follower knows now, so a resync can tell which ones are gone. */
  knownUids(): Iterable<string>;
}

export interface Follower {
  /** Looks at every stored object again (e.g. after a node's kubelet comes back). */
  resync(): void;
  /** Stops following; nothing more is delivered. */
  stop(): void;
}

/** Starts following `kind`: opens the watch, then delivers every stored object once. */
export function followStored(server: FollowedServer, kind: Kind, handlers: FollowHandlers): Follower {
  let stream: WatchStream | undefined;
  let stopped = false;
  const resync = (): void => {
    if (stopped) return;
    const stored = server.stored(kind);
    const uids = new Set(stored.map((object) => object.metadata.uid ?? ""));
    for (const uid of [...handlers.knownUids()]) if (!uids.has(uid)) handlers.gone(uid);
    for (const object of stored) handlers.seen(object);
  };
  const open = (): void => {
    stream = server.watch(
      kind,
      { lagMs: 0 },
      {
        onEvent: (event) => {
          if (event.type === "DELETED") handlers.gone(event.object.metadata.uid ?? "");
          else handlers.seen(event.object);
        },
        onClose: () => {
          open();
          resync();
        },
      },
    );
  };
  open();
  resync();
  return {
    resync,
    stop: () => {
      stopped = true;
      stream?.stop();
      stream = undefined;
    },
  };
}
