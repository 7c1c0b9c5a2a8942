/**
 * TCP collectives between real processes over loopback: N = 2, 3, 4 ranks, lengths 1, 7 and
 * 1000003 (odd, and smaller than N), against a serial float32 reference; allreduce results must be
 * bit-identical on every rank, whichever data path (native or wasm) each rank uses.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { describe as summary, runJob } from './tcp/harness.ts';

for (const N of [2, 3, 4]) {
  test(`tcp collectives with ${N} processes match the serial reference, identically on every rank`, {
    timeout: 60_000,
  }, async () => {
    // small chunk sizes so that 1000003 floats travel as many pipelined frames; rank 1 keeps to
    // the wasm data path, rank 2 chunks differently (its frames are forwarded as they came)
    const results = await runJob({
      worldSize: N,
      scenario: 'collectives',
      options: (rank) => ({ chunkBytes: rank === 2 ? 100_000 : 256 * 1024, nativeDataPath: rank !== 1 }),
    });
    for (const r of results) assert.ok(r.ok, summary(results));
    for (const key of Object.keys(results[0]!.data).filter((k) => k.startsWith('allreduce-'))) {
      const hashes = new Set(results.map((r) => r.data[key]));
      assert.equal(hashes.size, 1, `${key}: results differ between ranks (${[...hashes].join(', ')})`);
    }
  });
}
