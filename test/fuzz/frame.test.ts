/** Fuzzing the tcp frame decoder: any byte stream, cut anywhere, ends in FrameError or in the frames sent. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { crc32 } from 'node:zlib';
import fc from 'fast-check';
import { FrameDecoder } from '../../src/comm/tcp/frameDecoder.ts';
import {
  FrameError,
  FrameType,
  HEADER_BYTES,
  MAGIC,
  PRE_AUTH_MAX_FRAME,
  encodeFrame,
  parseJson,
  type Frame,
} from '../../src/comm/tcp/frame.ts';
import { INTERESTING_U32, concat, expectOnly, mutated, runs, spliced } from './helpers.ts';

const MAX = 1 << 16;
const CONTROL = [
  FrameType.Hello,
  FrameType.Challenge,
  FrameType.Proof,
  FrameType.Welcome,
  FrameType.Refuse,
  FrameType.Register,
  FrameType.Table,
  FrameType.Abort,
  FrameType.Bye,
];
const DATA = [
  FrameType.Allreduce,
  FrameType.ReduceScatter,
  FrameType.Allgather,
  FrameType.Broadcast,
  FrameType.Barrier,
  FrameType.P2P,
];

/** One frame's fields; the stream numbers them from seq 0. */
const frameSpec = fc
  .oneof(
    fc.record({
      type: fc.constantFrom(...CONTROL),
      payload: fc.jsonValue({ maxDepth: 3 }).map((v) => Buffer.from(JSON.stringify({ v }))),
    }),
    fc.record({
      type: fc.constantFrom(...DATA),
      payload: fc.float32Array({ maxLength: 64 }).map((f) => Buffer.from(f.buffer, f.byteOffset, f.byteLength)),
    }),
  )
  .chain((f) =>
    fc.record({ flags: fc.nat(1), arg: fc.nat(0xffff), tag: fc.nat(), aux: fc.nat() }).map((h) => ({ ...f, ...h })),
  );

const validStream = fc.array(frameSpec, { minLength: 1, maxLength: 5 }).map((frames) => ({
  frames,
  bytes: new Uint8Array(Buffer.concat(frames.map((f, seq) => encodeFrame({ ...f, seq }, f.payload)))),
}));
const streamBytes = validStream.map((s) => s.bytes);

/** Pushes `bytes` cut into chunks at `cuts`; returns the frames that came out. */
function decode(bytes: Uint8Array, cuts: number[], max = MAX): Frame[] {
  const out: Frame[] = [];
  const decoder = new FrameDecoder(max, (f) => out.push(f));
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  let at = 0;
  for (const p of [...points, bytes.length]) {
    if (p > at) decoder.push(Buffer.from(bytes.subarray(at, p)));
    at = Math.max(at, p);
  }
  return out;
}

const frameError = (err: unknown) => err instanceof FrameError;

test('fuzz frames: valid streams cut anywhere decode to the frames sent', { timeout: 60_000 }, () => {
  fc.assert(
    fc.property(validStream, fc.array(fc.nat(), { maxLength: 8 }), ({ frames, bytes }, cuts) => {
      const out = decode(bytes, cuts);
      assert.equal(out.length, frames.length);
      out.forEach((f, i) => {
        assert.equal(f.type, frames[i]!.type);
        assert.equal(f.seq, i);
        assert.deepEqual(Buffer.from(f.payload), frames[i]!.payload);
      });
    }),
    runs(300),
  );
});

test('fuzz frames: mutated and spliced streams end in FrameError or decode, never more than the bytes justify', {
  timeout: 60_000,
}, () => {
  fc.assert(
    fc.property(
      fc.oneof(mutated(streamBytes), spliced(streamBytes)),
      fc.array(fc.nat(), { maxLength: 6 }),
      (bytes, cuts) => {
        const out = expectOnly(() => decode(bytes, cuts), {
          expected: frameError,
          inputBytes: bytes.length,
          maxMs: 1000,
        });
        for (const f of out ?? []) assert.ok(f.payload.length <= bytes.length);
      },
    ),
    runs(1500),
  );
});

/** A header with a valid header checksum (so the decoder believes it) and forged fields. */
function forgedHeader(type: number, seq: number, length: number, check: number): Uint8Array {
  const b = Buffer.alloc(HEADER_BYTES);
  b.writeUInt32LE(MAGIC, 0);
  b.writeUInt8(type, 4);
  b.writeUInt32LE(seq >>> 0, 8);
  b.writeUInt32LE(length >>> 0, 20);
  b.writeUInt32LE(check >>> 0, 24);
  b.writeUInt32LE(crc32(b.subarray(0, 28)) >>> 0, 28);
  return b;
}

test('fuzz frames: forged headers with huge lengths are refused before their payload is allocated', {
  timeout: 60_000,
}, () => {
  const forged = fc
    .tuple(
      fc.nat(255),
      fc.oneof(fc.constant(0), fc.nat()),
      fc.oneof(fc.constantFrom(...INTERESTING_U32), fc.nat()),
      fc.nat(),
      fc.uint8Array({ maxLength: 64 }),
      fc.constantFrom(PRE_AUTH_MAX_FRAME, MAX),
    )
    .map(([type, seq, length, check, tail, max]) => ({
      bytes: concat(forgedHeader(type, seq, length, check), tail),
      max,
    }));
  fc.assert(
    fc.property(forged, ({ bytes, max }) => {
      expectOnly(() => decode(bytes, [], max), { expected: frameError, inputBytes: bytes.length, maxMs: 1000 });
    }),
    runs(1500),
  );
});

test('fuzz frames: control payloads that are not JSON objects are a FrameError', { timeout: 60_000 }, () => {
  const payload = fc.oneof(
    fc.uint8Array({ maxLength: 64 }),
    fc.jsonValue().map((v) => new TextEncoder().encode(JSON.stringify(v))),
  );
  fc.assert(
    fc.property(payload, (p) => {
      const frame = {
        type: FrameType.Hello,
        flags: 0,
        arg: 0,
        seq: 0,
        tag: 0,
        aux: 0,
        length: p.length,
        payload: Buffer.from(p),
        check: 0,
      };
      expectOnly(() => parseJson(frame), { expected: frameError, maxMs: 1000 });
    }),
    runs(1000),
  );
});
