/**
 * A sequence model built from a config (input [null, 6]: variable frames) on padded batches:
 * - padding invariance: the same samples padded to 7 and to 11 frames, with garbage in the padding
 *   of the input and of the output gradient, give the same outputs on the valid frames (0 on the
 *   padded ones) and the same parameter gradients (rtol 1e-5, atol 1e-6: gemms over more zero rows
 *   may sum in another order), on every backend;
 * - js vs wasm (and native): the same outputs and gradients (rtol 1e-4, atol 1e-5);
 * - lengths through time-shortening layers (Sequential.outputLengths), per-sample dropout masks
 *   independent of the batch split, and shape errors naming the layer.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Tensor } from '../../src/tensor/tensor.ts';
import { VARIABLE } from '../../src/tensor/shape.ts';
import { parseConfig, configToYaml, parseYaml } from '../../src/config/index.ts';
import { buildModel, type Sequential } from '../../src/nn/model.ts';
import { Dropout } from '../../src/nn/dropout.ts';
import type { Backend } from '../../src/kernels/backend.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { assertClose, randomArray } from '../util/close.ts';
import { TRAIN_CTX } from './gradcheck.ts';
import { availableBackends } from './sequenceHelpers.ts';

const F = 6;
const LENGTHS = [7, 4, 1, 5];
const config = parseConfig(
  {
    model: {
      input: [null, F],
      layers: [
        { conv1d: { filters: 8, kernelSize: 3, padding: 'same', activation: 'clippedRelu' } },
        { dense: { units: 8, activation: 'tanh' } },
        { layerNorm: {} },
        { dropout: { rate: 0.3, masks: 'per-sample' } },
        { conv1d: { filters: 7, kernelSize: 2, strides: 2, padding: 'valid' } },
        { lstm: { units: 5, bidirectional: 'concat' } },
        'sigmoid',
        { gru: { units: 4, bidirectional: 'sum' } },
        { dense: { units: 3 } },
      ],
    },
  },
  'test',
);

function model(B: Backend): Sequential {
  const m = buildModel(B, config.model);
  m.initialize(3);
  // non-zero biases and norms everywhere
  m.params.set(randomArray(m.params.length, 5).map((v, i) => m.params[i]! + 0.2 * v));
  return m;
}

/** The batch's samples (valid frames from one source) padded to T frames with garbage. */
function batch(T: number): Float32Array {
  const x = randomArray(LENGTHS.length * T * F, 1000 + T).map((v) => 7 * v);
  const valid = randomArray(LENGTHS.length * 11 * F, 42);
  for (const [n, len] of LENGTHS.entries()) x.set(valid.subarray(n * 11 * F, (n * 11 + len) * F), n * T * F);
  return x;
}

/** Forward and backward of one padded batch: the output and dy per valid output frame, the grads. */
function pass(m: Sequential, T: number) {
  const ctx = { ...TRAIN_CTX, lengths: Int32Array.from(LENGTHS) };
  const y = m.forward(new Tensor([LENGTHS.length, T, F], batch(T)), ctx);
  const outLengths = m.outputLengths(ctx.lengths);
  const [N, OT, D] = y.shape as [number, number, number];
  const want = randomArray(N * 11 * D, 77);
  const dy = randomArray(y.size, 900 + T).map((v) => 5 * v);
  const valid: number[] = [];
  for (let n = 0; n < N; n++) {
    for (let t = 0; t < OT; t++) {
      for (let d = 0; d < D; d++) {
        const v = y.data[(n * OT + t) * D + d]!;
        if (t < outLengths[n]!) {
          valid.push(v);
          dy[(n * OT + t) * D + d] = want[(n * 11 + t) * D + d]!;
        } else assert.equal(v, 0, `output frame ${t} of sample ${n} is padding but holds ${v}`);
      }
    }
  }
  m.zeroGrads();
  m.backward(new Tensor(y.shape, dy));
  return { valid, grads: m.grads.slice(), outLengths: [...outLengths], frames: OT };
}

const backends = await availableBackends();

for (const B of backends) {
  test(`padding never changes a result: 7 vs 11 frames, garbage padding, on ${B.name}`, () => {
    const m = model(B);
    const long = pass(m, 11),
      short = pass(m, 7),
      again = pass(m, 11);
    assert.deepStrictEqual(short.outLengths, [3, 2, 0, 2]);
    assert.deepStrictEqual([short.frames, long.frames], [3, 5]);
    assertClose(short.valid, long.valid, { rtol: 1e-5, atol: 1e-6, what: 'outputs on valid frames' });
    assertClose(short.grads, long.grads, { rtol: 1e-5, atol: 1e-6, what: 'parameter gradients' });
    // a smaller batch after a larger one reuses the pooled buffers: nothing stale leaks
    assertClose(again.grads, long.grads, { rtol: 0, atol: 0, what: 'repeated pass' });
  });
}

for (const B of backends) {
  test(`lstm and gru zero their output's and input gradient's padding after a pass that filled their buffers, on ${B.name}`, () => {
    for (const kind of ['lstm', 'gru'] as const) {
      for (const bidirectional of [undefined, 'concat', 'sum'] as const) {
        const build = () => {
          const m = buildModel(
            B,
            parseConfig(
              {
                model: {
                  input: [null, 3],
                  layers: [{ [kind]: { units: 4, ...(bidirectional ? { bidirectional } : {}) } }],
                },
              },
              't',
            ).model,
          );
          m.initialize(4);
          return m;
        };
        // a pass of the layer with dx: its output, dx and gradients
        const run = (m: Sequential, lengths: number[], seed: number) => {
          const y = m.forward(
            new Tensor(
              [3, 5, 3],
              randomArray(45, seed).map((v) => 9 * v),
            ),
            { ...TRAIN_CTX, lengths: Int32Array.from(lengths) },
          );
          m.zeroGrads();
          const dx = m.layers[0]!.backward(
            new Tensor(
              y.shape,
              randomArray(y.size, seed + 1).map((v) => 9 * v),
            ),
            true,
          )!;
          return { y: y.data.slice(), dx: dx.data.slice(), grads: m.grads.slice() };
        };
        const what = `${kind} ${bidirectional ?? 'one direction'}`;
        const used = build();
        run(used, [5, 5, 5], 10);
        const got = run(used, [5, 2, 0], 20),
          fresh = run(build(), [5, 2, 0], 20);
        for (const [name, a] of [
          ['output', got.y],
          ['dx', got.dx],
        ] as const) {
          const width = a.length / 15;
          for (const [n, len] of [
            [1, 2],
            [2, 0],
          ]) {
            assert.ok(
              a.subarray((n! * 5 + len!) * width, (n! + 1) * 5 * width).every((v) => v === 0),
              `${what}: sample ${n}'s padding is 0 in the ${name}`,
            );
          }
        }
        assert.deepStrictEqual(got, fresh, `${what}: the same output, dx and gradients as a fresh layer's`);
      }
    }
  });
}

test('every backend computes what js computes (outputs and gradients)', () => {
  const ref = pass(model(jsBackend), 11);
  for (const B of backends.filter((b) => b.name !== 'js')) {
    const got = pass(model(B), 11);
    assertClose(got.valid, ref.valid, { rtol: 1e-4, atol: 1e-5, what: `${B.name} outputs` });
    assertClose(got.grads, ref.grads, { rtol: 1e-4, atol: 1e-5, what: `${B.name} gradients` });
  }
});

test('per-sample dropout masks on sequences do not depend on the batch split nor the padding', () => {
  const d = new Dropout(jsBackend, 'dropout', [VARIABLE, 3], 0.5, 4, 'per-sample');
  const ctx = { ...TRAIN_CTX, sampleOffset: 20, lengths: Int32Array.from([4, 2, 3, 4]) };
  const whole = d.forward(new Tensor([4, 4, 3], new Float32Array(48).fill(1)), ctx).data.slice();
  const halves = [0, 2].flatMap((first) => [
    ...d.forward(new Tensor([2, 4, 3], new Float32Array(24).fill(1)), {
      ...ctx,
      sampleOffset: 20 + first,
      lengths: ctx.lengths.subarray(first, first + 2),
    }).data,
  ]);
  assert.deepStrictEqual(halves, [...whole]);
  const padded = d.forward(new Tensor([4, 6, 3], new Float32Array(72).fill(1)), ctx).data;
  for (let n = 0; n < 4; n++) {
    assert.deepStrictEqual([...padded.subarray(n * 18, n * 18 + 12)], [...whole.subarray(n * 12, (n + 1) * 12)]);
    assert.ok(padded.subarray(n * 18 + 12, (n + 1) * 18).every((v) => v === 0));
  }
  assert.ok(whole.some((v) => v === 0) && whole.some((v) => v === 2));
});

test('config: variable frames round-trip through YAML; shape errors name the layer', () => {
  assert.deepStrictEqual(config.model.input, [VARIABLE, F]);
  assert.match(configToYaml(config), /input: \[ null, 6 \]/);
  assert.deepStrictEqual(parseConfig(parseYaml(configToYaml(config), 'saved'), 'saved').model, config.model);
  const build = (input: (number | null)[], layers: unknown[]) =>
    buildModel(jsBackend, parseConfig({ model: { input, layers } }, 't').model);
  assert.throws(
    () => build([28, 28, 1], [{ lstm: { units: 4 } }]),
    /model\.layers\[0\] lstm: expects a sequence \[frames, features\] but receives \[28, 28, 1\]/,
  );
  assert.throws(
    () => build([null, 4], [{ lstm: { units: 4, returnSequences: false } }, { lstm: { units: 2 } }]),
    /model\.layers\[1\] lstm: expects a sequence/,
  );
  assert.throws(
    () => build([null, 4], ['flatten']),
    /model\.layers\[0\] flatten: cannot flatten a variable-length input \[null, 4\]/,
  );
  assert.throws(() => build([null, 4], ['batchNorm']), /model\.layers\[0\] batchNorm: .*use layerNorm/);
  assert.throws(
    () => build([3, 4], [{ conv1d: { filters: 2, kernelSize: 5 } }]),
    /model\.layers\[0\] conv1d: output shape \[0, 2\] is empty/,
  );
  assert.throws(
    () => parseConfig({ model: { input: [4, null], layers: ['relu'] } }, 't'),
    /model\.input: expected .*frames null when variable/,
  );
  assert.throws(
    () => parseConfig({ model: { input: [null, 4], layers: [{ gru: { units: 2, forgetBias: 1 } }] } }, 't'),
    /unknown option 'forgetBias'/,
  );
  const m = build(
    [null, 4],
    [{ lstm: { units: 3, returnSequences: false, bidirectional: 'concat' } }, { dense: { units: 2 } }],
  );
  assert.deepStrictEqual(m.outputShape, [2]);
  assert.throws(
    () => m.forward(new Tensor([2, 3, 4]), { ...TRAIN_CTX, lengths: Int32Array.from([3, 4]) }),
    /model input: sample 1 has length 4 but the batch holds 3 frames/,
  );
  assert.throws(
    () => m.forward(new Tensor([2, 3, 5]), TRAIN_CTX),
    /model input: expected shape \[2, null, 4\], got \[2, 3, 5\]/,
  );
});

test('initialisation: PyTorch-style uniform weights, zero biases, forgetBias on the forget gate of bias_ih only', () => {
  const m = buildModel(
    jsBackend,
    parseConfig(
      {
        model: {
          input: [null, 3],
          layers: [{ lstm: { units: 4, bidirectional: 'sum', forgetBias: 2.5 } }, { gru: { units: 4 } }],
        },
      },
      't',
    ).model,
  );
  m.initialize(9);
  const get = (name: string) => {
    const e = m.paramEntries.find((p) => p.name === name)!;
    return m.params.subarray(e.offset, e.offset + e.size);
  };
  for (const sfx of ['_l0', '_l0_reverse']) {
    assert.deepStrictEqual(
      [...get(`layers.0.bias_ih${sfx}`)],
      [0, 0, 0, 0, 2.5, 2.5, 2.5, 2.5, 0, 0, 0, 0, 0, 0, 0, 0],
    );
    assert.ok(get(`layers.0.bias_hh${sfx}`).every((v) => v === 0));
    const w = get(`layers.0.weight_hh${sfx}`);
    assert.ok(w.every((v) => Math.abs(v) <= 0.5) && w.some((v) => Math.abs(v) > 0.25), 'U(-1/sqrt(4), 1/sqrt(4))');
  }
  assert.ok(get('layers.1.bias_ih_l0').every((v) => v === 0));
  assert.deepStrictEqual(
    m.paramEntries.filter((e) => e.name.startsWith('layers.1.')).map((e) => [e.name, e.shape]),
    [
      ['layers.1.weight_ih_l0', [12, 4]],
      ['layers.1.weight_hh_l0', [12, 4]],
      ['layers.1.bias_ih_l0', [12]],
      ['layers.1.bias_hh_l0', [12]],
    ],
  );
});
