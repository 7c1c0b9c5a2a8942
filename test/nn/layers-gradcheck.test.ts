import { test } from 'node:test';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { Dense } from '../../src/nn/dense.ts';
import { Conv2D } from '../../src/nn/conv2d.ts';
import { Pool2D } from '../../src/nn/pool2d.ts';
import { Flatten } from '../../src/nn/flatten.ts';
import { ActivationLayer } from '../../src/nn/activationLayer.ts';
import { Dropout } from '../../src/nn/dropout.ts';
import { BatchNorm } from '../../src/nn/batchNorm.ts';
import { gradCheckLayer, TRAIN_CTX } from './gradcheck.ts';
import { randomArray } from '../util/close.ts';

const B = jsBackend;
/** Inputs kept away from activation kinks (|x| ≥ 0.15) so finite differences do not straddle them. */
const awayFromKinks = (n: number, seed: number) => randomArray(n, seed).map((v) => (v >= 0 ? 0.15 + v : v - 0.15));

test('Dense: linear, relu, tanh, sigmoid, no bias', () => {
  gradCheckLayer(B, new Dense(B, 'dense linear', [7], 5, 'linear', true), 3);
  gradCheckLayer(B, new Dense(B, 'dense tanh', [6], 4, 'tanh', true), 2);
  gradCheckLayer(B, new Dense(B, 'dense sigmoid', [5], 3, 'sigmoid', false), 4);
  gradCheckLayer(B, new Dense(B, 'dense relu', [4], 6, 'relu', true), 2, { eps: 1e-3 });
});

test('Conv2D: valid, same, strides, non-square kernels, activation', () => {
  gradCheckLayer(B, new Conv2D(B, 'conv valid', [6, 5, 2], 3, [3, 3], [1, 1], 'valid', 'linear', true), 2);
  gradCheckLayer(B, new Conv2D(B, 'conv same s2', [7, 6, 3], 4, [3, 2], [2, 2], 'same', 'tanh', true), 2);
  gradCheckLayer(B, new Conv2D(B, 'conv 1x1', [4, 4, 5], 2, [1, 1], [1, 1], 'valid', 'linear', false), 3);
  gradCheckLayer(B, new Conv2D(B, 'conv stride 3', [8, 7, 1], 2, [2, 3], [3, 2], 'same', 'sigmoid', true), 1);
});

test('MaxPool2D and AvgPool2D, valid and same, overlapping windows', () => {
  gradCheckLayer(B, new Pool2D(B, 'maxpool 2', [6, 6, 3], 'max', [2, 2], [2, 2], 'valid'), 2, { eps: 1e-3 });
  gradCheckLayer(B, new Pool2D(B, 'maxpool overlap', [5, 7, 2], 'max', [3, 3], [2, 2], 'same'), 2, { eps: 1e-3 });
  gradCheckLayer(B, new Pool2D(B, 'avgpool 2', [6, 4, 2], 'avg', [2, 2], [2, 2], 'valid'), 2);
  gradCheckLayer(B, new Pool2D(B, 'avgpool same', [5, 5, 3], 'avg', [3, 2], [2, 1], 'same'), 2);
});

test('Flatten', () => {
  gradCheckLayer(B, new Flatten(B, 'flatten', [3, 2, 4]), 2);
});

test('activations: relu, clipped relu, tanh, sigmoid', () => {
  gradCheckLayer(B, new ActivationLayer(B, 'relu', [10], 'relu'), 3, { eps: 1e-3, input: awayFromKinks(30, 4) });
  // values both under and over the cap (0.5) exercise both kinks of min(max(x,0),cap)
  gradCheckLayer(B, new ActivationLayer(B, 'clippedRelu', [12], 'clippedRelu', 0.5), 2, {
    eps: 1e-3,
    input: new Float32Array(24).map((_, i) => [-0.7, 0.2, 0.3, 0.9, 1.4, -0.2][i % 6]!),
  });
  gradCheckLayer(B, new ActivationLayer(B, 'tanh', [9], 'tanh'), 2);
  gradCheckLayer(B, new ActivationLayer(B, 'sigmoid', [9], 'sigmoid'), 2);
});

test('Dropout: training mask is fixed for a fixed context, evaluation is identity', () => {
  gradCheckLayer(B, new Dropout(B, 'dropout', [20], 0.4, 3), 3);
  gradCheckLayer(B, new Dropout(B, 'dropout eval', [20], 0.4, 3), 3, { ctx: { ...TRAIN_CTX, training: false } });
});

test('BatchNorm: training (batch statistics) and evaluation (running statistics), flat and image inputs', () => {
  gradCheckLayer(B, new BatchNorm(B, 'bn flat', [5], 0.9, 1e-5), 6, { eps: 1e-3, rtol: 3e-2 });
  gradCheckLayer(B, new BatchNorm(B, 'bn image', [3, 2, 4], 0.9, 1e-5), 3, { eps: 1e-3, rtol: 3e-2 });
  gradCheckLayer(B, new BatchNorm(B, 'bn eval', [4], 0.9, 1e-5), 3, { ctx: { ...TRAIN_CTX, training: false } });
});
