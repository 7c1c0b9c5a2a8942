import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { referenceBackend, CONV_CASES, convSizes } from './reference.ts';
import { assertClose, randomArray } from '../util/close.ts';

test('jsBackend is named js and implements every method', () => {
  assert.equal(jsBackend.name, 'js');
  for (const key of Object.keys(referenceBackend)) {
    assert.equal(typeof (jsBackend as unknown as Record<string, unknown>)[key], 'function', key);
  }
  for (const key of ['alloc', 'axpy', 'scale', 'adamStep', 'sgdStep']) {
    assert.equal(typeof (jsBackend as unknown as Record<string, unknown>)[key], 'function', key);
  }
});

test('alloc gives zeroed arrays, SharedArrayBuffer-backed when shared', () => {
  const a = jsBackend.alloc(10);
  assert.equal(a.length, 10);
  assert.ok(a.every((v) => v === 0));
  assert.ok(!(a.buffer instanceof SharedArrayBuffer));
  const s = jsBackend.alloc(7, true);
  assert.equal(s.length, 7);
  assert.ok(s.buffer instanceof SharedArrayBuffer);
  assert.ok(s.every((v) => v === 0));
  assert.equal(jsBackend.alloc(0, true).length, 0);
  assert.throws(() => jsBackend.alloc(-1), /alloc/);
});

test('the backend object runs the conv kernels (method wrappers pass arguments through)', () => {
  const g = CONV_CASES[4];
  const s = convSizes(g);
  const x = randomArray(s.x, 1),
    w = randomArray(s.w, 2),
    b = randomArray(g.F, 3),
    dy = randomArray(s.y, 4);
  const y = jsBackend.alloc(s.y, true),
    want = new Float32Array(s.y);
  jsBackend.conv2dForward(x, w, b, y, g);
  referenceBackend.conv2dForward(x, w, b, want, g);
  assertClose(y, want, { atol: 1e-5 });
  const dx = new Float32Array(s.x),
    wdx = new Float32Array(s.x);
  jsBackend.conv2dBackwardData(dy, w, dx, g);
  referenceBackend.conv2dBackwardData(dy, w, wdx, g);
  assertClose(dx, wdx, { atol: 1e-5 });
  const dw = new Float32Array(s.w),
    db = new Float32Array(g.F),
    wdw = new Float32Array(s.w),
    wdb = new Float32Array(g.F);
  jsBackend.conv2dBackwardFilter(x, dy, dw, db, g);
  referenceBackend.conv2dBackwardFilter(x, dy, wdw, wdb, g);
  assertClose(dw, wdw, { atol: 1e-5 });
  assertClose(db, wdb, { atol: 1e-5 });
});
