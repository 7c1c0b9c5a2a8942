/**
 * A tiny character GPT whose transformer blocks are split Megatron-style (`transformerBlock:
 * { parallel: model }`) resumes on another layout: split over 2 devices ↔ train.tensorParallel 2
 * on 4 devices (two groups), split → its marks removed, and an unsplit run → split. Each device
 * takes its part of the set's model file — q, k and v rows of in_proj_weight as strided pieces —
 * exactly, and the run ends like the one on the new layout throughout (within the model-parallel
 * equivalence tests' tolerance: summation order, over a few AdamW steps).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig, type RunConfig } from '../../src/config/index.ts';
import { resumesLike, restoreGathersBack, trained } from './resumeSplitHelpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'paratrain-resume-tp-'));
writeFileSync(
  join(dir, 'text.txt'),
  Array.from({ length: 600 }, (_, i) => 'abcdefgh\n'[(i * 7 + ((i * i) % 11)) % 9]).join(''),
);

/** Two blocks of 4 heads over 16 dimensions; 4 steps an epoch, sets every 3 steps. */
function gpt(split: boolean, devices: number, tensorParallel?: number): RunConfig {
  const block = { heads: 4, ...(split ? { parallel: 'model' } : {}) };
  return parseConfig(
    {
      model: {
        input: [16],
        layers: [
          { embedding: { vocab: 9, dim: 16 } },
          { positionEncoding: { encoding: 'learned' } },
          { transformerBlock: block },
          { transformerBlock: block },
          { layerNorm: {} },
          { tiedEmbedding: {} },
        ],
      },
      loss: 'tokenCrossEntropy',
      optimizer: { adamw: { lr: 0.003, beta2: 0.99, weightDecay: 0.1, eps: 0.001 } },
      data: {
        dataset: 'text',
        dir,
        file: 'text.txt',
        windows: 'random',
        trainLimit: 32,
        validation: 0,
        batchSize: 8,
        batchSizeScope: 'global',
      },
      train: {
        epochs: 2,
        seed: 5,
        evalEvery: 0,
        backend: 'js',
        checkpointEvery: { steps: 3 },
        devices,
        ...(devices > 1 ? { strategy: 'hybrid' } : {}),
        ...(tensorParallel ? { tensorParallel } : {}),
      },
    },
    'test config',
  );
}

test('split blocks: 2 devices → tensorParallel 2 on 4 → 2 devices, split → unsplit on 1 → split: exact parts of the set, then like the new layout all along', async () => {
  const two = await trained(gpt(true, 2), 3);
  const one = await trained(gpt(false, 1), 3);
  assert.equal(two.point.state.splitGroup, 2);
  for (const config of [gpt(true, 4, 2), gpt(true, 4), gpt(false, 2), gpt(false, 1)])
    assert.ok((await restoreGathersBack(two.point, config)).includes('layers.2.attn.layers.1.in_proj_weight'));
  // tensorParallel 2 on 4 devices trains as one device on the global batch (tensor-parallel-groups.test.ts)
  const sets = await resumesLike(
    two.point,
    gpt(true, 4, 2),
    one.tensors,
    'split on 2 → tensorParallel 2 on 4',
    /train\.tensorParallel none → 2/,
  );
  const four = sets.find((p) => p.state.step === 6)!;
  assert.deepEqual([four.state.devices, four.state.splitGroup], [4, 2]);
  await restoreGathersBack(four, gpt(true, 2));
  await resumesLike(
    four,
    gpt(true, 2),
    two.tensors,
    'tensorParallel 2 on 4 → split on 2',
    /train\.tensorParallel 2 → none/,
  );
  await resumesLike(
    two.point,
    gpt(false, 1),
    one.tensors,
    'split on 2 → unsplit on 1',
    /model\.layers\[2\], model\.layers\[3\] → none/,
  );
  await resumesLike(
    one.point,
    gpt(true, 2),
    two.tensors,
    'unsplit on 1 → split on 2',
    /none → model\.layers\[2\], model\.layers\[3\]/,
  );
});
