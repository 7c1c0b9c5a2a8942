/**
 * A `Prediction` says which task it answers (`task`), so strict TypeScript narrows on it: a
 * classification's `probabilities`, a multi-label's `labels`, a regression's `values` are there
 * without `!`. This file is typechecked with the rest (`tsc -p tsconfig.json` includes test/): the
 * switch below compiles only if the type is a union discriminated by `task`. It also runs, on one
 * checkpoint per task.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { loadModel, type Prediction } from '../../src/index.ts';
import { ROWS, writeFeatureCheckpoint } from './predictHelpers.ts';
import { tmpDir } from '../cli/helpers.ts';

/** What a caller writes: one branch per task, each using its fields as they are. */
function describe(p: Prediction): string {
  switch (p.task) {
    case 'classification':
      return `${p.label} (class ${p.class}, p = ${Math.max(...p.probabilities).toFixed(3)})`;
    case 'multiLabel':
      return `${p.labels.join('|')} of ${p.probabilities.length} labels`;
    case 'regression':
      return p.values.map((v) => v.toFixed(3)).join(', ');
    default: {
      const none: never = p;
      return none;
    }
  }
}

test('each prediction carries its task, and its fields are those of the task', async () => {
  const dir = tmpDir('paratrain-prediction-type-');
  const cases = [
    { task: 'classification', classNames: ['a', 'b', 'c'], pattern: /^[abc] \(class [0-2], p = 0\.\d{3}\)$/ },
    { task: 'multiLabel', classNames: ['a', 'b', 'c'], pattern: /^[abc|]* of 3 labels$/ },
    { task: 'regression', pattern: /^-?\d+\.\d{3}, -?\d+\.\d{3}, -?\d+\.\d{3}$/ },
  ] as const;
  for (const c of cases) {
    const model = await loadModel(
      writeFeatureCheckpoint(join(dir, `${c.task}.safetensors`), {
        task: c.task,
        inputShape: [4],
        ...('classNames' in c ? { classNames: c.classNames } : {}),
      }),
    );
    const predictions = model.predict(ROWS);
    assert.equal(predictions.length, ROWS.length);
    for (const p of predictions) {
      assert.equal(p.task, c.task);
      assert.match(describe(p), c.pattern);
    }
    const keys = Object.keys(predictions[0]!).sort();
    const expected = {
      classification: ['class', 'label', 'probabilities', 'task'],
      multiLabel: ['labels', 'probabilities', 'task'],
      regression: ['task', 'values'],
    }[c.task];
    assert.deepEqual(keys, expected, `a ${c.task} prediction holds its own fields only`);
  }
});
