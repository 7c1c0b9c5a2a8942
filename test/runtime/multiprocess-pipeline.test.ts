/**
 * Pipelines and tensor-parallel groups in jobs of several processes, started by `paratrain launch`,
 * against the same job on worker threads of one process (trainHere):
 *   - 2 pipeline stages on 2 processes × 1 device (activations and gradients over TCP) and two
 *     pipelines on 2 processes × 2 devices (a pipeline in each process, each stage's data-parallel
 *     group across them): bit for bit, weights and every step's loss, as between layouts in one
 *     process (parallel/pipeline-train.test.ts): a group of two sums in one order either way
 *   - train.tensorParallel: 2 on 2 processes × 2 devices (a group in each process) and on
 *     4 processes × 1 device (groups across processes): within 1e-4, the replicated layers'
 *     gradients summed hierarchically
 *   - a layout that needs devices without a link is refused before training, naming the fix
 * (The pairs each layout needs: runtime/link-checks.test.ts; under mpirun: mpirun.test.ts.)
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SUBSET, tmpDir } from '../cli/helpers.ts';
import { readMetrics } from '../../src/runtime/events/metrics.ts';
import { assertClose, launchTrain, tinyJobConfig, trainHere, weights } from './jobHelpers.ts';

/** Every step of every device that computed samples (a pipeline's last stages), as `step/rank loss`. */
function losses(dir: string): string[] {
  const files = ['metrics.jsonl', 'metrics.process-1.jsonl'].filter((f) => existsSync(join(dir, f)));
  return files
    .flatMap((f) =>
      readMetrics(join(dir, f)).flatMap((e) =>
        e.type === 'step' && Number(e.samples) > 0 ? [`${e.step}/${e.rank} ${e.loss}`] : [],
      ),
    )
    .sort();
}

const PIPELINE = ', microBatches: 2, pipeline: { stages: 2, schedule: 1f1b }';

for (const [processes, threads] of [
  [2, 1],
  [2, 2],
] as const) {
  test(`a pipeline of 2 stages on ${processes} processes × ${threads} device(s) equals ${processes * threads} threads, bit for bit`, {
    timeout: 180_000,
  }, async () => {
    const dir = tmpDir();
    const cfg = tinyJobConfig(dir, PIPELINE);
    const [multi] = await Promise.all([
      launchTrain(cfg, processes, threads, join(dir, 'multi')),
      trainHere(cfg, join(dir, 'single'), { devices: processes * threads }),
    ]);
    assert.equal(multi.code, 0, multi.stderr);
    assert.deepEqual(
      weights(join(dir, 'multi', 'model.safetensors')),
      weights(join(dir, 'single', 'model.safetensors')),
    );
    const single = losses(join(dir, 'single'));
    // 96 samples in batches of 8 per pipeline: one loss per pipeline and step, 12 in all
    assert.equal(single.length, 12);
    assert.deepEqual(losses(join(dir, 'multi')), single);
  });
}

/** The tiny job with its dense layers split over groups of 2 (48 samples: 6 steps). */
function tensorParallelConfig(dir: string): string {
  const file = join(dir, 'tp.yaml');
  writeFileSync(
    file,
    `model:
  input: [28, 28, 1]
  layers:
    - conv2d: { filters: 4, kernelSize: 3, strides: 2, activation: relu }
    - maxPool2d: { poolSize: 2 }
    - flatten: {}
    - dense: { units: 18, activation: relu, parallel: model }
    - dropout: { rate: 0.3, masks: per-sample }
    - dense: { units: 10, parallel: model }
optimizer: { sgd: { lr: 0.05, momentum: 0.9 } }
data: { dir: ${SUBSET}, batchSize: 8, trainLimit: 48, testLimit: 100 }
train: { epochs: 1, seed: 3, evalEvery: 0, backend: js, tensorParallel: 2 }
`,
  );
  return file;
}

test('tensorParallel: 2 on 2 processes × 2 devices and on 4 processes × 1 device equals 4 threads', {
  timeout: 240_000,
}, async () => {
  const dir = tmpDir();
  const cfg = tensorParallelConfig(dir);
  const [multi] = await Promise.all([
    launchTrain(cfg, 2, 2, join(dir, 'multi')),
    trainHere(cfg, join(dir, 'single'), { devices: 4 }),
  ]);
  assert.equal(multi.code, 0, multi.stderr);
  const reference = weights(join(dir, 'single', 'model.safetensors'));
  assertClose(weights(join(dir, 'multi', 'model.safetensors')), reference, 'tensorParallel 2 on 2 × 2');
  // one device per process: the groups' messages all cross processes (in this process, over loopback TCP)
  await trainHere(cfg, join(dir, 'spread'), { devices: 1, processes: 4 });
  assertClose(weights(join(dir, 'spread', 'model.safetensors')), reference, 'tensorParallel 2 on 4 × 1');
});

test('a pipeline whose stage groups need devices without a link is refused before training, naming the fix', {
  timeout: 120_000,
}, async () => {
  const dir = tmpDir();
  const r = await launchTrain(tinyJobConfig(dir, PIPELINE), 2, 4, join(dir, 'run'));
  assert.notEqual(r.code, 0);
  assert.match(
    r.stderr,
    /^paratrain: train\.pipeline: 2 stages on 2 processes × 4 devices needs device 2 \(process 0, thread 2\) and device 4 \(process 1, thread 0\) to exchange messages \(stage 0's data-parallel group\), .* use --devices 2 .* or --devices 1 \(one device per process\), or run one process$/m,
  );
  assert.doesNotMatch(r.stdout + r.stderr, /epoch 1/);
});
