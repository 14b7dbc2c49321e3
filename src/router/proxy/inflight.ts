/**
 * Legs in flight per endpoint: the one place this router replica's own load is kept. Selection
 * reads it for every request; the drain confirmation (DESIGN §3.4: "its own in-flight count for
 * the pod is 0") will read it through `count`.
 */
export class InFlight {
  readonly #counts = new Map<string, number>();

  /** Counts one leg on `key` until the returned release is called; releasing twice counts once. */
  begin(key: string): () => void {
    this.#counts.set(key, (this.#counts.get(key) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.#counts.get(key) ?? 1) - 1;
      if (left === 0) this.#counts.delete(key);
      else this.#counts.set(key, left);
    };
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
