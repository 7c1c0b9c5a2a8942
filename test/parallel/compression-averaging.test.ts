/**
 * Compressed model deltas for bsp, bmuf and diloco (compression/compressedDeltas.ts): at full rank
 * powerSGD is the uncompressed strategy to float32 rounding; oneBit gives every replica the same
 * bits and keeps what it left out; an estimate that overflows falls back to the plain average; and
 * a compressed average sends at least 25× fewer bytes than the plain one on large layers.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { CompressionSpec } from '../../src/parallel/compression/spec.ts';
import { AVERAGING, runAveraging } from './averagingHarness.ts';
import { counting } from './compressionBits.ts';
import { assertClose } from '../util/close.ts';

const powerSGD = (rank: number): CompressionSpec => ({
  type: 'powerSGD',
  rank,
  startStep: 0,
  warmStart: true,
  minCompressionRate: 0.01,
});

for (const [name, make] of Object.entries(AVERAGING)) {
  test(`${name}: powerSGD at full rank (both matrices compressed) equals the uncompressed strategy to 1e-5; rank 1 does not`, async () => {
    const o = { devices: 3, to: 8, finish: true };
    const plain = await runAveraging(make, null, o);
    const full = await runAveraging(make, powerSGD(12), o);
    assertClose(full.model, plain.model, { rtol: 0, atol: 1e-5, what: `${name} model` });
    assertClose(
      full.params.flatMap((p) => [...p]),
      plain.params.flatMap((p) => [...p]),
      { rtol: 0, atol: 1e-5, what: `${name} replicas` },
    );
    assert.deepEqual(full.stats, plain.stats, 'BatchNorm statistics travel plain');
    assert.ok(
      full.states[0]!.tensors['powerSGD.q']!.length === 10 * 10 + 3 * 3,
      'both matrices compressed, at their full rank (Q is 10 × 10 and 3 × 3)',
    );
    const low = await runAveraging(make, powerSGD(1), o);
    const off = Math.max(...low.model.map((v, i) => Math.abs(v - plain.model[i]!)));
    assert.ok(off > 1e-3, `rank 1 differs (${off}): the comparison can fail`);
  });

  test(`${name}: oneBit leaves every replica on the same bits and keeps a residual`, async () => {
    const r = await runAveraging(make, { type: 'oneBit' }, { devices: 3, to: 6 });
    for (const p of r.params.slice(1)) assert.deepEqual(p, r.params[0]);
    assert.ok(r.params[0]!.every(Number.isFinite));
    for (const s of r.states)
      assert.ok(
        s.tensors['oneBit.residual']!.some((v) => v !== 0),
        'a residual kept',
      );
  });
}

test('bsp: an estimate that overflows is averaged plain, as without compression, and the error feedback starts afresh', async () => {
  // device 1's weight 5 overflows in the first block: its average is the run's first
  const poke = (rank: number, step: number, params: Float32Array) => {
    if (rank === 1 && step === 1) params[5] = Infinity;
  };
  const o = { to: 3, poke };
  const plain = await runAveraging(AVERAGING.bsp!, null, o);
  const oneBit = await runAveraging(AVERAGING.bsp!, { type: 'oneBit' }, o);
  assert.equal(oneBit.params[0]![5], Infinity);
  assert.deepEqual(oneBit.params, plain.params, 'the last round is the plain one');
  for (const s of oneBit.states)
    assert.ok(
      s.tensors['oneBit.residual']!.every((v) => v === 0),
      'residual afresh',
    );
});

test('bsp and diloco: a oneBit average sends at least 25× fewer bytes than the plain one (4 matrices 512 × 512 and their biases)', async () => {
  const tensors = [0, 1, 2, 3].flatMap((k) => [
    { name: `l${k}.kernel`, shape: [512, 512], offset: k * (262144 + 512) },
    { name: `l${k}.bias`, shape: [512], offset: k * (262144 + 512) + 262144 },
  ]);
  const length = 4 * (262144 + 512);
  for (const name of ['bsp', 'diloco']) {
    for (const devices of [2, 4]) {
      // one step of period 3, then onFinish's average: all that is sent after the start
      const sent = async (spec: CompressionSpec | null) => {
        const comms: ReturnType<typeof counting>[] = [];
        await runAveraging(AVERAGING[name]!, spec, {
          devices,
          to: 1,
          finish: true,
          tensors,
          length,
          wrap: (c) => comms[comms.push(counting(c)) - 1]!,
          started: () => {
            for (const c of comms) c.sent = 0;
          },
        });
        return comms[0]!.sent;
      };
      const plain = await sent(null),
        oneBit = await sent({ type: 'oneBit' });
      assert.ok(
        plain / oneBit >= 25,
        `${name}, ${devices} devices: plain ${plain} bytes, oneBit ${oneBit} (${(plain / oneBit).toFixed(1)}×)`,
      );
    }
  }
});
