/**
 * The webgpu row softmax (softmaxForward, softmaxBackward) against the js backend, on row counts
 * across the 64-thread workgroups, rows of 1 to 300 values, views at offsets of one buffer, and rows
 * around 1000 (exp of the raw values would overflow float32: the row maximum is subtracted first).
 * Tolerances (float32 sums and exp against js's float64):
 * - y: (16 + cols)·1.2e-7·|want| + 1e-12 (exp's few ulps, a sum of `cols` terms);
 * - dx: (16 + cols)·1.2e-7·|y|·(|dy| + Σ_k |dy_k·y_k|), the magnitudes the dot product cancels;
 * - a model with a softmax layer: its gradients on webgpu within 1e-6 + 1e-3·|g| of js's.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { gpuView } from '../../src/kernels/webgpu/gpuArray.ts';
import { softmaxBackward, softmaxForward } from '../../src/kernels/webgpu/softmax.ts';
import { webgpuBackend } from '../../src/kernels/webgpu/index.ts';
import { resolveConfig } from '../../src/config/index.ts';
import { Replica } from '../../src/runtime/device/replica.ts';
import { assertClose, random } from './compareArrays.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

const SHAPES: [rows: number, cols: number, centre: number][] = [
  [1, 1, 0],
  [70, 1, 0],
  [130, 10, 0],
  [65, 7, 1000],
  [3, 300, -1000],
  [0, 5, 0],
];

test('webgpu softmaxForward and softmaxBackward equal js on rows across workgroups, at offsets', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  for (const [rows, cols, centre] of SHAPES) {
    const n = rows * cols,
      what = `${rows}×${cols} around ${centre}`;
    const x = random(n, rows + cols, centre - 8, centre + 8),
      dy = random(n, 3 * rows + cols, -2, 2);
    const wantY = new Float32Array(n),
      wantDx = new Float32Array(n);
    jsBackend.softmaxForward(x, wantY, rows, cols);
    jsBackend.softmaxBackward(wantY, dy, wantDx, rows, cols);
    // x, y, dy, dx as views of one buffer, apart
    const flat = gpu.upload(new Float32Array([...random(3, 1), ...x, ...random(2, 2), ...dy, 0, ...wantY]));
    const gx = gpuView(flat, 3, n),
      gdy = gpuView(flat, 5 + n, n),
      gy = gpuView(flat, 6 + 2 * n, n),
      out = gpu.array(n + 4),
      gOut = gpuView(out, 4, n),
      gDx = gpu.array(n);
    softmaxForward(gpu, gx, gOut, rows, cols);
    softmaxBackward(gpu, gy, gdy, gDx, rows, cols);
    const [gotY, gotDx] = await gpu.read(gOut, gDx);
    const k = (16 + cols) * 1.2e-7;
    assertClose(gotY!, wantY, (w) => k * Math.abs(w) + 1e-12, `${what}: y`);
    const scaleOf = (i: number) => {
      const base = i - (i % cols);
      let dot = 0;
      for (let c = 0; c < cols; c++) dot += Math.abs(dy[base + c]! * wantY[base + c]!);
      return Math.abs(wantY[i]!) * (Math.abs(dy[i]!) + dot);
    };
    assertClose(gotDx!, wantDx, (_, i) => k * scaleOf(i) + 1e-30, `${what}: dx`);
    if (n > 0) assert.ok(gotY!.every(Number.isFinite), `${what}: y finite`);
  }
});

test('the webgpu backend runs the softmax layer kernels on its own arrays and refuses overlaps', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const backend = webgpuBackend(gpu);
  const rows = 5,
    cols = 4;
  const x = backend.alloc(rows * cols),
    y = backend.alloc(rows * cols);
  const values = random(rows * cols, 9, -3, 3);
  x.set(values);
  backend.device!.fromHost([x]);
  backend.softmaxForward(x, y, rows, cols);
  await backend.device!.toHost([y]);
  const want = new Float32Array(rows * cols);
  jsBackend.softmaxForward(values, want, rows, cols);
  assertClose(y, want, (w) => 20 * 1.2e-7 * Math.abs(w), 'y');
  assert.throws(() => backend.softmaxForward(x, x, rows, cols), /softmaxForward: the output overlaps an input/);
  assert.throws(() => backend.softmaxBackward(y, x, x, rows, cols), /softmaxBackward: the output overlaps an input/);
  assert.throws(() => backend.softmaxForward(x, y, rows + 1, cols), /softmaxForward: 6×4 values/);
});

test('webgpu computes the gradients of a model with a softmax layer as js does', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const config = resolveConfig({
    model: { input: [6], layers: [{ dense: { units: 16 } }, 'softmax', { dense: { units: 3 } }] },
    optimizer: { sgd: { lr: 0.5 } },
  });
  const cpu = new Replica(jsBackend, config);
  const dev = new Replica(webgpuBackend(gpu), config);
  dev.model.params.set(cpu.model.params);
  const batch = 70;
  const images = random(batch * 6, 5, -3, 3);
  const labels = Int32Array.from({ length: batch }, (_, i) => i % 3);
  for (const r of [cpu, dev]) {
    r.zeroGrads();
    await r.computeGradientsAsync(images, labels, { training: true, seed: 1, step: 0, sampleOffset: 0 }, 1 / batch);
  }
  assert.ok(
    cpu.model.grads.some((g) => g !== 0),
    'the gradients are all zero',
  );
  assertClose(dev.model.grads, cpu.model.grads, (w) => 1e-6 + 1e-3 * Math.abs(w), 'gradient');
});
