import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { train } from '../../src/runtime/run/train.ts';
import { readMetrics } from '../../src/runtime/events/metrics.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { parseConfig } from '../../src/config/index.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { runDevice } from '../../src/runtime/job/deviceRun.ts';
import { hybridStrategy } from '../../src/parallel/strategies/hybrid.ts';
import { strategyCommunicator } from '../../src/parallel/pipeline/net.ts';
import { tinyConfig } from './helpers.ts';
import { localGroup } from './localGroup.ts';
import { syntheticDataset } from './inMemory.ts';
import { assertSameTensors, freshDir, tensorsOf } from '../runtime/resumeHelpers.ts';

// Bit-identical: each stage runs the 1-device run's layers on the same micro-batches (dropout
// offsets included) and sums their gradients in the same order; the reduction over one pipeline's
// stage group is a mean over one device; Adam is elementwise.
const settings = (train: Record<string, unknown>): RunConfig =>
  tinyConfig({
    optimizer: { adam: { lr: 0.003 } },
    train: { microBatches: 4, checkpointEvery: { steps: 4 }, backend: 'wasm', ...train },
    data: { trainLimit: 96 },
  });
const base = settings({});
const pipelined = settings({ devices: 2, strategy: 'hybrid', pipeline: { stages: 2, schedule: '1f1b' } });

test('a run pipelined over 2 stages (threads) equals the 1-device run step by step, and resumes unpipelined to its end', async () => {
  const one = await train(base, { out: freshDir() });
  const runDir = freshDir();
  await assert.rejects(train(pipelined, { out: runDir, failAt: { rank: 1, step: 6 } }), /injected failure/);
  const steps = (dir: string) => readMetrics(join(dir, 'metrics.jsonl')).filter((e) => e.type === 'step');
  const oneSteps = steps(one.runDir);
  const piped = steps(runDir);
  // the last stage reports the pipeline's loss and samples; the first none, so a step counts once
  for (let s = 0; s < 6; s++) {
    const last = piped.find((e) => e.step === s && e.rank === 1)!;
    const first = piped.find((e) => e.step === s && e.rank === 0)!;
    const want = oneSteps.find((e) => e.step === s)!;
    assert.equal(last.loss, want.loss, `step ${s}`);
    assert.equal(last.samples, 8);
    assert.equal(first.samples, 0);
  }
  const resumed = await train(base, { resume: runDir });
  assertSameTensors(tensorsOf(one.checkpoint), tensorsOf(resumed.checkpoint));
});

test('two pipelines of 2 stages (4 devices in this thread) train as 2 devices of hybrid do, bit for bit', async () => {
  const data = syntheticDataset('classification', 64, [6], 3, 4);
  const config = (devices: number, pipeline?: object) =>
    parseConfig(
      {
        model: {
          input: [6],
          layers: [
            { dense: { units: 12, activation: 'relu', useBias: true } },
            { dropout: { rate: 0.2 } },
            { dense: { units: 8, activation: 'tanh' } },
            { dense: { units: 3 } },
          ],
        },
        optimizer: { adam: { lr: 0.01 } },
        data: { batchSize: 8 },
        train: {
          devices,
          strategy: 'hybrid',
          microBatches: 4,
          seed: 9,
          backend: 'js',
          evalEvery: 0,
          ...(pipeline ? { pipeline } : {}),
        },
      },
      'pipelines',
    );
  const run = async (c: RunConfig, stages?: number) => {
    const path = join(mkdtempSync(join(tmpdir(), 'paratrain-pipe-')), 'model.safetensors');
    const steps: number[] = [];
    await Promise.all(
      localGroup(c.train.devices).map((comm) =>
        runDevice({
          config: c,
          rank: comm.rank,
          worldSize: c.train.devices,
          backend: jsBackend,
          train: data,
          test: null,
          emit: (e) => {
            if (e.type === 'step' && e.samples > 0) steps.push(e.loss);
          },
          shared: false,
          comm,
          strategy: hybridStrategy(strategyCommunicator(comm, stages), 64),
          checkpointPath: comm.rank === 0 ? path : null,
        }),
      ),
    );
    return { tensors: tensorsOf(path), steps };
  };
  const flat = await run(config(2));
  const piped = await run(config(4, { stages: 2, schedule: 'gpipe' }), 2);
  assert.deepEqual(piped.steps.sort(), flat.steps.sort());
  assertSameTensors(flat.tensors, piped.tensors);
});
