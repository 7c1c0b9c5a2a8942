/** Fuzzing the safetensors reader: damaged and forged files are one plain Error naming the file, or read. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { parseCheckpoint, writeCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { concat, expectOnly, mutated, plainErrorNaming, runs, spliced } from './helpers.ts';

const FILE = 'fuzz.safetensors';

/** A few valid files, written by writeCheckpoint itself (the bytes real runs produce). */
function validFiles(): Uint8Array[] {
  const dir = mkdtempSync(join(tmpdir(), 'paratrain-fuzz-st-'));
  try {
    const shapes: number[][][] = [[[2, 3], [3]], [[1]], [[4, 1, 2], [0], [5]], []];
    return shapes.map((list, k) => {
      const path = join(dir, `${k}.safetensors`);
      const tensors = list.map((shape, i) => ({
        name: `layers.${i}.kernel`,
        shape,
        data: new Float32Array(shape.reduce((a, b) => a * b, 1)).map((_, j) => j * 0.5 - i),
      }));
      writeCheckpoint(path, tensors, k % 2 ? { step: String(k), config: 'x' } : {});
      return new Uint8Array(readFileSync(path));
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
const VALID = validFiles();
const valid = fc.constantFrom(...VALID);
const expectation = (bytes: Uint8Array) => ({
  expected: plainErrorNaming(FILE),
  inputBytes: bytes.length,
  maxMs: 1000,
});

test('fuzz safetensors: the valid files read back', () => {
  for (const bytes of VALID) assert.ok(parseCheckpoint(bytes, FILE).tensors instanceof Map);
});

test('fuzz safetensors: mutated and spliced files are refused with one line naming the file, or read', {
  timeout: 60_000,
}, () => {
  fc.assert(
    fc.property(fc.oneof(mutated(valid), spliced(valid)), (bytes) => {
      const ckpt = expectOnly(() => parseCheckpoint(bytes, FILE), expectation(bytes));
      if (ckpt)
        for (const t of ckpt.tensors.values())
          assert.equal(
            t.data.length,
            t.shape.reduce((a, b) => a * b, 1),
          );
    }),
    runs(3000),
  );
});

/** JSON headers with forged entries: huge shapes and offsets, negative and fractional numbers, odd types. */
const forgedHeader = fc.dictionary(
  fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom('__metadata__', '__proto__', 'constructor', 'w')),
  fc.oneof(
    fc.record(
      {
        dtype: fc.oneof(fc.constantFrom('F32', 'F16', 'I64'), fc.jsonValue()),
        shape: fc.oneof(
          fc.array(fc.oneof(fc.nat(8), fc.constantFrom(2 ** 40, 2 ** 53, -1, 1.5, 1e308)), { maxLength: 4 }),
          fc.jsonValue(),
        ),
        data_offsets: fc.oneof(
          fc.tuple(
            fc.oneof(fc.nat(64), fc.constantFrom(-4, 2 ** 40, 2 ** 64, 1e308)),
            fc.oneof(fc.nat(64), fc.constantFrom(-4, 2 ** 40, 2 ** 64)),
          ),
          fc.jsonValue(),
        ),
      },
      { requiredKeys: [] },
    ),
    fc.dictionary(fc.string({ maxLength: 4 }), fc.oneof(fc.string({ maxLength: 4 }), fc.jsonValue())),
    fc.jsonValue(),
  ),
  { maxKeys: 5 },
);

test('fuzz safetensors: forged headers and header lengths are refused before anything is allocated', {
  timeout: 60_000,
}, () => {
  const forged = fc
    .tuple(
      forgedHeader,
      fc.uint8Array({ maxLength: 96 }),
      fc.oneof(fc.constant(undefined), fc.bigInt({ min: 0n, max: 2n ** 64n - 1n })),
    )
    .map(([header, data, claimed]) => {
      const json = new TextEncoder().encode(JSON.stringify(header));
      const len = new Uint8Array(8);
      new DataView(len.buffer).setBigUint64(0, claimed ?? BigInt(json.length), true);
      return concat(len, json, data);
    });
  fc.assert(
    fc.property(forged, (bytes) => {
      expectOnly(() => parseCheckpoint(bytes, FILE), expectation(bytes));
    }),
    runs(3000),
  );
});

test('regression: deeply nested JSON in the header is refused as corrupt, not a stack overflow', () => {
  const json = new TextEncoder().encode(`{"a":${'['.repeat(200_000)}${']'.repeat(200_000)}}`);
  const len = new Uint8Array(8);
  new DataView(len.buffer).setBigUint64(0, BigInt(json.length), true);
  assert.throws(
    () => parseCheckpoint(concat(len, json), FILE),
    (e: Error) => plainErrorNaming(FILE)(e) && /corrupt/.test(e.message),
  );
});
