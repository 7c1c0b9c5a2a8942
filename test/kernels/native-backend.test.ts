// The native backend as a whole: registration and `auto`, the kernels it takes from the wasm backend
// (against the reference), OpenBLAS on one thread also when worker threads call it at once, and the
// optional build: without OpenBLAS (or with PARATRAIN_NATIVE=0) the build script exits 0 with one
// line and the backend is simply unavailable. Tests that need the addon skip when it is not built.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { assertClose, randomArray } from '../util/close.ts';
import { referenceBackend as ref, POOL_CASES, poolSizes, describePool } from './reference.ts';
import { createNativeBackend, nativeUnavailableReason, type NativeBackend } from '../../src/kernels/native/index.ts';
import { getBackend, registeredBackends, tryBackend } from '../../src/kernels/index.ts';
import type { WasmBackend } from '../../src/kernels/wasm/index.ts';
import type { ActivationKind } from '../../src/kernels/activation.ts';

const native = await createNativeBackend();
const skip = native ? false : `native backend unavailable: ${nativeUnavailableReason()}`;
const b = native as NativeBackend & WasmBackend;
const root = fileURLToPath(new URL('../../', import.meta.url));

test('native is registered above wasm, and auto picks it exactly when it loads (and onednn does not)', async () => {
  const order = registeredBackends();
  assert.ok(
    order.indexOf('native') >= 0 && order.indexOf('native') < order.indexOf('wasm'),
    `order: ${order.join(', ')}`,
  );
  const loaded = await tryBackend('native');
  // onednn, when built, comes first (test/kernels/onednn-backend.test.ts)
  const onednn = await tryBackend('onednn');
  assert.equal((await getBackend('auto')).name, onednn ? 'onednn' : loaded ? 'native' : 'wasm');
  assert.equal(Boolean(loaded), Boolean(native));
});

test('native takes everything but gemm and conv from the wasm backend (allocation in shared wasm memory)', {
  skip,
}, () => {
  assert.equal(b.base, 'wasm');
  const a = b.alloc(10);
  assert.ok(a.buffer instanceof SharedArrayBuffer && b.owns(a));
  assert.equal(typeof b.allocInt32, 'function');
  // Methods are plain functions that can be destructured off the object, like every backend's.
  const { gemm, biasAdd } = b;
  const C = new Float32Array(1);
  gemm(false, false, 1, 1, 1, 1, Float32Array.of(2), Float32Array.of(3), 0, C);
  biasAdd(C, Float32Array.of(1), C, 1, 1);
  assert.deepEqual([...C], [7]);
});

test('native pooling, bias, activations and softmax match the reference', { skip }, () => {
  POOL_CASES.forEach((g, i) => {
    const s = poolSizes(g);
    const x = randomArray(s.x, 10 + i),
      dy = randomArray(s.y, 20 + i);
    const y = new Float32Array(s.y),
      am = b.allocInt32(s.y),
      wy = new Float32Array(s.y),
      wam = new Int32Array(s.y);
    b.maxPoolForward(x, y, am, g);
    ref.maxPoolForward(x, wy, wam, g);
    assert.deepEqual([...y], [...wy], `${describePool(g)} max y`);
    assert.deepEqual([...am], [...wam], `${describePool(g)} argmax`);
    const dx = new Float32Array(s.x).fill(NaN),
      wdx = new Float32Array(s.x);
    b.maxPoolBackward(dy, am, dx, g);
    ref.maxPoolBackward(dy, wam, wdx, g);
    assertClose(dx, wdx, { what: `${describePool(g)} max dx` });
    b.avgPoolForward(x, y, g);
    ref.avgPoolForward(x, wy, g);
    assertClose(y, wy, { what: `${describePool(g)} avg y` });
    b.avgPoolBackward(dy, dx, g);
    ref.avgPoolBackward(dy, wdx, g);
    assertClose(dx, wdx, { what: `${describePool(g)} avg dx` });
  });
  for (const [rows, cols] of [
    [1, 1],
    [7, 33],
    [65, 10],
  ] as const) {
    const x = randomArray(rows * cols, rows),
      bias = randomArray(cols, cols);
    const y = b.alloc(rows * cols),
      wy = new Float32Array(rows * cols);
    b.biasAdd(x, bias, y, rows, cols);
    ref.biasAdd(x, bias, wy, rows, cols);
    assertClose(y, wy, { what: `biasAdd ${rows}x${cols}` });
    const db = randomArray(cols, 3),
      wdb = db.slice();
    b.biasGrad(x, db, rows, cols);
    ref.biasGrad(x, wdb, rows, cols);
    assertClose(db, wdb, { what: `biasGrad ${rows}x${cols}` });
    for (const kind of ['relu', 'clippedRelu', 'tanh', 'sigmoid', 'linear'] as ActivationKind[]) {
      const ay = new Float32Array(rows * cols),
        way = new Float32Array(rows * cols);
      b.activationForward(kind, x, ay, 0.5);
      ref.activationForward(kind, x, way, 0.5);
      assertClose(ay, way, { rtol: 1e-5, atol: 1e-6, what: `${kind} forward` });
      const adx = new Float32Array(rows * cols),
        wadx = new Float32Array(rows * cols);
      b.activationBackward(kind, way, x, adx, 0.5);
      ref.activationBackward(kind, way, x, wadx, 0.5);
      assertClose(adx, wadx, { rtol: 1e-5, atol: 1e-6, what: `${kind} backward` });
    }
    const labels = Int32Array.from({ length: rows }, (_, r) => r % cols);
    const d = new Float32Array(rows * cols),
      wd = new Float32Array(rows * cols);
    const loss = b.softmaxCrossEntropy(x, labels, rows, cols, d, 0.5),
      wloss = ref.softmaxCrossEntropy(x, labels, rows, cols, wd, 0.5);
    assertClose([loss], [wloss], { rtol: 1e-5, atol: 1e-5, what: 'softmax loss' });
    assertClose(d, wd, { rtol: 1e-5, atol: 1e-6, what: 'softmax dlogits' });
  }
});

test('native gemm from two worker threads at once: correct results, OpenBLAS on one thread in each', {
  skip,
}, async () => {
  const M = 129,
    N = 65,
    K = 257,
    reps = 40;
  const A = randomArray(M * K, 1),
    B = randomArray(K * N, 2);
  const want = new Float32Array(M * N);
  ref.gemm(false, true, M, N, K, 1, A, B, 0, want);
  // Each worker computes into its own region of one SharedArrayBuffer, at a non-zero offset.
  const shared = new Float32Array(new SharedArrayBuffer((2 * M * N + 8) * 4));
  const moduleUrl = new URL('../../src/kernels/native/index.ts', import.meta.url).href;
  // tsx's --import hooks do not reach worker threads on Node 20, so the worker registers tsx itself.
  const code = `
    const { parentPort, workerData } = require('node:worker_threads');
    import('tsx/esm/api').then((m) => { m.register(); return import(${JSON.stringify(moduleUrl)}); }).then(async ({ createNativeBackend }) => {
      const b = await createNativeBackend();
      if (!b) throw new Error('no native backend in the worker');
      const { A, B, shared, offset, M, N, K, reps } = workerData;
      const a = b.alloc(A.length); a.set(A);
      const C = shared.subarray(offset, offset + M * N);
      for (let r = 0; r < reps; r++) b.gemm(false, true, M, N, K, 1, a, B, 0, C);
      parentPort.postMessage({ blas: b.blas });
    });`;
  const run = (offset: number) =>
    new Promise<{ blas: { threads: number } }>((resolve, reject) => {
      const w = new Worker(code, { eval: true, workerData: { A, B, shared, offset, M, N, K, reps } });
      w.once('message', (m) => {
        void w.terminate().then(() => resolve(m));
      });
      w.once('error', reject);
    });
  const results = await Promise.all([run(3), run(3 + M * N)]);
  for (const r of results) assert.equal(r.blas.threads, 1);
  assertClose(shared.subarray(3, 3 + M * N), want, { rtol: 1e-5, atol: 1e-4, what: 'worker 1' });
  assertClose(shared.subarray(3 + M * N, 3 + 2 * M * N), want, { rtol: 1e-5, atol: 1e-4, what: 'worker 2' });
});

test('loading the addon starts no OpenBLAS threads (pthread builds otherwise start cores − 1 idle ones)', {
  skip: skip || (existsSync('/proc/self/task') ? false : 'needs /proc'),
}, () => {
  // In a fresh process without OPENBLAS_NUM_THREADS, count this process's threads around the load.
  const addonUrl = new URL('../../src/kernels/native/addon.ts', import.meta.url).href;
  const script = `const { readdirSync } = await import('node:fs');
    const { loadNativeAddon } = await import(${JSON.stringify(addonUrl)});
    const before = readdirSync('/proc/self/task').length;
    const a = loadNativeAddon();
    const after = readdirSync('/proc/self/task').length;
    console.log(JSON.stringify({ before, after, threads: a.info().threads, env: process.env.OPENBLAS_NUM_THREADS ?? null }));`;
  const { OPENBLAS_NUM_THREADS: _, ...env } = process.env;
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: root,
    env,
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { before: number; after: number; threads: number; env: string | null };
  assert.equal(out.after, out.before, `loading the addon started ${out.after - out.before} thread(s)`);
  assert.equal(out.threads, 1);
  assert.equal(out.env, null, 'OPENBLAS_NUM_THREADS is restored after the load (children do not inherit it)');
});

test('build:native without OpenBLAS prints one line and exits 0; PARATRAIN_NATIVE=0 skips it', () => {
  for (const env of [
    { PARATRAIN_OPENBLAS_LIBDIR: '/nonexistent/openblas', PARATRAIN_OPENBLAS_INCLUDE: '/nonexistent/include' },
    { PARATRAIN_NATIVE: '0' },
  ]) {
    for (const args of [[], ['--optional']]) {
      const { PARATRAIN_NATIVE: _, ...inherited } = process.env;
      const r = spawnSync(process.execPath, ['native/build.mjs', ...args], {
        cwd: root,
        env: { ...inherited, ...env },
        encoding: 'utf8',
      });
      assert.equal(r.status, 0, `${JSON.stringify(env)} ${args}: exit ${r.status}\n${r.stdout}${r.stderr}`);
      const lines = r.stdout.trim().split('\n');
      assert.equal(lines.length, 1, r.stdout);
      assert.match(
        lines[0]!,
        env.PARATRAIN_NATIVE
          ? /build:native: skipped \(PARATRAIN_NATIVE=0\)/
          : /build:native: OpenBLAS not found .*libopenblas-dev/,
      );
      assert.equal(r.stderr, '');
    }
  }
});

test('PARATRAIN_NATIVE=0 makes the backend unavailable and auto falls back to wasm', () => {
  const moduleUrl = new URL('../../src/kernels/index.ts', import.meta.url).href;
  const script = `const k = await import(${JSON.stringify(moduleUrl)});
    const n = await k.tryBackend('native'); const a = await k.getBackend('auto');
    const { nativeUnavailableReason } = await import(${JSON.stringify(new URL('../../src/kernels/native/index.ts', import.meta.url).href)});
    console.log(JSON.stringify({ native: n === null, auto: a.name, reason: nativeUnavailableReason() }));`;
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: root,
    env: { ...process.env, PARATRAIN_NATIVE: '0', PARATRAIN_ONEDNN: '0' },
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), { native: true, auto: 'wasm', reason: 'disabled by PARATRAIN_NATIVE=0' });
});
