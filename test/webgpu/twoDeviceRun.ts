/**
 * Runs for the webgpu tests of layers that communicate (model-parallel sections, synchronised
 * BatchNorm): a config trained on its devices in this thread (in-process collectives, hybrid with
 * one gradient bucket), one backend per device, and rank 0's checkpoint read back by tensor name.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import type { TestContext } from 'node:test';
import { join } from 'node:path';
import type { Backend } from '../../src/kernels/backend.ts';
import { runDevice } from '../../src/runtime/job/deviceRun.ts';
import { loadData } from '../../src/runtime/run/train.ts';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { hybridStrategy } from '../../src/parallel/strategies/hybrid.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import type { Dataset } from '../../src/data/dataset.ts';
import { localGroup } from '../parallel/localGroup.ts';
import { assertClose } from '../util/close.ts';
import { webgpuBackend } from '../../src/kernels/webgpu/index.ts';
import { gpuOrSkip } from './gpuTest.ts';

/**
 * Two webgpu backends, each with its own arrays (what crosses between host and device is per
 * backend), on the test GPU: a GPUDevice per backend would compile every shader twice, and
 * SwiftShader's compiles are most of these tests' time. Undefined where the test was skipped.
 */
export async function twoWebgpuBackends(t: TestContext): Promise<Backend[] | undefined> {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return undefined;
  return [webgpuBackend(gpu), webgpuBackend(gpu)];
}

/**
 * Rank 0's checkpoint (weights, statistics, optimizer state) after training `config` on
 * `backends.length` devices, on `train` or the config's data.
 */
export async function trainOnDevices(
  config: RunConfig,
  backends: Backend[],
  train?: Dataset,
): Promise<Map<string, Float32Array>> {
  const data = train ? { train } : await loadData(config);
  const dir = mkdtempSync(join(tmpdir(), 'paratrain-webgpu-devices-'));
  const checkpoint = join(dir, 'model.safetensors');
  try {
    await Promise.all(
      localGroup(backends.length).map((comm) =>
        runDevice({
          config,
          rank: comm.rank,
          worldSize: backends.length,
          backend: backends[comm.rank]!,
          comm,
          strategy: hybridStrategy(comm, 1 << 30),
          train: data.train,
          test: null,
          emit: () => {},
          shared: false,
          checkpointPath: comm.rank === 0 ? checkpoint : null,
        }),
      ),
    );
    return new Map([...readCheckpoint(checkpoint).tensors].map(([name, t]) => [name, t.data]));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Every tensor of `want` in `got` within |g − w| ≤ atol + rtol·|w|. */
export function assertSameTensors(
  got: Map<string, Float32Array>,
  want: Map<string, Float32Array>,
  tol: { rtol: number; atol: number },
  what: string,
): void {
  const names = [...want.keys()].sort();
  assert.deepStrictEqual([...got.keys()].sort(), names, `${what}: the same tensors`);
  for (const name of names) assertClose(got.get(name)!, want.get(name)!, { ...tol, what: `${what} ${name}` });
}
