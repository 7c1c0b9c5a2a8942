/**
 * The native ring (native/tcp/ring.c through nativeRing.ts) on real loopback sockets, in one
 * process: the "left peer" writes crafted frames before the ring runs (it blocks this thread),
 * and what the ring sent to the "right peer" is read and decoded afterwards. Covers the normal
 * path and every way out: hand-over on the unexpected, at the end of the stream and when idle;
 * errors for a peer dying or stalling mid-frame, a corrupt payload and a right neighbour that
 * stops reading. The collectives over it are tested against the serial reference in
 * tcp-collectives.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { spawn } from 'node:child_process';
import { encodeFrame, FrameType, type Frame } from '../../src/comm/tcp/frame.ts';
import { FrameDecoder } from '../../src/comm/tcp/frameDecoder.ts';
import { TcpDataPath } from '../../src/comm/tcp/dataPath.ts';
import { Link, PullReader } from '../../src/comm/tcp/link.ts';
import { loadTcpNative } from '../../src/comm/tcp/nativeDataPath.ts';
import { NativeRing, type NativeRingOutcome, type RingStep } from '../../src/comm/tcp/nativeRing.ts';

const MAX_FRAME = 1 << 20;
const ring = NativeRing.of(loadTcpNative(), MAX_FRAME);
const skip = ring ? false : 'the native tcp data path is not built (npm run build:tcp)';
const FIELDS = { type: FrameType.Allreduce, flags: 0, arg: 0, tag: 5, aux: 4096 };

interface Rig {
  /** writes to our in link (the left neighbour) */
  left: net.Socket;
  /** reads what our out link sends (the right neighbour) */
  right: net.Socket;
  inLink: Link;
  out: Link;
  /** everything the right peer has read so far */
  received: Buffer[];
  close(): void;
}

/** Our ring position: an in link dialled with a PullReader (as the communicator does) and an out link. */
async function rig(): Promise<Rig> {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as net.AddressInfo).port;
  const accepted: net.Socket[] = [];
  server.on('connection', (s) => accepted.push(s));
  const reader = new PullReader();
  const inSock = net.connect({ port, host: '127.0.0.1', onread: reader.onread });
  await once(inSock, 'connect');
  const outSock = net.connect({ port, host: '127.0.0.1' });
  await once(outSock, 'connect');
  while (accepted.length < 2) await new Promise((r) => setTimeout(r, 5));
  const inLink = new Link(inSock, MAX_FRAME, undefined, reader);
  const out = new Link(outSock, MAX_FRAME);
  const [left, right] = accepted as [net.Socket, net.Socket];
  const received: Buffer[] = [];
  right.on('data', (b: Buffer) => received.push(b));
  return {
    left,
    right,
    inLink,
    out,
    received,
    close() {
      for (const s of [left, right, inSock, outSock]) s.destroy();
      server.close();
    },
  };
}

/** A data frame of the call in FIELDS, sequence `seq`, carrying `floats`. */
function frame(seq: number, floats: Float32Array, over: Partial<typeof FIELDS> = {}): Buffer {
  return encodeFrame({ ...FIELDS, ...over, seq }, Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength));
}

/** Writes `bytes` as the left peer and waits until the kernel has them (the ring then blocks this thread). */
async function leftSends(r: Rig, ...bytes: Buffer[]): Promise<void> {
  r.inLink.socket.pause(); // the ring reads them, not the event loop
  for (const b of bytes) await new Promise<void>((res, rej) => r.left.write(b, (e) => (e ? rej(e) : res())));
  await new Promise((res) => setTimeout(res, 20));
}

/** The frames the right peer got, decoded (which checks every checksum and sequence number). */
async function rightGot(r: Rig, count: number): Promise<Frame[]> {
  const deadline = Date.now() + 5000;
  for (;;) {
    const frames: Frame[] = [];
    const d = new FrameDecoder(MAX_FRAME, (f) => frames.push(f));
    for (const b of r.received) d.push(b);
    if (frames.length >= count || Date.now() > deadline) return frames;
    await new Promise((res) => setTimeout(res, 10));
  }
}

const floatsOf = (f: Frame) => new Float32Array(f.payload.buffer, f.payload.byteOffset, f.length / 4);
const iota = (n: number, k: number) => Float32Array.from({ length: n }, (_, i) => i * k + 0.5);

function run(
  r: Rig,
  buf: Float32Array,
  steps: RingStep[],
  send = { start: 0, end: 0 },
  o: { chunkFloats?: number; sliceMs?: number; timeoutMs?: number; step?: number; cur?: number; watch?: number[] } = {},
): NativeRingOutcome {
  assert.ok(NativeRing.ready(r.inLink, r.out, FIELDS.tag), 'the rig is at a clean moment');
  return ring!.run(
    r.inLink,
    r.out,
    buf,
    steps,
    o.step ?? 0,
    o.cur ?? steps[0]!.start,
    send,
    FIELDS,
    {
      chunkFloats: o.chunkFloats ?? 256,
      maxFrameBytes: MAX_FRAME,
      sliceMs: o.sliceMs ?? 2000,
      timeoutMs: o.timeoutMs ?? 5000,
    },
    o.watch,
  );
}

/**
 * Another connection of ours, as the communicator's other links (the native ring watches them):
 * accepted paused (Node does not read it; only the ring looks), with its peer's socket.
 */
async function otherConnection(): Promise<{ fd: number; port: number; accepted: Promise<net.Socket>; close(): void }> {
  const server = net.createServer({ pauseOnConnect: true });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const accepted = once(server, 'connection').then(([s]) => s as net.Socket);
  return {
    get fd() {
      return -1;
    },
    port: (server.address() as net.AddressInfo).port,
    accepted,
    close() {
      void accepted.then((s) => s.destroy());
      server.close();
    },
  };
}

const fdOf = (s: net.Socket) => (s as unknown as { _handle: { fd: number } })._handle.fd;
const ABORT = encodeFrame(
  { type: FrameType.Abort, flags: 0, arg: 0, seq: 0, tag: 0, aux: 0 },
  Buffer.from('{"origin":1,"reason":"x"}'),
);

test('reduce-scatter and allgather steps: sums forwarded, stores forwarded, frames exactly as the JS ring sends them', {
  skip,
}, async () => {
  const x = await rig();
  try {
    // 1024 floats; we send [0, 512) first, receive [512, 1024) to reduce (forwarded), then [0, 512) to store (not forwarded)
    const buf = iota(1024, 1);
    const fromLeft = iota(512, 3);
    const gathered = iota(512, -2);
    await leftSends(
      x,
      frame(0, fromLeft.subarray(0, 256)),
      frame(1, fromLeft.subarray(256)),
      frame(2, gathered.subarray(0, 256)),
      frame(3, gathered.subarray(256)),
    );
    const steps: RingStep[] = [
      { start: 512, end: 1024, reduce: true, forward: true, div: 2 },
      { start: 0, end: 512, reduce: false, forward: false, div: 0 },
    ];
    const res = run(x, buf, steps, { start: 0, end: 512 });
    assert.equal(res.kind, 'done', JSON.stringify(res));
    const mine = iota(1024, 1);
    for (let i = 0; i < 512; i++) {
      assert.equal(
        buf[512 + i],
        Math.fround(Math.fround(mine[512 + i]! + fromLeft[i]!) / 2),
        `reduced float ${512 + i}`,
      );
      assert.equal(buf[i], gathered[i], `stored float ${i}`);
    }
    assert.equal(x.inLink.frames.expectedSeq, 4);
    assert.equal(x.out.sendSeq, 4);
    const sent = await rightGot(x, 4);
    assert.equal(sent.length, 4);
    assert.deepEqual(
      sent.map((f) => [f.seq, f.type, f.tag, f.aux, f.length]),
      [
        [0, FIELDS.type, 5, 4096, 1024],
        [1, FIELDS.type, 5, 4096, 1024],
        [2, FIELDS.type, 5, 4096, 1024],
        [3, FIELDS.type, 5, 4096, 1024],
      ],
    );
    assert.deepEqual(floatsOf(sent[0]!), mine.subarray(0, 256), 'our own first range, as it was before the stores');
    assert.deepEqual(floatsOf(sent[2]!), buf.subarray(512, 768), 'the reduced range, forwarded');
  } finally {
    x.close();
  }
});

test('steps with nothing to receive (fewer floats than ranks) are passed over, also the last one', {
  skip,
}, async () => {
  const x = await rig();
  try {
    // 3 floats over 4 ranks leaves one segment empty: here the second and the last step
    const buf = Float32Array.from([1, 2, 3]);
    await leftSends(x, frame(0, Float32Array.from([10])), frame(1, Float32Array.from([20])));
    const steps: RingStep[] = [
      { start: 0, end: 1, reduce: true, forward: true, div: 0 },
      { start: 3, end: 3, reduce: true, forward: true, div: 0 },
      { start: 1, end: 2, reduce: false, forward: true, div: 0 },
      { start: 3, end: 3, reduce: false, forward: false, div: 0 },
    ];
    // a long slice: waiting for a frame of the empty last step would hand over only after it
    const res = run(x, buf, steps, { start: 2, end: 3 }, { sliceMs: 3000 });
    assert.deepEqual(res.kind === 'done' && [res.step, res.cur], [4, 3], JSON.stringify(res));
    assert.deepEqual([...buf], [11, 20, 3]);
    assert.deepEqual(
      (await rightGot(x, 3)).map((f) => [...floatsOf(f)]),
      [[3], [11], [20]],
    );
  } finally {
    x.close();
  }
});

test('a header the decoder holds (its call had not started) is taken over: the ring starts with it', {
  skip,
}, async () => {
  const x = await rig();
  try {
    x.inLink.raiseLimits(MAX_FRAME, undefined, new TcpDataPath(1 << 20, false));
    x.inLink.holdData((h) => h.tag === FIELDS.tag);
    const write = (b: Buffer) => new Promise<void>((res, rej) => x.left.write(b, (e) => (e ? rej(e) : res())));
    const until = async (cond: () => boolean) => {
      for (const deadline = Date.now() + 5000; !cond() && Date.now() < deadline; )
        await new Promise((r) => setTimeout(r, 5));
    };
    // a frame of an earlier call first: after it the reader reads headers on their own, as it
    // does once a link is up (its first read, before the link attached, took whatever was there)
    await write(frame(0, iota(8, 1), { tag: 4 }));
    await until(() => x.inLink.frames.expectedSeq === 1);
    const fromLeft = iota(512, 2);
    await write(Buffer.concat([frame(1, fromLeft.subarray(0, 256)), frame(2, fromLeft.subarray(256))]));
    await until(() => x.inLink.frames.heldHeader !== undefined);
    assert.equal(x.inLink.frames.heldHeader?.seq, 1, 'the first header of the call is held, its payload unread');
    const buf = iota(512, 1);
    const res = run(x, buf, [{ start: 0, end: 512, reduce: true, forward: false, div: 0 }]);
    assert.equal(res.kind, 'done', JSON.stringify(res));
    const mine = iota(512, 1);
    assert.deepEqual(
      buf,
      mine.map((v, i) => Math.fround(v + fromLeft[i]!)),
    );
    assert.equal(x.inLink.frames.expectedSeq, 3);
    assert.equal(x.inLink.frames.heldHeader, undefined);
  } finally {
    x.close();
  }
});

test('an Abort from the left neighbour ends the ring at the boundary (aborted, nothing flushed); the decoder gets its header and delivers it', {
  skip,
}, async () => {
  const x = await rig();
  try {
    const delivered: Frame[] = [];
    x.inLink.setHandler((f) => delivered.push(f));
    const buf = new Float32Array(1024);
    const abort = encodeFrame(
      { type: FrameType.Abort, flags: 0, arg: 0, seq: 1, tag: 0, aux: 0 },
      Buffer.from('{"reason":"x"}'),
    );
    await leftSends(x, frame(0, iota(256, 1)), abort);
    const res = run(x, buf, [{ start: 0, end: 1024, reduce: true, forward: false, div: 0 }]);
    assert.equal(res.kind, 'aborted', JSON.stringify(res));
    assert.equal(x.inLink.frames.expectedSeq, 2, 'frame 0 was read natively, the header of frame 1 by the decoder');
    assert.deepEqual(buf.subarray(0, 256), iota(256, 1));
    for (let t = 0; delivered.length === 0 && t < 100; t++) await new Promise((res) => setTimeout(res, 10));
    assert.deepEqual(
      delivered.map((f) => f.type),
      [FrameType.Abort],
      'the JS decoder continues from the handed-over header',
    );
  } finally {
    x.close();
  }
});

test('a frame of another call (different length field) or out of sequence is not consumed', { skip }, async () => {
  for (const bad of [frame(0, iota(64, 1), { aux: 4095 }), frame(1, iota(64, 1)), frame(0, iota(64, 1), { tag: 6 })]) {
    const x = await rig();
    try {
      await leftSends(x, bad);
      const buf = new Float32Array(1024);
      const res = run(x, buf, [{ start: 0, end: 1024, reduce: true, forward: false, div: 0 }]);
      assert.deepEqual(res.kind === 'handover' && [res.step, res.cur], [0, 0], JSON.stringify(res));
      assert.ok(
        buf.every((v) => v === 0),
        'nothing was reduced',
      );
    } finally {
      x.close();
    }
  }
});

test('no data for sliceMs at a boundary hands the wait back to the event loop', { skip }, async () => {
  const x = await rig();
  try {
    const t = performance.now();
    const res = run(
      x,
      new Float32Array(1024),
      [{ start: 0, end: 1024, reduce: true, forward: false, div: 0 }],
      undefined,
      { sliceMs: 50 },
    );
    const ms = performance.now() - t;
    assert.equal(res.kind, 'handover');
    assert.ok(ms >= 45 && ms < 1000, `handed over after ${ms} ms`);
  } finally {
    x.close();
  }
});

test('the end of the stream at a frame boundary is handed over; in the middle of a frame it is an error', {
  skip,
}, async () => {
  const x = await rig();
  try {
    await leftSends(x, frame(0, iota(256, 1)));
    x.left.end();
    await new Promise((res) => setTimeout(res, 20));
    const res = run(x, new Float32Array(1024), [{ start: 0, end: 1024, reduce: true, forward: false, div: 0 }]);
    assert.deepEqual(res.kind === 'handover' && res.cur, 256, JSON.stringify(res));
  } finally {
    x.close();
  }
  const y = await rig();
  try {
    await leftSends(y, frame(0, iota(256, 1)).subarray(0, 32 + 500));
    y.left.end();
    await new Promise((res) => setTimeout(res, 20));
    const res = run(y, new Float32Array(1024), [{ start: 0, end: 1024, reduce: true, forward: false, div: 0 }]);
    assert.equal(res.kind, 'error');
    assert.ok(
      res.kind === 'error' && res.side === 'in' && !res.timeout && /closed in the middle of a frame/.test(res.message),
      JSON.stringify(res),
    );
  } finally {
    y.close();
  }
});

test('a peer stalling mid-frame times out (receiving); a right neighbour that stops reading times out (sending)', {
  skip,
}, async () => {
  const x = await rig();
  try {
    await leftSends(x, frame(0, iota(256, 1)).subarray(0, 32 + 500));
    const t = performance.now();
    const res = run(
      x,
      new Float32Array(1024),
      [{ start: 0, end: 1024, reduce: true, forward: false, div: 0 }],
      undefined,
      { timeoutMs: 200, sliceMs: 50 },
    );
    const ms = performance.now() - t;
    assert.ok(res.kind === 'error' && res.side === 'in' && res.timeout, JSON.stringify(res));
    assert.ok(ms >= 190 && ms < 2000, `timed out after ${ms} ms`);
  } finally {
    x.close();
  }
  const y = await rig();
  try {
    y.right.pause(); // reads nothing: 32 MB cannot fit in the socket buffers
    const buf = new Float32Array(8 << 20);
    const res = run(
      y,
      buf,
      [{ start: 0, end: 1024, reduce: true, forward: false, div: 0 }],
      { start: 0, end: buf.length },
      { chunkFloats: 1 << 18, timeoutMs: 200, sliceMs: 50 },
    );
    assert.ok(res.kind === 'error' && res.side === 'out' && res.timeout, JSON.stringify(res));
  } finally {
    y.close();
  }
});

test('a corrupt payload is a malformed-frame error, and nothing of it is reduced', { skip }, async () => {
  const x = await rig();
  try {
    const f = frame(0, iota(256, 1));
    f[32 + 100]! ^= 0x10;
    await leftSends(x, f);
    const buf = new Float32Array(1024);
    const res = run(x, buf, [{ start: 0, end: 1024, reduce: true, forward: true, div: 0 }]);
    assert.ok(
      res.kind === 'error' && res.side === 'in' && res.malformed && /checksum mismatch in frame #0/.test(res.message),
      JSON.stringify(res),
    );
    assert.ok(
      buf.every((v) => v === 0),
      'the corrupt frame was not added',
    );
    assert.equal(x.out.sendSeq, 0, 'nor forwarded');
  } finally {
    x.close();
  }
});

test("a peer's Abort on another connection ends the ring at once, also while it waits idle", { skip }, async () => {
  const x = await rig();
  const other = await otherConnection();
  const peer = net.connect({ port: other.port, host: '127.0.0.1' });
  try {
    const watched = await other.accepted;
    await new Promise<void>((res, rej) => peer.write(ABORT, (e) => (e ? rej(e) : res())));
    await new Promise((res) => setTimeout(res, 20));
    // nothing comes from the left: before, the ring waited sliceMs (3 s) for data, then handed over
    const t = performance.now();
    const res = run(
      x,
      new Float32Array(1024),
      [{ start: 0, end: 1024, reduce: true, forward: false, div: 0 }],
      undefined,
      { sliceMs: 3000, timeoutMs: 5000, watch: [fdOf(watched)] },
    );
    const ms = performance.now() - t;
    assert.equal(res.kind, 'aborted', JSON.stringify(res));
    assert.ok(ms < 1000, `noticed after ${Math.round(ms)} ms`);
    // only looked at: the Abort is still there for Node to read
    watched.resume();
    const [got] = (await once(watched, 'data')) as [Buffer];
    assert.equal(got.readUInt8(4), FrameType.Abort);
  } finally {
    peer.destroy();
    other.close();
    x.close();
  }
});

test("a peer's Abort on another connection while the ring sends to a right neighbour that stopped reading: it returns at once; the frame it was in the middle of is finished through Node, so an Abort sent after it reaches the right neighbour in sequence", {
  skip,
}, async () => {
  const x = await rig();
  const other = await otherConnection();
  // the peer is another process: it writes its Abort 300 ms after 'go', while the ring blocks this thread
  const peer = spawn(
    process.execPath,
    [
      '-e',
      `
    const s = require('node:net').connect(${other.port}, '127.0.0.1');
    process.stdin.once('data', () => setTimeout(() => s.write(Buffer.from('${ABORT.toString('hex')}', 'hex')), 300));
    setTimeout(() => process.exit(0), 20000);`,
    ],
    { stdio: ['pipe', 'ignore', 'inherit'] },
  );
  try {
    const watched = await other.accepted;
    x.right.pause(); // reads nothing: 32 MB cannot fit in the socket buffers
    const buf = iota(8 << 20, 1);
    peer.stdin!.write('go\n');
    const t = performance.now();
    const res = run(
      x,
      buf,
      [{ start: 0, end: 1024, reduce: true, forward: false, div: 0 }],
      { start: 0, end: buf.length },
      { chunkFloats: 1 << 18, timeoutMs: 8000, sliceMs: 50, watch: [fdOf(watched)] },
    );
    const ms = performance.now() - t;
    // before, it waited for the right neighbour until timeoutMs (8 s) and failed with a send timeout
    assert.equal(res.kind, 'aborted', JSON.stringify(res));
    assert.ok(ms >= 250 && ms < 4000, `returned after ${Math.round(ms)} ms`);
    // this rank's own Abort follows what the ring sent: the right neighbour decodes every frame in sequence
    await x.out.sendJson(FrameType.Abort, { origin: 1, reason: 'x' });
    const frames: Frame[] = [];
    const d = new FrameDecoder(MAX_FRAME, (f) => frames.push(f));
    x.right.on('data', (b: Buffer) => d.push(b));
    x.right.resume();
    for (const end = Date.now() + 10_000; frames.at(-1)?.type !== FrameType.Abort && Date.now() < end; )
      await new Promise((r) => setTimeout(r, 10));
    const data = frames.slice(0, -1);
    assert.equal(frames.at(-1)?.type, FrameType.Abort, `the Abort arrived after ${frames.length - 1} data frames`);
    assert.ok(data.length > 0 && data.length < 32, `${data.length} of the 32 frames were sent before the abort`);
    for (const [k, f] of data.entries())
      assert.deepEqual(floatsOf(f), buf.subarray(k << 18, (k + 1) << 18), `frame ${k}`);
  } finally {
    peer.kill();
    other.close();
    x.close();
  }
});
