/**
 * Collectives and send/recv of the shm transport on real worker threads, against a serial
 * float32 reference, bit for bit: G = 1, 2, 3, 4, 8; lengths 0, 1, 7, G−1 and an odd length
 * larger than every chunk; plain (staged), registered SharedArrayBuffer (copy-through), a view
 * into a rank's own shared wasm memory, arena (SIMD in place) and subarray-of-registered buffers.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runWorld } from './helpers.ts';

const BIG = 1_000_003;
const worlds: { size: number; sizes: number[]; kinds: string[] }[] = [
  { size: 1, sizes: [0, 1, 7, BIG], kinds: ['plain', 'sab', 'arena', 'sub'] },
  { size: 2, sizes: [0, 1, 7, BIG], kinds: ['plain', 'sab', 'arena', 'sub'] },
  { size: 3, sizes: [0, 1, 2, 7, BIG], kinds: ['plain', 'sab', 'arena', 'sub', 'wasm'] },
  { size: 4, sizes: [1, 3, 7, 4099, BIG], kinds: ['plain', 'sab', 'arena', 'sub'] },
  // 8 threads on 2 cores: keep the big case to one staged and one zero-copy kind
  { size: 8, sizes: [0, 1, 7, 5003], kinds: ['plain', 'sab', 'arena', 'sub'] },
  { size: 8, sizes: [BIG], kinds: ['plain', 'arena'] },
];

for (const w of worlds) {
  test(`collectives match the serial reference bit for bit, G=${w.size}, lengths ${w.sizes.join('/')}, ${w.kinds.join('/')}`, { timeout: 60_000 }, async () => {
    const { results } = await runWorld(w.size, 'collectives', { sizes: w.sizes, kinds: w.kinds });
    for (const r of results) assert.deepEqual(r.failures, [], r.failures.join('\n'));
    const first = results[0]!.data.hashes as number[];
    assert.ok(first.length > 0);
    for (const r of results) assert.deepEqual(r.data.hashes, first, `allreduce results of rank ${r.rank} differ from rank 0's`);
  });
}

test('collectives through a small staging area (many rounds per call)', { timeout: 60_000 }, async () => {
  const { results } = await runWorld(3, 'collectives', { sizes: [5, 10007], kinds: ['plain'] }, { world: { stagingBytes: 4096 } });
  for (const r of results) assert.deepEqual(r.failures, [], r.failures.join('\n'));
});

for (const size of [1, 2, 3, 4]) {
  test(`send/recv ring and in-order messages, G=${size}`, { timeout: 60_000 }, async () => {
    const { results } = await runWorld(size, 'sendrecv', { sizes: [0, 1, 7, 70_001, BIG] }, { world: { mailboxBytes: 64 * 1024 } });
    for (const r of results) assert.deepEqual(r.failures, [], r.failures.join('\n'));
  });
}
