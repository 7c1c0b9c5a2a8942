/**
 * Opens a GPU for the webgpu tests: the real one if the machine has it, else SwiftShader (Debian's
 * chromium ships it). Without either the tests skip, saying why, except where
 * PARATRAIN_REQUIRE_GPU_TESTS=1 (CI sets it) makes that a failure.
 */
import { existsSync } from 'node:fs';
import type { TestContext } from 'node:test';
import { GpuContext } from '../../src/kernels/webgpu/gpuContext.ts';

const SWIFTSHADER = '/usr/lib/chromium/vk_swiftshader_icd.json';

let opened: Promise<GpuContext | string> | undefined;

export function testGpu(): Promise<GpuContext | string> {
  if (!process.env.VK_ICD_FILENAMES && !process.env.VK_DRIVER_FILES && existsSync(SWIFTSHADER))
    process.env.VK_ICD_FILENAMES = SWIFTSHADER;
  opened ??= GpuContext.open();
  return opened;
}

/** The GPU, or undefined after marking the test skipped (or failing it where GPU tests are required). */
export async function gpuOrSkip(t: TestContext): Promise<GpuContext | undefined> {
  const gpu = await testGpu();
  if (typeof gpu !== 'string') return gpu;
  if (process.env.PARATRAIN_REQUIRE_GPU_TESTS === '1') throw new Error(`webgpu tests required, but ${gpu}`);
  t.skip(gpu);
  return undefined;
}

/** Drops the device so that the test process can exit. */
export async function releaseGpu(): Promise<void> {
  const gpu = await opened;
  if (gpu && typeof gpu !== 'string') gpu.destroy();
  opened = undefined;
}
