/**
 * Runs you can compare: the report reads each run directory's config.yaml and command.txt, shows
 * the hyperparameters that differ between runs, the learning-rate curve and the validation
 * evaluations, and leaves out panels and columns with nothing in them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  chartsFor,
  differingSettings,
  flattenSettings,
  formatTable,
  loadReportRuns,
  writeReport,
} from '../../src/report/index.ts';
import { configToYaml } from '../../src/config/writeYaml.ts';
import { parseConfig } from '../../src/config/index.ts';
import { tmpDir, writeSyntheticRun } from './helpers.ts';

const MODEL = { input: [4], layers: [{ dense: { units: 8, activation: 'relu' } }, { dense: { units: 2 } }] };
const yamlOf = (o: Record<string, unknown>) => configToYaml(parseConfig({ model: MODEL, ...o }));

test('settings flatten one value per hyperparameter; a one-key map is its name and its options', () => {
  const flat = flattenSettings({
    optimizer: { adam: { lr: 0.001 } },
    model: { input: [4], layers: [{ flatten: {} }, { dense: { units: 2 } }] },
    train: { best: false },
  });
  assert.deepEqual(
    [...flat],
    [
      ['optimizer', 'adam'],
      ['optimizer.lr', '0.001'],
      ['model.input', '[4]'],
      ['model.layers[0]', 'flatten'],
      ['model.layers[1]', 'dense'],
      ['model.layers[1].units', '2'],
      ['train.best', 'false'],
    ],
  );
  const a = { hyperparameters: flattenSettings({ optimizer: { adam: { lr: 0.001 } }, epochs: 2 }), commands: [] };
  const b = {
    hyperparameters: flattenSettings({ optimizer: { sgd: { lr: 0.001, momentum: 0.9 } }, epochs: 2 }),
    commands: [],
  };
  assert.deepEqual(
    differingSettings([a, b]),
    ['optimizer', 'optimizer.momentum'],
    'the same lr under another optimizer is no difference',
  );
  assert.deepEqual(differingSettings([a, null]), [], 'a run without settings is left out of the comparison');
});

test('the report shows what differs between runs, the learning rate and validation, and leaves out empty panels', () => {
  const dir = tmpDir();
  const fast = join(dir, 'fast'),
    slow = join(dir, 'slow');
  writeSyntheticRun(fast, {
    strategy: 'hybrid',
    validation: true,
    epochs: 4,
    configYaml: yamlOf({ optimizer: { adam: { lr: 0.01 } }, train: { epochs: 4, devices: 2, strategy: 'hybrid' } }),
  });
  writeSyntheticRun(slow, {
    strategy: 'bsp',
    epochs: 4,
    configYaml: yamlOf({
      optimizer: { adam: { lr: 0.001 } },
      train: { epochs: 4, devices: 2, strategy: { bsp: { period: 4 } } },
    }),
  });
  const runs = loadReportRuns([fast, slow]);
  assert.deepEqual(
    chartsFor(runs),
    [
      'loss-step',
      'loss-time',
      'accuracy-step',
      'accuracy-time',
      'validation',
      'lr',
      'throughput',
      'device-share',
      'timeline',
      'bytes',
      'memory',
    ],
    'no staleness (no parameter server), no stalls',
  );
  const html = readFileSync(writeReport(runs), 'utf8');
  const hyper = /<section class="hyperparameters"[\s\S]*?<details>/.exec(html)![0];
  const rows = [
    ...hyper.matchAll(/<tr class="differs"><td><code>([^<]+)<\/code><\/td><td>([^<]*)<\/td><td>([^<]*)<\/td><\/tr>/g),
  ].map((m) => m.slice(1));
  assert.deepEqual(rows, [
    ['optimizer.lr', '0.01', '0.001'],
    ['train.strategy', 'hybrid', 'bsp'],
    ['train.strategy.period', '—', '4'],
    ['train.strategy.bucketBytes', '4194304', '—'],
  ]);
  assert.match(
    html,
    /<code class="command">paratrain train config\.yaml --strategy bsp<\/code>/,
    'the command line of each run',
  );
  assert.match(
    html,
    /Left out, having nothing to show: staleness \(only the parameter-server strategies, async and sync, record it\); stalls \(none reported\)\./,
  );
  const data = JSON.parse(/<script type="application\/json" id="report-data">([\s\S]*?)<\/script>/.exec(html)![1]!) as {
    runs: {
      series: {
        validation: { epoch: number; accuracy: number }[];
        lr: { step: number[]; lr: number[] };
        evals: unknown[];
      };
    }[];
  };
  assert.deepEqual(
    data.runs[0]!.series.validation.map((v) => v.epoch),
    [0, 1, 2, 3],
  );
  assert.equal(data.runs[0]!.series.evals.length, 1, 'with validation the test set is one marker at the end');
  assert.equal(data.runs[1]!.series.validation.length, 0);
  assert.ok(data.runs[0]!.series.lr.lr.every((x) => x === 0.001) && data.runs[0]!.series.lr.step.length === 200);
  // summary columns: val accuracy and best appear because one run has them; stalls and bad steps do not
  assert.match(html, /<th>val accuracy<\/th><th>best<\/th>/);
  assert.match(html, /valAccuracy 80\.00% \(epoch 3\)/, 'the best evaluation (epoch 3 of 4) is named');
  assert.doesNotMatch(html, /<th>stalls<\/th>|<th>bad steps<\/th>|<th>early stop<\/th>/);
  const table = formatTable(runs.map((r) => ({ label: r.label, summary: r.summary })));
  assert.match(table.split('\n')[0]!, /^strategy +devices +test accuracy +val accuracy +best +wall time/);
});

test('a report of one run lists every hyperparameter, and stalls get their panel', () => {
  const dir = tmpDir();
  writeSyntheticRun(join(dir, 'run'), { stalls: true, configYaml: yamlOf({}) });
  const runs = loadReportRuns([join(dir, 'run')]);
  assert.ok(chartsFor(runs).includes('stalls'));
  const html = readFileSync(writeReport(runs), 'utf8');
  assert.match(html, /<h2>Hyperparameters<\/h2>/);
  assert.match(html, /All \d+ hyperparameters/);
  assert.match(html, /<td><code>train\.earlyStopping<\/code><\/td><td>false<\/td>/);
  assert.match(html, /<th>stalls<\/th>/);
  assert.equal(runs[0]!.summary.stalls, 2);
});
