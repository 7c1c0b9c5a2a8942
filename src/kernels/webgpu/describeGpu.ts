/**
 * The GPU as `paratrain info` shows it: the adapter WebGPU opened, its driver, whether it is a
 * software one, the limits that size the kernels, and every adapter this process sees (the names
 * and `#index`es PARATRAIN_WEBGPU_ADAPTER takes).
 */
import { listText } from './adapterChoice.ts';
import type { AdapterDescription } from './gpuAdapter.ts';

export function describeGpu(d: AdapterDescription): string {
  const mib = (n: number) => `${Math.round(n / 2 ** 20)} MiB`;
  const count = d.adapters.length;
  return (
    `${d.name} (${d.vendor}${d.architecture ? `, ${d.architecture}` : ''}), driver: ${d.driver || 'unnamed'}` +
    (d.software ? ' — a software adapter: correct, slow, for tests' : '') +
    `; limits: storage binding ${mib(d.limits.maxStorageBufferBindingSize)}, buffer ${mib(d.limits.maxBufferSize)}, ` +
    `workgroup memory ${d.limits.maxComputeWorkgroupStorageSize} B, ${d.limits.maxComputeInvocationsPerWorkgroup} invocations per workgroup` +
    `; adapter #${d.index} of the ${count} this process sees: ${listText(d.adapters)}`
  );
}
