/**
 * The averaging strategies' compression state in checkpoint sets: each device's error feedback (and
 * the block's start) saved and restored so that a resumed run ends bit for bit where the
 * uninterrupted one ends — by hand for every strategy and codec, and through a whole training run
 * — and a resume with another compression setting: honoured, the error feedback afresh.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import type { CompressionSpec } from '../../src/parallel/compression/spec.ts';
import { compressedHybridStrategy } from '../../src/parallel/compression/compressedHybrid.ts';
import { hybridStrategy } from '../../src/parallel/strategies/hybrid.ts';
import { train } from '../../src/runtime/run/train.ts';
import { latestCompleteSet } from '../../src/runtime/checkpoint/checkpointSet.ts';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { AVERAGING, N, runAveraging, TENSORS } from './averagingHarness.ts';
import { localGroup } from './localGroup.ts';
import { sgdReplica } from './strategyHarness.ts';
import { tinyConfig } from './helpers.ts';
import { assertSameTensors, freshDir, tensorsOf } from '../runtime/resumeHelpers.ts';

const KINDS: Record<string, CompressionSpec> = {
  oneBit: { type: 'oneBit' },
  'powerSGD warm': { type: 'powerSGD', rank: 2, startStep: 1, warmStart: true, minCompressionRate: 1 },
  'powerSGD cold': { type: 'powerSGD', rank: 2, startStep: 0, warmStart: false, minCompressionRate: 1 },
};

for (const [name, make] of Object.entries(AVERAGING)) {
  for (const [kind, spec] of Object.entries(KINDS)) {
    test(`${name} with ${kind}: 9 steps equal 4, the state saved and restored into fresh devices, then 5 more, bit for bit`, async () => {
      const whole = await runAveraging(make, spec, { to: 9, finish: true });
      // step 4 is one step into the second block: the start, the error feedback and the step count all matter
      const half = await runAveraging(make, spec, { to: 4 });
      const kept = half.states[0]!.tensors[spec.type === 'oneBit' ? 'oneBit.residual' : 'powerSGD.error']!;
      assert.ok(
        kept.some((v) => v !== 0),
        'the saved error feedback is not empty (the comparison means something)',
      );
      const resumed = await runAveraging(make, spec, { from: 4, to: 9, finish: true, resume: half });
      assert.deepEqual(resumed.model, whole.model);
      assert.deepEqual(resumed.params, whole.params);
      assert.deepEqual(resumed.states, whole.states);
    });
  }
}

test('another compression on resume: honoured, the error feedback afresh (none → oneBit, oneBit → powerSGD, oneBit → none)', async () => {
  const zeros = (t: Float32Array | undefined) => t?.every((v) => v === 0) === true;
  for (const [name, make] of Object.entries(AVERAGING)) {
    const from = (spec: CompressionSpec | null, to = 3) => runAveraging(make, spec, { to });
    // bsp without compression holds no start: resumed at an average (step 3 of period 3), the replicas hold it
    const plainSet = await from(null);
    const oneBit = await runAveraging(make, { type: 'oneBit' }, { from: 3, to: 3, resume: plainSet });
    for (const s of oneBit.states) assert.ok(zeros(s.tensors['oneBit.residual']), `${name}: none → oneBit`);
    assert.deepEqual(oneBit.states[0]!.tensors.start, plainSet.params[0], `${name}: the start is the last average`);
    const oneBitSet = await from({ type: 'oneBit' });
    const psgd = await runAveraging(make, KINDS['powerSGD cold']!, { from: 3, to: 3, resume: oneBitSet });
    const fresh = await runAveraging(make, KINDS['powerSGD cold']!, { to: 0 });
    assert.deepEqual(psgd.states[0]!.tensors['powerSGD.q'], fresh.states[0]!.tensors['powerSGD.q']);
    assert.ok(zeros(psgd.states[0]!.tensors['powerSGD.error']), `${name}: oneBit → powerSGD`);
    const plain = await runAveraging(make, null, { from: 3, to: 6, finish: true, resume: oneBitSet });
    assert.ok(plain.model.every(Number.isFinite), `${name}: oneBit → none`);
  }
});

test('bsp: a set without compression written between averages cannot start compressed deltas, and says what to do', async () => {
  const plainSet = await runAveraging(AVERAGING.bsp!, null, { to: 4 });
  await assert.rejects(
    runAveraging(AVERAGING.bsp!, { type: 'oneBit' }, { from: 4, to: 5, resume: plainSet }),
    /the set was written by bsp without compression 1 steps after an average.*resume without train\.strategy\.bsp\.compression, or from a set written at an average/,
  );
});

test('hybrid: a set without compression resumes with compression oneBit, its residuals afresh', async () => {
  const comms = localGroup(2);
  const reps = comms.map(() => Object.assign(sgdReplica(new Array<number>(N).fill(0)), { tensors: TENSORS }));
  const strategies = comms.map((c) => compressedHybridStrategy(c, hybridStrategy(c, 64), { type: 'oneBit' }, 9));
  await Promise.all(strategies.map((s, r) => s.onStart!(reps[r]!)));
  for (const s of strategies) s.restoreState!({ tensors: {}, counters: {} });
  assert.ok(strategies[0]!.saveState!().tensors['oneBit.residual']!.every((v) => v === 0));
});

// A whole run (device threads over shm, the library's train(), as the CLI runs it): diloco with
// oneBit deltas, a checkpoint set in the middle of a block, a failure, and the resumed run ending
// where the uninterrupted one ends, bit for bit.
test('training: diloco with compression oneBit on 2 device threads: its residuals and start in the set, resume bit for bit', {
  timeout: 60_000,
}, async () => {
  const strategy = { diloco: { period: 3, compression: 'oneBit' } };
  const config = tinyConfig({ train: { epochs: 2, devices: 2, strategy, checkpointEvery: { steps: 4 } } });
  const whole = await train(config, { out: freshDir() });
  const runDir = freshDir();
  await assert.rejects(train(config, { out: runDir, failAt: { rank: 1, step: 7 } }), /injected failure/);
  const point = latestCompleteSet(runDir)!;
  assert.equal(point.state.step, 4);
  const device = readCheckpoint(join(point.dir, 'device-1.safetensors'));
  const saved = [...device.tensors.keys()].filter((k) => k.startsWith('strategy.'));
  for (const name of ['strategy.start', 'strategy.oneBit.residual', 'strategy.oneBit.serverResidual'])
    assert.ok(saved.includes(name), `${name} in the set (${saved.join(', ')})`);
  assert.ok(
    device.tensors.get('strategy.oneBit.residual')!.data.some((v) => v !== 0),
    'a residual was kept',
  );
  const resumed = await train(config, { resume: runDir });
  assertSameTensors(tensorsOf(whole.checkpoint), tensorsOf(resumed.checkpoint));
});
