/**
 * Training's own flat buffers take the shm transport's in-place path: a device thread's backend
 * keeps its heap in the world's arena (runtime/device/deviceBackend.ts), so the replica's params, grads
 * and state are arena buffers, and the hybrid strategy's broadcasts and gradient allreduce on them
 * are counted as `inPlace` by the transport (none copied through scratch, none staged).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { createShmWorld, type PathCounts } from '../../src/comm/shm/index.ts';
import { tinyConfig } from '../parallel/helpers.ts';

interface Result {
  inArena: Record<string, boolean>;
  afterStart: PathCounts;
  afterStep: PathCounts;
  ownGrads: Float32Array;
  reduced: Float32Array;
  params: Float32Array;
}

async function runDevices(backendName: string, env: NodeJS.ProcessEnv = process.env): Promise<Result[]> {
  const world = createShmWorld(2);
  const config = tinyConfig({ train: { devices: 2, strategy: 'hybrid' } });
  const entry = new URL('./trainingBuffersWorker.ts', import.meta.url);
  const tsx = import.meta.resolve('tsx/esm/api');
  const code = `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(entry.href)}); })`;
  const workers = [0, 1].map(
    (rank) => new Worker(code, { eval: true, env, workerData: { init: world.rankInit(rank), config, backendName } }),
  );
  for (const [rank, w] of workers.entries()) world.watch(w, rank);
  try {
    return await Promise.all(
      workers.map(
        (w) =>
          new Promise<Result>((resolve, reject) => {
            w.once('message', resolve);
            w.once('error', reject);
          }),
      ),
    );
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

function checkReduced(results: Result[]): void {
  const [a, b] = results as [Result, Result];
  // the hybrid allreduce is a float32 mean in rank order: (g0 + g1) / 2 on both ranks, bit for bit
  for (let i = 0; i < a.ownGrads.length; i++) {
    const want = Math.fround(Math.fround(a.ownGrads[i]! + b.ownGrads[i]!) / 2);
    if (a.reduced[i] !== want || b.reduced[i] !== want)
      assert.fail(`grads[${i}]: ${a.reduced[i]} / ${b.reduced[i]}, expected ${want}`);
  }
  assert.deepEqual(a.params, b.params, 'both replicas hold the same weights after the step');
  assert.ok(
    a.ownGrads.some((v, i) => v !== b.ownGrads[i]),
    'the ranks computed different gradients (the check is not vacuous)',
  );
}

test("a device thread's replica buffers live in the arena and hybrid reduces them in place", async () => {
  const results = await runDevices('wasm');
  for (const r of results) {
    assert.deepEqual(r.inArena, { params: true, grads: true, state: true });
    // onStart: two broadcasts (params, state); the step: the gradient allreduce (and the finite-check flag rides in it)
    assert.ok(r.afterStart.inPlace >= 2, `broadcasts in place: ${JSON.stringify(r.afterStart)}`);
    assert.ok(
      r.afterStep.inPlace > r.afterStart.inPlace,
      `the gradient allreduce in place: ${JSON.stringify(r.afterStep)}`,
    );
    assert.equal(r.afterStep.copyThrough, 0, 'nothing copied through scratch');
    assert.equal(r.afterStep.staged, 0, 'nothing staged');
  }
  checkReduced(results);
});

test("PARATRAIN_SHM_HEAP=0 keeps each device's own memory: the same results through the copy-through path", async () => {
  const results = await runDevices('wasm', { ...process.env, PARATRAIN_SHM_HEAP: '0' });
  for (const r of results) {
    assert.deepEqual(r.inArena, { params: false, grads: false, state: false });
    assert.equal(r.afterStep.inPlace, 0);
    assert.ok(r.afterStep.copyThrough >= 1, `copy-through: ${JSON.stringify(r.afterStep)}`);
  }
  checkReduced(results);
});
