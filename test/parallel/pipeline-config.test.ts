import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../src/config/index.ts';
import { multiDeviceIssues } from '../../src/config/schema/deviceChecks.ts';

const model = {
  input: [8],
  layers: [
    { dense: { units: 8, activation: 'relu' } },
    { dense: { units: 8, activation: 'relu' } },
    { dense: { units: 3 } },
  ],
};
const parse = (train: Record<string, unknown>, layers: unknown[] = model.layers) =>
  parseConfig({ model: { ...model, layers }, train: { strategy: 'hybrid', ...train } }, 'pipeline.yaml');

test('train.pipeline normalises with its defaults, and is absent unless given', () => {
  const c = parse({ devices: 4, microBatches: 4, pipeline: { stages: 2 } });
  assert.deepEqual(c.train.pipeline, { stages: 2, schedule: '1f1b' });
  assert.equal(parse({ devices: 2 }).train.pipeline, undefined);
  assert.deepEqual(
    parse({ devices: 3, pipeline: { stages: 3, schedule: 'gpipe', boundaries: [1, 2] } }).train.pipeline,
    {
      stages: 3,
      schedule: 'gpipe',
      boundaries: [1, 2],
    },
  );
});

test('what a pipeline cannot do is refused naming the field and the fix', () => {
  assert.throws(
    () => parse({ devices: 3, pipeline: { stages: 2 } }),
    /train\.devices.*multiple of 2 \(stages × pipelines\), got 3/s,
  );
  // one device per process may make a pipeline across processes: the run checks the job's devices
  assert.match(
    multiDeviceIssues(parse({ devices: 1, pipeline: { stages: 2 } }), 1)[0]!.message,
    /the job's devices \(processes × train\.devices\) must be a multiple of 2 .*got 1/,
  );
  assert.throws(() => parse({ devices: 4, pipeline: { stages: 4 } }), /4 stages for a model of 3 layers.*at most 3/s);
  assert.throws(() => parse({ devices: 2, pipeline: { stages: 1 } }), /stages.*expected an integer ≥ 2/s);
  assert.throws(() => parse({ devices: 2, pipeline: { stages: 2, schedule: 'zigzag' } }), /schedule/);
  assert.throws(() => parse({ devices: 2, pipeline: { stages: 2, boundaries: [3] } }), /boundaries.*between 1 and 2/s);
  assert.throws(
    () => parse({ devices: 2, strategy: 'bsp', pipeline: { stages: 2 } }),
    /use strategy: hybrid \(got bsp\)/,
  );
  assert.throws(() => parse({ devices: 2, syncBatchNorm: true, pipeline: { stages: 2 } }), /syncBatchNorm: false/);
  assert.throws(
    () =>
      parse({ devices: 2, pipeline: { stages: 2 } }, [
        { dense: { units: 8, activation: 'relu' } },
        { dense: { units: 8, parallel: 'model' } },
        { dense: { units: 3 } },
      ]),
    /'parallel: model'.*not supported together/s,
  );
});
