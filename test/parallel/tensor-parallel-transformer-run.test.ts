/**
 * Whole runs of a tiny character GPT (examples/shakespeare-char.yaml's layers, smaller) with its
 * blocks marked `parallel: model`: `paratrain train --devices 2` on worker threads against one
 * device on the same global batch, and the checkpoints between the two layouts: the split run's
 * model.safetensors is the unsplit model's (same names, shapes; loads into it), and an unsplit
 * checkpoint loads into the split model (--init-from's path) unchanged.
 *
 * Tolerance: as tensor-parallel-transformer.test.ts, only float32 summation order differs, over
 * 8 AdamW steps here (eps 1e-3, for the reason given there); rtol 1e-4 with atol 1e-5.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { Tensor } from '../../src/tensor/tensor.ts';
import { loadConfig } from '../../src/config/index.ts';
import { train } from '../../src/runtime/run/train.ts';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { loadModelCheckpoint } from '../../src/runtime/checkpoint/modelCheckpoint.ts';
import { loadInitialWeights } from '../../src/runtime/checkpoint/initFrom.ts';
import { buildModel } from '../../src/nn/model.ts';
import { ModelParallelNet } from '../../src/parallel/modelParallel/net.ts';
import { rowSplit } from '../../src/parallel/modelParallel/activationExchange.ts';
import { runCli } from '../cli/helpers.ts';
import { localGroup } from './localGroup.ts';
import { assertClose } from '../util/close.ts';

const TOL = { rtol: 1e-4, atol: 1e-5 };
const dir = mkdtempSync(join(tmpdir(), 'paratrain-tp-gpt-'));
// 9 characters (vocab 9), a text long enough for 32 windows of 17
writeFileSync(
  join(dir, 'text.txt'),
  Array.from({ length: 600 }, (_, i) => 'abcdefgh\n'[(i * 7 + ((i * i) % 11)) % 9]).join(''),
);

function yaml(parallel: string): string {
  return `model:
  input: [16]
  layers:
    - embedding: { vocab: 9, dim: 16 }
    - positionEncoding: { encoding: learned }
    - transformerBlock: { heads: 4${parallel} }
    - transformerBlock: { heads: 4${parallel} }
    - layerNorm: {}
    - tiedEmbedding: {}
loss: tokenCrossEntropy
optimizer:
  adamw: { lr: 0.003, beta2: 0.99, weightDecay: 0.1, eps: 0.001 }
data:
  dataset: text
  dir: ${dir}
  file: text.txt
  windows: random
  trainLimit: 32
  validation: 0
  batchSize: 8
  batchSizeScope: global
train:
  epochs: 2
  seed: 5
  evalEvery: 0
`;
}
writeFileSync(join(dir, 'unsplit.yaml'), yaml(''));
writeFileSync(join(dir, 'split.yaml'), yaml(', parallel: model'));

const tensorsOf = (path: string) => readCheckpoint(path).tensors;

test('paratrain train --devices 2 with parallel: model blocks (threads) ends like one device; its checkpoint is the unsplit model, and an unsplit one loads into the split model', async () => {
  const unsplit = await train(loadConfig(join(dir, 'unsplit.yaml')), { out: join(dir, 'one'), log: () => {} });
  const cli = await runCli(['train', join(dir, 'split.yaml'), '--devices', '2', '--out', join(dir, 'two'), '--quiet']);
  assert.equal(cli.code, 0, cli.stderr);
  const splitPath = join(dir, 'two', 'model.safetensors');
  const want = tensorsOf(unsplit.checkpoint),
    got = tensorsOf(splitPath);
  assert.deepStrictEqual([...got.keys()].sort(), [...want.keys()].sort(), 'the same tensor names');
  for (const [name, t] of want) {
    assert.deepStrictEqual(got.get(name)!.shape, t.shape, `${name}: the unsplit shape`);
    if (name.startsWith('layers.')) assertClose(got.get(name)!.data, t.data, { ...TOL, what: `weights ${name}` });
  }

  // the split run's checkpoint loads into the unsplit model and computes what the unsplit run's does
  const spec = loadConfig(join(dir, 'unsplit.yaml')).model;
  const start = buildModel(jsBackend, spec);
  start.initialize(5);
  const moved = start.paramEntries.find((e) => e.name === 'layers.2.mlp.layers.1.kernel')!;
  assert.ok(
    start.params
      .subarray(moved.offset, moved.offset + moved.size)
      .some((v, i) => Math.abs(v - want.get(moved.name)!.data[i]!) > 1e-3),
    'the weights moved in training',
  );
  const x = new Tensor(
    [3, 16],
    Float32Array.from({ length: 48 }, (_, i) => (i * 5) % 9),
  );
  const ctx = { training: false, seed: 0, step: 0, sampleOffset: 0 };
  const logitsOf = (path: string) => {
    const m = buildModel(jsBackend, spec);
    loadModelCheckpoint(path, m);
    return m.forward(x, ctx).data.slice();
  };
  const reference = logitsOf(unsplit.checkpoint);
  assertClose(logitsOf(splitPath), reference, { ...TOL, what: 'logits of the split checkpoint' });

  // the reverse: the unsplit checkpoint into the split model on 2 devices, gathered back bit for bit
  const splitSpec = loadConfig(join(dir, 'split.yaml')).model;
  const whole = buildModel(jsBackend, spec);
  const target = {
    buffers: [new Float32Array(whole.params.length)],
    paramEntries: whole.paramEntries,
    state: new Float32Array(whole.state.length),
    stateEntries: whole.stateEntries,
  };
  await Promise.all(
    localGroup(2).map(async (comm) => {
      const net = new ModelParallelNet(jsBackend, splitSpec, comm);
      loadInitialWeights({ path: unsplit.checkpoint, reinit: [] }, net);
      const rows = rowSplit(3, 2),
        start = rows.starts[comm.rank]!,
        count = rows.counts[comm.rank]!;
      const y = await net.forwardAsync(new Tensor([count, 16], x.data.slice(start * 16, (start + count) * 16)), {
        ...ctx,
        sampleOffset: start,
        rank: comm.rank,
        globalBatch: 3,
      });
      assertClose(y.data, reference.subarray(start * 16 * 9, (start + y.batch) * 16 * 9), {
        ...TOL,
        what: `rank ${comm.rank}: logits of the split model from the unsplit checkpoint`,
      });
      await net.gatherWhole([net.params], comm.rank === 0 ? target : null);
    }),
  );
  for (const e of whole.paramEntries)
    assert.deepStrictEqual(target.buffers[0]!.subarray(e.offset, e.offset + e.size), want.get(e.name)!.data, e.name);
});
