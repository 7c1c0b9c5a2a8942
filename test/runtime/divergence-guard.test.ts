/**
 * The divergence guard's decision (runtime/device/divergenceGuard.ts): a sequence of step losses →
 * whether, and at which step, it stops the run; and the message it stops it with.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DivergenceGuard, divergenceMessage, isDivergence } from '../../src/runtime/device/divergenceGuard.ts';
import type { DivergenceSpec } from '../../src/config/runConfig.ts';
import { parseConfig, parseYaml } from '../../src/config/index.ts';

const SPEC: DivergenceSpec = { factor: 100, steps: 50 };

/** A one-layer model with `extra` YAML lines after it. */
const loadConfigText = (extra: string) =>
  parseConfig(parseYaml(`model: { input: [4], layers: [dense: { units: 2 }] }\n${extra}\n`, 'f.yaml'), 'f.yaml');

/** The step (0-based) at which the guard fires on `losses`, or null. */
function firesAt(losses: readonly number[], spec: DivergenceSpec | false = SPEC): number | null {
  const guard = new DivergenceGuard(spec);
  for (let step = 0; step < losses.length; step++) if (guard.observe(losses[step]!, step)) return step;
  return null;
}

/** A healthy run: ln 10 falling towards `floor`, with ±30% noise from a fixed sequence. */
function healthy(steps: number, floor = 0.05): number[] {
  let x = 1;
  return Array.from({ length: steps }, (_, i) => {
    x = (x * 16807) % 2147483647;
    const noise = 0.7 + 0.6 * (x / 2147483647);
    return (floor + (2.3 - floor) * Math.exp(-i / 100)) * noise;
  });
}

test('a healthy run never fires: falling, noisy, over thousands of steps', () => {
  assert.equal(firesAt(healthy(3000)), null);
});

test('a loss that blows up at step 1 and stays up fires after exactly `steps` steps above the limit, from the first', () => {
  const losses = [2.3, ...Array.from({ length: 100 }, () => 1e8)];
  // the smoothed loss moves a tenth of the way in log space a step: it passes 100 × 2.3 at step 3
  assert.equal(firesAt(losses), 3 + 50 - 1);
  assert.equal(firesAt(losses, { factor: 100, steps: 5 }), 3 + 5 - 1);
});

test('oscillating between 1e3 and 1e20 (SGD at lr 1e4) fires; so do the finite losses between NaN steps', () => {
  const wild = [2.4, ...Array.from({ length: 80 }, (_, i) => (i % 3 === 0 ? 1e20 : 4e3))];
  assert.notEqual(firesAt(wild), null);
  const withNaN = [2.4, ...Array.from({ length: 120 }, (_, i) => (i % 2 ? NaN : 1e6))];
  // NaN steps are the non-finite guard's: passed over, they neither count nor break the streak;
  // the fifth finite 1e6 (step 9) is the first above the limit, the 50th from it is at step 9 + 2 × 49
  assert.equal(firesAt(withNaN), 9 + 2 * 49);
});

test('one outlying batch, however large, does not fire: the smoothing is geometric', () => {
  const losses = healthy(400);
  losses[200] = 1e12;
  assert.equal(firesAt(losses), null);
  // ten in a row do not either with the defaults (the smoothed loss falls back within 50 steps)
  for (let i = 200; i < 210; i++) losses[i] = 1e6;
  assert.equal(firesAt(losses), null);
});

test('a streak broken by one step below the limit starts again', () => {
  const up = (n: number) => Array.from({ length: n }, () => 1e9);
  const losses = [2.3, ...up(40), ...Array.from({ length: 60 }, () => 0.001), ...up(49)];
  assert.equal(firesAt(losses), null);
  assert.notEqual(firesAt([...losses, ...up(60)]), null);
});

test('a loss that fell near zero and bumps up 100-fold but stays below its first loss does not fire', () => {
  const losses = [2.3, ...Array.from({ length: 200 }, () => 1e-5), ...Array.from({ length: 200 }, () => 0.5)];
  assert.equal(firesAt(losses), null);
  // above the first loss as well: fires
  assert.notEqual(firesAt([...losses, ...Array.from({ length: 100 }, () => 50)]), null);
});

test('scale-free: a CTC-sized or MSE-sized loss behaves as cross-entropy does', () => {
  for (const scale of [1e-4, 1, 300]) {
    assert.equal(firesAt(healthy(1000).map((l) => l * scale)), null, `healthy at scale ${scale}`);
    assert.notEqual(
      firesAt([2.3, ...Array.from({ length: 60 }, () => 1e5)].map((l) => l * scale)),
      null,
      `blow-up at scale ${scale}`,
    );
  }
});

test('bound: an absolute limit fires on its own; false never fires', () => {
  const plateau = Array.from({ length: 100 }, () => 40);
  assert.equal(firesAt(plateau), null);
  assert.equal(firesAt(plateau, { factor: 100, steps: 50, bound: 30 }), 49);
  assert.equal(firesAt([2.3, ...Array.from({ length: 200 }, () => 1e30)], false), null);
});

test('the message names the device, the steps, the loss, the best so far and the fix', () => {
  const guard = new DivergenceGuard({ factor: 100, steps: 3 });
  const context = { rank: 1, epoch: 2, lr: 10000, clipGradNorm: undefined };
  guard.stopIfDiverged(2.5 * 64, 64, 0, context);
  // an empty slice is passed over
  guard.stopIfDiverged(0, 0, 1, context);
  // the smoothed loss passes 250 at step 4 (1-based 5), the third 1e8: the streak of 3 ends at step 6
  for (let step = 2; step < 6; step++) guard.stopIfDiverged(1e8 * 64, 64, step, context);
  assert.throws(
    () => guard.stopIfDiverged(5e9 * 64, 64, 6, context),
    (err: Error) => {
      assert.equal(
        err.message,
        "training diverged: device 1's training loss, smoothed over about 10 steps, stayed above 100 × its best (and its first loss) for 3 steps in a row " +
          '(steps 5–7): at step 7 (epoch 3) the loss is 5.00e+9 (smoothed 4800), its best 2.5 (smoothed, step 1); ' +
          'lower optimizer.lr (now 10000) or clip the gradients (train.clipGradNorm), or loosen train.divergence (false turns it off); ' +
          'checkpoint sets from step-00000004 on hold weights from after it began',
      );
      assert.ok(isDivergence(`device 1 failed: ${err.message}`));
      return true;
    },
  );
  const d = { step: 9, since: 0, loss: 40, smoothed: 40, best: 40, bestStep: 0, cause: 'bound' as const };
  assert.match(
    divergenceMessage(d, { factor: 100, steps: 10, bound: 30 }, { ...context, clipGradNorm: 5 }),
    /stayed above train\.divergence\.bound \(30\) for 10 steps .* clip the gradients \(a smaller train\.clipGradNorm \(now 5\)\)/,
  );
});

test('train.divergence: on by default; false, true and a map parse; a bad value names the field', () => {
  assert.deepEqual(loadConfigText('').train.divergence, { factor: 100, steps: 50 });
  assert.equal(loadConfigText('train: { divergence: false }').train.divergence, false);
  assert.deepEqual(loadConfigText('train: { divergence: true }').train.divergence, { factor: 100, steps: 50 });
  assert.deepEqual(loadConfigText('train: { divergence: { steps: 20, bound: 1000 } }').train.divergence, {
    factor: 100,
    steps: 20,
    bound: 1000,
  });
  assert.throws(
    () => loadConfigText('train: { divergence: { factor: 1 } }'),
    /train\.divergence\.factor: expected a number > 1, got 1/,
  );
  assert.throws(
    () => loadConfigText('train: { divergence: 3 }'),
    /train\.divergence: expected true, false or \{ factor/,
  );
  assert.throws(
    () => loadConfigText('train: { divergence: { step: 3 } }'),
    /unknown option 'step' \(did you mean 'steps'\?\)/,
  );
});
