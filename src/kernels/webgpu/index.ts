/**
 * The `webgpu` backend: every Backend kernel in WGSL on one GPUDevice per device thread. Arrays
 * from `alloc` name GPU buffers (residency.ts); kernels are recorded into the device's command
 * stream and run when the host next reads (DeviceStorage.toHost) or flushes, so a step is a few
 * submits and no per-layer round trip. Never chosen by `auto`: it is named (`--backend webgpu`).
 */
import type { Backend } from '../backend.ts';
import { GpuContext } from './gpuContext.ts';
import { Residency } from './residency.ts';
import { gemm } from './gemm.ts';
import { gemmPacked, packB } from './packedGemm.ts';
import { axpy, biasAdd, biasGrad, scale } from './elementwise.ts';
import { copyRowsRepeating } from './repeatedRows.ts';
import { activationBackward, activationForward } from './activations.ts';
import { dropoutBackward, dropoutForward } from './dropout.ts';
import { conv2dBackwardData, conv2dBackwardFilter, conv2dForward } from './convolution.ts';
import { avgPoolBackward, avgPoolForward, maxPoolBackward, maxPoolForward } from './pooling.ts';
import { batchNormGradSums, batchNormInputGrad, batchNormNormalise, channelCentredSquares } from './batchNorm.ts';
import {
  batchNormAffineInputGrad,
  batchNormMean,
  batchNormParamGrads,
  batchNormRunningStatistics,
  batchNormStatistics,
  channelSums,
} from './batchNormChannels.ts';
import { layerNormBackward, layerNormForward } from './layerNorm.ts';
import { attentionApply, attentionApplyBackward, attentionWeights, attentionWeightsBackward } from './attention.ts';
import { softmaxBackward, softmaxForward } from './softmax.ts';
import { gruCellBackward, gruCellForward, lstmCellBackward, lstmCellForward } from './recurrent.ts';
import { adamStep, sgdStep } from './optimizers.ts';
import { fill, zeroPadding } from './sequence.ts';
import { stepKernels } from './stepKernels.ts';

let unavailable: string | undefined;

/** Why the last createWebGpuBackend gave null (no package, no loader, no adapter), for `paratrain info`. */
export function webgpuUnavailableReason(): string | undefined {
  return unavailable;
}

/** What the backend adds to the contract: its GPU, and a way to let the process exit. */
export interface WebGpuBackend extends Backend {
  readonly gpu: GpuContext;
  /** Releases the GPUDevice (the backend is unusable after). */
  release(): void;
}

/** The backend on the adapter PARATRAIN_WEBGPU_ADAPTER chooses (a name, #index, or unset: the GPU of this thread's device slot, adapterChoice.ts). */
export async function createWebGpuBackend(): Promise<WebGpuBackend | null> {
  const ctx = await GpuContext.open(process.env.PARATRAIN_WEBGPU_ADAPTER || undefined);
  if (typeof ctx === 'string') {
    unavailable = ctx;
    return null;
  }
  return webgpuBackend(ctx);
}

export function webgpuBackend(ctx: GpuContext): WebGpuBackend {
  const r = new Residency(ctx, (res) => stepKernels(ctx, res));
  const i = (a: Float32Array) => r.input(a);
  const o = (a: Float32Array, kernel: string) => r.output(a, kernel);
  return {
    name: 'webgpu',
    gpu: ctx,
    device: r,
    release: () => ctx.destroy(),
    alloc: (n, shared) => r.alloc(n, shared),

    gemm: (ta, tb, M, N, K, alpha, A, B, beta, C) => gemm(ctx, ta, tb, M, N, K, alpha, i(A), i(B), beta, o(C, 'gemm')),
    packB: (tb, K, N, B, into) => packB(ctx, tb, K, N, i(B), into),
    gemmPacked: (ta, M, N, K, alpha, A, P, beta, C, aOff, cOff) =>
      gemmPacked(ctx, ta, M, N, K, alpha, i(A), P, beta, o(C, 'gemmPacked'), aOff, cOff),
    axpy: (alpha, x, y) => axpy(ctx, alpha, i(x), o(y, 'axpy')),
    scale: (alpha, x) => scale(ctx, alpha, o(x, 'scale')),

    conv2dForward: (x, w, bias, y, g) => conv2dForward(ctx, i(x), i(w), bias && i(bias), o(y, 'conv2dForward'), g),
    conv2dBackwardData: (dy, w, dx, g) => conv2dBackwardData(ctx, i(dy), i(w), o(dx, 'conv2dBackwardData'), g),
    conv2dBackwardFilter: (x, dy, dw, db, g) =>
      conv2dBackwardFilter(ctx, i(x), i(dy), o(dw, 'conv2dBackwardFilter'), db && o(db, 'conv2dBackwardFilter'), g),

    maxPoolForward: (x, y, argmax, g) => maxPoolForward(ctx, i(x), o(y, 'maxPoolForward'), r.ints(argmax, true), g),
    maxPoolBackward: (dy, argmax, dx, g) => maxPoolBackward(ctx, i(dy), r.ints(argmax), o(dx, 'maxPoolBackward'), g),
    avgPoolForward: (x, y, g) => avgPoolForward(ctx, i(x), o(y, 'avgPoolForward'), g),
    avgPoolBackward: (dy, dx, g) => avgPoolBackward(ctx, i(dy), o(dx, 'avgPoolBackward'), g),

    dropoutForward: (k0, k1, counter, n, keep, s, x, mask, y) =>
      dropoutForward(ctx, k0, k1, counter, n, keep, s, i(x), o(mask, 'dropoutForward'), o(y, 'dropoutForward')),
    dropoutBackward: (dy, mask, dx, n) => dropoutBackward(ctx, i(dy), i(mask), o(dx, 'dropoutBackward'), n),
    copyRows: (from, fs, to, ts, count, width, add) =>
      copyRowsRepeating(ctx, i(from), fs, o(to, 'copyRows'), ts, count, width, add),
    biasAdd: (x, bias, y, rows, cols) => biasAdd(ctx, i(x), i(bias), o(y, 'biasAdd'), rows, cols),
    biasGrad: (dy, db, rows, cols) => biasGrad(ctx, i(dy), o(db, 'biasGrad'), rows, cols),
    activationForward: (kind, x, y, cap) => activationForward(ctx, kind, i(x), o(y, 'activationForward'), cap),
    activationBackward: (kind, y, dy, dx, cap) =>
      activationBackward(ctx, kind, i(y), i(dy), o(dx, 'activationBackward'), cap),
    softmaxCrossEntropy() {
      // a number the host would wait for mid-step: losses run on the host from the logits (see Replica)
      throw new Error('webgpu: softmaxCrossEntropy returns its loss to the host; compute losses with a CPU backend');
    },
    softmaxForward: (x, y, rows, cols) => softmaxForward(ctx, i(x), o(y, 'softmaxForward'), rows, cols),
    softmaxBackward: (y, dy, dx, rows, cols) => softmaxBackward(ctx, i(y), i(dy), o(dx, 'softmaxBackward'), rows, cols),

    channelCentredSquares: (x, mean, out, rows, C) =>
      channelCentredSquares(ctx, i(x), i(mean), o(out, 'channelCentredSquares'), rows, C),
    batchNormNormalise: (x, mean, invStd, gamma, beta, xhat, y, rows, C) =>
      batchNormNormalise(
        ctx,
        i(x),
        i(mean),
        i(invStd),
        i(gamma),
        i(beta),
        o(xhat, 'batchNormNormalise'),
        o(y, 'batchNormNormalise'),
        rows,
        C,
      ),
    batchNormGradSums: (dy, xhat, out, rows, C) =>
      batchNormGradSums(ctx, i(dy), i(xhat), o(out, 'batchNormGradSums'), rows, C),
    batchNormInputGrad: (dy, xhat, gamma, invStd, sums, M, dx, rows, C) =>
      batchNormInputGrad(ctx, i(dy), i(xhat), i(gamma), i(invStd), i(sums), M, o(dx, 'batchNormInputGrad'), rows, C),
    channelSums: (x, out, rows, C) => channelSums(ctx, i(x), o(out, 'channelSums'), rows, C),
    batchNormMean: (sums, rows, mean, C) => batchNormMean(ctx, i(sums), rows, o(mean, 'batchNormMean'), C),
    batchNormStatistics: (squares, rows, mean, momentum, epsilon, invStd, runningMean, runningVar, C) =>
      batchNormStatistics(
        ctx,
        i(squares),
        rows,
        i(mean),
        momentum,
        epsilon,
        o(invStd, 'batchNormStatistics'),
        o(runningMean, 'batchNormStatistics'),
        o(runningVar, 'batchNormStatistics'),
        C,
      ),
    batchNormRunningStatistics: (runningMean, runningVar, epsilon, mean, invStd, C) =>
      batchNormRunningStatistics(
        ctx,
        i(runningMean),
        i(runningVar),
        epsilon,
        o(mean, 'batchNormRunningStatistics'),
        o(invStd, 'batchNormRunningStatistics'),
        C,
      ),
    batchNormParamGrads: (sums, dgamma, dbeta, C) =>
      batchNormParamGrads(ctx, i(sums), o(dgamma, 'batchNormParamGrads'), o(dbeta, 'batchNormParamGrads'), C),
    batchNormAffineInputGrad: (dy, gamma, invStd, dx, rows, C) =>
      batchNormAffineInputGrad(ctx, i(dy), i(gamma), i(invStd), o(dx, 'batchNormAffineInputGrad'), rows, C),
    layerNormForward: (x, gamma, beta, valid, rows, D, eps, xhat, invStd, y) =>
      layerNormForward(
        ctx,
        i(x),
        i(gamma),
        i(beta),
        valid,
        rows,
        D,
        eps,
        o(xhat, 'layerNormForward'),
        o(invStd, 'layerNormForward'),
        o(y, 'layerNormForward'),
      ),
    layerNormBackward: (dy, xhat, invStd, gamma, valid, rows, D, dx, dgamma, dbeta) =>
      layerNormBackward(
        ctx,
        i(dy),
        i(xhat),
        i(invStd),
        i(gamma),
        valid,
        rows,
        D,
        o(dx, 'layerNormBackward'),
        o(dgamma, 'layerNormBackward'),
        o(dbeta, 'layerNormBackward'),
      ),
    attentionWeights: (q, k, lengths, g, probs) =>
      attentionWeights(ctx, i(q), i(k), lengths, g, o(probs, 'attentionWeights')),
    attentionApply: (probs, v, g, out) => attentionApply(ctx, i(probs), i(v), g, o(out, 'attentionApply')),
    attentionApplyBackward: (probs, v, dout, g, dprobs, dv) =>
      attentionApplyBackward(
        ctx,
        i(probs),
        i(v),
        i(dout),
        g,
        o(dprobs, 'attentionApplyBackward'),
        o(dv, 'attentionApplyBackward'),
      ),
    attentionWeightsBackward: (q, k, probs, dprobs, g, dq, dk) =>
      attentionWeightsBackward(
        ctx,
        i(q),
        i(k),
        i(probs),
        o(dprobs, 'attentionWeightsBackward'),
        g,
        o(dq, 'attentionWeightsBackward'),
        o(dk, 'attentionWeightsBackward'),
      ),

    lstmCellForward: (t, N, H, gates, c, h, lengths) =>
      lstmCellForward(
        ctx,
        t,
        N,
        H,
        o(gates, 'lstmCellForward'),
        o(c, 'lstmCellForward'),
        o(h, 'lstmCellForward'),
        r.ints(lengths),
      ),
    lstmCellBackward: (t, N, H, gates, c, dh, dc, dz, lengths) =>
      lstmCellBackward(
        ctx,
        t,
        N,
        H,
        i(gates),
        i(c),
        o(dh, 'lstmCellBackward'),
        o(dc, 'lstmCellBackward'),
        o(dz, 'lstmCellBackward'),
        r.ints(lengths),
      ),
    gruCellForward: (t, N, H, gates, rec, bhh, hn, h, lengths) =>
      gruCellForward(
        ctx,
        t,
        N,
        H,
        o(gates, 'gruCellForward'),
        i(rec),
        i(bhh),
        o(hn, 'gruCellForward'),
        o(h, 'gruCellForward'),
        r.ints(lengths),
      ),
    gruCellBackward: (t, N, H, gates, hn, h, dh, dzx, dzh, lengths) =>
      gruCellBackward(
        ctx,
        t,
        N,
        H,
        i(gates),
        i(hn),
        i(h),
        o(dh, 'gruCellBackward'),
        o(dzx, 'gruCellBackward'),
        o(dzh, 'gruCellBackward'),
        r.ints(lengths),
      ),
    fill: (x, value) => fill(ctx, o(x, 'fill'), value),
    zeroPadding: (x, N, T, F, lengths) => zeroPadding(ctx, o(x, 'zeroPadding'), N, T, F, lengths),

    adamStep: (params, grads, m, v, p) =>
      adamStep(ctx, o(params, 'adamStep'), i(grads), o(m, 'adamStep'), o(v, 'adamStep'), p),
    sgdStep: (params, grads, velocity, p) =>
      sgdStep(ctx, o(params, 'sgdStep'), i(grads), velocity && o(velocity, 'sgdStep'), p),
  };
}
