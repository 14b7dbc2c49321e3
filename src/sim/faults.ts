/**
 * Request fault injection for the simulated API server (Kubernetes' `requestTracker{err, after}`
 * plus TigerBeetle-style exact-ratio probabilities). Rules match requests by verb, kind and client;
 * a matching request fails with the rule's error instead of (or, for an applied Timeout, after)
 * being served.
 *
 * Every rule sees every request it matches, even when an earlier rule already failed it, so adding
 * or firing one rule never shifts another rule's count or random draws. The first firing rule, in
 * installation order, decides the outcome.
 */
import { ApiError } from "../engine/ports.ts";
import type { Kind } from "../engine/ports.ts";
import type { Prng } from "./prng.ts";

/** Request verbs; "bind" is a Pod's binding subresource, which the scheduler writes. */
export type Verb = "list" | "watch" | "create" | "update" | "patch" | "patchStatus" | "bind" | "delete";
export type WriteVerb = "create" | "update" | "patch" | "patchStatus" | "bind" | "delete";

export const WRITE_VERBS: readonly WriteVerb[] = ["create", "update", "patch", "patchStatus", "bind", "delete"];

export function isWriteVerb(verb: Verb): verb is WriteVerb {
  return (WRITE_VERBS as readonly Verb[]).includes(verb);
}

/** The errors a fault can inject: 409, 500 and a timeout. */
export type InjectedError = "Conflict" | "ServerError" | "Timeout";

/** Which requests a rule applies to; an absent field matches anything. */
export interface FaultMatch {
  verb?: Verb;
  kind?: Kind;
  /** The client name given to `ApiServer.client(name)`. */
  client?: string;
}

export interface FaultEffect {
  error: InjectedError;
  /**
   * Timeout only: the request is applied and then reported as timed out, the ambiguous outcome a
   * controller must survive (a retried create then meets AlreadyExists). Default false.
   */
  applied?: boolean;
}

export interface Request {
  readonly verb: Verb;
  readonly kind: Kind;
  readonly client: string;
}

interface Rule {
  readonly match: FaultMatch;
  readonly effect: FaultEffect;
  /** True when this matching request fails; advances the rule's own state either way. */
  readonly fires: () => boolean;
  readonly oneShot: boolean;
}

/** Rules installed at once; more is a bug in a scenario or fault generator. */
const MAX_RULES = 1024;

export class FaultInjector {
  readonly #rng: Prng;
  readonly #streams = new Map<string, Prng>();
  #rules: Rule[] = [];

  /** `rng` is the stream named streams are forked from (the simulator passes its "faults" fork). */
  constructor(rng: Prng) {
    this.#rng = rng;
  }

  /** Fails the `n`th request (1-based) matching `match` from now on, once. */
  failNth(match: FaultMatch, n: number, effect: FaultEffect): void {
    if (!Number.isSafeInteger(n) || n < 1) throw new Error(`failNth: n must be a positive integer, got ${n}`);
    let seen = 0;
    this.#add({ match, effect: checked(effect), fires: () => ++seen === n, oneShot: true });
  }

  /**
   * Fails each matching request with probability numerator/denominator, drawn from the named
   * stream `stream` (rules naming the same stream share it). One draw per matching request.
   */
  failWithChance(
    match: FaultMatch,
    numerator: number,
    denominator: number,
    effect: FaultEffect & { stream: string },
  ): void {
    const rng = this.#stream(effect.stream);
    // Validate the ratio now, not at the first matching request.
    if (numerator < 0 || numerator > denominator)
      throw new Error(`failWithChance: bad ratio ${numerator}/${denominator}`);
    this.#add({ match, effect: checked(effect), fires: () => rng.chance(numerator, denominator), oneShot: false });
  }

  /** Removes every rule. Named streams keep their position, so re-adding a rule continues them. */
  clear(): void {
    this.#rules = [];
  }

  /** The effect for `request`, or undefined to serve it normally. */
  decide(request: Request): FaultEffect | undefined {
    // Most runs have no rules: no copy of the list per request.
    if (this.#rules.length === 0) return undefined;
    let decided: FaultEffect | undefined;
    for (const rule of [...this.#rules]) {
      if (!matches(rule.match, request)) continue;
      if (!rule.fires()) continue;
      decided ??= rule.effect;
      if (rule.oneShot) this.#rules.splice(this.#rules.indexOf(rule), 1);
    }
    return decided;
  }

  #add(rule: Rule): void {
    if (this.#rules.length >= MAX_RULES) throw new Error(`more than ${MAX_RULES} fault rules`);
    this.#rules.push(rule);
  }

  #stream(name: string): Prng {
    let rng = this.#streams.get(name);
    if (rng === undefined) {
      rng = this.#rng.fork(name);
      this.#streams.set(name, rng);
    }
    return rng;
  }
}

/** The error a client sees for an injected fault. */
export function injectedError(effect: FaultEffect, request: Request): ApiError {
  const what = `${request.verb} ${request.kind} (injected fault)`;
  switch (effect.error) {
    case "Conflict":
      return new ApiError("Conflict", `${what}: the object has been modified; re-read it and try again`);
    case "ServerError":
      return new ApiError("ServerError", `${what}: internal error`);
    case "Timeout":
      return new ApiError(
        "Timeout",
        `${what}: no response in time${effect.applied === true ? " (the request was applied)" : ""}`,
      );
  }
}

function checked(effect: FaultEffect): FaultEffect {
  if (effect.applied === true && effect.error !== "Timeout")
    throw new Error(`only a Timeout can be applied, not ${effect.error}`);
  return { error: effect.error, applied: effect.applied === true };
}

function matches(match: FaultMatch, request: Request): boolean {
  return (
    (match.verb === undefined || match.verb === request.verb) &&
    (match.kind === undefined || match.kind === request.kind) &&
    (match.client === undefined || match.client === request.client)
  );
}
