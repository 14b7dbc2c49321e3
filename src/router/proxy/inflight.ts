/**
 * Legs in flight per endpoint: the one place this router replica's own load is kept. Selection
 * reads it for every request; the drain confirmation (DESIGN §3.4: "its own in-flight count for
 * the pod is 0") reads it through `count` and is told through `onIdle` when a pod's last leg ends.
 */
export class InFlight {
  readonly #counts = new Map<string, number>();
  readonly #onIdle = new Set<(key: string) => void>();

  /** Counts one leg on `key` until the returned release is called; releasing twice counts once. */
  begin(key: string): () => void {
    this.#counts.set(key, (this.#counts.get(key) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.#counts.get(key) ?? 1) - 1;
      if (left > 0) {
        this.#counts.set(key, left);
        return;
      }
      this.#counts.delete(key);
      for (const listener of this.#onIdle) listener(key);
    };
  }

  /** Calls `listener` with the key each time an endpoint's count drops to 0; returns the unsubscribe. */
  onIdle(listener: (key: string) => void): () => void {
    this.#onIdle.add(listener);
    return () => this.#onIdle.delete(listener);
  }

  /** Legs in flight on `key` (an endpoint key, `<namespace>/<pod>`). */
  count(key: string): number {
    return this.#counts.get(key) ?? 0;
  }

  /** Every endpoint with a leg in flight, by key. */
  snapshot(): Map<string, number> {
    return new Map(this.#counts);
  }
}
