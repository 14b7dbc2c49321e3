/**
 * A bounded list of listeners: add (returning the remover), notify in the order added, clear.
 * Listeners added or removed while notifying take effect from the next notification.
 */
export class Listeners<T> {
  readonly #listeners: ((value: T) => void)[] = [];
  readonly #limit: number;
  readonly #what: string;

  /** `what` names the listeners in the error when more than `limit` are added. */
  constructor(limit: number, what: string) {
    this.#limit = limit;
    this.#what = what;
  }

  /** Adds `listener`; returns a function that removes it. Throws beyond the limit. */
  add(listener: (value: T) => void): () => void {
    if (this.#listeners.length >= this.#limit) throw new Error(`more than ${this.#limit} ${this.#what}`);
    this.#listeners.push(listener);
    return () => {
      const index = this.#listeners.indexOf(listener);
      if (index !== -1) this.#listeners.splice(index, 1);
    };
  }

  notify(value: T): void {
    for (const listener of [...this.#listeners]) listener(value);
  }

  clear(): void {
    this.#listeners.length = 0;
  }
}
