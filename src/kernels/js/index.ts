import type { Backend } from '../backend.ts';
import { alloc } from './alloc.ts';
import { gemm } from './gemm.ts';
import { conv2dForward, conv2dBackwardData, conv2dBackwardFilter } from './conv2d.ts';
import { maxPoolForward, maxPoolBackward, avgPoolForward, avgPoolBackward } from './pool.ts';
import { biasAdd, biasGrad, activationForward, activationBackward, axpy, scale } from './elementwise.ts';
import { softmaxCrossEntropy } from './softmaxCrossEntropy.ts';
import { softmaxBackward, softmaxForward } from './softmax.ts';
import { dropoutForward, dropoutBackward } from './dropout.ts';
import { copyRows } from './rows.ts';
import { channelCentredSquares, batchNormNormalise, batchNormGradSums, batchNormInputGrad } from './batchNorm.ts';
import { jsBatchNormChannelKernels } from './batchNormChannels.ts';
import { layerNormForward, layerNormBackward } from './layerNorm.ts';
import { attentionKernels } from './attention.ts';
import { adamStep, sgdStep } from './optimizerSteps.ts';
import { fill, zeroPadding } from './sequence.ts';
import { packB, gemmPacked, lstmCellForward, lstmCellBackward, gruCellForward, gruCellBackward } from './recurrent.ts';

/**
 * The reference backend: plain TypeScript, always available, correct first and reasonably fast
 * (cache-blocked GEMM, im2col convolutions). Every method is a plain function, so it can be
 * destructured off the object.
 */
export const jsBackend: Backend = {
  name: 'js',
  alloc,
  gemm,
  packB,
  gemmPacked,
  // Wrapped so the test-only `budget` parameter of the conv functions is not reachable here.
  conv2dForward: (x, w, bias, y, g) => conv2dForward(x, w, bias, y, g),
  conv2dBackwardData: (dy, w, dx, g) => conv2dBackwardData(dy, w, dx, g),
  conv2dBackwardFilter: (x, dy, dw, db, g) => conv2dBackwardFilter(x, dy, dw, db, g),
  maxPoolForward,
  maxPoolBackward,
  avgPoolForward,
  avgPoolBackward,
  dropoutForward,
  dropoutBackward,
  copyRows,
  biasAdd,
  biasGrad,
  channelCentredSquares,
  batchNormNormalise,
  batchNormGradSums,
  batchNormInputGrad,
  ...jsBatchNormChannelKernels,
  layerNormForward,
  layerNormBackward,
  ...attentionKernels(gemm),
  activationForward,
  activationBackward,
  softmaxCrossEntropy,
  softmaxForward,
  softmaxBackward,
  axpy,
  scale,
  lstmCellForward,
  lstmCellBackward,
  gruCellForward,
  gruCellBackward,
  fill,
  zeroPadding,
  adamStep,
  sgdStep,
};
