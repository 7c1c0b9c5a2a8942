/** Fuzzing the IDX reader: mutated and forged files end in one plain Error naming the file, or parse. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { checkImagesAndLabels, encodeIdx, parseIdx } from '../../src/data/idx.ts';
import { datasetFromIdx } from '../../src/data/dataset.ts';
import { INTERESTING_U32, expectOnly, mutated, plainErrorNaming, runs, spliced } from './helpers.ts';

const FILE = 'fuzz-images-idx3-ubyte';
const LABELS = 'fuzz-labels-idx1-ubyte';

const validImages = fc
  .tuple(fc.integer({ min: 0, max: 6 }), fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 5 }))
  .chain(([n, r, c]) =>
    fc.uint8Array({ minLength: n * r * c, maxLength: n * r * c }).map((d) => encodeIdx([n, r, c], d)),
  );
const validLabels = fc
  .integer({ min: 0, max: 6 })
  .chain((n) => fc.uint8Array({ minLength: n, maxLength: n, max: 12 }).map((d) => encodeIdx([n], d)));
const anyIdx = fc.oneof(validImages, validLabels);

/** Parses a pair as the loader does, up to the Dataset. */
function load(images: Uint8Array, labels: Uint8Array): void {
  const i = parseIdx(images, FILE);
  const l = parseIdx(labels, LABELS);
  checkImagesAndLabels(i, l, FILE, LABELS);
  const ds = datasetFromIdx(
    'fuzz',
    { images: i, labels: l, count: i.dims[0]!, rows: i.dims[1]!, cols: i.dims[2]! },
    10,
    LABELS,
  );
  assert.equal(ds.images.length, ds.count * ds.sampleShape[0]! * ds.sampleShape[1]!);
}

const fileError = (err: unknown) => plainErrorNaming(FILE)(err) || plainErrorNaming(LABELS)(err);

test('fuzz IDX: mutated and spliced files are refused with one line naming the file, or read', {
  timeout: 60_000,
}, () => {
  fc.assert(
    fc.property(fc.oneof(mutated(anyIdx), spliced(anyIdx)), mutated(validLabels), (images, labels) => {
      expectOnly(() => load(images, labels), {
        expected: fileError,
        inputBytes: images.length + labels.length,
        maxMs: 1000,
      });
    }),
    runs(3000),
  );
});

test('fuzz IDX: forged headers claiming huge sizes are refused before anything is allocated', {
  timeout: 60_000,
}, () => {
  const forged = fc
    .tuple(
      fc.integer({ min: 0, max: 12 }),
      fc.array(fc.oneof(fc.constantFrom(...INTERESTING_U32), fc.nat()), { maxLength: 12 }),
      fc.uint8Array({ maxLength: 64 }),
    )
    .map(([ndim, dims, tail]) => {
      const head = new Uint8Array(4 + 4 * dims.length);
      head[2] = 0x08;
      head[3] = ndim;
      for (const [k, d] of dims.entries()) new DataView(head.buffer).setUint32(4 + 4 * k, d, false);
      const out = new Uint8Array(head.length + tail.length);
      out.set(head);
      out.set(tail, head.length);
      return out;
    });
  fc.assert(
    fc.property(forged, (bytes) => {
      expectOnly(() => parseIdx(bytes, FILE), {
        expected: plainErrorNaming(FILE),
        inputBytes: bytes.length,
        maxMs: 1000,
      });
    }),
    runs(3000),
  );
});

test('regression: an images file with 0 rows or columns is refused, naming the file', () => {
  const images = parseIdx(encodeIdx([5, 0, 28], new Uint8Array(0)), FILE);
  const labels = parseIdx(encodeIdx([5], new Uint8Array(5)), LABELS);
  assert.throws(() => checkImagesAndLabels(images, labels, FILE, LABELS), /fuzz-images-idx3-ubyte: .*0×28 pixels/);
});
