/**
 * The onednn backend's LSTM over a whole direction (Backend.lstmSequenceForward/Backward: oneDNN's
 * LSTM primitive, native/onednn/rnn.c) against the wasm backend stepping through its cells: the
 * same layers, weights and batches, outputs and every gradient compared. Offered with AVX-512 only;
 * elsewhere these tests check that it is not offered and the layer steps (rnn-torch.test.ts then
 * covers the onednn backend's step path against PyTorch).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Tensor } from '../../src/tensor/tensor.ts';
import { Recurrent, type RecurrentOptions } from '../../src/nn/recurrent.ts';
import { Sequential } from '../../src/nn/model.ts';
import type { Layer } from '../../src/nn/layer.ts';
import type { Backend } from '../../src/kernels/backend.ts';
import { createOneDnnBackend, onednnUnavailableReason } from '../../src/kernels/onednn/index.ts';
import { createWasmBackend } from '../../src/kernels/wasm/index.ts';
import { assertClose, randomArray } from '../util/close.ts';

const onednn = await createOneDnnBackend();
const wasm = (await createWasmBackend())!;
const skip = onednn ? false : `onednn backend unavailable: ${onednnUnavailableReason()}`;
const offered = onednn?.onednn.isa.includes('avx512') ?? false;
const tol = { rtol: 1e-4, atol: 1e-5 };

interface Stack { T: number; F: number; layers: { H: number; o: RecurrentOptions }[] }

/** The stack on backend B with the given weights, one forward and backward: output, input gradient and gradients. */
function run(B: Backend, s: Stack, N: number, lengths: number[], weights: Float32Array | null, inputGrad: boolean) {
  const layers: Layer[] = [];
  let shape: readonly number[] = [s.T, s.F];
  for (const [i, l] of s.layers.entries()) {
    const layer = new Recurrent(B, `lstm${i}`, shape, 'lstm', l.H, l.o);
    layers.push(layer);
    shape = layer.outputShape;
  }
  const model = new Sequential(B, layers, [s.T, s.F]);
  model.initialize(5);
  if (weights) model.params.set(weights);
  const x = new Tensor([N, s.T, s.F], randomArray(N * s.T * s.F, 11));
  const ctx = { training: true, seed: 1, step: 0, sampleOffset: 0, lengths: Int32Array.from(lengths) };
  const y = model.forward(x, ctx);
  model.zeroGrads();
  let dy = new Tensor(y.shape, randomArray(y.data.length, 12));
  let dx: Tensor | null = null;
  for (let i = layers.length - 1; i >= 0; i--) {
    dx = layers[i]!.backward(dy, i > 0 || inputGrad);
    if (dx) dy = dx;
  }
  return { params: model.params.slice(), y: y.data.slice(), dx: inputGrad ? dx!.data.slice() : null, grads: model.grads.slice() };
}

function compare(s: Stack, N: number, lengths: number[], inputGrad: boolean, what: string): void {
  const want = run(wasm, s, N, lengths, null, inputGrad);
  const got = run(onednn!, s, N, lengths, want.params, inputGrad);
  assertClose(got.y, want.y, { ...tol, what: `${what}: output` });
  if (inputGrad) assertClose(got.dx!, want.dx!, { ...tol, what: `${what}: input gradient` });
  assertClose(got.grads, want.grads, { ...tol, what: `${what}: gradients` });
}

test('onednn runs a whole LSTM direction as one oneDNN primitive where it offers one, and says when it does not', { skip }, () => {
  const before = onednn!.stats().lstmForward.plans;
  const size = onednn!.lstmSequenceWorkspace!(3, 4, 5, 6);
  if (offered) {
    assert.ok(size > 0, 'a workspace size with AVX-512');
    assert.equal(onednn!.stats().lstmForward.plans, before + 1);
    assert.ok(onednn!.stats().lstmBackward.plans > 0, 'the backward plan is made with the forward one');
  } else {
    assert.equal(size, 0, 'not offered without AVX-512: the layer steps');
  }
});

test('onednn LSTM over whole directions equals wasm stepping: one direction, padded samples, both outputs', { skip }, () => {
  for (const returnSequences of [true, false]) {
    compare({ T: 7, F: 9, layers: [{ H: 16, o: { returnSequences } }] }, 5, [7, 3, 1, 6, 7], true, `returnSequences ${returnSequences}`);
  }
});

test('onednn LSTM over whole directions equals wasm stepping: bidirectional (concat and sum), the reverse direction from each sample\'s end', { skip }, () => {
  for (const bidirectional of ['concat', 'sum'] as const) {
    compare({ T: 6, F: 8, layers: [{ H: 12, o: { bidirectional } }] }, 4, [6, 2, 5, 4], true, bidirectional);
    compare({ T: 6, F: 8, layers: [{ H: 12, o: { bidirectional, returnSequences: false } }] }, 4, [6, 2, 5, 4], true, `${bidirectional}, final states`);
  }
});

test('onednn LSTM: the first step\'s dW_hh is 0 (oneDNN 2.6 took an uninitialised initial state until it was given one)', { skip }, () => {
  // T = 1: h₋₁ = 0, so every recurrent weight's gradient is exactly 0
  const got = run(onednn!, { T: 1, F: 5, layers: [{ H: 6, o: {} }] }, 3, [1, 1, 1], null, true);
  const whh = got.grads.subarray(24 * 5, 24 * 5 + 24 * 6);
  assert.ok(whh.every((v) => v === 0), `dW_hh at T = 1: ${Array.from(whh.slice(0, 4))}…`);
});

test('onednn LSTM: stacked layers of one shape share a plan but not a workspace; a first layer computes no input gradient', { skip }, () => {
  // layer 2 has F = H = 10 like layer 1's output: the same (N, T, F, H) as a third layer would; two of one shape here
  const stack: Stack = { T: 5, F: 10, layers: [{ H: 10, o: {} }, { H: 10, o: {} }, { H: 10, o: { bidirectional: 'concat' } }] };
  compare(stack, 3, [5, 4, 2], false, 'three stacked');
  compare(stack, 3, [5, 5, 5], true, 'three stacked, full lengths');
});
