import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { train, loadConfig, readMetrics } from '../../src/index.ts';

const SUBSET = new URL('../../data/fashion-mnist-subset/', import.meta.url).pathname;
const MLP = new URL('../../examples/mlp.yaml', import.meta.url).pathname;

test('stall inspector on shm: a device slowed beyond train.stallWarningSeconds is named by the waiting device, with its step and call, once per stall', async () => {
  const config = loadConfig(MLP);
  config.data.trainLimit = 256;
  config.data.testLimit = 100;
  config.train.stallWarningSeconds = 0.2;
  const out = join(mkdtempSync(join(tmpdir(), 'paratrain-stall-')), 'run');
  // 50× its compute: device 1's first step alone (≥ 10 ms of compute, far more with the kernels' first calls)
  // keeps device 0 waiting ≥ 0.5 s, past the 0.2 s threshold; a larger factor only makes the test wait longer
  await train(config, {
    devices: 2,
    strategy: 'hybrid',
    epochs: 1,
    dataDir: SUBSET,
    out,
    slowDevices: new Map([[1, 50]]),
  });
  // a device thread starting 0.2 s after the other (a loaded machine) is a stall too, before the first step (no
  // collective yet, or onStart's broadcast of rank 0's weights): not this test's, whose steps only all-reduce
  const stalls = readMetrics(join(out, 'metrics.jsonl')).filter(
    (e) => e.type === 'stall' && !/^(no collective yet|broadcast #)/.test(e.waitingIn as string),
  );
  assert.ok(stalls.length >= 1, 'a stall was reported');
  for (const s of stalls) {
    assert.equal(s.rank, 0, 'the fast device waits');
    assert.deepEqual(s.missing, [1], 'for the slowed one');
    const others = s.others as { rank: number; step: number; call: string }[];
    assert.equal(others.length, 1);
    assert.equal(others[0]!.rank, 1);
    // the slowed device may not have entered any collective yet (it is slow from its first step)
    assert.match(
      others[0]!.call,
      /^(allreduce #\d+ of \d+ floats|broadcast #\d+ of \d+ floats|barrier #\d+|no collective yet)$/,
    );
    assert.ok(Number.isInteger(others[0]!.step));
    assert.match(s.waitingIn as string, /^allreduce #\d+ of \d+ floats$/);
  }
  // one warning per stall: at most one per step the slow device held up (2 steps)
  assert.ok(stalls.length <= 2, `${stalls.length} warnings`);
});
