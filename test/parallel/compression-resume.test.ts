/**
 * Compression's error-feedback state (residuals, Q) in checkpoint sets: a run stopped mid-way and
 * resumed from its saved state ends bit for bit where the uninterrupted run ends — driven by hand
 * on in-process devices for each kind, and through whole training runs (device threads over shared
 * memory, a checkpoint set, an injected failure, --resume).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { compressedHybridStrategy } from '../../src/parallel/compression/compressedHybrid.ts';
import type { CompressionSpec } from '../../src/parallel/compression/spec.ts';
import { hybridStrategy } from '../../src/parallel/strategies/hybrid.ts';
import type { StrategyState } from '../../src/parallel/strategy.ts';
import { train } from '../../src/runtime/run/train.ts';
import { latestCompleteSet } from '../../src/runtime/checkpoint/checkpointSet.ts';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { readMetrics } from '../../src/runtime/events/metrics.ts';
import { localGroup } from './localGroup.ts';
import { sgdReplica, stepInfo } from './strategyHarness.ts';
import { tinyConfig } from './helpers.ts';
import { randomArray } from '../util/close.ts';
import { assertSameTensors, freshDir, tensorsOf } from '../runtime/resumeHelpers.ts';

const TENSORS = [
  { name: 'a.kernel', shape: [24, 40], offset: 0 },
  { name: 'a.bias', shape: [40], offset: 960 },
  { name: 'b.kernel', shape: [40, 3], offset: 1008 },
];
const N = 1136;
const KINDS: Record<string, CompressionSpec> = {
  oneBit: { type: 'oneBit' },
  'powerSGD warm': { type: 'powerSGD', rank: 2, startStep: 1, warmStart: true, minCompressionRate: 1 },
  'powerSGD cold': { type: 'powerSGD', rank: 2, startStep: 0, warmStart: false, minCompressionRate: 1 },
};

/**
 * Steps [from, to) of 2 devices from `params` (and saved states, when resuming); the weights and
 * each device's state at the end.
 */
async function steps(spec: CompressionSpec, from: number, to: number, params: Float32Array[], saved?: StrategyState[]) {
  const comms = localGroup(2);
  const reps = comms.map((_, r) => Object.assign(sgdReplica([...params[r]!]), { tensors: TENSORS }));
  const strategies = comms.map((c) => compressedHybridStrategy(c, hybridStrategy(c, 64), spec, 9));
  await Promise.all(strategies.map((s, r) => s.onStart!(reps[r]!)));
  if (saved) for (const [r, s] of strategies.entries()) s.restoreState!(saved[r]!);
  for (let step = from; step < to; step++) {
    const info = stepInfo(step, 0.3);
    for (const [r, s] of strategies.entries()) await s.beforeStep?.(reps[r]!, info);
    for (const [r, rep] of reps.entries()) rep.grads.set(randomArray(N, 10 * step + r + 1));
    await Promise.all(strategies.map((s, r) => s.applyUpdate!(reps[r]!, info)));
  }
  // a copy, as a checkpoint set holds it
  const states = strategies.map((s) => {
    const st = s.saveState!();
    return {
      counters: { ...st.counters },
      tensors: Object.fromEntries(Object.entries(st.tensors).map(([k, v]) => [k, v.slice()])),
    };
  });
  return { params: reps.map((rep) => rep.params.slice()), states };
}

for (const [kind, spec] of Object.entries(KINDS)) {
  test(`${kind}: 6 steps equal 3 steps, the state saved and restored into fresh devices, then 3 more, bit for bit`, async () => {
    const start = [randomArray(N, 50), randomArray(N, 50)];
    const whole = await steps(spec, 0, 6, start);
    const half = await steps(spec, 0, 3, start);
    assert.ok(
      Object.values(half.states[0]!.tensors).some((t) => t.some((v) => v !== 0)),
      'the saved state is not empty (the comparison means something)',
    );
    const resumed = await steps(spec, 3, 6, half.params, half.states);
    assert.deepEqual(resumed.params, whole.params);
    assert.deepEqual(resumed.states, whole.states);
  });
}

// Whole runs (device threads over shm, the library's train(), as the CLI runs it): oneBit's
// point-to-point exchange on the real transport, its residuals in a checkpoint set at step 4, a
// failure at step 7, and the resumed run ending where the uninterrupted one ends, bit for bit.
test('training: hybrid with compression oneBit on 2 device threads: finite loss, its residuals in the set, resume bit for bit', {
  timeout: 60_000,
}, async () => {
  const strategy = { hybrid: { compression: 'oneBit' } };
  const config = tinyConfig({ train: { epochs: 2, devices: 2, strategy, checkpointEvery: { steps: 4 } } });
  const whole = await train(config, { out: freshDir() });
  const stepsOf = readMetrics(join(whole.runDir, 'metrics.jsonl')).filter((e) => e.type === 'step');
  assert.ok(stepsOf.length > 0 && stepsOf.every((e) => Number.isFinite(e.loss)), 'finite losses');
  assert.ok(
    stepsOf.every((e) => (e as unknown as { bytes: number }).bytes > 0),
    'every step reports the bytes it moved',
  );
  const runDir = freshDir();
  await assert.rejects(train(config, { out: runDir, failAt: { rank: 1, step: 7 } }), /injected failure/);
  const point = latestCompleteSet(runDir)!;
  assert.equal(point.state.step, 4);
  const device = readCheckpoint(join(point.dir, 'device-1.safetensors'));
  const saved = [...device.tensors.keys()].filter((k) => k.startsWith('strategy.')).sort();
  assert.deepEqual(saved, ['strategy.oneBit.residual', 'strategy.oneBit.serverResidual']);
  assert.ok(
    device.tensors.get('strategy.oneBit.residual')!.data.some((v) => v !== 0),
    'a residual was kept',
  );
  const resumed = await train(config, { resume: runDir });
  assertSameTensors(tensorsOf(whole.checkpoint), tensorsOf(resumed.checkpoint));
});
