/**
 * The stall inspector on the parameter server's waits: under `sync` a device waiting for its turn
 * longer than train.stallWarningSeconds names the device holding the turn, with every device's step.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { train, loadConfig, readMetrics } from '../../src/index.ts';

const SUBSET = new URL('../../data/fashion-mnist-subset/', import.meta.url).pathname;
const MLP = new URL('../../examples/mlp.yaml', import.meta.url).pathname;

test('stall inspector, sync parameter server: device 0 waiting for its turn past the threshold names slowed device 1 and its step', async () => {
  const config = loadConfig(MLP);
  config.data.trainLimit = 256;
  config.data.testLimit = 100;
  config.train.stallWarningSeconds = 0.2;
  const out = join(mkdtempSync(join(tmpdir(), 'paratrain-stall-ps-')), 'run');
  // 50× its compute: device 1's first step alone (≥ 10 ms of compute, far more with the kernels' first calls)
  // keeps device 0 waiting ≥ 0.5 s, past the 0.2 s threshold; a larger factor only makes the test wait longer
  await train(config, {
    devices: 2,
    strategy: 'sync',
    epochs: 1,
    dataDir: SUBSET,
    out,
    slowDevices: new Map([[1, 50]]),
  });
  const stalls = readMetrics(join(out, 'metrics.jsonl')).filter(
    (e) => e.type === 'stall' && /turn/.test(e.waitingIn as string),
  );
  for (const s of stalls) {
    const other = 1 - (s.rank as number);
    assert.deepEqual(s.missing, [other], 'the device holding the turn is named');
    const others = s.others as { rank: number; step: number; call: string }[];
    assert.deepEqual(
      others.map((o) => [o.rank, o.call]),
      [[other, 'holding the turn (its batch on the server)']],
    );
  }
  // the slowed device holds the turn for 50× a step: the fast one reports it, with its step
  const slowed = stalls.filter((s) => s.rank === 0);
  assert.ok(slowed.length >= 1, 'device 0 reported waiting for device 1');
  for (const s of slowed) {
    const step = (s.others as { step: number }[])[0]!.step;
    assert.ok(Number.isInteger(step) && step >= 0, `device 1's step ${step}`);
  }
  // one warning per stall: at most one per turn device 1 held (256 samples / global batch)
  const steps = readMetrics(join(out, 'metrics.jsonl')).filter((e) => e.type === 'step').length;
  assert.ok(stalls.length <= Math.max(steps, 1), `${stalls.length} warnings for ${steps} steps`);
});
