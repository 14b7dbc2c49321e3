/**
 * Seeded pseudo-random streams for the simulator.
 *
 * Generator: sfc32, the 32-bit "Small Fast Chaotic" generator by Chris Doty-Humphrey (PractRand).
 * State is four 32-bit words a, b, c and a counter d; one step is
 *   t = a + b + d;  d = d + 1;  a = b xor (b >>> 9);  b = c + (c << 3);  c = rotl(c, 21) + t;
 * and outputs t (all arithmetic mod 2^32). The counter guarantees a period of at least 2^32; the
 * expected period is about 2^127. It is not cryptographic, and need not be.
 *
 * Streams are named (the idea of Temporal's named random): `fork(name)` derives a stream from the
 * root seed and the path of fork names only, so drawing from one subsystem's stream never shifts
 * another's, and adding a new stream never changes existing ones. Seeding hashes the path with
 * FNV-1a (two offset bases), mixes it with the seed through MurmurHash3's 32-bit finalizer, and
 * discards the first outputs so nearby seeds diverge.
 *
 * Probabilities are exact ratios of integers (TigerBeetle's `Ratio`); there are no floats in the API.
 */
import type { Rng } from "../engine/ports.ts";

const TWO_POW_32 = 0x1_0000_0000;
/** Outputs discarded after seeding; sfc's author seeds with 12 rounds, a few more costs nothing. */
const WARMUP_ROUNDS = 15;
/** Rejection sampling rejects under half of all draws, so 64 rejections in a row means a bug. */
const MAX_REJECTIONS = 64;

export class Prng implements Rng {
  readonly #seed: number;
  readonly #path: string;
  readonly #state: Sfc32State;

  /**
   * A root stream for `seed`, a non-negative safe integer. Equal seeds give equal streams.
   * `path` is internal: the "/"-joined fork names leading to this stream.
   */
  constructor(seed: number, path = "") {
    if (!Number.isSafeInteger(seed) || seed < 0)
      throw new Error(`seed must be a non-negative safe integer, got ${seed}`);
    this.#seed = seed;
    this.#path = path;
    const seedLow = seed >>> 0;
    const seedHigh = Math.floor(seed / TWO_POW_32) >>> 0;
    const nameHashA = fnv1a(path, 0x811c9dc5);
    const nameHashB = fnv1a(path, 0x050c5d1f);
    this.#state = {
      a: fmix32(seedLow ^ nameHashA),
      b: fmix32(seedHigh ^ nameHashB),
      c: fmix32(seedLow ^ nameHashB ^ 0x9e3779b9),
      d: 1,
    };
    for (let i = 0; i < WARMUP_ROUNDS; i++) sfc32Next(this.#state);
  }

  /** The "/"-joined names of the forks that led here; "" for a root stream. */
  get path(): string {
    return this.#path;
  }

  /** The next raw output, a uniform integer in [0, 2^32). */
  nextUint32(): number {
    return sfc32Next(this.#state);
  }

  /**
   * An independent stream for (root seed, this path + name). Forking the same name twice gives two
   * streams with the same sequence, so each purpose needs its own name. `name` is non-empty and
   * has no "/".
   */
  fork(name: string): Prng {
    if (name === "" || name.includes("/")) throw new Error(`fork name must be non-empty without "/", got "${name}"`);
    return new Prng(this.#seed, this.#path === "" ? name : `${this.#path}/${name}`);
  }

  /** A uniform integer in [minInclusive, maxExclusive), without modulo bias. */
  int(minInclusive: number, maxExclusive: number): number {
    const span = maxExclusive - minInclusive;
    if (!Number.isSafeInteger(minInclusive) || !Number.isSafeInteger(maxExclusive) || span < 1 || span > TWO_POW_32) {
      throw new Error(`int range [${minInclusive}, ${maxExclusive}) must be integers with a span of 1..2^32`);
    }
    // Accept only draws below the largest multiple of span, so every residue is equally likely.
    const limit = TWO_POW_32 - (TWO_POW_32 % span);
    for (let attempt = 0; attempt < MAX_REJECTIONS; attempt++) {
      const draw = this.nextUint32();
      if (draw < limit) return minInclusive + (draw % span);
    }
    throw new Error(`int: ${MAX_REJECTIONS} rejections in a row for span ${span}; the generator is broken`);
  }

  /**
   * True with probability numerator/denominator. Always consumes exactly one `int` draw, even for
   * 0/d and d/d, so changing a ratio never shifts the rest of the stream.
   */
  chance(numerator: number, denominator: number): boolean {
    if (!Number.isSafeInteger(numerator) || !Number.isSafeInteger(denominator)) {
      throw new Error(`chance(${numerator}, ${denominator}) needs integers`);
    }
    if (denominator < 1 || denominator > TWO_POW_32 || numerator < 0 || numerator > denominator) {
      throw new Error(`chance(${numerator}, ${denominator}) needs 0 ≤ numerator ≤ denominator ≤ 2^32, denominator ≥ 1`);
    }
    return this.int(0, denominator) < numerator;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error("pick from an empty array");
    return items[this.int(0, items.length)] as T;
  }

  /** Fisher–Yates on a copy: one `int` draw per position from the end. */
  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.int(0, i + 1);
      const swapped = out[i] as T;
      out[i] = out[j] as T;
      out[j] = swapped;
    }
    return out;
  }
}

/** sfc32 state: four 32-bit words, d being the counter. Words are kept as signed int32 values. */
export interface Sfc32State {
  a: number;
  b: number;
  c: number;
  d: number;
}

/** One sfc32 step: advances `state` and returns the output as an unsigned 32-bit integer. */
export function sfc32Next(state: Sfc32State): number {
  const t = (((state.a + state.b) | 0) + state.d) | 0;
  state.d = (state.d + 1) | 0;
  state.a = state.b ^ (state.b >>> 9);
  state.b = (state.c + (state.c << 3)) | 0;
  state.c = ((state.c << 21) | (state.c >>> 11)) + t;
  state.c |= 0;
  return t >>> 0;
}

/** FNV-1a, 32-bit, over the UTF-16 code units of `text` (each unit as two bytes, low first). */
function fnv1a(text: string, offsetBasis: number): number {
  let hash = offsetBasis >>> 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    hash = Math.imul(hash ^ (unit & 0xff), 0x01000193);
    hash = Math.imul(hash ^ (unit >>> 8), 0x01000193);
  }
  return hash >>> 0;
}

/** MurmurHash3's 32-bit finalizer: every input bit affects every output bit. */
function fmix32(value: number): number {
  let h = value >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
