// paratrain wasm kernels (AssemblyScript → build/kernels.wasm and build/kernels-relaxed.wasm).
//
// Memory is imported (env.memory, shared). The JS side (src/kernels/wasm/) owns allocation and
// passes byte addresses; this module has no data segments and allocates nothing, so instances never
// disturb memory they were not handed. Each instance keeps its gemm scratch address in a global.
export { gemm, gemmStrided, gemmScratchBytes, setGemmScratch, setBlocking, kSlice, packedNc, packBFull, gemmPacked } from './gemm';
export { lstmCellForward, lstmCellBackward, gruCellForward, gruCellBackward } from './recurrent';
export { conv2dForward, conv2dBackwardData, conv2dBackwardFilter, setConvChunkBytes } from './conv';
export { maxPoolForward, maxPoolBackward, avgPoolForward, avgPoolBackward } from './pool';
export { channelCentredSquares, batchNormNormalise, batchNormGradSums, batchNormInputGrad } from './batchnorm';
export { dropoutForward, dropoutBackward } from './dropout';
export { copyRows } from './rows';
export {
  biasAdd, biasGrad, activationForward, activationBackward, softmaxCrossEntropy,
  axpy, scale, adamStep, sgdStep, zeroF32,
} from './elementwise';

/** First byte after this module's static data: the JS heap starts at or above it. */
export function heapBase(): usize {
  return __heap_base;
}

/** 1 when compiled with relaxed SIMD (fused multiply-add), else 0. */
export function isRelaxed(): i32 {
  return ASC_FEATURE_RELAXED_SIMD ? 1 : 0;
}
