import { registerBackend } from './registry.ts';
import { jsBackend } from './js/index.ts';
import { createWasmBackend } from './wasm/index.ts';
import { createNativeBackend, nativeUnavailableReason } from './native/index.ts';
import { createOneDnnBackend, onednnUnavailableReason } from './onednn/index.ts';
import { createWebGpuBackend, webgpuUnavailableReason } from './webgpu/index.ts';

// The plain-JS reference is always present; faster backends register with higher priority
// ('auto' takes the fastest that loads).
registerBackend('js', async () => jsBackend, 0);
registerBackend('wasm', () => createWasmBackend(), 10);
// Optional OpenBLAS addon (npm run build:native); null, hence skipped by 'auto', when not built.
// Above wasm: `npm run bench -- train` measured its training step faster.
registerBackend('native', () => createNativeBackend(), 20, nativeUnavailableReason);
// Optional oneDNN addon (npm run build:onednn): oneDNN's own JIT kernels for the CPU it finds,
// convolutions without im2col; first for `auto` when built (docs/backends.md).
registerBackend('onednn', () => createOneDnnBackend(), 30, onednnUnavailableReason);
// Optional package webgpu (Dawn): the GPU's kernels. Below js, so `auto` never takes it: it is named.
registerBackend('webgpu', () => createWebGpuBackend(), -10, webgpuUnavailableReason);

export { getBackend, tryBackend, registeredBackends, backendUnavailableReason } from './registry.ts';
export type { Backend } from './backend.ts';
export { useSharedHeap, type HeapSource } from './wasm/index.ts';
