/**
 * Dawn's Node bindings (the optional npm package `webgpu`), loaded on first use so that a machine
 * without them, or without a Vulkan loader, still installs and trains on the CPU backends.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';

/** What the package exports: `create` makes a `GPU` (navigator.gpu); `globals` holds the enums. */
export interface Dawn {
  create(flags: string[]): GPU;
  globals: { GPUBufferUsage: GPUBufferUsage; GPUMapMode: GPUMapMode; GPUShaderStage: GPUShaderStage };
}

let loaded: Promise<Dawn | string> | undefined;

/** The bindings, or one line saying why they cannot load and what fixes it. */
export function loadDawn(): Promise<Dawn | string> {
  // a name in a variable: the package is optional, so the typecheck must not require it
  const pkg = 'webgpu';
  loaded ??= import(pkg).then(
    (m) => m as unknown as Dawn,
    (err: unknown) =>
      `the npm package 'webgpu' (Dawn) is not installed or does not load here (${(err as Error).message.split('\n')[0]}): run npm install webgpu`,
  );
  return loaded;
}

/** Where the Vulkan loader is looked for (Dawn opens libvulkan.so.1 itself). */
const LOADER_DIRS = ['/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib64', '/usr/lib', '/lib64'];

/** Why no adapter was found, with the fix: the loader is missing, or no driver answered. */
export function noAdapterReason(): string {
  if (process.platform === 'linux') {
    const dirs = [...(process.env.LD_LIBRARY_PATH ?? '').split(':').filter(Boolean), ...LOADER_DIRS];
    if (!dirs.some((d) => existsSync(`${d}/libvulkan.so.1`)))
      return 'no Vulkan loader (libvulkan.so.1): install it (Debian and Ubuntu: apt-get install libvulkan1)';
  }
  return (
    "no GPU adapter: install your GPU's driver with its Vulkan support (NVIDIA: the driver's ICD file, " +
    'pointed at by VK_DRIVER_FILES if it is not found); a software adapter for tests is SwiftShader: ' +
    'VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json (Debian package chromium)'
  );
}

/** The resolved path of the package, for `paratrain info` (undefined when absent). */
export function dawnPackagePath(): string | undefined {
  try {
    return createRequire(import.meta.url).resolve('webgpu');
  } catch {
    return undefined;
  }
}
