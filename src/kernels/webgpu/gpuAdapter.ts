/**
 * One GPU adapter, opened and described: its name, driver and limits, and whether it is a software
 * one (SwiftShader, lavapipe: correct but slow, so `auto` never picks it).
 */
import { type Dawn, loadDawn, noAdapterReason } from './dawn.ts';

export interface AdapterDescription {
  /** the device as the driver names it */
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
}

export interface OpenAdapter {
  dawn: Dawn;
  gpu: GPU;
  adapter: GPUAdapter;
  description: AdapterDescription;
}

const SOFTWARE = /swiftshader|llvmpipe|lavapipe|software/i;

/** Describes an adapter from what WebGPU tells of it. */
export function describeAdapter(adapter: GPUAdapter): AdapterDescription {
  const info = adapter.info;
  const limits = adapter.limits;
  const name = info.device || info.description || info.architecture || 'unknown adapter';
  return {
    name,
    vendor: info.vendor,
    architecture: info.architecture,
    driver: info.description,
    software:
      info.isFallbackAdapter || SOFTWARE.test(`${info.vendor} ${info.architecture} ${info.device} ${info.description}`),
    limits: {
      maxStorageBufferBindingSize: limits.maxStorageBufferBindingSize,
      maxBufferSize: limits.maxBufferSize,
      maxComputeWorkgroupStorageSize: limits.maxComputeWorkgroupStorageSize,
      maxComputeInvocationsPerWorkgroup: limits.maxComputeInvocationsPerWorkgroup,
      maxStorageBuffersPerShaderStage: limits.maxStorageBuffersPerShaderStage,
    },
  };
}

/**
 * Opens the high-performance adapter (`name` picks one by its driver name, Dawn's `adapter=` flag),
 * or gives one line saying why none opened and how to fix it. The `GPU` object keeps Node alive
 * while referenced: callers drop it when done (GpuContext.destroy).
 */
export async function openAdapter(name?: string): Promise<OpenAdapter | string> {
  const dawn = await loadDawn();
  if (typeof dawn === 'string') return dawn;
  // the Vulkan loader complains on stderr without a runtime dir; it needs none for compute
  process.env.XDG_RUNTIME_DIR ??= '/tmp';
  let gpu: GPU;
  try {
    gpu = dawn.create(name ? [`adapter=${name}`] : []);
  } catch (err) {
    return `no GPU adapter named '${name}': ${(err as Error).message.split('\n').join(' ')}`;
  }
  const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) return noAdapterReason();
  return { dawn, gpu, adapter, description: describeAdapter(adapter) };
}
