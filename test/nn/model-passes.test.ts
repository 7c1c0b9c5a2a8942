/**
 * Sequential and the residual block have one forward and one backward loop each (nn/pass.ts), run
 * synchronously or awaiting the layers that communicate. Both ways must give the same bits, and the
 * asynchronous way must really await a communicating layer, nested in a block too.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { Tensor } from '../../src/tensor/tensor.ts';
import { buildModel, type Sequential } from '../../src/nn/model.ts';
import { BatchNorm } from '../../src/nn/batchNorm.ts';
import { allLayers } from '../../src/nn/layer.ts';
import type { LayerSpec, ModelSpec } from '../../src/nn/spec.ts';
import { randomArray } from '../util/close.ts';
import { TRAIN_CTX } from './gradcheck.ts';

const BN: LayerSpec = { type: 'batchNorm', momentum: 0.8, epsilon: 1e-5 };
const dense = (units: number): LayerSpec => ({
  type: 'dense',
  units,
  activation: 'tanh',
  useBias: true,
  parallel: 'data',
});
const SPEC: ModelSpec = {
  input: [5],
  layers: [
    dense(6),
    BN,
    { type: 'residual', layers: [dense(6), BN, dense(6)], shortcut: [], activation: 'relu' },
    dense(3),
  ],
};
const N = 7;

function model(): Sequential {
  const m = buildModel(jsBackend, SPEC);
  m.initialize(5);
  return m;
}

/** What one training step leaves: the output, the gradients, the running statistics, the ready offsets in order. */
interface StepResult {
  y: Float32Array;
  grads: Float32Array;
  state: Float32Array;
  ready: number[];
}

function stepNow(m: Sequential, x: Float32Array, dy: Float32Array): StepResult {
  const ready: number[] = [];
  const y = m.forward(new Tensor([N, 5], x), TRAIN_CTX);
  m.backward(new Tensor([N, 3], dy), (o) => ready.push(o));
  return { y: y.data.slice(), grads: m.grads.slice(), state: m.state.slice(), ready };
}

async function stepLater(m: Sequential, x: Float32Array, dy: Float32Array): Promise<StepResult> {
  const ready: number[] = [];
  const y = await m.forwardAsync(new Tensor([N, 5], x), TRAIN_CTX);
  await m.backwardAsync(new Tensor([N, 3], dy), (o) => ready.push(o));
  return { y: y.data.slice(), grads: m.grads.slice(), state: m.state.slice(), ready };
}

function assertSameBits(got: StepResult, want: StepResult): void {
  for (const key of ['y', 'grads', 'state'] as const) {
    assert.equal(got[key].length, want[key].length, key);
    const differ = got[key].findIndex((v, i) => !Object.is(v, want[key][i]));
    assert.equal(differ, -1, `${key}[${differ}]: ${got[key][differ]} vs ${want[key][differ]}`);
  }
  assert.deepEqual(got.ready, want.ready);
}

const x = randomArray(N * 5, 3);
const dy = randomArray(N * 3, 4);

test('without communicating layers, the synchronous and the asynchronous passes give the same bits', async () => {
  const want = stepNow(model(), x, dy);
  assert.equal(want.ready.length, 4, 'one ready offset per layer with parameters (the block counts once)');
  assertSameBits(await stepLater(model(), x, dy), want);
});

test('the asynchronous passes await a communicating BatchNorm, nested in a residual block too, with the same bits', async () => {
  const want = stepNow(model(), x, dy);
  const m = model();
  const norms = allLayers(m.layers).filter((l): l is BatchNorm => l instanceof BatchNorm);
  assert.equal(norms.length, 2);
  // one replica's "sum over replicas" is the identity, answered a macrotask later like a transport
  const calls: string[] = [];
  for (const [k, bn] of norms.entries()) {
    const sum = () =>
      new Promise<void>((resolve) =>
        setImmediate(() => {
          calls.push(`bn${k}`);
          resolve();
        }),
      );
    bn.setReducer({ sum });
  }
  assert.ok(m.needsAsync);
  assertSameBits(await stepLater(m, x, dy), want);
  // forward: mean and variance per BatchNorm; backward: the gradient sums, the nested one first
  assert.deepEqual(calls, ['bn0', 'bn0', 'bn1', 'bn1', 'bn1', 'bn0']);
  // the synchronous pass refuses, naming the layer
  assert.throws(
    () => m.forward(new Tensor([N, 5], x), TRAIN_CTX),
    /model\.layers\[1\] batchNorm: synchronised batch statistics need the asynchronous pass/,
  );
});

test('a bad input rejects the asynchronous pass and throws from the synchronous one', async () => {
  const m = model();
  const bad = new Tensor([2, 4], new Float32Array(8));
  assert.throws(() => m.forward(bad, TRAIN_CTX), /model input: expected shape \[2, 5\], got \[2, 4\]/);
  await assert.rejects(m.forwardAsync(bad, TRAIN_CTX), /model input: expected shape \[2, 5\], got \[2, 4\]/);
});
