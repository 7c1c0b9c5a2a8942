// A max pool after an activation takes over the activation's backward, on its own output
// (src/nn/activationFusion.ts); a conv2d → max pool pair runs as one backend step where the backend
// fuses it (src/nn/convPool.ts). Both must leave every result as the layers computed it one by one:
// on the js backend (no fused kernels) the model's output and gradients equal, bit for bit, the
// kernels called in the old order (the full activation backward, then the filter and data
// gradients); overlapping windows, gelu (its backward reads the input) and a layer in between are
// not taken over and still equal. Where the onednn addon fuses, the pair's results equal the
// layers' own within float32 rounding.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assertClose, randomArray } from '../util/close.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { createOneDnnBackend } from '../../src/kernels/onednn/index.ts';
import type { ActivationKind } from '../../src/kernels/activation.ts';
import type { Backend } from '../../src/kernels/backend.ts';
import type { Pool2DGeometry } from '../../src/kernels/poolKernels.ts';
import { Tensor } from '../../src/tensor/tensor.ts';
import { Conv2D } from '../../src/nn/conv2d.ts';
import { Pool2D } from '../../src/nn/pool2d.ts';
import { ActivationLayer } from '../../src/nn/activationLayer.ts';
import { Sequential } from '../../src/nn/model.ts';
import type { Layer } from '../../src/nn/layer.ts';

const B = jsBackend;
const CTX = { training: true, seed: 1, step: 0, sampleOffset: 0 };
const N = 3;

/** The model's output and gradients for input x and output gradient dy (fresh zeroed gradients). */
function run(model: Sequential, x: Float32Array, dy: Float32Array): { y: Float32Array; grads: Float32Array } {
  model.zeroGrads();
  const y = model.forward(new Tensor([N, ...model.inputShape], x), CTX);
  const out = y.data.slice();
  model.backward(new Tensor(y.shape, dy));
  return { y: out, grads: model.grads.slice() };
}

/**
 * conv0 (linear) → act (a conv's own or an activation layer) → max pool, by the kernels in the
 * old order: the full activation backward, then the gradients of conv1 (if any) and conv0.
 */
function byKernels(
  b: Backend,
  model: Sequential,
  x: Float32Array,
  dy: Float32Array,
  kind: ActivationKind,
  cap?: number,
): { y: Float32Array; grads: Float32Array } {
  const convs = model.layers.filter((l): l is Conv2D => l instanceof Conv2D);
  const pool = model.layers.find((l): l is Pool2D => l instanceof Pool2D)!;
  const grads = new Float32Array(model.grads.length);
  const entries = model.paramEntries;
  const view = (i: number) => grads.subarray(entries[i]!.offset, entries[i]!.offset + entries[i]!.size);
  const param = (i: number) => model.params.subarray(entries[i]!.offset, entries[i]!.offset + entries[i]!.size);
  const acts: Float32Array[] = [x];
  convs.forEach((c, i) => {
    const g = { ...c.geometry, N };
    const z = new Float32Array(N * g.OH * g.OW * g.F);
    b.conv2dForward(acts[i]!, param(2 * i), param(2 * i + 1), z, g);
    acts.push(z);
  });
  const z = acts[acts.length - 1]!,
    a = new Float32Array(z.length);
  b.activationForward(kind, z, a, cap);
  const q: Pool2DGeometry = { ...pool.geometry, N };
  const y = new Float32Array(N * q.OH * q.OW * q.C),
    argmax = new Int32Array(y.length);
  b.maxPoolForward(a, y, argmax, q);
  const da = new Float32Array(a.length),
    dz = new Float32Array(a.length);
  b.maxPoolBackward(dy, argmax, da, q);
  b.activationBackward(kind, kind === 'gelu' ? z : a, da, dz, cap);
  let d = dz;
  for (let i = convs.length - 1; i >= 0; i--) {
    const g = { ...convs[i]!.geometry, N };
    b.conv2dBackwardFilter(acts[i]!, d, view(2 * i), view(2 * i + 1), g);
    if (i > 0) {
      const dx = new Float32Array(acts[i]!.length);
      b.conv2dBackwardData(d, param(2 * i), dx, g);
      d = dx;
    }
  }
  return { y, grads };
}

function model(b: Backend, layers: Layer[]): Sequential {
  const m = new Sequential(b, layers, layers[0]!.inputShape);
  m.initialize(7);
  return m;
}

const KINDS: [ActivationKind, number | undefined][] = [
  ['relu', undefined],
  ['clippedRelu', 0.3],
  ['tanh', undefined],
  ['sigmoid', undefined],
  ['leakyRelu', 0.1],
  ['gelu', undefined],
];

test("a max pool that takes over its input's activation backward leaves output and gradients bit for bit (js backend)", () => {
  for (const [kind, cap] of KINDS) {
    for (const [KH, S] of [
      [2, 2],
      [3, 2],
    ] as const) {
      // the activation in the second convolution (its input gradient is needed), or as a layer of its own
      const inConv = model(B, [
        new Conv2D(B, 'c0', [9, 8, 2], 3, [3, 3], [1, 1], 'same', 'linear', true),
        new Conv2D(B, 'c1', [9, 8, 3], 4, [2, 2], [1, 1], 'valid', kind, true),
        new Pool2D(B, 'pool', [8, 7, 4], 'max', [KH, KH], [S, S], 'valid'),
      ]);
      const asLayer = model(B, [
        new Conv2D(B, 'c0', [9, 8, 2], 4, [3, 3], [1, 1], 'valid', 'linear', true),
        new ActivationLayer(B, 'act', [7, 6, 4], kind, cap),
        new Pool2D(B, 'pool', [7, 6, 4], 'max', [KH, KH], [S, S], 'valid'),
      ]);
      for (const [name, m] of [
        ['conv activation', inConv],
        ['activation layer', asLayer],
      ] as const) {
        if (name === 'conv activation' && cap !== undefined) continue; // a conv's activation takes the default parameter
        const x = randomArray(N * 9 * 8 * 2, 3),
          out = m.layers[m.layers.length - 1]!.outputShape;
        const dy = randomArray(N * out.reduce((a, c) => a * c, 1), 4);
        const got = run(m, x, dy),
          want = byKernels(B, m, x, dy, kind, cap);
        const what = `${name} ${kind} pool ${KH}/${S}`;
        assert.deepEqual([...got.y], [...want.y], `${what}: output`);
        assert.deepEqual([...got.grads], [...want.grads], `${what}: gradients`);
      }
    }
  }
});

const onednn = await createOneDnnBackend();

// the addon's fused kernels are AVX-512 (native/onednn/direct.h); elsewhere the pair declines and runs apart
const fusedSkip = !onednn
  ? 'onednn backend unavailable'
  : !onednn.onednn.isa.startsWith('avx512')
    ? `no AVX-512 here (oneDNN dispatches ${onednn.onednn.isa}): the fused kernels decline`
    : false;

test("onednn: a conv2d → 2×2 max pool pair runs as one fused step, first layer or not, with the layers' results", {
  skip: fusedSkip,
}, () => {
  const b = onednn!;
  for (const first of [true, false]) {
    const layers = (be: Backend): Layer[] => [
      ...(first ? [] : [new Conv2D(be, 'c0', [10, 9, 2], 2, [1, 1], [1, 1], 'valid', 'linear', true)]),
      new Conv2D(be, 'c1', [10, 9, 2], 20, [3, 3], [1, 1], 'valid', 'relu', true),
      new Pool2D(be, 'pool', [8, 7, 20], 'max', [2, 2], [2, 2], 'valid'),
    ];
    const fused = model(b, layers(b)),
      apart = model(B, layers(B));
    apart.params.set(fused.params);
    const x = randomArray(N * 10 * 9 * 2, 5),
      dy = randomArray(N * 4 * 3 * 20, 6);
    const before = b.stats();
    const got = run(fused, x, dy),
      want = run(apart, x, dy);
    const after = b.stats();
    // every convolution here has few input channels: the addon's own kernels (c0's too, when there)
    const convs = first ? 1 : 2;
    assert.equal(after.convForward.direct - before.convForward.direct, convs, "the pair's forward ran fused");
    assert.equal(
      after.convBackwardWeights.direct - before.convBackwardWeights.direct,
      convs,
      "filter gradients by the addon's kernels",
    );
    assert.equal(after.maxPoolForward.plans - before.maxPoolForward.plans, 0, 'no separate pooling');
    assertClose(got.y, want.y, { rtol: 1e-5, atol: 1e-6, what: `first ${first}: output` });
    assertClose(got.grads, want.grads, { rtol: 1e-4, atol: 1e-5, what: `first ${first}: gradients` });
  }
});
