import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deviceName, processOf } from '../../src/runtime/job/deviceNames.ts';
import { crossWorldOf, parameterServerWorldOf, type ProcessPlacement } from '../../src/runtime/job/processWorld.ts';

test('one numbering: device d = process p × L + local ℓ; messages say `device d (process p)` in a job of processes', () => {
  const job = { threads: 2, processes: 2 };
  assert.deepEqual(
    [0, 1, 2, 3].map((d) => processOf(d, job)),
    [0, 0, 1, 1],
  );
  assert.equal(deviceName(3, job), 'device 3 (process 1)');
  assert.equal(deviceName(3, { threads: 4, processes: 1 }), 'device 3', 'a job of one process names devices alone');
});

test("the TCP worlds name their ranks by the same rule: processes in a cross world, devices in the parameter server's", () => {
  const p: ProcessPlacement = {
    process: 1,
    processes: 2,
    masterAddr: '127.0.0.1',
    masterPort: 29500,
    configHash: 'x',
    timeoutMs: 1000,
    transport: 'tcp',
  };
  const cross = crossWorldOf(p, 1);
  assert.ok(cross.transport === 'tcp');
  assert.deepEqual(cross.rankNames, ['process 0', 'process 1']);
  assert.deepEqual(parameterServerWorldOf(p, { processes: 2, threads: 2, devices: 4, process: 1 }, 4).rankNames, [
    'the parameter server (process 0)',
    'device 0 (process 0)',
    'device 1 (process 0)',
    'device 2 (process 1)',
    'device 3 (process 1)',
  ]);
});
