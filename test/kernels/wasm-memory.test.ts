import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { wasmBackend } from './wasmHelpers.ts';
import { createWasmBackend } from '../../src/kernels/wasm/index.ts';

const b = await wasmBackend();

test('alloc returns zeroed, 64-byte aligned (a cache line), SharedArrayBuffer-backed views into wasm memory', () => {
  for (const n of [0, 1, 3, 4, 33, 1000]) {
    const a = b.alloc(n, true);
    assert.equal(a.length, n);
    assert.ok(a.buffer instanceof SharedArrayBuffer);
    assert.equal(a.byteOffset % 64, 0);
    assert.ok(a.every((v) => v === 0));
    assert.ok(b.owns(a));
  }
  assert.ok(!b.owns(new Float32Array(4)));
  assert.ok(!b.owns(new Float32Array(new SharedArrayBuffer(16))));
});

test('views stay valid, and are still recognised as wasm memory, after the memory grows', () => {
  const early = b.alloc(64);
  early.set(Array.from({ length: 64 }, (_, i) => i));
  const before = b.memory.buffer.byteLength;
  const big = b.alloc((48 << 20) >> 2); // 48 MiB forces growth
  assert.ok(b.memory.buffer.byteLength > before, 'memory grew');
  assert.notEqual(early.buffer, b.memory.buffer, 'the old view keeps its old SharedArrayBuffer object');
  assert.equal(early[63], 63);
  assert.ok(b.owns(early) && b.owns(big));
  // A kernel on an array made before the growth and one made after: both used in place.
  const y = b.alloc(64);
  b.axpy(2, early, y);
  assert.equal(y[10], 20);
  big[big.length - 1] = 5;
  b.scale(3, big.subarray(big.length - 4));
  assert.equal(big[big.length - 1], 15);
});

test('free returns blocks for reuse (zeroed again on reuse) and rejects foreign arrays', () => {
  const a = b.alloc(100);
  a.fill(9);
  const at = a.byteOffset;
  b.free(a);
  const c = b.alloc(100);
  assert.equal(c.byteOffset, at);
  assert.ok(c.every((v) => v === 0));
  assert.throws(() => b.free(new Float32Array(100)), /not allocated by this wasm backend/);
  assert.throws(() => b.free(c.subarray(4)), /not allocated by this wasm backend/);
  const i = b.allocInt32(10);
  assert.ok(i instanceof Int32Array && b.owns(i));
  b.free(i);
});

test('two backends in one thread are independent; arrays of one are staged (copied) by the other', async () => {
  const b2 = await createWasmBackend();
  assert.ok(b2);
  assert.notEqual(b2.memory, b.memory);
  const x = b.alloc(5),
    y = b2.alloc(5);
  x.set([1, 2, 3, 4, 5]);
  b2.axpy(1, x, y);
  assert.deepEqual([...y], [1, 2, 3, 4, 5]);
  b.axpy(1, y, x);
  assert.deepEqual([...x], [2, 4, 6, 8, 10]);
});

test("a worker thread builds its own instance; an alloc'd array is shared memory the worker can update", async () => {
  const shared = b.alloc(8);
  shared.fill(2);
  // tsx's --import hooks do not reach worker threads on Node 20 (privatenumber/tsx#354), so the
  // worker registers tsx itself before importing the TypeScript fixture.
  const fixture = new URL('./wasmWorkerFixture.ts', import.meta.url).href;
  const code = `import('tsx/esm/api').then((m) => { m.register(); return import(${JSON.stringify(fixture)}); })`;
  const worker = new Worker(code, { eval: true, workerData: { shared } });
  const msg = await new Promise<{ c: number[]; relaxed: boolean; isShared: boolean }>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  await worker.terminate();
  assert.deepEqual(msg.c, [1, 2, 3, 4]);
  assert.ok(msg.isShared);
  assert.deepEqual([...shared], new Array(8).fill(3), 'the worker wrote through the shared buffer');
});
