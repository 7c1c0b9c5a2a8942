import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Tensor } from '../../src/tensor/tensor.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import type { LayerSpec } from '../../src/nn/spec.ts';
import { SoftmaxCrossEntropy } from '../../src/nn/softmaxCrossEntropy.ts';
import { synchroniseBatchNorm } from '../../src/parallel/syncBatchNorm.ts';
import { evenSlice } from '../../src/tensor/shape.ts';
import { localGroup } from './localGroup.ts';
import { seededModel, conv } from './splitHelpers.ts';
import { assertClose, randomArray } from '../util/close.ts';

// Tolerance (float32): the statistics are sums of the same terms in another grouping (per rank,
// then over ranks, through float32 transport): ~1e-6 relative; we allow 1e-5.
const TOL = { rtol: 1e-5, atol: 1e-6 };

const BN: LayerSpec = { type: 'batchNorm', momentum: 0.8, epsilon: 1e-5 };
const SPECS: LayerSpec[] = [
  conv(4, 3, { activation: 'linear' }),
  BN,
  { type: 'relu' },
  { type: 'flatten' },
  { type: 'dense', units: 6, activation: 'linear', useBias: true, parallel: 'data' },
  BN,
  { type: 'dense', units: 3, activation: 'linear', useBias: true, parallel: 'data' },
];
const INPUT = [6, 5, 2];
const N = 10;
const CTX = { training: true, seed: 1, step: 0, sampleOffset: 0 };

/** One device, BatchNorm on the whole batch: logits, gradients, running statistics after two steps. */
async function oneDevice(x: Float32Array, labels: Int32Array) {
  const model = seededModel(jsBackend, SPECS, INPUT);
  const loss = new SoftmaxCrossEntropy(jsBackend);
  let logits = new Float32Array(0);
  for (let step = 0; step < 2; step++) {
    model.zeroGrads();
    const y = model.forward(new Tensor([N, ...INPUT], x), CTX);
    logits = y.data.slice();
    model.backward(loss.compute(y, labels, 1 / N).dlogits);
  }
  return { logits, grads: model.grads.slice(), state: model.state.slice() };
}

/** G devices, each with its (uneven) slice of the batch; gradients summed over devices like hybrid does. */
async function devices(G: number, x: Float32Array, labels: Int32Array, sync: boolean) {
  const per = x.length / N;
  return Promise.all(
    localGroup(G).map(async (comm) => {
      const model = seededModel(jsBackend, SPECS, INPUT);
      if (sync) assert.equal(synchroniseBatchNorm(model, comm), 2);
      const loss = new SoftmaxCrossEntropy(jsBackend);
      const { start, end } = evenSlice(N, G, comm.rank);
      let logits = new Float32Array(0);
      for (let step = 0; step < 2; step++) {
        model.zeroGrads();
        const y = await model.forwardAsync(new Tensor([end - start, ...INPUT], x.slice(start * per, end * per)), CTX);
        logits = y.data.slice();
        await model.backwardAsync(loss.compute(y, labels.subarray(start, end), 1 / N).dlogits);
      }
      await comm.allreduce(model.grads, 'sum');
      return { logits, grads: model.grads.slice(), state: model.state.slice() };
    }),
  );
}

test('syncBatchNorm on G devices (uneven shards) equals BatchNorm on the whole batch on one device', async () => {
  const x = randomArray(N * 60, 12).map((v, i) => v * 2 + (i % 2)); // non-zero channel means
  const labels = Int32Array.from({ length: N }, (_, i) => i % 3);
  const want = await oneDevice(x, labels);
  for (const G of [2, 3, 4]) {
    const ranks = await devices(G, x, labels, true);
    const logits = new Float32Array(ranks.flatMap((r) => [...r.logits]));
    assertClose(logits, want.logits, { ...TOL, what: `G=${G} outputs` });
    for (const [k, r] of ranks.entries()) {
      assertClose(r.grads, want.grads, { ...TOL, what: `G=${G} rank ${k} gradients` });
      assertClose(r.state, want.state, { ...TOL, what: `G=${G} rank ${k} running statistics` });
    }
  }
  // per-replica statistics (the default) are not the whole batch's: the comparison is not vacuous
  const local = await devices(3, x, labels, false);
  assert.ok(
    local[0]!.state.some((v, i) => Math.abs(v - want.state[i]!) > 1e-3),
    'per-replica running statistics must differ',
  );
});

test('a synchronised BatchNorm refuses the synchronous pass with a clear error', async () => {
  const model = seededModel(jsBackend, SPECS, INPUT);
  synchroniseBatchNorm(model, localGroup(2)[0]!);
  assert.ok(model.needsAsync);
  assert.throws(
    () => model.forward(new Tensor([2, ...INPUT]), CTX),
    /model\.layers\[1\] batchNorm: synchronised batch statistics need the asynchronous pass/,
  );
  // evaluation uses the running statistics: no communication, the sync pass is fine
  model.forward(new Tensor([2, ...INPUT]), { ...CTX, training: false });
});
