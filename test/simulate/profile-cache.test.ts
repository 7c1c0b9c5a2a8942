/**
 * The simulator's per-layer timings are cached by a key that includes the build of the kernels
 * they were taken with: a rebuilt wasm module (or addon) must be timed again, not answered from
 * timings of the old kernels.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { statSync, utimesSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { profileCacheKey, type ProfileRequest } from '../../src/simulate/profile.ts';
import { wasmFileUrl } from '../../src/kernels/wasm/loader.ts';

const req = {
  model: { input: [4], layers: [{ type: 'dense', units: 3 }] },
  optimizer: { type: 'sgd', lr: 0.1 },
  backend: 'wasm',
  batches: [8],
} as unknown as ProfileRequest;

test('the profile cache key changes when the wasm kernels are rebuilt, and differs between backends', () => {
  const file = fileURLToPath(wasmFileUrl('kernels.wasm'));
  const { atime, mtime } = statSync(file);
  const before = profileCacheKey(req, 'wasm');
  assert.equal(profileCacheKey(req, 'wasm'), before, 'the same build gives the same key');
  assert.notEqual(profileCacheKey(req, 'js'), before);
  try {
    utimesSync(file, atime, new Date(mtime.getTime() + 2000));
    assert.notEqual(profileCacheKey(req, 'wasm'), before, 'a newer kernels.wasm gives another key');
  } finally {
    // back to the build's time (to the millisecond: utimes takes seconds as a double, so the key
    // may not come back bit for bit, which is why nothing is asserted after this)
    utimesSync(file, atime, mtime);
  }
});
