import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { writeCheckpoint, readCheckpoint, type CheckpointTensor } from '../../src/runtime/checkpoint/checkpoint.ts';
import { randomArray } from '../util/close.ts';

function withDir(fn: (dir: string) => void): void {
  const dir = mkdtempSync(join(tmpdir(), 'paratrain-ckpt-'));
  try {
    fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const bits = (a: Float32Array) => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));

/** Odd values on purpose: -0, ±Infinity, a NaN with a payload, a subnormal. */
function awkward(): Float32Array {
  const a = new Float32Array(6);
  a.set([-0, Infinity, -Infinity, 0, 1.401298464324817e-45, 3.4028234663852886e38]);
  new Uint32Array(a.buffer)[3] = 0x7fc00123;
  return a;
}

const sample = (): CheckpointTensor[] => [
  { name: 'layers.0.kernel', shape: [3, 3, 1, 4], data: randomArray(36, 1) },
  { name: 'layers.0.bias', shape: [4], data: randomArray(4, 2) },
  { name: 'odd', shape: [2, 3], data: awkward() },
  { name: 'scalar', shape: [], data: new Float32Array([42]) },
  { name: 'empty', shape: [0, 5], data: new Float32Array(0) },
  // a view into a larger buffer, as model parameters are
  { name: 'view', shape: [5], data: randomArray(20, 3).subarray(7, 12) },
];

test('round trip is bit-exact and keeps order, shapes and metadata', () =>
  withDir((dir) => {
    const path = join(dir, 'model.safetensors');
    const tensors = sample();
    const metadata = { config: JSON.stringify({ a: [1, 2] }), epoch: '3', 'unicode ✓': 'naïve' };
    writeCheckpoint(path, tensors, metadata);
    const r = readCheckpoint(path);
    assert.deepStrictEqual(
      [...r.tensors.keys()],
      tensors.map((t) => t.name),
    );
    for (const t of tensors) {
      const got = r.tensors.get(t.name)!;
      assert.deepStrictEqual(got.shape, t.shape, t.name);
      assert.deepStrictEqual(bits(got.data), bits(t.data), t.name);
    }
    assert.deepStrictEqual(r.metadata, metadata);
  }));

test('the file layout is safetensors: u64 LE header length, padded JSON header, contiguous data', () =>
  withDir((dir) => {
    const path = join(dir, 'a.safetensors');
    writeCheckpoint(
      path,
      [
        { name: 'w', shape: [2], data: new Float32Array([1, -2]) },
        { name: 'b', shape: [1], data: new Float32Array([0.5]) },
      ],
      { k: 'v' },
    );
    const bytes = readFileSync(path);
    const n = Number(bytes.readBigUInt64LE(0));
    assert.equal(n % 8, 0, 'header padded to a multiple of 8');
    const headerText = bytes.subarray(8, 8 + n).toString('utf8');
    assert.match(headerText, /^\{.*\} *$/);
    assert.deepStrictEqual(JSON.parse(headerText), {
      __metadata__: { k: 'v' },
      w: { dtype: 'F32', shape: [2], data_offsets: [0, 8] },
      b: { dtype: 'F32', shape: [1], data_offsets: [8, 12] },
    });
    assert.equal(bytes.length, 8 + n + 12);
    assert.deepStrictEqual([...bytes.subarray(8 + n)], [0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0, 0, 0, 0, 0x3f]);
    // no metadata: no __metadata__ key
    writeCheckpoint(path, [{ name: 'w', shape: [1], data: new Float32Array([1]) }], {});
    const m = Number(readFileSync(path).readBigUInt64LE(0));
    assert.ok(
      !JSON.parse(
        readFileSync(path)
          .subarray(8, 8 + m)
          .toString(),
      ).__metadata__,
    );
    assert.deepStrictEqual(readCheckpoint(path).metadata, {});
  }));

test('writes are atomic: no temp file left, a failed write leaves the old file intact', () =>
  withDir((dir) => {
    const path = join(dir, 'model.safetensors');
    writeCheckpoint(path, sample(), { v: '1' });
    writeCheckpoint(path, sample(), { v: '2' });
    assert.deepStrictEqual(readdirSync(dir), ['model.safetensors']);
    assert.equal(readCheckpoint(path).metadata.v, '2');
    const before = readFileSync(path);
    assert.throws(
      () => writeCheckpoint(path, [{ name: 'w', shape: [2, 2], data: new Float32Array(3) }], {}),
      /checkpoint .*model\.safetensors: tensor 'w' has shape \[2, 2\] \(4 values\) but 3 values of data/,
    );
    assert.throws(
      () =>
        writeCheckpoint(
          path,
          [
            { name: 'w', shape: [1], data: new Float32Array(1) },
            { name: 'w', shape: [1], data: new Float32Array(1) },
          ],
          {},
        ),
      /two tensors are named 'w'/,
    );
    assert.deepStrictEqual(readFileSync(path), before);
    assert.deepStrictEqual(readdirSync(dir), ['model.safetensors']);
    const nowhere = join(dir, 'missing-dir', 'm.safetensors');
    assert.throws(
      () => writeCheckpoint(nowhere, sample(), {}),
      /^Error: cannot write checkpoint .*missing-dir.*m\.safetensors: ENOENT/,
    );
    assert.ok(!existsSync(join(dir, 'missing-dir')));
  }));

/** Writes a good checkpoint, lets `damage` change its bytes, and returns the error message of reading it. */
function readDamaged(dir: string, damage: (bytes: Buffer, headerLength: number) => Buffer): string {
  const path = join(dir, 'bad.safetensors');
  writeCheckpoint(
    path,
    [
      { name: 'a', shape: [2, 2], data: new Float32Array([1, 2, 3, 4]) },
      { name: 'b', shape: [3], data: new Float32Array([5, 6, 7]) },
    ],
    { epoch: '1' },
  );
  const bytes = readFileSync(path);
  writeFileSync(path, damage(bytes, Number(bytes.readBigUInt64LE(0))));
  try {
    readCheckpoint(path);
  } catch (e) {
    const msg = (e as Error).message;
    assert.ok(msg.includes(path), `names the file: ${msg}`);
    assert.ok(!msg.includes('\n'), `one line: ${msg}`);
    return msg.slice(msg.indexOf(path) + path.length);
  }
  return assert.fail('expected the damaged checkpoint to be rejected');
}

/** A file with header `header` (as JSON) and `dataBytes` zero bytes of data. */
function rawFile(header: unknown, dataBytes: number): Buffer {
  const json = Buffer.from(JSON.stringify(header));
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  return Buffer.concat([len, json, Buffer.alloc(dataBytes)]);
}

test('every kind of damage is detected with a clear message', () =>
  withDir((dir) => {
    const cases: [string, (b: Buffer, n: number) => Buffer, RegExp][] = [
      [
        'empty file',
        () => Buffer.alloc(0),
        /^ is corrupt or truncated: the file is 0 bytes, too short to hold the 8-byte header length$/,
      ],
      ['3 bytes', (b) => b.subarray(0, 3), /^ is corrupt or truncated: the file is 3 bytes, too short/],
      [
        'cut inside the header',
        (b) => b.subarray(0, 20),
        /^ is corrupt or truncated: the header length \(\d+ bytes\) reaches beyond the end of the file \(20 bytes\)$/,
      ],
      [
        'cut inside the data',
        (b) => b.subarray(0, b.length - 5),
        /^ is corrupt or truncated: tensor 'b' lies at bytes 16\.\.28 of the data, but the data holds only 23 bytes$/,
      ],
      [
        'header length flipped to huge',
        (b) => {
          const c = Buffer.from(b);
          c[7] = 0xff;
          return c;
        },
        /^ is corrupt or truncated: the header length \(\d+ bytes\) reaches beyond the end of the file/,
      ],
      [
        'header length too small',
        (b, n) => {
          const c = Buffer.from(b);
          c.writeBigUInt64LE(BigInt(n - 16));
          return c;
        },
        /^ is corrupt or truncated: the header is not valid JSON \(/,
      ],
      [
        'garbage JSON',
        (b, n) => {
          const c = Buffer.from(b);
          c.fill(0x7a, 8, 8 + n);
          return c;
        },
        /^ is corrupt or truncated: the header is not valid JSON \(/,
      ],
      [
        'invalid UTF-8',
        (b) => {
          const c = Buffer.from(b);
          c[9] = 0xff;
          return c;
        },
        /^ is corrupt or truncated: the header is not valid JSON \(/,
      ],
      [
        'a JSON array',
        () => rawFile([1, 2], 0),
        /^ is corrupt or truncated: the header is not valid JSON \(it does not start with \{\)$/,
      ],
      [
        'unsupported dtype',
        () => rawFile({ a: { dtype: 'F16', shape: [2], data_offsets: [0, 4] } }, 4),
        /^: tensor 'a' has dtype F16, which paratrain does not read \(only F32\); convert it to float32$/,
      ],
      [
        'offsets outside',
        () => rawFile({ a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } }, 4),
        /^ is corrupt or truncated: tensor 'a' lies at bytes 0\.\.8 of the data, but the data holds only 4 bytes$/,
      ],
      [
        'overlap',
        () =>
          rawFile(
            {
              a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] },
              b: { dtype: 'F32', shape: [2], data_offsets: [4, 12] },
            },
            12,
          ),
        /^ is corrupt or truncated: tensors 'a' and 'b' overlap \(bytes 4\.\.8\)$/,
      ],
      [
        'shape/size mismatch',
        () => rawFile({ a: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }, 8),
        /^ is corrupt or truncated: tensor 'a' has shape \[3\] \(12 bytes of F32\) but its data_offsets span 8 bytes$/,
      ],
      [
        'gap',
        () => rawFile({ a: { dtype: 'F32', shape: [1], data_offsets: [4, 8] } }, 8),
        /^ is corrupt or truncated: bytes 0\.\.4 of the data belong to no tensor$/,
      ],
      [
        'trailing bytes',
        (b) => Buffer.concat([b, Buffer.alloc(4)]),
        /^ is corrupt or truncated: 4 bytes follow the last tensor$/,
      ],
      [
        'bad offsets',
        () => rawFile({ a: { dtype: 'F32', shape: [1], data_offsets: [8, 4] } }, 8),
        /^ is corrupt or truncated: tensor 'a' has data_offsets \[8,4\]; expected \[begin, end\] with 0 ≤ begin ≤ end$/,
      ],
      [
        'bad shape',
        () => rawFile({ a: { dtype: 'F32', shape: [-1], data_offsets: [0, 4] } }, 4),
        /^ is corrupt or truncated: tensor 'a' has shape \[-1\]/,
      ],
      [
        'bad metadata',
        () => rawFile({ __metadata__: { epoch: 1 } }, 0),
        /^ is corrupt or truncated: __metadata__ 'epoch' is not a string$/,
      ],
    ];
    for (const [what, damage, expected] of cases) {
      assert.match(readDamaged(dir, damage), expected, what);
    }
    const missing = join(dir, 'nope.safetensors');
    assert.throws(
      () => readCheckpoint(missing),
      (e: unknown) => (e as Error).message === `checkpoint ${missing} not found`,
    );
  }));

test('a file written by another safetensors writer (metadata anywhere, other tensor order) is read', () =>
  withDir((dir) => {
    const path = join(dir, 'other.safetensors');
    const header = Buffer.from(
      '{"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}  ',
    );
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(header.length));
    writeFileSync(path, Buffer.concat([len, header, Buffer.from(new Float32Array([1, 2, 3]).buffer)]));
    const r = readCheckpoint(path);
    assert.deepStrictEqual([...r.tensors.get('a')!.data], [1, 2]);
    assert.deepStrictEqual([...r.tensors.get('b')!.data], [3]);
    assert.deepStrictEqual(r.metadata, { format: 'pt' });
  }));

/** Why the Python interop test cannot run here, or null when it can. */
function pythonUnavailable(): string | null {
  const r = spawnSync('python3', ['-c', 'import numpy, safetensors.numpy'], { encoding: 'utf8', timeout: 20_000 });
  if (r.error) return `python3 is not available (${r.error.message})`;
  if (r.status !== 0)
    return 'python3 has no safetensors/numpy module (Debian bookworm does not package python3-safetensors; install it to run this test)';
  return null;
}
const skipPython = pythonUnavailable();

test('Python safetensors reads our file and writes one we read', { skip: skipPython ?? false }, () =>
  withDir((dir) => {
    const ours = join(dir, 'ours.safetensors');
    const theirs = join(dir, 'theirs.safetensors');
    writeCheckpoint(
      ours,
      [
        { name: 'w', shape: [2, 3], data: new Float32Array([1, 2, 3, 4, 5, 6.5]) },
        { name: 'b', shape: [3], data: new Float32Array([-1, 0, 1]) },
      ],
      { epoch: '7' },
    );
    const script = `
import sys, json, numpy as np
from safetensors.numpy import load_file, save_file
from safetensors import safe_open
t = load_file(sys.argv[1])
with safe_open(sys.argv[1], framework="np") as f:
    meta = f.metadata()
print(json.dumps({"w": t["w"].tolist(), "b": t["b"].tolist(), "meta": meta}))
save_file({"x": np.arange(6, dtype=np.float32).reshape(2, 3) / 4, "y": np.array([7.25], dtype=np.float32)}, sys.argv[2], metadata={"from": "python"})
`;
    const r = spawnSync('python3', ['-c', script, ours, theirs], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, r.stderr);
    assert.deepStrictEqual(JSON.parse(r.stdout), {
      w: [
        [1, 2, 3],
        [4, 5, 6.5],
      ],
      b: [-1, 0, 1],
      meta: { epoch: '7' },
    });
    const back = readCheckpoint(theirs);
    assert.deepStrictEqual(back.tensors.get('x')!.shape, [2, 3]);
    assert.deepStrictEqual([...back.tensors.get('x')!.data], [0, 0.25, 0.5, 0.75, 1, 1.25]);
    assert.deepStrictEqual([...back.tensors.get('y')!.data], [7.25]);
    assert.deepStrictEqual(back.metadata, { from: 'python' });
  }),
);
