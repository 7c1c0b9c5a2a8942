/** The shm building blocks on one thread: SIMD reduce kernel, Mutex, Barrier, abort word, arena. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  Barrier,
  CommTimeoutError,
  createShmWorld,
  Mutex,
  PeerFailedError,
  ShmCommunicator,
  ShmUsageError,
  waitUntil,
} from '../../src/comm/shm/index.ts';
import { REDUCE_KERNEL_WASM_BASE64, ReduceKernel } from '../../src/comm/shm/reduceKernel.ts';
import { assembleWat, firstBitDiff, inputFor, serialSum } from './helpers.ts';

test('SIMD reduce kernel equals the serial float32 sum (and mean) bit for bit, any offset and tail', () => {
  const memory = new WebAssembly.Memory({ initial: 64, maximum: 1024, shared: true });
  const kernel = new ReduceKernel(memory, 0);
  let seed = 0;
  for (const n of [0, 1, 3, 4, 5, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1001, 4133]) {
    for (const nsrc of [1, 2, 3, 5, 9]) {
      for (const div of [0, nsrc]) {
        seed++;
        const inputs = Array.from({ length: nsrc }, (_, r) => inputFor(n, r, seed));
        const want = serialSum(inputs);
        if (div) for (let i = 0; i < n; i++) want[i] = want[i]! / div;
        // sources at odd (4-byte but not 16-byte aligned) addresses, spread out
        const srcAddrs = inputs.map((x, k) => {
          const addr = 8192 + k * (n * 4 + 4096) + 4 * (k % 3);
          new Float32Array(memory.buffer, addr, n).set(x);
          return addr;
        });
        const dstAddrs = [0, 1].map((d) => 8192 + nsrc * (n * 4 + 4096) + d * (n * 4 + 64) + 12);
        kernel.reduce(srcAddrs, dstAddrs, n, div);
        for (const a of dstAddrs) {
          const got = new Float32Array(memory.buffer, a, n);
          assert.equal(firstBitDiff(got, want), -1, `n=${n} nsrc=${nsrc} div=${div}`);
        }
        // in place into the first source
        kernel.reduce(srcAddrs, [srcAddrs[0]!], n, div);
        assert.equal(
          firstBitDiff(new Float32Array(memory.buffer, srcAddrs[0]!, n), want),
          -1,
          `in place n=${n} nsrc=${nsrc}`,
        );
        // in place into every source (an allreduce of registered buffers), from fresh inputs
        for (const [k, x] of inputs.entries()) new Float32Array(memory.buffer, srcAddrs[k]!, n).set(x);
        kernel.reduce(srcAddrs, srcAddrs, n, div);
        for (const a of srcAddrs)
          assert.equal(
            firstBitDiff(new Float32Array(memory.buffer, a, n), want),
            -1,
            `in place everywhere n=${n} nsrc=${nsrc}`,
          );
      }
    }
  }
});

test('the embedded reduce kernel is reduceKernel.wat', () => {
  assert.equal(
    assembleWat(new URL('../../src/comm/shm/reduceKernel.wat', import.meta.url)),
    REDUCE_KERNEL_WASM_BASE64,
    'rebuild the base64 from reduceKernel.wat',
  );
});

test('Mutex: tryLock, unlock errors, timeout, and abort wake-up on the main thread', () => {
  const m = Mutex.create({ timeoutMs: 50, observer: 'the test' });
  assert.equal(m.tryLock(), true);
  assert.equal(m.tryLock(), false);
  assert.throws(
    () => m.lock(),
    (e: unknown) => e instanceof CommTimeoutError && /the test waited more than 50 ms for a mutex/.test(e.message),
  );
  m.unlock();
  assert.equal(m.locked, false);
  assert.throws(() => m.unlock(), /not locked/);
  assert.equal(
    m.withLock(() => 42),
    42,
  );

  const world = createShmWorld(2);
  const wm = world.mutex(3);
  wm.lock();
  world.abort('stop', 1);
  const t0 = performance.now();
  assert.throws(
    () => world.mutex(3).lock(),
    (e: unknown) => e instanceof PeerFailedError && e.failedRank === 1 && /aborted by rank 1 .*: stop/.test(e.message),
  );
  assert.ok(performance.now() - t0 < 500);
  assert.throws(() => world.mutex(99), ShmUsageError);
});

test('Barrier: one party passes, a timeout names the missing party', () => {
  assert.equal(Barrier.create(1).wait(0), 0);
  const b = Barrier.create(3, { timeoutMs: 80 });
  assert.throws(
    () => b.wait(0),
    (e: unknown) =>
      e instanceof CommTimeoutError && e.missing.join() === '1,2' && /party 1, 2 had not arrived/.test(e.message),
  );
});

test('Barrier: a party paused between its two writes (counted, not yet marked) is still named, never an empty list', () => {
  // the barrier's words are [count, generation, arrived…]: party 2 has counted itself, then stalled
  const b = Barrier.create(3, { timeoutMs: 80 });
  Atomics.add(b.i32, 0, 1);
  assert.throws(
    () => b.wait(0),
    (e: unknown) => e instanceof CommTimeoutError && e.missing.join() === '1,2',
  );
  // once released, every party that passed is marked with the generation it passed
  const c = Barrier.create(2);
  Atomics.add(c.i32, 0, 1);
  Atomics.store(c.i32, 2 + 1, 1);
  assert.equal(c.wait(0), 0);
  assert.deepEqual(c.missing(0), []);
  assert.deepEqual(c.missing(), [0, 1]);
});

test('waitUntil returns when the word is ready, throws on abort', () => {
  const world = createShmWorld(1);
  const i32 = new Int32Array(new SharedArrayBuffer(8));
  i32[0] = 5;
  assert.equal(
    waitUntil(i32, 0, (v) => v === 5),
    0,
  );
  world.abort('no more');
  assert.throws(() => waitUntil(i32, 0, (v) => v === 6, world.abortFlag), PeerFailedError);
});

test('world options are checked; the arena allocates aligned, zeroed, growing', () => {
  assert.throws(() => createShmWorld(0), /size must be an integer/);
  assert.throws(() => createShmWorld(2, { stagingBytes: 10 }), /stagingBytes must be at least/);
  const world = createShmWorld(2, { stagingBytes: 4096, mailboxBytes: 4096 });
  assert.throws(() => world.rankInit(2), /rank must be in 0..1/);
  const init = world.rankInit(1);
  assert.equal(structuredClone(init).control instanceof SharedArrayBuffer, true);
  const a = world.alloc(5),
    b = world.alloc(6 << 20);
  assert.equal(a.byteOffset % 64, 0);
  assert.equal(b.byteOffset % 64, 0);
  assert.ok(b.byteOffset >= a.byteOffset + 5 * 4);
  assert.equal(b.buffer instanceof SharedArrayBuffer, true);
  assert.equal(b[b.length - 1], 0);
  const small = createShmWorld(1, { arenaMaxBytes: 8 << 20 });
  assert.throws(() => small.alloc(16 << 20), /arena cannot hold/);
});

test('trySend sends only what an empty mailbox takes at once; the receiver gets it in order, bit for bit', async () => {
  const world = createShmWorld(2, { mailboxBytes: 4096 });
  const [a, b] = await Promise.all([0, 1].map((r) => ShmCommunicator.connect(world.rankInit(r))));
  try {
    const x = inputFor(1024, 0, 1),
      y = inputFor(7, 0, 2),
      got = new Float32Array(1024);
    assert.equal(a!.trySend(x, 1, 5), true);
    // the mailbox still holds x: a second message would have to wait for the receiver
    assert.equal(a!.trySend(y, 1, 6), false);
    assert.equal(a!.takeStats().bytes, 4096);
    b!.recvSync(got, 0, 5);
    assert.equal(firstBitDiff(got, x), -1);
    // larger than the mailbox (1,025 floats of 4 KiB): never at once
    assert.equal(a!.trySend(new Float32Array(1025), 1, 6), false);
    assert.equal(a!.trySend(y, 1, 6), true);
    const small = new Float32Array(7);
    b!.recvSync(small, 0, 6);
    assert.equal(firstBitDiff(small, y), -1);
    assert.throws(() => a!.trySend(y, 2, 0), /send destination must be a rank in 0..1, got 2/);
  } finally {
    a?.close();
    b?.close();
  }
});
