/** The tcp wire format: frames survive any split of the byte stream; anything malformed is a FrameError. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  encodeFrame,
  encodeHeader,
  FrameError,
  FrameType,
  HEADER_BYTES,
  MAGIC,
  type Frame,
} from '../../src/comm/tcp/frame.ts';
import { FrameDecoder } from '../../src/comm/tcp/frameDecoder.ts';
import { hashPayloadJs, DATA_PATH_WASM_BASE64, TcpDataPath } from '../../src/comm/tcp/dataPath.ts';
import { PullReader } from '../../src/comm/tcp/link.ts';
import { loadTcpNative } from '../../src/comm/tcp/nativeDataPath.ts';
import { assembleWat } from './helpers.ts';

/** The two data paths: the wasm data path, and the native addon where it is built (npm run build:tcp). */
const DATA_PATHS = [
  { name: 'wasm', native: false, skip: false as string | false },
  {
    name: 'native',
    native: true,
    skip: loadTcpNative() ? false : 'the native tcp data path is not built (npm run build:tcp)',
  },
];

const frame = (seq: number, payload: Buffer, type: number = FrameType.Allreduce) =>
  encodeFrame({ type, flags: 1, arg: 2, seq, tag: 40 + seq, aux: 1000 }, payload);

function decodeAll(stream: Buffer, pieces: number[], max = 1 << 20): Frame[] {
  const out: Frame[] = [];
  const d = new FrameDecoder(max, (f) => out.push(f));
  let off = 0;
  for (let i = 0; off < stream.length; i++) {
    const n = pieces[i % pieces.length]!;
    d.push(stream.subarray(off, off + n));
    off += n;
  }
  return out;
}

test('frames round-trip through every split of the stream, payloads 4-byte aligned', () => {
  const payloads = [Buffer.alloc(0), Buffer.from([1, 2, 3, 4, 5, 6, 7, 8]), Buffer.alloc(70_000, 9)];
  const stream = Buffer.concat(payloads.map((p, i) => frame(i, p)));
  for (const pieces of [[1], [3], [31, 33], [4096], [stream.length]]) {
    const got = decodeAll(stream, pieces);
    assert.equal(got.length, 3);
    got.forEach((f, i) => {
      assert.deepEqual(
        [f.type, f.flags, f.arg, f.seq, f.tag, f.aux, f.length],
        [FrameType.Allreduce, 1, 2, i, 40 + i, 1000, payloads[i]!.length],
      );
      assert.ok(f.payload.equals(payloads[i]!));
      assert.equal(f.payload.byteOffset % 4, 0);
    });
  }
  assert.equal(stream.readUInt32LE(0), MAGIC);
  assert.equal(stream.subarray(0, 4).toString('latin1'), 'PTR1');
});

test('malformed input is a FrameError and stops the decoder', () => {
  const good = frame(0, Buffer.from('abcd'));
  const cases: [string, Buffer, RegExp][] = [
    ['foreign bytes', Buffer.from('SSH-2.0-OpenSSH_9.2\r\n'), /bad magic "SSH-"/],
    [
      'corrupt header',
      (() => {
        const b = Buffer.from(good);
        b[20] ^= 1;
        return b;
      })(),
      /header checksum/,
    ],
    [
      'corrupt payload',
      (() => {
        const b = Buffer.from(good);
        b[HEADER_BYTES] ^= 1;
        return b;
      })(),
      /payload checksum mismatch/,
    ],
    ['sequence gap', frame(5, Buffer.from('abcd')), /sequence gap: got #5, expected #0/],
    [
      'oversized',
      encodeHeader({ type: FrameType.P2P, flags: 0, arg: 0, seq: 0, tag: 0, aux: 0, length: 2048 }, 0),
      /oversized send\/recv frame: 2048 bytes, the maximum here is 1024/,
    ],
    [
      'unknown type',
      encodeFrame({ type: 99, flags: 0, arg: 0, seq: 0, tag: 0, aux: 0 }),
      /unexpected frame type unknown type 99/,
    ],
  ];
  for (const [what, bytes, message] of cases) {
    const got: Frame[] = [];
    const d = new FrameDecoder(1024, (f) => got.push(f));
    assert.throws(
      () => d.push(bytes),
      (err: Error) => err instanceof FrameError && message.test(err.message),
      what,
    );
    d.push(good); // ignored after a failure
    assert.equal(got.length, 0, what);
  }
  // types outside the allowed set (e.g. data before authentication)
  const d = new FrameDecoder(1024, () => {}, new Set([FrameType.Hello]));
  assert.throws(() => d.push(good), /unexpected frame type allreduce/);
});

test('a replayed frame is rejected', () => {
  const got: Frame[] = [];
  const d = new FrameDecoder(1024, (f) => got.push(f));
  const f0 = frame(0, Buffer.from('abcd'));
  d.push(f0);
  assert.throws(() => d.push(f0), /sequence gap: got #0, expected #1/);
  assert.equal(got.length, 1);
});

for (const dp of DATA_PATHS)
  test(`data payloads land in kernel slots, hashed on arrival, and the slots are reused (${dp.name})`, {
    skip: dp.skip,
  }, () => {
    const kernel = new TcpDataPath(2 << 20, dp.native); // small arenas: more get added on the way
    assert.equal(!!kernel.native, dp.native);
    const got: Frame[] = [];
    const d = new FrameDecoder(1 << 22, (f) => got.push(f));
    d.dataPath = kernel;
    const floats = Float32Array.from({ length: 300_001 }, (_, i) => Math.sin(i));
    const payload = Buffer.from(floats.buffer);
    const stream = Buffer.concat([frame(0, payload), frame(1, payload.subarray(0, 44))]);
    for (let off = 0; off < stream.length; off += 1000) d.push(stream.subarray(off, off + 1000));
    assert.equal(got.length, 2);
    assert.ok(got[0]!.payload.equals(payload));
    assert.equal(got[0]!.check, hashPayloadJs(payload));
    assert.ok(got[0]!.slot && kernel.isSlot(got[0]!.payload));
    const first = got[0]!.payload;
    kernel.putSlot(first);
    kernel.putSlot(first); // a second put is ignored
    d.push(frame(2, payload));
    assert.ok(
      got[2]!.payload.buffer === first.buffer && got[2]!.payload.byteOffset === first.byteOffset,
      'the slot is reused',
    );
    d.push(frame(3, payload));
    assert.ok(
      got[3]!.payload.byteOffset !== first.byteOffset || got[3]!.payload.buffer !== first.buffer,
      'but handed to one reader at a time',
    );
    // a corrupt data payload is caught by the hash
    const bad = frame(4, payload.subarray(0, 4096));
    bad[HEADER_BYTES + 100] ^= 0x10;
    assert.throws(() => d.push(bad), /payload checksum mismatch in allreduce frame #4/);
  });

for (const dp of DATA_PATHS)
  test(`the SIMD hash equals the JS reference for every length and offset (${dp.name})`, { skip: dp.skip }, () => {
    const kernel = new TcpDataPath(1 << 20, dp.native);
    const bytes = Buffer.from(Array.from({ length: 70_001 * 4 }, (_, i) => (i * 131 + (i >> 7)) & 0xff));
    for (const at of [0, 4, 36]) {
      for (const len of [0, 4, 60, 64, 68, 124, 128, 132, 256, 4092, 65536, 65540, 70_000 * 4]) {
        const b = bytes.subarray(at, at + len);
        assert.equal(kernel.hashBytes(b), hashPayloadJs(b), `length ${len} at byte ${at}`);
      }
    }
  });

test('a changed bit or two swapped words change the hash; the embedded wasm is dataPath.wat', async () => {
  const bytes = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 131 + (i >> 7)) & 0xff));
  // one flipped bit, or two words swapped, change it
  const a = Buffer.from(bytes.subarray(0, 4096));
  const h = hashPayloadJs(a);
  a[77] ^= 1;
  assert.notEqual(hashPayloadJs(a), h);
  a[77] ^= 1;
  const [w0, w1] = [a.readUInt32LE(0), a.readUInt32LE(4)];
  a.writeUInt32LE(w1, 0);
  a.writeUInt32LE(w0, 4);
  assert.notEqual(hashPayloadJs(a), h);
  assert.equal(
    assembleWat(new URL('../../src/comm/tcp/dataPath.wat', import.meta.url)),
    DATA_PATH_WASM_BASE64,
    'rebuild the base64 from dataPath.wat',
  );
});

for (const dp of DATA_PATHS)
  test(`the SIMD reduce step is float32 addition (and division), element by element (${dp.name})`, {
    skip: dp.skip,
  }, () => {
    const kernel = new TcpDataPath(1 << 20, dp.native);
    for (const n of [1, 5, 16, 17, 16_387, 40_000]) {
      for (const div of [0, 3]) {
        const incoming = Float32Array.from({ length: n }, (_, i) => Math.fround(Math.cos(i) * 1e3));
        const own = Float32Array.from({ length: n }, (_, i) => Math.fround(Math.sin(i * 0.7) / 7));
        const slot = kernel.getSlot(n * 4);
        slot.set(new Uint8Array(incoming.buffer));
        const dst = own.slice();
        const check = kernel.reduceInto(dst, slot, div, true);
        const want = own.map((x, i) =>
          div ? Math.fround(Math.fround(incoming[i]! + x) / div) : Math.fround(incoming[i]! + x),
        );
        assert.deepEqual(dst, want, `n=${n} div=${div}`);
        assert.equal(check, hashPayloadJs(new Uint8Array(want.buffer)));
        // without the hash, and into a view at an odd float offset
        const big = new Float32Array(n + 3);
        big.set(own, 3);
        slot.set(new Uint8Array(incoming.buffer));
        assert.equal(kernel.reduceInto(big.subarray(3), slot, div, false), 0);
        assert.deepEqual(big.subarray(3), want, `n=${n} div=${div} at an offset`);
        kernel.putSlot(slot);
      }
    }
  });

test('a pull reader completes at most one frame per read, so a handshake can raise limits between frames', () => {
  const frames: Frame[] = [];
  const reads: number[] = [];
  const d = new FrameDecoder(1 << 16, (f) => frames.push(f));
  const reader = new PullReader();
  reader.attach(d, (err) => assert.fail(err));
  // what the peer wrote: a Welcome right followed by data; the socket offers it all at once
  const wire = Buffer.concat([
    encodeFrame({ type: FrameType.Welcome, flags: 0, arg: 0, seq: 0, tag: 0, aux: 0 }, Buffer.from('{}')),
    encodeFrame({ type: FrameType.Barrier, flags: 0, arg: 0, seq: 1, tag: 0, aux: 0 }),
    encodeFrame({ type: FrameType.Barrier, flags: 0, arg: 1, seq: 2, tag: 0, aux: 0 }),
  ]);
  for (let off = 0; off < wire.length; ) {
    const target = reader.onread.buffer();
    const n = Math.min(target.length, wire.length - off);
    wire.copy(target, 0, off, off + n);
    off += n;
    const before = frames.length;
    reader.onread.callback(n, target);
    reads.push(frames.length - before);
  }
  assert.deepEqual(
    frames.map((f) => f.type),
    [FrameType.Welcome, FrameType.Barrier, FrameType.Barrier],
  );
  assert.ok(
    reads.every((k) => k <= 1),
    `frames completed per read: ${reads}`,
  );
});

test('a held data frame waits at its header until released, or is given away with its header bytes', () => {
  const kernel = new TcpDataPath(1 << 20, false);
  const got: Frame[] = [];
  const d = new FrameDecoder(1 << 20, (f) => got.push(f));
  d.dataPath = kernel;
  d.hold = (h) => h.tag >= 41; // frames 1 and up
  const payload = Buffer.from(Float32Array.from({ length: 64 }, (_, i) => i).buffer);
  const [f0, f1, f2] = [frame(0, payload), frame(1, payload), frame(2, payload)];
  d.push(f0);
  d.push(f1.subarray(0, HEADER_BYTES)); // the header alone, as a pull read ends there
  assert.equal(got.length, 1);
  assert.equal(d.heldHeader?.seq, 1);
  assert.ok(!d.idle && !d.inPayload, 'held: neither between frames nor in a payload');
  assert.equal(d.readTarget().length, HEADER_BYTES, 'reads go to scratch-sized targets while held');
  d.release();
  assert.equal(d.heldHeader, undefined);
  d.push(f1.subarray(HEADER_BYTES));
  assert.equal(got.length, 2);
  assert.ok(got[1]!.payload.equals(payload));
  // given away: its header bytes come back and the decoder expects that frame again
  d.push(f2.subarray(0, HEADER_BYTES));
  const head = d.takeHeld();
  assert.ok(head?.equals(f2.subarray(0, HEADER_BYTES)));
  assert.ok(d.idle);
  assert.equal(d.expectedSeq, 2);
  d.push(f2); // whoever took it hands the frame back whole
  d.push(frame(3, payload)); // header and payload in one chunk: bytes past the header are in, so it cannot be held
  assert.equal(got.length, 4);
  assert.equal(d.heldHeader, undefined);
  assert.ok(got[3]!.payload.equals(payload));
});
