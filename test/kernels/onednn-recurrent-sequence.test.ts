/**
 * The onednn backend's LSTM and GRU over a whole direction (Backend.recurrentSequenceForward/Backward:
 * oneDNN's LSTM and linear-before-reset GRU primitives, native/onednn/rnn.c) against the wasm
 * backend stepping through its cells: the same layers, weights and batches, outputs and every
 * gradient compared. Offered with AVX-512 only;
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
import type { SequenceCell } from '../../src/kernels/recurrentKernels.ts';
import { createOneDnnBackend, onednnUnavailableReason, sequenceCellsFromEnv } from '../../src/kernels/onednn/index.ts';
import { createWasmBackend } from '../../src/kernels/wasm/index.ts';
import { assertClose, randomArray } from '../util/close.ts';

const onednn = await createOneDnnBackend();
const wasm = (await createWasmBackend())!;
const skip = onednn ? false : `onednn backend unavailable: ${onednnUnavailableReason()}`;
const offered = onednn?.onednn.isa.includes('avx512') ?? false;
const tol = { rtol: 1e-4, atol: 1e-5 };

test('the cells onednn runs as whole-direction primitives: both by default, PARATRAIN_ONEDNN_RNN to choose', {
  skip,
}, () => {
  assert.deepEqual(sequenceCellsFromEnv(undefined), ['lstm', 'gru']);
  assert.deepEqual(sequenceCellsFromEnv('gru, LSTM,gru'), ['gru', 'lstm']);
  assert.deepEqual(sequenceCellsFromEnv('none'), []);
  assert.deepEqual(sequenceCellsFromEnv(''), []);
  assert.throws(
    () => sequenceCellsFromEnv('lstm,rnn'),
    /PARATRAIN_ONEDNN_RNN=lstm,rnn: "rnn" is not a cell; use a comma-separated list of lstm and gru, or none/,
  );
  const was = onednn!.setSequenceCells(['gru']);
  assert.equal(onednn!.recurrentSequenceWorkspace!('lstm', 2, 3, 4, 5), 0, 'a cell left out steps');
  assert.equal(onednn!.recurrentSequenceWorkspace!('gru', 2, 3, 4, 5) > 0, offered);
  if (process.env.PARATRAIN_ONEDNN_RNN === undefined) assert.deepEqual(was, ['lstm', 'gru']);
  // the tests below run both cells as primitives
  onednn!.setSequenceCells(['lstm', 'gru']);
});

interface Stack {
  cell: SequenceCell;
  T: number;
  F: number;
  layers: { H: number; o: RecurrentOptions }[];
}

const CELLS: readonly SequenceCell[] = ['lstm', 'gru'];
const GATES: Record<SequenceCell, number> = { lstm: 4, gru: 3 };

/**
 * The stack on backend B with the given weights, one forward and backward: output, input gradient
 * and gradients. The gradients start from the same random values on every backend (unless
 * `zeroGrads`), as a backward must add to them.
 */
function run(
  B: Backend,
  s: Stack,
  N: number,
  lengths: number[],
  weights: Float32Array | null,
  inputGrad: boolean,
  zeroGrads = false,
) {
  const layers: Layer[] = [];
  let shape: readonly number[] = [s.T, s.F];
  for (const [i, l] of s.layers.entries()) {
    const layer = new Recurrent(B, `${s.cell}${i}`, shape, s.cell, l.H, l.o);
    layers.push(layer);
    shape = layer.outputShape;
  }
  const model = new Sequential(B, layers, [s.T, s.F]);
  model.initialize(5);
  if (weights) model.params.set(weights);
  const x = new Tensor([N, s.T, s.F], randomArray(N * s.T * s.F, 11));
  const ctx = { training: true, seed: 1, step: 0, sampleOffset: 0, lengths: Int32Array.from(lengths) };
  const y = model.forward(x, ctx);
  if (zeroGrads) model.zeroGrads();
  else model.grads.set(randomArray(model.grads.length, 13));
  let dy = new Tensor(y.shape, randomArray(y.data.length, 12));
  let dx: Tensor | null = null;
  for (let i = layers.length - 1; i >= 0; i--) {
    dx = layers[i]!.backward(dy, i > 0 || inputGrad);
    if (dx) dy = dx;
  }
  return {
    params: model.params.slice(),
    y: y.data.slice(),
    dx: inputGrad ? dx!.data.slice() : null,
    grads: model.grads.slice(),
  };
}

function compare(s: Stack, N: number, lengths: number[], inputGrad: boolean, what: string): void {
  const want = run(wasm, s, N, lengths, null, inputGrad);
  const got = run(onednn!, s, N, lengths, want.params, inputGrad);
  what = `${s.cell}, ${what}`;
  assertClose(got.y, want.y, { ...tol, what: `${what}: output` });
  if (inputGrad) assertClose(got.dx!, want.dx!, { ...tol, what: `${what}: input gradient` });
  assertClose(got.grads, want.grads, { ...tol, what: `${what}: gradients` });
}

for (const cell of CELLS) {
  const name = cell.toUpperCase(),
    stats = `${cell}Forward` as const,
    bstats = `${cell}Backward` as const;

  test(`onednn runs a whole ${name} direction as one oneDNN primitive where it offers one, and says when it does not`, {
    skip,
  }, () => {
    const before = onednn!.stats()[stats].plans;
    const size = onednn!.recurrentSequenceWorkspace!(cell, 3, 4, 5, 6);
    if (offered) {
      assert.ok(size > 0, 'a workspace size with AVX-512');
      assert.equal(onednn!.stats()[stats].plans, before + 1);
      assert.ok(onednn!.stats()[bstats].plans > 0, 'the backward plan is made with the forward one');
    } else {
      assert.equal(size, 0, 'not offered without AVX-512: the layer steps');
    }
  });

  test(`onednn ${name} over whole directions equals wasm stepping: one direction, padded samples, both outputs`, {
    skip,
  }, () => {
    for (const returnSequences of [true, false]) {
      compare(
        { cell, T: 7, F: 9, layers: [{ H: 16, o: { returnSequences } }] },
        5,
        [7, 3, 1, 6, 7],
        true,
        `returnSequences ${returnSequences}`,
      );
    }
  });

  test(`onednn ${name} over whole directions equals wasm stepping: bidirectional (concat and sum), the reverse direction from each sample's end`, {
    skip,
  }, () => {
    for (const bidirectional of ['concat', 'sum'] as const) {
      compare({ cell, T: 6, F: 8, layers: [{ H: 12, o: { bidirectional } }] }, 4, [6, 2, 5, 4], true, bidirectional);
      compare(
        { cell, T: 6, F: 8, layers: [{ H: 12, o: { bidirectional, returnSequences: false } }] },
        4,
        [6, 2, 5, 4],
        true,
        `${bidirectional}, final states`,
      );
    }
  });

  test(`onednn ${name}: the first step's dW_hh is 0 (oneDNN 2.6's LSTM took an uninitialised initial state until it was given one)`, {
    skip,
  }, () => {
    // T = 1: h₋₁ = 0, so every recurrent weight's gradient is exactly 0
    const G = GATES[cell],
      F = 5,
      H = 6;
    const got = run(onednn!, { cell, T: 1, F, layers: [{ H, o: {} }] }, 3, [1, 1, 1], null, true, true);
    const whh = got.grads.subarray(G * H * F, G * H * F + G * H * H);
    assert.ok(
      whh.every((v) => v === 0),
      `dW_hh at T = 1: ${Array.from(whh.slice(0, 4))}…`,
    );
  });

  test(`onednn ${name}: stacked layers of one shape share a plan but not a workspace; a first layer computes no input gradient`, {
    skip,
  }, () => {
    // layer 2 has F = H = 10 like layer 1's output: the same (N, T, F, H) as a third layer would; two of one shape here
    const stack: Stack = {
      cell,
      T: 5,
      F: 10,
      layers: [
        { H: 10, o: {} },
        { H: 10, o: {} },
        { H: 10, o: { bidirectional: 'concat' } },
      ],
    };
    compare(stack, 3, [5, 4, 2], false, 'three stacked');
    compare(stack, 3, [5, 5, 5], true, 'three stacked, full lengths');
  });
}
