import { test } from 'node:test';
import assert from 'node:assert/strict';
import { philox4x32, CounterRng } from '../../src/tensor/rng.ts';

test('Philox4x32-10 matches the Random123 known-answer vectors', () => {
  const out = new Uint32Array(4);
  philox4x32(0, 0, 0, 0, 0, 0, out);
  assert.deepEqual([...out], [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]);
  philox4x32(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, out);
  assert.deepEqual([...out], [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]);
  philox4x32(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, out);
  assert.deepEqual([...out], [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]);
});

test('CounterRng: random access equals sequential draws; keys separate streams', () => {
  const a = new CounterRng(1, 2, 3),
    b = new CounterRng(1, 2, 3),
    c = new CounterRng(1, 2, 4);
  const seq = Array.from({ length: 10 }, () => a.next());
  assert.deepEqual(
    seq,
    Array.from({ length: 10 }, (_, i) => b.at(i)),
  );
  assert.notDeepEqual(
    seq,
    Array.from({ length: 10 }, (_, i) => c.at(i)),
  );
  assert.ok(seq.every((u) => u >= 0 && u < 1));
});

test('CounterRng: uniform mean and normal moments are plausible', () => {
  const r = new CounterRng(42);
  let s = 0,
    s2 = 0;
  const n = 20000;
  for (let i = 0; i < n; i++) s += r.next();
  assert.ok(Math.abs(s / n - 0.5) < 0.01);
  s = 0;
  for (let i = 0; i < n; i++) {
    const z = r.normal();
    s += z;
    s2 += z * z;
  }
  assert.ok(Math.abs(s / n) < 0.03 && Math.abs(s2 / n - 1) < 0.05);
});

test('shuffle is a permutation and depends on the key', () => {
  const a = Int32Array.from({ length: 100 }, (_, i) => i),
    b = a.slice();
  new CounterRng(1).shuffle(a);
  new CounterRng(2).shuffle(b);
  assert.deepEqual(
    [...a].sort((x, y) => x - y),
    [...Array(100).keys()],
  );
  assert.notDeepEqual(a, b);
});
