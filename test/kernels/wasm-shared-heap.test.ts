/**
 * Wasm backends over one memory they share with others (a HeapSource: the shm arena in training):
 * each allocates only in regions it reserved, above the bytes kept for the static data, and
 * computes correctly there; a source that keeps too little room for the static data is refused.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createWasmBackend, type HeapSource } from '../../src/kernels/wasm/index.ts';

function source(staticBytes = 65536): HeapSource & { regions: [number, number][] } {
  const memory = new WebAssembly.Memory({ initial: 2, maximum: 65536, shared: true });
  let top = staticBytes;
  const regions: [number, number][] = [];
  return {
    memory,
    staticBytes,
    regions,
    reserve(bytes) {
      const at = top;
      top += bytes;
      if (top > memory.buffer.byteLength) memory.grow(Math.ceil((top - memory.buffer.byteLength) / 65536));
      regions.push([at, top]);
      return at;
    },
    buffer: () => memory.buffer,
  };
}

test('two backends over one shared memory allocate in disjoint reserved regions and compute there', async () => {
  const src = source();
  const a = (await createWasmBackend({ heap: src }))!,
    b = (await createWasmBackend({ heap: src }))!;
  assert.equal(a.memory, src.memory);
  assert.equal(b.memory, src.memory);
  const x = a.alloc(1000),
    y = b.alloc(1000),
    big = a.alloc(5 << 20); // 20 MiB: a second region
  for (const arr of [x, y, big]) {
    assert.equal(arr.buffer.constructor, SharedArrayBuffer);
    const mine = src.regions.filter(([s, e]) => arr.byteOffset >= s && arr.byteOffset + arr.byteLength <= e);
    assert.equal(mine.length, 1, 'inside exactly one reserved region');
  }
  assert.ok(src.regions.length >= 3, 'each backend reserved its own region, a big array one more');
  assert.ok(a.owns(y) && b.owns(x), "either backend uses the other's arrays in place (same memory)");
  x.fill(2);
  y.fill(1);
  a.axpy(3, x, y); // y += 3x, computed by a on b's array
  assert.ok(y.every((v) => v === 7));
  // gemm through a's scratch while b's arrays hold their values
  const m = b.alloc(4),
    n = b.alloc(4),
    c = a.alloc(4);
  m.set([1, 2, 3, 4]);
  n.set([5, 6, 7, 8]);
  a.gemm(false, false, 2, 2, 2, 1, m, n, 0, c);
  assert.deepEqual([...c], [19, 22, 43, 50]);
  assert.ok(x.every((v) => v === 2));
});

test("a shared memory without room for the kernels' static data is refused with the reason", async () => {
  await assert.rejects(async () => {
    const b = await createWasmBackend({ heap: source(16) });
    if (!b) throw new Error('no wasm backend here');
  }, /static data ends at byte \d+, past the 16 bytes/);
});
