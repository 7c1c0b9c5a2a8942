/**
 * Landing: data frames that only need storing are read straight into the caller's buffer. The
 * plan follows the collective's ranges in arrival order, skips what arrived before it existed,
 * and gives up (slots from then on) at the first frame that does not fit.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeFrame, FrameType, type Frame, type FrameHeader } from '../../src/comm/tcp/frame.ts';
import { FrameDecoder } from '../../src/comm/tcp/frameDecoder.ts';
import { hashPayloadJs, TcpDataPath } from '../../src/comm/tcp/dataPath.ts';
import { LandingPlan } from '../../src/comm/tcp/landing.ts';
import { loadTcpNative } from '../../src/comm/tcp/nativeDataPath.ts';

const EXPECT = { type: FrameType.Allreduce, aux: 100, flags: 0, arg: 0 };
const header = (floats: number, h: Partial<FrameHeader> = {}): FrameHeader => ({
  ...EXPECT,
  seq: 0,
  tag: 7,
  length: floats * 4,
  ...h,
});

/** The float offset a plan gives a frame (via the returned bytes' offset), or 'slot'. */
function where(plan: LandingPlan, bytes: Buffer, h: FrameHeader): number | 'slot' {
  const b = plan.take(h);
  if (!b) return 'slot';
  assert.equal(b.buffer, bytes.buffer);
  assert.equal(b.length, h.length);
  return (b.byteOffset - bytes.byteOffset) / 4;
}

test('a plan lands frames of its landing ranges, in order, and leaves the others to slots', () => {
  const bytes = Buffer.alloc(400);
  const plan = new LandingPlan(bytes, EXPECT, [
    { start: 50, end: 75, land: false }, // reduced: slots
    { start: 10, end: 10, land: true }, // empty: skipped
    { start: 75, end: 100, land: true },
    { start: 0, end: 25, land: true },
  ]);
  const got = [10, 15, 20, 5, 25].map((m) => where(plan, bytes, header(m)));
  assert.deepEqual(got, ['slot', 'slot', 75, 95, 0]);
  assert.equal(where(plan, bytes, header(1)), 'slot', 'past the last range');
});

test('frames announced before the plan existed are skipped', () => {
  const bytes = Buffer.alloc(400);
  const plan = new LandingPlan(bytes, EXPECT, [
    { start: 50, end: 75, land: false },
    { start: 0, end: 30, land: true },
  ]);
  plan.skip(25 + 12);
  assert.equal(where(plan, bytes, header(18)), 12);
});

test('a frame that does not fit breaks the plan for good', () => {
  for (const bad of [
    header(30),
    header(10, { aux: 99 }),
    header(10, { type: FrameType.Allgather }),
    header(10, { flags: 1 }),
    header(0),
  ]) {
    const bytes = Buffer.alloc(400);
    const plan = new LandingPlan(bytes, EXPECT, [
      { start: 0, end: 20, land: true },
      { start: 40, end: 60, land: true },
    ]);
    assert.equal(where(plan, bytes, bad), 'slot');
    assert.equal(where(plan, bytes, header(10)), 'slot', 'later frames go to slots too');
  }
});

test('the decoder reads a landed payload into the given bytes and checks its hash', {
  skip: loadTcpNative() ? false : 'the native tcp data path is not built (npm run build:tcp)',
}, () => {
  const kernel = new TcpDataPath(1 << 20, true);
  const got: Frame[] = [];
  const d = new FrameDecoder(1 << 22, (f) => got.push(f));
  d.dataPath = kernel;
  const dst = new Float32Array(1000);
  const target = Buffer.from(dst.buffer, 4 * 100, 4 * 777);
  d.landing = (h) => (h.tag === 1 ? target : undefined);
  const floats = Float32Array.from({ length: 777 }, (_, i) => Math.cos(i));
  const payload = Buffer.from(floats.buffer);
  const at = (seq: number, tag: number, p: Buffer) =>
    encodeFrame({ type: FrameType.Allgather, flags: 0, arg: 0, seq, tag, aux: 1000 }, p);
  const stream = Buffer.concat([at(0, 1, payload), at(1, 2, payload)]);
  for (let off = 0; off < stream.length; off += 333) d.push(stream.subarray(off, off + 333));
  assert.equal(got.length, 2);
  assert.ok(got[0]!.landed && !got[0]!.slot);
  assert.deepEqual(dst.subarray(100, 877), floats);
  assert.equal(got[0]!.check, hashPayloadJs(payload));
  assert.ok(got[1]!.slot && !got[1]!.landed, 'no landing: a slot');
  // a corrupt landed payload is caught by the hash all the same
  const bad = at(2, 1, payload);
  bad[bad.length - 5] ^= 0x40;
  assert.throws(() => d.push(bad), /payload checksum mismatch/);
});
