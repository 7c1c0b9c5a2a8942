// Worker side of wasm-memory.test.ts: builds its own wasm backend, runs a gemm on arrays from its
// own heap, and also adds 1 to every value of a shared array the main thread allocated.
import { parentPort, workerData } from 'node:worker_threads';
import { createWasmBackend } from '../../src/kernels/wasm/index.ts';

const { shared } = workerData as { shared: Float32Array };
const b = await createWasmBackend();
if (!b) throw new Error('no wasm backend in the worker');
const A = b.alloc(4),
  B = b.alloc(4),
  C = b.alloc(4);
A.set([1, 2, 3, 4]);
B.set([1, 0, 0, 1]);
b.gemm(false, false, 2, 2, 2, 1, A, B, 0, C);
b.axpy(
  1,
  Float32Array.from({ length: shared.length }, () => 1),
  shared,
); // shared is foreign here: staged
parentPort!.postMessage({ c: [...C], relaxed: b.relaxed, isShared: C.buffer instanceof SharedArrayBuffer });
