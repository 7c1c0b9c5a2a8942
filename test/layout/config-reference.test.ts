/**
 * docs/configuration.md documents every field, layer, loss, optimizer, decay, dataset kind and
 * strategy the config schema accepts, with its default, and nothing the schema does not have. The
 * schema is read by schemaReference.ts (walked where it is plain zod, probed where it is not).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { configSchema, LAYER_TYPES, LOSS_TYPES, OPTIMIZER_TYPES } from '../../src/config/schema/index.ts';
import { bool, oneKeyMap, posInt, strict } from '../../src/config/schema/fields.ts';
import { DATASET_TYPES } from '../../src/data/spec.ts';
import { STRATEGY_NAMES } from '../../src/parallel/strategies/index.ts';
import { collectReference, type SchemaReference } from './schemaReference.ts';
import { checkReference } from './referenceTables.ts';

const PAGE = 'docs/configuration.md';
const pageText = () => readFileSync(fileURLToPath(new URL(`../../${PAGE}`, import.meta.url)), 'utf8');
const VARIANTS = [{ at: 'data', key: 'dataset', values: DATASET_TYPES, family: 'dataset' }];
const list = (lines: readonly string[]) => `\n  ${lines.join('\n  ')}\n`;
let cached: SchemaReference | undefined;
const reference = () => (cached ??= collectReference(configSchema, VARIANTS));
const choicesOf = (family: string) =>
  reference()
    .entries.filter((e) => e.choiceOf === family)
    .map((e) => e.key);

test('the schema is read whole: every probe understood, every name of its lists found', () => {
  const r = reference();
  assert.deepEqual(
    r.problems,
    [],
    `the schema's messages changed shape; update schemaReference.ts:${list(r.problems)}`,
  );
  assert.deepEqual(choicesOf('layer'), [...LAYER_TYPES]);
  assert.deepEqual(choicesOf('loss'), [...LOSS_TYPES]);
  assert.deepEqual(choicesOf('optimizer'), [...OPTIMIZER_TYPES]);
  assert.deepEqual(choicesOf('strategy'), [...STRATEGY_NAMES]);
  assert.deepEqual(choicesOf('dataset'), [...DATASET_TYPES]);
  assert.ok(choicesOf('decay').length > 0, 'no learning-rate decay found under schedule.decay');
  // fields that only the probe reaches, as a sample that it reaches them
  const keys = new Set(r.entries.map((e) => e.key));
  for (const k of [
    'conv2d.filters',
    'bmuf.blockMomentum',
    'csv.delimiter',
    'speech.features.context',
    'data.augment.flip',
  ])
    assert.ok(keys.has(k), `${k} not found`);
});

test(`${PAGE} has a row for everything the config schema accepts, and only for that`, () => {
  const problems = checkReference(reference().entries, pageText(), PAGE);
  assert.deepEqual(problems, [], `bring ${PAGE} in line with src/config/schema/:${list(problems)}`);
});

// The check checks itself: what it is there to find, it finds.

test('on the real page: a missing option, a layer that does not exist, a wrong default, an unnamed dataset kind', () => {
  const page = pageText();
  const check = (text: string) => checkReference(reference().entries, text, PAGE);
  const drop = page.replace(/^\| `conv2d\.filters` \|.*\n/m, '');
  assert.notEqual(drop, page);
  assert.ok(check(drop).some((p) => p.includes('`conv2d.filters` has no row')));

  const extra = page.replace(/^(\| `conv2d` \|.*\n)/m, '$1| `conv3d` | layer | — | a 3-D convolution |\n');
  assert.ok(check(extra).some((p) => p.includes('`conv3d` (a `layer` row) is not in the config schema')));

  const wrong = page.replace(/^(\| `train\.keepLast` \| [^|]+\| )3 \|/m, '$15 |');
  assert.notEqual(wrong, page);
  assert.ok(check(wrong).some((p) => p.includes('`train.keepLast` defaults to 3')));

  const unnamed = page.replace(/^(\| `data\.classNames` \|.*)`npy`/m, '$1npy');
  assert.notEqual(unnamed, page);
  assert.ok(check(unnamed).some((p) => p.includes('`data.classNames`') && p.includes('`npy`')));
});

test('on a small schema: plain zod walked, a one-key map probed, a missing field and a stale layer named', () => {
  const small = strict({
    epochs: posInt().default(1),
    clip: z.strictObject({ norm: z.number(), every: z.number().default(2) }).optional(),
    layer: oneKeyMap({
      noun: 'layer type',
      choices: {
        dense: strict({ units: posInt(), useBias: bool().default(true) }),
        relu: strict({}, 'option', 'relu'),
      },
      example: '`dense: { units: 10 }`',
    }),
  });
  const r = collectReference(small);
  assert.deepEqual(r.problems, []);
  assert.deepEqual(
    r.entries.map((e) => [e.table, e.key, e.default]),
    [
      ['field', 'epochs', 1],
      ['field', 'clip', undefined],
      ['field', 'clip.norm', undefined],
      ['field', 'clip.every', 2],
      ['field', 'layer', undefined],
      ['layer', 'dense', undefined],
      ['layer', 'dense.units', undefined],
      ['layer', 'dense.useBias', true],
      ['layer', 'relu', undefined],
    ],
  );
  const doc = [
    '| field | type | default | meaning |',
    '| --- | --- | --- | --- |',
    '| `epochs` | n | 1 | passes |',
    '| `clip` | map | — | clipping |',
    '| `clip.every` | n | 2 | how often |',
    '| `layer` | layer | required | the layer |',
    '',
    '| layer | type | default | meaning |',
    '| --- | --- | --- | --- |',
    '| `dense` | layer | — | fully connected |',
    '| `dense.units` | n | required | outputs |',
    '| `dense.useBias` | true/false | true | bias |',
    '| `relu` | layer | — | max(x, 0) |',
    '| `conv9` | layer | — | gone |',
  ].join('\n');
  assert.deepEqual(checkReference(r.entries, doc, 'small.md'), [
    "small.md: `clip.norm` has no row; add one to a table headed '| field |', the name in backticks in its first cell",
    'small.md:14: `conv9` (a `layer` row) is not in the config schema; remove the row or correct the name',
  ]);
});
