/**
 * The webgpu column of the CPU benchmarks (kernels, train, lstm): the backend on the GPU WebGPU
 * opens (`PARATRAIN_WEBGPU_ADAPTER` picks one by name), with its adapter printed, or one line saying
 * why there is none and the column left out. Its kernels are recorded and run when the host next
 * reads, so a webgpu figure ends its timed region with a read (`finished`) and counts wall time:
 * the GPU's finished work, not this process's CPU time nor the recording alone.
 */
import type { Backend } from '../src/kernels/backend.ts';
import { describeGpu } from '../src/kernels/webgpu/describeGpu.ts';
import { createWebGpuBackend, type WebGpuBackend, webgpuUnavailableReason } from '../src/kernels/webgpu/index.ts';

/** The webgpu backend, its adapter printed (a software one flagged as a smoke test), or null with the reason printed. */
export async function openWebGpuColumn(): Promise<WebGpuBackend | null> {
  let gpu: WebGpuBackend | null;
  try {
    gpu = await createWebGpuBackend();
  } catch (err) {
    console.log(`webgpu: left out, the GPU did not open: ${(err as Error).message.split('\n')[0]}`);
    return null;
  }
  if (!gpu) {
    console.log(`webgpu: left out, no GPU adapter opened: ${webgpuUnavailableReason() ?? 'no reason given'}`);
    return null;
  }
  const d = gpu.gpu.description;
  console.log(`webgpu: ${describeGpu(d)}`);
  if (d.software)
    console.log(`webgpu: ${d.name} is a software adapter: its figures are a smoke test only, not a GPU's speed`);
  return gpu;
}

/**
 * Waits until the backend has run everything recorded so far: on a GPU a 4-byte read of `a` (an
 * array the backend allocated; the queue runs in order, so it waits for all earlier kernels);
 * nothing on a CPU backend, whose calls have already run.
 */
export async function finished(b: Backend, a: Float32Array): Promise<void> {
  await b.device?.toHost([a.subarray(0, 1)]);
}

/** Wall seconds per call of `calls` calls of `fn` back to back, ended by the read that runs them (`finished`). */
export async function wallSecondsPerCall(b: Backend, fn: () => void, out: Float32Array, calls = 1): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < calls; i++) fn();
  await finished(b, out);
  return (performance.now() - t0) / 1000 / calls;
}

/** A rate with one decimal, or two significant digits below 1 (a software adapter's GFLOPS). */
export function figure(v: number): string {
  return v >= 1 ? v.toFixed(1) : v.toPrecision(2);
}
