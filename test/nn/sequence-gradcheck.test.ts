/**
 * Finite differences for the sequence layers on every available backend, on padded batches with
 * per-sample lengths (a zero-length sample included): the padded input frames get gradient 0
 * from both the layer's backward and the finite differences, so padding is checked too.
 * Tolerances: gradCheckLayer's (central differences in float32, eps 1e-2, rtol 2e-2, atol 2e-3).
 */
import { test } from 'node:test';
import { Recurrent } from '../../src/nn/recurrent.ts';
import { Conv1D } from '../../src/nn/conv1d.ts';
import { Dense } from '../../src/nn/dense.ts';
import { LayerNorm } from '../../src/nn/layerNorm.ts';
import { Dropout } from '../../src/nn/dropout.ts';
import { ActivationLayer } from '../../src/nn/activationLayer.ts';
import { gradCheckLayer } from './gradcheck.ts';
import { availableBackends, withLengths } from './sequenceHelpers.ts';
import { randomArray } from '../util/close.ts';

const backends = await availableBackends();
const ctx = withLengths(5, 3, 0, 1);

for (const B of backends) {
  test(`lstm on ${B.name}: one direction and both (concat, sum), all frames and the final state`, () => {
    gradCheckLayer(B, new Recurrent(B, 'lstm', [5, 3], 'lstm', 4), 4, { ctx });
    gradCheckLayer(B, new Recurrent(B, 'lstm bi concat', [5, 3], 'lstm', 3, { bidirectional: 'concat' }), 4, { ctx });
    gradCheckLayer(
      B,
      new Recurrent(B, 'lstm bi sum last', [5, 2], 'lstm', 3, { bidirectional: 'sum', returnSequences: false }),
      4,
      { ctx },
    );
    gradCheckLayer(B, new Recurrent(B, 'lstm last, no lengths', [4, 3], 'lstm', 2, { returnSequences: false }), 2);
  });

  test(`gru on ${B.name}: one direction and both (concat, sum), all frames and the final state`, () => {
    gradCheckLayer(B, new Recurrent(B, 'gru', [5, 3], 'gru', 4), 4, { ctx });
    gradCheckLayer(B, new Recurrent(B, 'gru bi sum', [5, 3], 'gru', 3, { bidirectional: 'sum' }), 4, { ctx });
    gradCheckLayer(
      B,
      new Recurrent(B, 'gru bi concat last', [5, 2], 'gru', 3, { bidirectional: 'concat', returnSequences: false }),
      4,
      { ctx },
    );
  });

  test(`conv1d on ${B.name}: same and valid, strides, activations`, () => {
    gradCheckLayer(B, new Conv1D(B, 'conv1d same', [5, 3], 4, 3, 1, 'same', 'linear', true), 4, { ctx });
    gradCheckLayer(B, new Conv1D(B, 'conv1d valid s2', [5, 2], 3, 2, 2, 'valid', 'tanh', true), 4, { ctx });
    gradCheckLayer(B, new Conv1D(B, 'conv1d same s2 k4', [5, 3], 2, 4, 2, 'same', 'sigmoid', false), 4, { ctx });
    gradCheckLayer(B, new Conv1D(B, 'conv1d no lengths', [6, 2], 3, 3, 1, 'valid', 'linear', true), 2);
  });

  test(`dense per frame, layerNorm, dropout and sigmoid on sequences, on ${B.name}`, () => {
    gradCheckLayer(B, new Dense(B, 'dense per frame', [5, 3], 4, 'tanh', true), 4, { ctx });
    gradCheckLayer(B, new Dense(B, 'dense per frame linear', [5, 3], 2, 'linear', true), 4, { ctx });
    gradCheckLayer(B, new LayerNorm(B, 'layerNorm', [5, 6], 1e-5), 4, { ctx, eps: 1e-3, rtol: 3e-2 });
    gradCheckLayer(B, new LayerNorm(B, 'layerNorm flat', [7], 1e-5), 3, { eps: 1e-3, rtol: 3e-2 });
    gradCheckLayer(B, new Dropout(B, 'dropout', [5, 4], 0.4, 2, 'per-sample'), 4, { ctx });
    gradCheckLayer(B, new ActivationLayer(B, 'sigmoid', [5, 3], 'sigmoid'), 4, { ctx, input: randomArray(60, 3) });
  });
}
