/**
 * Collectives and send/recv of the shm transport on real worker threads, against a serial
 * float32 reference, bit for bit: G = 1, 2, 3, 4, 8; lengths 0, 1, 7, G−1 and an odd length
 * larger than every chunk; plain (staged), registered SharedArrayBuffer (copy-through), a view
 * into a rank's own shared wasm memory, arena (SIMD in place) and subarray-of-registered buffers.
 * Each world's threads run every scenario of that world size (thread start-up is most of the cost).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runWorld, type RankResult } from './helpers.ts';

/** Odd, and longer than every chunk: a staging half (524,288 floats at the default 4 MiB: 2 rounds), an arena chunk, a 64 KiB mailbox. */
const BIG = 600_011;
const worlds: { size: number; cases: { sizes: number[]; kinds: string[] }[] }[] = [
  { size: 1, cases: [{ sizes: [0, 1, 7, BIG], kinds: ['plain', 'sab', 'arena', 'sub'] }] },
  { size: 2, cases: [{ sizes: [0, 1, 7, BIG], kinds: ['plain', 'sab', 'arena', 'sub'] }] },
  { size: 3, cases: [{ sizes: [0, 1, 2, 7, BIG], kinds: ['plain', 'sab', 'arena', 'sub', 'wasm'] }] },
  { size: 4, cases: [{ sizes: [1, 3, 7, 4099, BIG], kinds: ['plain', 'sab', 'arena', 'sub'] }] },
  // 8 threads on 2 cores: keep the big case to one staged and one zero-copy kind
  {
    size: 8,
    cases: [
      { sizes: [0, 1, 7, 5003], kinds: ['plain', 'sab', 'arena', 'sub'] },
      { sizes: [BIG], kinds: ['plain', 'arena'] },
    ],
  },
];

/** Every rank without failures, and every rank's allreduce results hashing alike. */
function assertCollectives(results: RankResult[]): void {
  for (const r of results) assert.deepEqual(r.failures, [], r.failures.join('\n'));
  const first = results[0]!.data.hashes as number[];
  assert.ok(first.length > 0);
  for (const r of results)
    assert.deepEqual(r.data.hashes, first, `allreduce results of rank ${r.rank} differ from rank 0's`);
}

for (const w of worlds) {
  const what = w.cases.map((c) => `lengths ${c.sizes.join('/')}, ${c.kinds.join('/')}`).join('; ');
  // G ≤ 4: the same threads then run send/recv (ring and in-order messages) through 64 KiB mailboxes (many chunks)
  const sendrecv = w.size <= 4;
  const name = `collectives match the serial reference bit for bit, G=${w.size}, ${what}${sendrecv ? '; send/recv ring and in-order messages' : ''}`;
  test(name, { timeout: 120_000 }, async () => {
    const { results } = sendrecv
      ? await runWorld(
          w.size,
          'collectives+sendrecv',
          { cases: w.cases, sendSizes: [0, 1, 7, 70_001, BIG] },
          { world: { mailboxBytes: 64 * 1024 } },
        )
      : await runWorld(w.size, 'collectives', { cases: w.cases });
    assertCollectives(results);
  });
}

test('collectives through a small staging area (many rounds per call)', { timeout: 60_000 }, async () => {
  const { results } = await runWorld(
    3,
    'collectives',
    { sizes: [5, 10007], kinds: ['plain'] },
    { world: { stagingBytes: 4096 } },
  );
  for (const r of results) assert.deepEqual(r.failures, [], r.failures.join('\n'));
});
