/**
 * The kernel backend contract. Every layer computes through one of these; backends differ only
 * in speed. All arrays are row-major Float32Array views (possibly into a larger flat buffer);
 * images are NHWC, conv weights are [KH, KW, C, F], dense weights are [in, out].
 *
 * Conventions:
 * - Outputs named `y`/`dx` are overwritten.
 * - Parameter gradients (`dw`, `db`) are ACCUMULATED into (+=), so micro-batches and several
 *   backward passes can add up; the training loop zeroes gradients before each step.
 */
import type { AttentionKernels } from './attentionKernels.ts';
import type { BatchNormKernels } from './batchNormKernels.ts';
import type { DeviceStorage } from './deviceStorage.ts';
import type { ConvolutionKernels } from './convKernels.ts';
import type { ElementwiseKernels } from './elementwiseKernels.ts';
import type { LayerNormKernels } from './layerNormKernels.ts';
import type { MatrixKernels } from './matrixKernels.ts';
import type { OptimizerKernels } from './optimizerKernels.ts';
import type { PoolingKernels } from './poolKernels.ts';
import type { RecurrentKernels } from './recurrentKernels.ts';
import type { SequenceKernels } from './sequenceKernels.ts';

/** A backend: every kernel group, each in its own file beside this one, plus the arrays it computes on. */
export interface Backend
  extends MatrixKernels,
    ConvolutionKernels,
    PoolingKernels,
    ElementwiseKernels,
    BatchNormKernels,
    LayerNormKernels,
    AttentionKernels,
    RecurrentKernels,
    SequenceKernels,
    OptimizerKernels {
  readonly name: string;

  /** A zeroed array the backend computes on without copies; `shared` asks for SharedArrayBuffer backing. */
  alloc(length: number, shared?: boolean): Float32Array;

  /** Present where arrays live on a device (webgpu): when the host may read or write them (deviceStorage.ts). */
  readonly device?: DeviceStorage;
}
