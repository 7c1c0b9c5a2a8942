import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Tensor } from '../../src/tensor/tensor.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { getBackend } from '../../src/kernels/index.ts';
import type { Backend } from '../../src/kernels/backend.ts';
import type { LayerSpec } from '../../src/nn/spec.ts';
import { Sequential } from '../../src/nn/model.ts';
import { SpatialParallelStage } from '../../src/parallel/modelParallel/spatialParallelStage.ts';
import { SerialSpatialStack } from '../../src/nn/spatialStack.ts';
import { planTiles } from '../../src/nn/spatialTiles.ts';
import { localGroup } from './localGroup.ts';
import { buildLayers, seededModel, reference, conv, pool, TRAIN } from './splitHelpers.ts';
import { assertClose, randomArray } from '../util/close.ts';

// Tolerance (float32): a tile computes the same sums as the whole image, but weight gradients add
// the tiles' partial sums in another order, so values agree to ~1e-6 relative; we allow 1e-5.
const TOL = { rtol: 1e-5, atol: 1e-5 };

/** Stacks with 'same' and 'valid' padding, strides, non-square windows, pooling and activations. */
const STACKS: { name: string; input: number[]; layers: LayerSpec[] }[] = [
  {
    name: 'same convs, max pool, strided conv, avg pool same',
    input: [29, 23, 2],
    layers: [
      conv(4, 3, { padding: 'same', activation: 'relu' }),
      pool('maxPool2d', 2),
      conv(5, [3, 2], { strides: [2, 1], padding: 'same', activation: 'tanh' }),
      pool('avgPool2d', 3, 2, 'same'),
    ],
  },
  {
    name: 'valid 5×5, relu, strided valid conv, overlapping max pool',
    input: [19, 16, 3],
    layers: [conv(3, 5), { type: 'relu' }, conv(4, 3, { strides: [2, 2] }), pool('maxPool2d', 3, 1, 'same')],
  },
];

const N = 3;

test('spatial split, serial: tile grids (uneven included) equal the unsplit stack — output, input and weight gradients', async () => {
  for (const backend of [jsBackend, await getBackend('wasm')] as Backend[]) {
    for (const s of STACKS) {
      const ref = seededModel(backend, s.layers, s.input);
      const x = new Tensor([N, ...s.input], randomArray(N * s.input.reduce((a, b) => a * b), 3));
      const r = randomArray(N * ref.outputShape.reduce((a, b) => a * b), 9);
      const want = reference(ref, x, r);
      for (const [th, tw] of [
        [3, 1],
        [2, 2],
        [4, 3],
        [1, 2],
      ] as const) {
        const what = `${backend.name} ${s.name} tiles ${th}×${tw}`;
        const stack = new SerialSpatialStack(backend, buildLayers(backend, s.layers, s.input), th, tw);
        const model = new Sequential(backend, [stack], s.input);
        model.params.set(ref.params);
        const y = model.forward(x, TRAIN);
        assertClose(y.data, want.y, { ...TOL, what: `${what} output` });
        model.zeroGrads();
        const dx = stack.backward(new Tensor(y.shape, r.slice()))!;
        assertClose(dx.data, want.dx, { ...TOL, what: `${what} input gradient` });
        assertClose(model.grads, want.grads, { ...TOL, what: `${what} weight gradients` });
        // one tile's activations at a time: less than the unsplit stack keeps
        assert.ok(
          stack.peakTileBytes < ref.lastActivationBytes,
          `${what}: tile peak ${stack.peakTileBytes} ≥ unsplit ${ref.lastActivationBytes}`,
        );
      }
    }
  }
});

test('spatial split, parallel: G devices (the model-parallel stage, replicated input) equal the unsplit stack', async () => {
  const backend = jsBackend;
  for (const s of STACKS) {
    const ref = seededModel(backend, s.layers, s.input);
    const x = new Tensor([N, ...s.input], randomArray(N * s.input.reduce((a, b) => a * b), 5));
    const r = randomArray(N * ref.outputShape.reduce((a, b) => a * b), 7);
    const want = reference(ref, x, r);
    for (const [th, tw] of [
      [3, 1],
      [2, 2],
      [1, 2],
    ] as const) {
      const what = `${s.name} grid ${th}×${tw}`;
      const comms = localGroup(th * tw);
      const ranks = comms.map((comm) => {
        const serial = new SerialSpatialStack(backend, buildLayers(backend, s.layers, s.input), th, tw);
        const model = new Sequential(backend, [serial], s.input);
        model.params.set(ref.params);
        return {
          comm,
          model,
          split: new SpatialParallelStage(backend, comm, 'stage', serial, [th, tw], s.input, { inputRows: false }),
        };
      });
      // replicated input: every rank cuts its tiles; input gradients summed over ranks, weight gradients summed here
      const outs = await Promise.all(
        ranks.map(async ({ comm, model, split }) => {
          model.zeroGrads();
          const y = await split.forwardAsync(x, { ...TRAIN, globalBatch: N });
          const dx = (await split.backwardAsync(new Tensor(y.shape, r.slice())))!;
          await comm.allreduce(model.grads, 'sum');
          return { y: y.data.slice(), dx: dx.data.slice(), grads: model.grads.slice() };
        }),
      );
      for (const [k, o] of outs.entries()) {
        assertClose(o.y, want.y, { ...TOL, what: `${what} rank ${k} output` });
        assertClose(o.dx, want.dx, { ...TOL, what: `${what} rank ${k} input gradient` });
        assertClose(o.grads, want.grads, { ...TOL, what: `${what} rank ${k} weight gradients` });
      }
    }
  }
});

test('spatial tiles: halos follow the receptive field through strides and same padding', () => {
  // conv 3×3 stride 2 same on 8 rows pads 0 before, 1 after (TensorFlow's convention): output
  // row r reads middle rows 2r..2r+2; conv 3×3 same (halo 1 each side) widens that by one row
  // each way, clipped to the image
  const layers = buildLayers(
    jsBackend,
    [conv(2, 3, { padding: 'same' }), conv(2, 3, { strides: [2, 2], padding: 'same' })],
    [8, 8, 1],
  );
  const plans = planTiles(layers, 4, 1);
  assert.deepEqual(
    plans.map((p) => [p.outRows.start, p.outRows.end]),
    [
      [0, 1],
      [1, 2],
      [2, 3],
      [3, 4],
    ],
  );
  assert.deepEqual(
    plans.map((p) => [p.inRows.start, p.inRows.end]),
    [
      [0, 4],
      [1, 6],
      [3, 8],
      [5, 8],
    ],
  );
  assert.deepEqual(plans[0]!.inCols, { start: 0, end: 8 });
});

test('spatial split: impossible splits are refused naming the layer', () => {
  const layers = buildLayers(jsBackend, [conv(2, 3), pool('maxPool2d', 2)], [9, 9, 1]);
  assert.throws(
    () => planTiles(layers, 5, 1),
    /model\.layers\[1\] maxPool2d: cannot split 3 output rows into 5 tiles along height; use at most 3/,
  );
  const withBn = buildLayers(jsBackend, [conv(2, 3), { type: 'batchNorm', momentum: 0.9, epsilon: 1e-5 }], [9, 9, 1]);
  assert.throws(
    () => planTiles(withBn, 2, 1),
    /model\.layers\[1\] batchNorm: cannot be part of a spatially split stack/,
  );
});
