/**
 * One GPU adapter, opened and described: its name, driver and limits, whether it is a software one
 * (SwiftShader, lavapipe: correct but slow), and where it sits among the adapters this process sees.
 */
import { type Dawn, loadDawn, noAdapterReason } from './dawn.ts';
import { type ListedAdapter, SOFTWARE_ADAPTER, chooseAdapter, parseAdapterChoice } from './adapterChoice.ts';
import { ADAPTER_OPTIONS, listAdapters } from './adapterList.ts';
import { deviceSlot } from './deviceSlot.ts';

export interface AdapterDescription {
  /** the device as the driver names it (what PARATRAIN_WEBGPU_ADAPTER matches) */
  name: string;
  vendor: string;
  architecture: string;
  /** the driver's own description (version) */
  driver: string;
  software: boolean;
  /** the limits a kernel plan depends on */
  limits: {
    maxStorageBufferBindingSize: number;
    maxBufferSize: number;
    maxComputeWorkgroupStorageSize: number;
    maxComputeInvocationsPerWorkgroup: number;
    maxStorageBuffersPerShaderStage: number;
  };
  /** its `#index` among the adapters this process sees, and all of them in Dawn's order */
  index: number;
  adapters: ListedAdapter[];
}

export interface OpenAdapter {
  dawn: Dawn;
  gpu: GPU;
  adapter: GPUAdapter;
  description: AdapterDescription;
}

/** Describes an adapter from what WebGPU tells of it and its place in Dawn's list. */
export function describeAdapter(adapter: GPUAdapter, index: number, adapters: ListedAdapter[]): AdapterDescription {
  const info = adapter.info;
  const limits = adapter.limits;
  // the listed name is the driver's own; WebGPU's info.device is a lower-case, hyphenated form of it
  const name = adapters[index]?.name || info.device || info.description || info.architecture || 'unknown adapter';
  return {
    name,
    vendor: info.vendor,
    architecture: info.architecture,
    driver: info.description,
    software:
      info.isFallbackAdapter ||
      SOFTWARE_ADAPTER.test(`${info.vendor} ${info.architecture} ${info.device} ${info.description}`),
    limits: {
      maxStorageBufferBindingSize: limits.maxStorageBufferBindingSize,
      maxBufferSize: limits.maxBufferSize,
      maxComputeWorkgroupStorageSize: limits.maxComputeWorkgroupStorageSize,
      maxComputeInvocationsPerWorkgroup: limits.maxComputeInvocationsPerWorkgroup,
      maxStorageBuffersPerShaderStage: limits.maxStorageBuffersPerShaderStage,
    },
    index,
    adapters,
  };
}

/**
 * Opens the adapter that `setting` (PARATRAIN_WEBGPU_ADAPTER: a part of a name, `#index`, or unset)
 * chooses for a device in `slot` of its host (adapterChoice.ts), or gives one line saying why no
 * adapter opened and how to fix it. A setting that cannot be met throws a BackendSettingError. The
 * `GPU` object keeps Node alive while referenced: callers drop it when done (GpuContext.destroy).
 */
export async function openAdapter(setting?: string, slot: number = deviceSlot()): Promise<OpenAdapter | string> {
  const choice = parseAdapterChoice(setting);
  const dawn = await loadDawn();
  if (typeof dawn === 'string') return dawn;
  // the Vulkan loader complains on stderr without a runtime dir; it needs none for compute
  process.env.XDG_RUNTIME_DIR ??= '/tmp';
  const adapters = await listAdapters(dawn);
  if (typeof adapters === 'string') return adapters;
  if (adapters.length === 0) return noAdapterReason();
  const chosen = chooseAdapter(choice, adapters, slot);
  const gpu = dawn.create([`adapter=${chosen.name}`]);
  let adapter: GPUAdapter | null;
  try {
    adapter = await gpu.requestAdapter(ADAPTER_OPTIONS);
  } catch (err) {
    // the list changed between listing and opening (a GPU gone, a driver reset)
    const why = (err instanceof Error ? err.message : String(err)).split('\n').join(' ');
    return `webgpu: adapter #${chosen.index} '${chosen.name}' did not open: ${why}`;
  }
  if (!adapter) return noAdapterReason();
  return { dawn, gpu, adapter, description: describeAdapter(adapter, chosen.index, adapters) };
}
