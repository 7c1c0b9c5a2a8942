import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FaultPlan } from '../../src/runtime/faults/faultPlan.ts';

test('a FaultPlan answers per device: slowdown (1 when none) and the step it fails at', () => {
  const plan = FaultPlan.fromOptions({
    slowDevices: new Map([
      [1, 3],
      [2, 1.5],
    ]),
    failAt: { rank: 2, step: 4 },
  });
  assert.deepEqual(
    [0, 1, 2].map((r) => plan.slowdownFor(r)),
    [1, 3, 1.5],
  );
  assert.equal(plan.failsAt(2, 4), true);
  assert.equal(plan.failsAt(2, 3), false);
  assert.equal(plan.failsAt(1, 4), false);
  assert.equal(FaultPlan.none.slowdownFor(0), 1);
  assert.equal(FaultPlan.none.failsAt(0, 0), false);
});

test('a FaultPlan survives structured cloning as data (worker threads, child processes)', () => {
  const plan = FaultPlan.fromCli({ slowDevice: new Map([[1, 2]]), failAtEnv: '0:3' });
  const copy = FaultPlan.fromData(structuredClone(plan.toData()));
  assert.deepEqual(copy.toData(), plan.toData());
  assert.equal(copy.slowdownFor(1), 2);
  assert.equal(copy.failsAt(0, 3), true);
  // the copy still names the flag the user wrote
  assert.throws(() => copy.checkDevices(1), /^Error: --slow-device: there is no device 1 among 1 \(ranks 0\.\.0\)$/);
});

test('parsing the flag and the variable: the same values and messages as the CLI always gave', () => {
  assert.deepEqual(FaultPlan.parseSlowDevice('1:2.5'), [1, 2.5]);
  assert.throws(
    () => FaultPlan.parseSlowDevice('1:0.5'),
    /--slow-device: expected RANK:FACTOR with FACTOR ≥ 1 \(e\.g\. 1:3\), got '1:0\.5'/,
  );
  assert.deepEqual(FaultPlan.parseFailAt('3:2'), { rank: 3, step: 2 });
  assert.equal(FaultPlan.parseFailAt(undefined), undefined);
  assert.equal(FaultPlan.parseFailAt(''), undefined);
  assert.throws(() => FaultPlan.parseFailAt('x'), /PARATRAIN_FAIL_AT: expected RANK:STEP \(e\.g\. 1:5\), got 'x'/);
});

test('bad faults are refused naming where they were given', () => {
  assert.throws(
    () => FaultPlan.fromOptions({ slowDevices: new Map([[1, 0.5]]) }),
    /slowDevices: device 1's slowdown factor must be a number ≥ 1/,
  );
  assert.throws(
    () => FaultPlan.fromOptions({ failAt: { rank: -1, step: 2 } }),
    /failAt: a device rank is a whole number ≥ 0, got -1/,
  );
  assert.throws(
    () => FaultPlan.fromOptions({ failAt: { rank: 1, step: 1.5 } }),
    /failAt: device 1's failing step must be a whole number ≥ 0, got 1\.5/,
  );
  assert.throws(
    () => FaultPlan.fromCli({ failAtEnv: '5:1' }).checkDevices(4),
    /PARATRAIN_FAIL_AT: there is no device 5 among 4 \(ranks 0\.\.3\)/,
  );
  assert.doesNotThrow(() => FaultPlan.fromCli({ slowDevice: new Map([[3, 2]]), failAtEnv: '3:1' }).checkDevices(4));
});
