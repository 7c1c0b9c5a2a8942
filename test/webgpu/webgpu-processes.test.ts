/**
 * A multi-process job with webgpu devices: `paratrain launch` starts 2 processes, each with one
 * webgpu device (on SwiftShader both open the one software adapter), hybrid over loopback TCP;
 * it ends where hybrid on 2 js worker threads ends. The tiny convnet of the multi-process tests
 * (conv, max pool, dense, dropout), 12 steps of SGD with momentum. Tolerance: 1e-4 of the largest
 * weight (float32 sums in another order, on another backend).
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { runCli, tmpDir } from '../cli/helpers.ts';
import { assertClose, randomPort, tinyJobConfig, trainHere, weights } from '../runtime/jobHelpers.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

test('hybrid on 2 processes × 1 webgpu device ends where hybrid on 2 js threads does', {
  timeout: 180_000,
}, async (t) => {
  // opens the software adapter here, and sets what the child processes need to find it
  if (!(await gpuOrSkip(t))) return;
  const dir = tmpDir();
  const cfg = tinyJobConfig(dir);
  const [multi] = await Promise.all([
    runCli(
      [
        'launch',
        '--nproc-per-node',
        '2',
        '--master-port',
        String(randomPort()),
        '--',
        'train',
        cfg,
        '--backend',
        'webgpu',
        '--strategy',
        'hybrid',
        '--out',
        join(dir, 'gpu'),
        '--quiet',
      ],
      { timeoutMs: 150_000 },
    ),
    trainHere(cfg, join(dir, 'js'), { devices: 2, strategy: 'hybrid' }),
  ]);
  assert.equal(multi.code, 0, multi.stderr);
  const start = JSON.parse(readFileSync(join(dir, 'gpu', 'metrics.jsonl'), 'utf8').split('\n')[0]!);
  assert.equal(start.backend, 'webgpu', 'the processes ran on webgpu');
  assertClose(
    weights(join(dir, 'gpu', 'model.safetensors')),
    weights(join(dir, 'js', 'model.safetensors')),
    '2 processes on webgpu vs 2 js threads',
  );
});
