/**
 * Shared pieces of the fuzz tests: one fixed seed (override with PARATRAIN_FUZZ_SEED to explore;
 * fast-check prints the seed and the shrunk counterexample on failure, so a failure reproduces),
 * byte-level mutations of valid inputs, and the check every reader must pass — the input ends in
 * the documented error class, or parses, within a time bound and without allocating far more than
 * the input justifies.
 */
import fc from 'fast-check';

export const FUZZ_SEED = Number(process.env.PARATRAIN_FUZZ_SEED ?? 18_2025);

/** fast-check parameters: the fixed seed and `numRuns` (chosen so the whole suite stays under ~20 s). */
export function runs(numRuns: number): { seed: number; numRuns: number; endOnFailure: boolean } {
  return { seed: FUZZ_SEED, numRuns, endOnFailure: true };
}

/** Sizes a forged header likes to claim: zero, one, sign bits, all ones, 2^31, 2^32−1. */
export const INTERESTING_U32 = [0, 1, 0x7f, 0xff, 0x7fff, 0xffff, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff];

type Mutation =
  | { kind: 'flip'; at: number; bit: number }
  | { kind: 'cut'; at: number }
  | { kind: 'insert'; at: number; bytes: Uint8Array }
  | { kind: 'delete'; at: number; n: number }
  | { kind: 'u32'; at: number; value: number; little: boolean };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), bit: fc.nat(7) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('cut' as const), at: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('insert' as const),
      at: fc.nat(),
      bytes: fc.uint8Array({ minLength: 1, maxLength: 16 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('delete' as const), at: fc.nat(), n: fc.integer({ min: 1, max: 16 }) }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('u32' as const),
      at: fc.nat(),
      value: fc.constantFrom(...INTERESTING_U32),
      little: fc.boolean(),
    }),
  },
);

function apply(bytes: Uint8Array, m: Mutation): Uint8Array {
  const n = bytes.length;
  const at = n === 0 ? 0 : m.at % (n + (m.kind === 'insert' || m.kind === 'cut' ? 1 : 0));
  switch (m.kind) {
    case 'flip': {
      if (n === 0) return bytes;
      const out = bytes.slice();
      out[at] = out[at]! ^ (1 << m.bit);
      return out;
    }
    case 'cut':
      return bytes.slice(0, at);
    case 'insert':
      return concat(bytes.subarray(0, at), m.bytes, bytes.subarray(at));
    case 'delete':
      return concat(bytes.subarray(0, at), bytes.subarray(at + m.n));
    case 'u32': {
      if (n < 4) return bytes;
      const out = bytes.slice();
      new DataView(out.buffer).setUint32(Math.min(at, n - 4), m.value, m.little);
      return out;
    }
  }
}

export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((s, p) => s + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** `valid` inputs after 1–6 mutations (bit flips, truncations, insertions, deletions, forged u32 fields). */
export function mutated(valid: fc.Arbitrary<Uint8Array>): fc.Arbitrary<Uint8Array> {
  return fc.tuple(valid, fc.array(mutation, { minLength: 1, maxLength: 6 })).map(([v, ms]) => ms.reduce(apply, v));
}

/** A splice: the head of one valid input followed by the tail of another. */
export function spliced(valid: fc.Arbitrary<Uint8Array>): fc.Arbitrary<Uint8Array> {
  return fc
    .tuple(valid, valid, fc.nat(), fc.nat())
    .map(([a, b, i, j]) => concat(a.subarray(0, i % (a.length + 1)), b.subarray(j % (b.length + 1))));
}

export interface Expectation {
  /** the documented error: anything else (TypeError, RangeError, a plain Error where a class is documented) fails */
  expected: (err: unknown) => boolean;
  /** the longest one input may take, ms (a hang or a super-linear path fails) */
  maxMs?: number;
  /** bytes of ArrayBuffer memory one input may add beyond `slack + factor × its length` */
  inputBytes?: number;
}

/**
 * Runs `fn` on one input: returns its result, or undefined when it threw the documented error.
 * Fails on any other exception, on taking longer than maxMs, and on allocating more ArrayBuffer
 * memory than the input justifies (4 × its size + 1 MiB: floats from bytes, plus slack).
 */
export function expectOnly<T>(fn: () => T, e: Expectation): T | undefined {
  const before = e.inputBytes !== undefined ? process.memoryUsage().arrayBuffers : 0;
  const started = performance.now();
  let result: T | undefined;
  try {
    result = fn();
  } catch (err) {
    if (!e.expected(err))
      throw new Error(
        `unexpected ${(err as Error)?.constructor?.name ?? typeof err}: ${(err as Error)?.message ?? String(err)}`,
        { cause: err },
      );
  }
  const ms = performance.now() - started;
  if (ms > (e.maxMs ?? 2000)) throw new Error(`one input took ${ms.toFixed(0)} ms (bound ${e.maxMs ?? 2000} ms)`);
  if (e.inputBytes !== undefined) {
    const grown = process.memoryUsage().arrayBuffers - before;
    const bound = 4 * e.inputBytes + 2 ** 20;
    if (grown > bound) throw new Error(`one input of ${e.inputBytes} bytes allocated ${grown} bytes (bound ${bound})`);
  }
  return result;
}

/** A plain Error (the readers' documented class), not a TypeError/RangeError thrown by accident. */
export const plainErrorNaming =
  (name: string) =>
  (err: unknown): boolean =>
    err instanceof Error && err.constructor === Error && err.message.includes(name) && !err.message.includes('\n');
