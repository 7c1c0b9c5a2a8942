/**
 * Run by adapters.test.ts in a child process (a process that opened several Dawn instances may
 * crash as it exits, in their teardown, so the test's own process opens none). `one`, with
 * SwiftShader alone: the adapter opened by default and what `#1` and a name it lacks say, as JSON.
 * With VK_ICD_FILENAMES listing SwiftShader twice (two copies of its library: two identical
 * adapters), `open`: what each setting and slot opens, as JSON; `train`: a 2-device webgpu run of
 * the dense example, its end or its error, as JSON (device 1 is in slot 1 of the host, which it
 * must set in its own thread for the run to stop on it).
 */
import { join } from 'node:path';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { GpuContext } from '../../src/kernels/webgpu/gpuContext.ts';

const mode = process.argv[2];

if (mode === 'one') {
  const ctx = await GpuContext.open(undefined, 0);
  const out: Record<string, unknown> = {
    opened: typeof ctx === 'string' ? { unavailable: ctx } : ctx.description,
  };
  if (typeof ctx !== 'string') ctx.destroy();
  for (const setting of ['#1', 'H100']) {
    try {
      await GpuContext.open(setting, 0);
      out[setting] = 'opened';
    } catch (err) {
      out[setting] = { error: (err as Error).message, type: (err as Error).constructor.name };
    }
  }
  console.log(JSON.stringify(out));
} else if (mode === 'open') {
  const opened: Record<string, unknown> = {};
  for (const [setting, slot] of [
    [undefined, 0],
    [undefined, 1],
    ['#0', 1],
    ['#1', 0],
  ] as const) {
    const key = `${setting ?? 'unset'} slot ${slot}`;
    try {
      const ctx = await GpuContext.open(setting, slot);
      if (typeof ctx === 'string') opened[key] = { unavailable: ctx };
      else {
        opened[key] = { index: ctx.description.index, adapters: ctx.description.adapters.length };
        ctx.destroy();
      }
    } catch (err) {
      opened[key] = { error: (err as Error).message };
    }
  }
  console.log(JSON.stringify(opened));
} else if (mode === 'train') {
  // the run's own modules, not the library's entry (src/index.ts): with all of that loaded, a
  // process that used Dawn now and then crashes as it exits (SIGSEGV or an abort in native teardown)
  const { loadConfig, applyOverrides } = await import('../../src/config/index.ts');
  const { train } = await import('../../src/runtime/run/train.ts');
  const dir = mkdtempSync(join(tmpdir(), 'paratrain-two-adapters-'));
  const config = loadConfig(new URL('../../examples/mlp.yaml', import.meta.url).pathname);
  config.data.trainLimit = 64;
  config.data.testLimit = 32;
  const dataDir = new URL('../../data/fashion-mnist-subset/', import.meta.url).pathname;
  const overrides = { backend: 'webgpu', devices: 2, epochs: 1, batchSize: 16, dataDir, seed: 3 } as const;
  try {
    await train(applyOverrides(config, overrides, 'fixture', 'keys'), { out: join(dir, 'run'), log: () => {} });
    console.log(JSON.stringify({ trained: true }));
  } catch (err) {
    console.log(JSON.stringify({ error: (err as Error).message }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
} else throw new Error(`twoAdaptersFixture: unknown mode ${mode}`);
