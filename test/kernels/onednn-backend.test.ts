// The onednn backend as a whole: registration and `auto`, the kernels it takes from the wasm backend,
// pooling (including windows wholly in the padding), bias, activations and the softmax loss against
// the reference, oneDNN on one thread per calling thread (two worker threads at once; no OpenMP pool
// even when OMP_NUM_THREADS asks for one), the optional build (without oneDNN, or with
// PARATRAIN_ONEDNN=0, the build script exits 0 with one line and the backend is unavailable, and
// `paratrain info` says why), and the FMA peak probe. Tests that need the addon skip when it is not built.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { assertClose, randomArray } from '../util/close.ts';
import { referenceBackend as ref, POOL_CASES, poolSizes, describePool, convGeometry, convSizes } from './reference.ts';
import { createOneDnnBackend, onednnUnavailableReason, type OneDnnBackend } from '../../src/kernels/onednn/index.ts';
import { getBackend, registeredBackends, tryBackend } from '../../src/kernels/index.ts';
import type { WasmBackend } from '../../src/kernels/wasm/index.ts';
import type { ActivationKind } from '../../src/kernels/activation.ts';
import type { Pool2DGeometry } from '../../src/kernels/poolKernels.ts';
import { loadAddon } from '../../src/platform/addon.ts';
import { coreScaling } from '../../bench/peak.ts';

const onednn = await createOneDnnBackend();
const skip = onednn ? false : `onednn backend unavailable: ${onednnUnavailableReason()}`;
const b = onednn as OneDnnBackend & WasmBackend;
const root = fileURLToPath(new URL('../../', import.meta.url));
const ACTIVATIONS: ActivationKind[] = ['relu', 'clippedRelu', 'tanh', 'sigmoid', 'linear'];

test('onednn is registered first, and auto picks it exactly when it loads', async () => {
  const order = registeredBackends();
  assert.equal(order[0], 'onednn', `order: ${order.join(', ')}`);
  assert.ok(order.indexOf('native') < order.indexOf('wasm'), `order: ${order.join(', ')}`);
  const loaded = await tryBackend('onednn');
  assert.equal(Boolean(loaded), Boolean(onednn));
  const auto = (await getBackend('auto')).name;
  assert.equal(auto, loaded ? 'onednn' : (await tryBackend('native')) ? 'native' : 'wasm');
});

test('onednn takes allocation and the optimizer steps from the wasm backend, and reports its ISA', { skip }, () => {
  assert.equal(b.base, 'wasm');
  assert.match(b.onednn.version, /^2\.\d+\.\d+$/);
  assert.ok(b.onednn.isa.length > 0);
  assert.equal(b.onednn.threads, 1);
  const a = b.alloc(10);
  assert.ok(a.buffer instanceof SharedArrayBuffer && b.owns(a));
  assert.equal(typeof b.allocInt32, 'function');
  // Methods are plain functions that can be destructured off the object, like every backend's.
  const { gemm, biasAdd, axpy } = b;
  const C = new Float32Array(1);
  gemm(false, false, 1, 1, 1, 1, Float32Array.of(2), Float32Array.of(3), 0, C);
  biasAdd(C, Float32Array.of(1), C, 1, 1);
  axpy(2, Float32Array.of(1), C);
  assert.deepEqual([...C], [9]);
});

/** Max and average pooling forward and backward on `g` against the reference (argmax exactly). */
function checkPool(g: Pool2DGeometry, i: number): void {
  const s = poolSizes(g);
  const x = randomArray(s.x, 10 + i),
    dy = randomArray(s.y, 20 + i);
  const y = new Float32Array(s.y).fill(NaN),
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
  y.fill(NaN);
  b.avgPoolForward(x, y, g);
  ref.avgPoolForward(x, wy, g);
  assertClose(y, wy, { what: `${describePool(g)} avg y` });
  dx.fill(NaN);
  b.avgPoolBackward(dy, dx, g);
  ref.avgPoolBackward(dy, wdx, g);
  assertClose(dx, wdx, { what: `${describePool(g)} avg dx` });
}

test("onednn pooling matches the reference (argmax exactly), every case: max forward in the addon's C, and as a oneDNN primitive", {
  skip,
}, () => {
  // mnist-small's second pool: 11×11 → 5×5, the last row and column unused (negative implied padding)
  const mnistPool2: Pool2DGeometry = {
    N: 4,
    H: 11,
    W: 11,
    C: 64,
    KH: 2,
    KW: 2,
    strideH: 2,
    strideW: 2,
    padTop: 0,
    padLeft: 0,
    OH: 5,
    OW: 5,
  };
  // channels in whole vectors of 8 (the AVX2 kernel's case) with overlapping, padded windows, some clipped to one cell
  const padded16: Pool2DGeometry = {
    N: 2,
    H: 7,
    W: 9,
    C: 16,
    KH: 3,
    KW: 3,
    strideH: 2,
    strideW: 2,
    padTop: 1,
    padLeft: 2,
    OH: 4,
    OW: 5,
  };
  for (const direct of [true, false]) {
    b.setDirect(direct);
    try {
      const before = b.stats().maxPoolForward;
      POOL_CASES.forEach(checkPool);
      checkPool(mnistPool2, 99);
      checkPool(padded16, 98);
      const after = b.stats();
      const calls = POOL_CASES.length + 2;
      assert.equal(
        after.maxPoolForward.direct - before.direct,
        direct ? calls : 0,
        `max forward in the addon's C: ${direct}`,
      );
      for (const kind of ['maxPoolForward', 'avgPoolForward', 'avgPoolBackward'] as const)
        assert.equal(after[kind].unsupported, 0, kind);
    } finally {
      b.setDirect(true);
    }
  }
});

test("onednn max pooling with NaN as the reference: strictly greater wins, so a later NaN never takes over and a first cell's stays", {
  skip,
}, () => {
  // 3 channels: the plain C loop; 8: the AVX2 kernel, where the CPU has it
  for (const C of [3, 8]) {
    const g: Pool2DGeometry = {
      N: 1,
      H: 4,
      W: 4,
      C,
      KH: 2,
      KW: 2,
      strideH: 2,
      strideW: 2,
      padTop: 0,
      padLeft: 0,
      OH: 2,
      OW: 2,
    };
    const x = randomArray(16 * C, 5);
    x[(1 * 4 + 1) * C + 2] = NaN; // window (0, 0), its last cell, channel 2
    x[(2 * 4 + 2) * C + 0] = NaN; // window (1, 1), its first cell, channel 0
    const y = new Float32Array(4 * C),
      am = b.allocInt32(4 * C),
      wy = new Float32Array(4 * C),
      wam = new Int32Array(4 * C);
    b.maxPoolForward(x, y, am, g);
    ref.maxPoolForward(x, wy, wam, g);
    assert.deepEqual([...am], [...wam], `C = ${C}`);
    assert.deepEqual([...y], [...wy], `C = ${C}`);
    assert.ok(!Number.isNaN(y[2]!) && Number.isNaN(y[3 * C]!), `C = ${C}`);
  }
});

test('onednn pooling with windows wholly in the padding gives 0 and argmax −1 there, like the reference', {
  skip,
}, () => {
  // padding of 2 before a 2×2 window: the first output row and column see only padding
  checkPool({ N: 2, H: 3, W: 4, C: 5, KH: 2, KW: 2, strideH: 1, strideW: 2, padTop: 2, padLeft: 2, OH: 4, OW: 3 }, 7);
});

test('onednn maxPoolBackward refuses an argmax past the end of dx', { skip }, () => {
  const g: Pool2DGeometry = {
    N: 1,
    H: 2,
    W: 2,
    C: 1,
    KH: 2,
    KW: 2,
    strideH: 2,
    strideW: 2,
    padTop: 0,
    padLeft: 0,
    OH: 1,
    OW: 1,
  };
  assert.throws(
    () => b.maxPoolBackward(Float32Array.of(1), Int32Array.of(4), new Float32Array(4), g),
    /argmax holds an index past the end of dx/,
  );
});

test('onednn biasGrad sums each column in double, rows in order: bit for bit a float64 loop (AVX2 strips and the tail)', {
  skip,
}, () => {
  for (const [rows, cols] of [
    [301, 2051],
    [3, 8],
    [2, 7],
  ] as const) {
    const dy = randomArray(rows * cols, cols),
      db = randomArray(cols, 5),
      want = db.slice();
    for (let c = 0; c < cols; c++) {
      let sum = 0;
      for (let r = 0; r < rows; r++) sum += dy[r * cols + c]!;
      want[c] = Math.fround(want[c]! + sum);
    }
    b.biasGrad(dy, db, rows, cols);
    assert.deepEqual(db, want, `biasGrad ${rows}x${cols}`);
  }
});

test('onednn bias, activations and softmax cross-entropy match the reference (also in place)', { skip }, () => {
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
    const inPlace = x.slice();
    b.biasAdd(inPlace, bias, inPlace, rows, cols);
    assertClose(inPlace, wy, { what: `biasAdd in place ${rows}x${cols}` });
    const db = randomArray(cols, 3),
      wdb = db.slice();
    b.biasGrad(x, db, rows, cols);
    ref.biasGrad(x, wdb, rows, cols);
    assertClose(db, wdb, { what: `biasGrad ${rows}x${cols}` });
    for (const kind of ACTIVATIONS) {
      const ay = new Float32Array(rows * cols),
        way = new Float32Array(rows * cols);
      b.activationForward(kind, x, ay, 0.5);
      ref.activationForward(kind, x, way, 0.5);
      assertClose(ay, way, { rtol: 1e-5, atol: 1e-6, what: `${kind} forward` });
      const same = x.slice();
      b.activationForward(kind, same, same, 0.5);
      assertClose(same, way, { rtol: 1e-5, atol: 1e-6, what: `${kind} forward in place` });
      const adx = new Float32Array(rows * cols),
        wadx = new Float32Array(rows * cols);
      b.activationBackward(kind, way, x, adx, 0.5);
      ref.activationBackward(kind, way, x, wadx, 0.5);
      assertClose(adx, wadx, { rtol: 1e-5, atol: 1e-6, what: `${kind} backward` });
      const dyInPlace = x.slice();
      b.activationBackward(kind, way, dyInPlace, dyInPlace, 0.5);
      assertClose(dyInPlace, wadx, { rtol: 1e-5, atol: 1e-6, what: `${kind} backward in place` });
    }
    const labels = Int32Array.from({ length: rows }, (_, r) => r % cols);
    const d = new Float32Array(rows * cols),
      wd = new Float32Array(rows * cols);
    const loss = b.softmaxCrossEntropy(x, labels, rows, cols, d, 0.5),
      wloss = ref.softmaxCrossEntropy(x, labels, rows, cols, wd, 0.5);
    assertClose([loss], [wloss], { rtol: 1e-5, atol: 1e-5, what: 'softmax loss' });
    assertClose(d, wd, { rtol: 1e-5, atol: 1e-6, what: 'softmax dlogits' });
    const logitsInPlace = x.slice();
    const loss2 = b.softmaxCrossEntropy(logitsInPlace, labels, rows, cols, logitsInPlace, 0.5);
    assertClose([loss2], [wloss], { rtol: 1e-5, atol: 1e-5, what: 'softmax loss in place' });
    assertClose(logitsInPlace, wd, { rtol: 1e-5, atol: 1e-6, what: 'softmax dlogits in place' });
  }
  // the default clippedRelu cap is 20, as in the other backends
  const big = Float32Array.of(-1, 5, 25),
    out = new Float32Array(3);
  b.activationForward('clippedRelu', big, out);
  assert.deepEqual([...out], [0, 5, 20]);
  assert.throws(
    () => b.softmaxCrossEntropy(Float32Array.of(1, 2), Int32Array.of(2), 1, 2, new Float32Array(2), 1),
    /row 0 has label 2, expected a class in 0..1/,
  );
  assert.throws(() => b.activationForward('swish' as ActivationKind, big, out), /unknown activation 'swish'/);
  const stats = b.stats();
  for (const kind of ['eltwiseForward', 'eltwiseBackward', 'biasAdd', 'logSoftmax'] as const)
    assert.equal(stats[kind].unsupported, 0, kind);
});

test('onednn from two worker threads at once: correct results, oneDNN on one thread in each', { skip }, async () => {
  const g = convGeometry(8, 13, 13, 32, 3, 3, 64, 1, 1, 'valid');
  const s = convSizes(g);
  const x = randomArray(s.x, 1),
    w = randomArray(s.w, 2);
  const want = new Float32Array(s.y);
  ref.conv2dForward(x, w, null, want, g);
  // Each worker computes into its own region of one SharedArrayBuffer, at a non-zero offset.
  const shared = new Float32Array(new SharedArrayBuffer((2 * s.y + 8) * 4));
  const moduleUrl = new URL('../../src/kernels/onednn/index.ts', import.meta.url).href;
  // tsx's --import hooks do not reach worker threads on Node 20, so the worker registers tsx itself.
  const code = `
    const { parentPort, workerData } = require('node:worker_threads');
    import('tsx/esm/api').then((m) => { m.register(); return import(${JSON.stringify(moduleUrl)}); }).then(async ({ createOneDnnBackend }) => {
      const b = await createOneDnnBackend();
      if (!b) throw new Error('no onednn backend in the worker');
      const { x, w, g, shared, offset, length } = workerData;
      const xa = b.alloc(x.length); xa.set(x);
      const y = shared.subarray(offset, offset + length);
      for (let r = 0; r < 20; r++) b.conv2dForward(xa, w, null, y, g);
      parentPort.postMessage({ info: b.onednn });
    });`;
  const run = (offset: number) =>
    new Promise<{ info: { threads: number } }>((resolve, reject) => {
      const wk = new Worker(code, { eval: true, workerData: { x, w, g, shared, offset, length: s.y } });
      wk.once('message', (m) => {
        void wk.terminate().then(() => resolve(m));
      });
      wk.once('error', reject);
    });
  const results = await Promise.all([run(3), run(3 + s.y)]);
  for (const r of results) assert.equal(r.info.threads, 1);
  const tol = { rtol: 1e-5, atol: 3e-6 * (1 + Math.sqrt(9 * 32)) };
  assertClose(shared.subarray(3, 3 + s.y), want, { ...tol, what: 'worker 1' });
  assertClose(shared.subarray(3 + s.y, 3 + 2 * s.y), want, { ...tol, what: 'worker 2' });
});

test('oneDNN starts no OpenMP threads, even when OMP_NUM_THREADS asks for 4; paratrain info names its ISA', {
  skip: skip || (existsSync('/proc/self/task') ? false : 'needs /proc'),
}, () => {
  // In a fresh process, count this process's threads from before the first kernel to after many.
  const indexUrl = new URL('../../src/kernels/onednn/index.ts', import.meta.url).href;
  const commandsUrl = new URL('../../src/cli/commands.ts', import.meta.url).href;
  const script = `const { readdirSync } = await import('node:fs');
    const { createOneDnnBackend } = await import(${JSON.stringify(indexUrl)});
    const b = await createOneDnnBackend();
    const before = readdirSync('/proc/self/task').length;
    const g = { N: 64, H: 13, W: 13, C: 32, KH: 3, KW: 3, F: 64, strideH: 1, strideW: 1, padTop: 0, padLeft: 0, OH: 11, OW: 11 };
    const x = b.alloc(64 * 13 * 13 * 32), w = b.alloc(9 * 32 * 64), y = b.alloc(64 * 11 * 11 * 64), dw = b.alloc(9 * 32 * 64);
    for (let i = 0; i < 3; i++) { b.conv2dForward(x, w, null, y, g); b.conv2dBackwardData(y, w, x, g); b.conv2dBackwardFilter(x, y, dw, null, g); b.gemm(false, false, 256, 256, 256, 1, x, x, 0, y); }
    const after = readdirSync('/proc/self/task').length;
    console.log(JSON.stringify({ before, after, threads: b.onednn.threads }));
    await (await import(${JSON.stringify(commandsUrl)})).runInfo();`;
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: root,
    env: { ...process.env, OMP_NUM_THREADS: '4' },
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  const [first, ...info] = r.stdout.split('\n');
  const out = JSON.parse(first!) as { before: number; after: number; threads: number };
  assert.equal(out.after, out.before, `the kernels started ${out.after - out.before} thread(s)`);
  assert.equal(out.threads, 1);
  const version = b.onednn.version.replace(/\./g, '\\.');
  assert.match(
    info.join('\n'),
    new RegExp(
      `^onednn +available — oneDNN ${version}, ISA ${b.onednn.isa} \\(.* 1 thread per device\\).*\\(chosen by --backend auto\\)$`,
      'm',
    ),
  );
});

test('build:onednn without oneDNN prints one line and exits 0; PARATRAIN_ONEDNN=0 skips it', () => {
  for (const [env, args] of [
    [
      { PARATRAIN_ONEDNN_LIBDIR: '/nonexistent/dnnl', PARATRAIN_ONEDNN_INCLUDE: '/nonexistent/include' },
      ['--optional'],
    ],
    [{ PARATRAIN_ONEDNN: '0' }, []],
  ] as const) {
    const { PARATRAIN_ONEDNN: _, ...inherited } = process.env;
    const r = spawnSync(process.execPath, ['native/onednn/build.mjs', ...args], {
      cwd: root,
      env: { ...inherited, ...env },
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, `${JSON.stringify(env)} ${args}: exit ${r.status}\n${r.stdout}${r.stderr}`);
    const lines = r.stdout.trim().split('\n');
    assert.equal(lines.length, 1, r.stdout);
    assert.match(
      lines[0]!,
      'PARATRAIN_ONEDNN' in env
        ? /build:onednn: skipped \(PARATRAIN_ONEDNN=0\)/
        : /build:onednn: oneDNN not found .*libdnnl-dev/,
    );
    assert.equal(r.stderr, '');
  }
});

test('PARATRAIN_ONEDNN=0 makes the backend unavailable, auto falls back, and paratrain info says why', () => {
  const env = { ...process.env, PARATRAIN_ONEDNN: '0' };
  const kernelsUrl = new URL('../../src/kernels/index.ts', import.meta.url).href;
  const commandsUrl = new URL('../../src/cli/commands.ts', import.meta.url).href;
  const script = `const k = await import(${JSON.stringify(kernelsUrl)});
    const o = await k.tryBackend('onednn'); const a = await k.getBackend('auto');
    console.log(JSON.stringify({ onednn: o === null, auto: a.name, reason: k.backendUnavailableReason('onednn') }));
    await (await import(${JSON.stringify(commandsUrl)})).runInfo();`;
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: root,
    env,
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  const [first, ...info] = r.stdout.split('\n');
  const out = JSON.parse(first!) as { onednn: boolean; auto: string; reason: string };
  assert.deepEqual(out, {
    onednn: true,
    auto: out.auto === 'native' ? 'native' : 'wasm',
    reason: 'disabled by PARATRAIN_ONEDNN=0',
  });
  assert.match(info.join('\n'), /^onednn +not available: disabled by PARATRAIN_ONEDNN=0$/m);
});

test("the addon's AVX-512 paths follow oneDNN's dispatch: under ONEDNN_MAX_CPU_ISA=AVX2 the backend runs as on an AVX2 machine", {
  skip,
}, () => {
  const indexUrl = new URL('../../src/kernels/onednn/index.ts', import.meta.url).href;
  // a one-channel convolution (the addon's own AVX-512 kernel where it may), the LSTM primitive's
  // offer, and the addon's dropout (it answers whether it ran)
  const script = `const { createOneDnnBackend, loadOneDnnAddon } = await import(${JSON.stringify(indexUrl)});
    const b = await createOneDnnBackend();
    const g = { N: 2, H: 8, W: 8, C: 1, KH: 3, KW: 3, F: 16, strideH: 1, strideW: 1, padTop: 0, padLeft: 0, OH: 6, OW: 6 };
    b.conv2dForward(b.alloc(128), b.alloc(144), null, b.alloc(2 * 36 * 16), g);
    const dropout = loadOneDnnAddon().dropoutForward(1, 2, 0, 64, 0.5, 2, new Float32Array(64), new Float32Array(64), new Float32Array(64));
    console.log(JSON.stringify({ isa: b.onednn.isa, direct: b.stats().convForward.direct, lstm: b.recurrentSequenceWorkspace('lstm', 2, 3, 4, 5), dropout }));`;
  const run = (env: Record<string, string>) => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: root,
      env: { ...process.env, ...env },
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout) as { isa: string; direct: number; lstm: number; dropout: boolean };
  };
  const capped = run({ ONEDNN_MAX_CPU_ISA: 'AVX2' });
  assert.ok(!capped.isa.includes('avx512'), `isa ${capped.isa}`);
  assert.deepEqual(
    { direct: capped.direct, lstm: capped.lstm, dropout: capped.dropout },
    { direct: 0, lstm: 0, dropout: false },
    'no AVX-512 kernel of the addon, no LSTM primitive',
  );
  if (b.onednn.isa.includes('avx512')) {
    // the same script uncapped takes them all: what the cap turned off
    const free = run({});
    assert.ok(free.direct > 0 && free.lstm > 0 && free.dropout, JSON.stringify(free));
  }
});

test('PARATRAIN_ONEDNN_RNN chooses the recurrent layers run as oneDNN primitives (paratrain info says which); a bad value is an error, not a fallback', {
  skip,
}, () => {
  const kernelsUrl = new URL('../../src/kernels/index.ts', import.meta.url).href;
  const commandsUrl = new URL('../../src/cli/commands.ts', import.meta.url).href;
  const script = `const k = await import(${JSON.stringify(kernelsUrl)});
    const a = await k.getBackend('auto'); console.log(a.name);
    await (await import(${JSON.stringify(commandsUrl)})).runInfo();`;
  const run = (value: string) =>
    spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: root,
      env: { ...process.env, PARATRAIN_ONEDNN_RNN: value },
      encoding: 'utf8',
    });
  const good = run('gru,lstm');
  assert.equal(good.status, 0, good.stderr);
  const cells = b.onednn.isa.includes('avx512') ? 'gru, lstm' : 'none \\(no AVX-512: they step\\)';
  assert.match(
    good.stdout,
    new RegExp(`^onednn +available — .*; recurrent layers as oneDNN primitives: ${cells};`, 'm'),
  );
  const bad = run('lstm,rnn');
  assert.notEqual(bad.status, 0, 'a bad value stops the run');
  assert.doesNotMatch(bad.stdout, /^(native|wasm)$/m, 'auto did not fall back to another backend');
  assert.match(
    bad.stderr,
    /PARATRAIN_ONEDNN_RNN=lstm,rnn: "rnn" is not a cell; use a comma-separated list of lstm and gru, or none/,
  );
});

const peak = loadAddon<{
  fmaPeak(bits: number, seconds: number): { bits: number; gflops: number; sustainedGflops: number; fma: boolean };
}>({
  file: 'paratrain_peak.node',
  sourceDir: 'native/onednn/peak',
  disableEnv: 'PARATRAIN_PEAK',
  requiredExports: ['fmaPeak'],
  buildCommand: 'npm run build:peak',
  notBuiltReason: 'not built',
});

test('the FMA peak probe measures the widest vectors and 128-bit ones', {
  skip: peak ? false : 'the FMA peak probe is not built (npm run build:peak)',
}, () => {
  const wide = peak!.fmaPeak(0, 0.01),
    narrow = peak!.fmaPeak(128, 0.01);
  assert.ok([128, 256, 512].includes(wide.bits), `bits ${wide.bits}`);
  assert.equal(narrow.bits, 128);
  assert.ok(wide.gflops > 0 && narrow.gflops > 0, `${wide.gflops} ${narrow.gflops}`);
  // the whole run's rate: its chunks' total over their total time, never above the fastest chunk's
  for (const r of [wide, narrow])
    assert.ok(r.sustainedGflops > 0 && r.sustainedGflops <= r.gflops * (1 + 1e-9), `${r.sustainedGflops} ${r.gflops}`);
  assert.throws(() => peak!.fmaPeak(1024, 0.01), /bits must be 0, 128, 256 or 512/);
});

test('the probe on two cores at once: both threads run together, their rates summed', {
  skip: peak ? false : 'the FMA peak probe is not built (npm run build:peak)',
}, async () => {
  const s = (await coreScaling(2, 0.1))!;
  assert.ok(s.one > 0 && s.together > 0, JSON.stringify(s));
  assert.equal(s.scaling, s.together / s.one);
  // started together and timed by the wall clock, they overlap for nearly all of the run (started
  // one after the other, they would not overlap at all)
  assert.ok(s.overlap > 0.8, `overlap ${s.overlap}`);
});
