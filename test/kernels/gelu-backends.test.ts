// GELU (exact erf form) on the wasm and onednn backends against the js reference: lengths across
// the 4- and 16-wide vector edges, 0 and −0, large |x| either side, the lower tail, in place and
// dx = dy. Tolerance rtol 1e-5, atol 1e-6: what the backend tests allow every transcendental
// activation (tanh, sigmoid), a few float32 ulp. Backward reads the forward INPUT (the contract).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assertClose, randomArray } from '../util/close.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { createOneDnnBackend, onednnUnavailableReason } from '../../src/kernels/onednn/index.ts';
import { wasmBackend } from './wasmHelpers.ts';
import type { Backend } from '../../src/kernels/backend.ts';

const wasm = await wasmBackend();
const onednn = await createOneDnnBackend();
const LENGTHS = [1, 15, 16, 17, 1001];
const SPECIAL = [0, -0, 1e4, -1e4, 40, -40, 9, -9, -5, -3, -0.7517916, 1e-30, -1e-30, 0.5, -0.5];
const TOL = { rtol: 1e-5, atol: 1e-6 };

/** n values, mostly uniform on [−6, 6), the special ones spread through them (first and last included). */
function inputs(n: number, seed: number): Float32Array {
  const x = randomArray(n, seed).map((v) => v * 6);
  for (let k = 0; k < SPECIAL.length && k < n; k++)
    x[Math.floor((k * (n - 1)) / Math.max(1, SPECIAL.length - 1))] = SPECIAL[k]!;
  return x;
}

function checkGelu(b: Backend, name: string): void {
  let seed = 900;
  for (const n of LENGTHS) {
    const x = inputs(n, seed++),
      dy = randomArray(n, seed++);
    const want = new Float32Array(n),
      wantDx = new Float32Array(n);
    jsBackend.activationForward('gelu', x, want);
    jsBackend.activationBackward('gelu', x, dy, wantDx);
    const what = `${name} gelu n=${n}`;
    const y = new Float32Array(n);
    b.activationForward('gelu', x, y);
    assertClose(y, want, { ...TOL, what: `${what} forward` });
    const inPlace = x.slice();
    b.activationForward('gelu', inPlace, inPlace);
    assertClose(inPlace, want, { ...TOL, what: `${what} forward in place` });
    // backward from the input: reading the output instead would be far off for x < 0.7
    const dx = new Float32Array(n);
    b.activationBackward('gelu', x, dy, dx);
    assertClose(dx, wantDx, { ...TOL, what: `${what} backward` });
    const alias = dy.slice();
    b.activationBackward('gelu', x, alias, alias);
    assertClose(alias, wantDx, { ...TOL, what: `${what} backward dx = dy` });
  }
}

test('the reference gelu itself: x·Φ(x) and Φ(x) + x·φ(x) at a few points of known value', () => {
  // Φ(1) = 0.8413447460685429, Φ(−1) = 0.15865525393145707 (tables)
  const y = new Float32Array(3),
    dx = new Float32Array(3);
  jsBackend.activationForward('gelu', Float32Array.of(1, -1, 0), y);
  assertClose(y, [0.8413447460685429, -0.15865525393145707, 0], { rtol: 2e-7, atol: 0 });
  jsBackend.activationBackward('gelu', Float32Array.of(1, -1, 0), Float32Array.of(1, 1, 1), dx);
  const phi1 = Math.exp(-0.5) / Math.sqrt(2 * Math.PI);
  assertClose(dx, [0.8413447460685429 + phi1, 0.15865525393145707 - phi1, 0.5], { rtol: 2e-7, atol: 0 });
});

test('wasm gelu matches the js reference across vector edges, large |x|, 0 and the lower tail', () => {
  checkGelu(wasm, 'wasm');
});

test('onednn gelu (gelu_erf primitive) matches the js reference across vector edges, large |x|, 0 and the lower tail', {
  skip: onednn ? false : `onednn backend unavailable: ${onednnUnavailableReason()}`,
}, () => {
  const b = onednn!;
  const before = b.stats();
  checkGelu(b, 'onednn');
  const after = b.stats();
  // the primitive ran, not the base backend's fallback
  assert.equal(after.eltwiseForward.unsupported, before.eltwiseForward.unsupported);
  assert.equal(after.eltwiseBackward.unsupported, before.eltwiseBackward.unsupported);
  assert.ok(after.eltwiseForward.plans > before.eltwiseForward.plans, 'gelu forward made oneDNN plans');
  assert.ok(after.eltwiseBackward.plans > before.eltwiseBackward.plans, 'gelu backward made oneDNN plans');
});
