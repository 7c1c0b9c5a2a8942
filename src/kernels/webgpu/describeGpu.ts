/**
 * The GPU as `paratrain info` shows it: the adapter WebGPU opens, its driver, whether it is a
 * software one, and the limits that size the kernels; or why there is none and how to fix it.
 */
import { openAdapter } from './gpuAdapter.ts';

export async function describeGpu(): Promise<string> {
  const opened = await openAdapter();
  if (typeof opened === 'string') return `gpu      none: ${opened}`;
  const d = opened.description;
  const mib = (n: number) => `${Math.round(n / 2 ** 20)} MiB`;
  const lines = [
    `gpu      ${d.name} (${d.vendor}${d.architecture ? `, ${d.architecture}` : ''}), driver: ${d.driver || 'unnamed'}` +
      (d.software ? ' — a software adapter: correct, slow, for tests; the backend does not use it unless named' : ''),
    `         limits: storage binding ${mib(d.limits.maxStorageBufferBindingSize)}, buffer ${mib(d.limits.maxBufferSize)}, ` +
      `workgroup memory ${d.limits.maxComputeWorkgroupStorageSize} B, ${d.limits.maxComputeInvocationsPerWorkgroup} invocations per workgroup, ` +
      `${d.limits.maxStorageBuffersPerShaderStage} storage buffers per shader`,
  ];
  opened.adapter = undefined as unknown as GPUAdapter;
  return lines.join('\n');
}
