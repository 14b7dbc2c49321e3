/**
 * A bounded list of listeners: add (returning the remover), notify in the order added, clear.
 * Listeners added or removed while notifying take effect from the next notification.
 */
export class Listeners<T> {
  /**
   * Replaced, never edited, when a listener is added or removed: a notification goes through the
   * array as it was when it began, with no copy made per notification.
   */
  #listeners: readonly ((value: T) => void)[] = [];
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
    this.#listeners = [...this.#listeners, listener];
    return () => {
      const index = this.#listeners.indexOf(listener);
      if (index !== -1) this.#listeners = this.#listeners.filter((_, at) => at !== index);
    };
  }

  notify(value: T): void {
    const listeners = this.#listeners;
    for (let index = 0; index < listeners.length; index++) (listeners[index] as (value: T) => void)(value);
  }

  clear(): void {
    this.#listeners = [];
  }
}
