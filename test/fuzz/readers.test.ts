/**
 * Fuzzing the readers of users' files that came with the dataset registry and speech: CSV, NumPy
 * .npy/.npz, WAV, PNG/JPEG. Mutated, spliced and forged inputs end in one plain Error naming the file,
 * or parse — never a TypeError/RangeError, a hang, or an allocation the input does not justify.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { zipSync } from 'fflate';
import pngjs from 'pngjs';
import { parseCsv, csvNumber } from '../../src/data/csv.ts';
import { encodeNpy, parseNpy, parseNpz } from '../../src/data/npy.ts';
import { decodeWav, encodeWav16 } from '../../src/speech/wav.ts';
import { decodeImage } from '../../src/data/imageDecode.ts';
import { INTERESTING_U32, expectOnly, mutated, plainErrorNaming, runs, spliced } from './helpers.ts';

const CSV = 'fuzz.csv',
  NPY = 'fuzz.npy',
  NPZ = 'fuzz.npz',
  WAV = 'fuzz.wav',
  PNG = 'fuzz.png';

const csvCell = fc.oneof(
  fc.double({ noNaN: false }).map(String),
  fc.string({ maxLength: 6 }),
  fc.constantFrom('"a,b"', '""', '"x""y"', ' 1e3', '-0', 'NaN', 'Infinity'),
);
const csvText = fc
  .array(fc.array(csvCell, { minLength: 1, maxLength: 5 }), { maxLength: 8 })
  .chain((rows) => fc.constantFrom('\n', '\r\n').map((eol) => rows.map((r) => r.join(',')).join(eol)));

test('fuzz CSV: any text, and mutated CSV bytes, parse into records or end in one line naming the file', {
  timeout: 60_000,
}, () => {
  const bytes = csvText.map((t) => new TextEncoder().encode(t));
  fc.assert(
    fc.property(
      fc.oneof(
        fc.string({ maxLength: 200 }).map((t) => new TextEncoder().encode(t)),
        mutated(bytes),
        spliced(bytes),
      ),
      (raw) => {
        const text = new TextDecoder().decode(raw);
        const records = expectOnly(() => parseCsv(text, CSV), { expected: plainErrorNaming(CSV), maxMs: 500 });
        if (!records) return;
        for (const r of records) {
          assert.ok(r.line >= 1 && Array.isArray(r.fields));
          // every cell is a number or one error naming file:line:column
          for (const [c, cell] of r.fields.entries())
            expectOnly(() => csvNumber(cell, CSV, r.line, c, undefined), {
              expected: plainErrorNaming(`${CSV}:${r.line}`),
            });
        }
      },
    ),
    runs(2000),
  );
});

const npyArray = fc
  .tuple(
    fc.constantFrom('f4', 'f8', 'u1', 'i4', 'i8') as fc.Arbitrary<'f4' | 'f8' | 'u1' | 'i4' | 'i8'>,
    fc.array(fc.integer({ min: 0, max: 4 }), { minLength: 0, maxLength: 3 }),
  )
  .map(([dtype, shape]) =>
    encodeNpy(
      dtype,
      shape,
      Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => i % 200),
    ),
  );

test('fuzz NPY: mutated, spliced and forged .npy files are refused with one line naming the file, or read', {
  timeout: 60_000,
}, () => {
  const forged = fc
    .tuple(
      fc.string({ maxLength: 80 }),
      fc.constantFrom(1, 2, 3),
      fc.constantFrom(...INTERESTING_U32),
      fc.uint8Array({ maxLength: 32 }),
    )
    .map(([header, major, len, tail]) => {
      const h = new TextEncoder().encode(header);
      const head = new Uint8Array(major === 1 ? 10 : 12);
      head.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, major, 0]);
      const view = new DataView(head.buffer);
      if (major === 1) view.setUint16(8, len & 0xffff, true);
      else view.setUint32(8, len, true);
      const out = new Uint8Array(head.length + h.length + tail.length);
      out.set(head);
      out.set(h, head.length);
      out.set(tail, head.length + h.length);
      return out;
    });
  fc.assert(
    fc.property(fc.oneof(mutated(npyArray), spliced(npyArray), forged), (bytes) => {
      const a = expectOnly(() => parseNpy(bytes, NPY), {
        expected: plainErrorNaming(NPY),
        inputBytes: bytes.length,
        maxMs: 500,
      });
      if (a)
        assert.equal(
          a.data.length,
          a.shape.reduce((x, y) => x * y, 1),
        );
    }),
    runs(3000),
  );
});

test('fuzz NPZ: mutated archives are refused with one line naming the file, or read', { timeout: 60_000 }, () => {
  const npz = fc.tuple(npyArray, npyArray).map(([x, y]) => zipSync({ 'x.npy': x, 'y.npy': y }, { level: 0 }));
  fc.assert(
    fc.property(mutated(npz), (bytes) => {
      expectOnly(() => parseNpz(bytes, NPZ, ['x', 'y']), {
        expected: plainErrorNaming(NPZ),
        inputBytes: bytes.length,
        maxMs: 500,
      });
    }),
    runs(1000),
  );
});

const wav = fc
  .tuple(fc.array(fc.double({ min: -1, max: 1, noNaN: true }), { maxLength: 64 }), fc.constantFrom(8000, 16000, 44100))
  .map(([samples, rate]) => encodeWav16(samples, rate));

test('fuzz WAV: mutated and spliced WAV files are refused with one line naming the file, or decoded', {
  timeout: 60_000,
}, () => {
  fc.assert(
    fc.property(fc.oneof(mutated(wav), spliced(wav)), (bytes) => {
      // no resampling here: the target rate is the file's own, so the decoder alone is under test
      const audio = expectOnly(() => decodeWav(bytes, WAV), {
        expected: plainErrorNaming(WAV),
        inputBytes: bytes.length,
        maxMs: 500,
      });
      if (audio)
        assert.ok(
          audio.samples.every((v) => Number.isFinite(v)),
          'decoded samples are finite',
        );
    }),
    runs(2000),
  );
});

const png = fc
  .tuple(
    fc.integer({ min: 1, max: 6 }),
    fc.integer({ min: 1, max: 6 }),
    fc.uint8Array({ minLength: 144, maxLength: 144 }),
  )
  .map(([w, h, px]) => {
    const img = new pngjs.PNG({ width: w, height: h });
    img.data.set(px.subarray(0, w * h * 4));
    return new Uint8Array(pngjs.PNG.sync.write(img));
  });

test('fuzz images: mutated PNGs are refused with one line naming the file, or decoded to width × height × 4 bytes', {
  timeout: 60_000,
}, () => {
  fc.assert(
    fc.property(mutated(png), (bytes) => {
      const img = expectOnly(() => decodeImage(bytes, PNG), { expected: plainErrorNaming(PNG), maxMs: 500 });
      if (img) assert.equal(img.data.length, img.width * img.height * 4);
    }),
    runs(1000),
  );
});
