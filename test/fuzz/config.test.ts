/**
 * Fuzzing the YAML config: mutated example configs and forged documents (deep nesting, huge numbers,
 * alias bombs, odd keys) end in a ConfigError or a valid config, never another exception or a hang.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { parseConfig, parseYaml } from '../../src/config/load.ts';
import { ConfigError } from '../../src/config/errors.ts';
import { expectOnly, mutated, runs, spliced } from './helpers.ts';

const EXAMPLES = join(import.meta.dirname, '..', '..', 'examples');
const TEXTS = readdirSync(EXAMPLES)
  .filter((f) => f.endsWith('.yaml'))
  .map((f) => readFileSync(join(EXAMPLES, f), 'utf8'));
const utf8 = new TextEncoder();
const text = new TextDecoder();

function load(yaml: string): void {
  parseConfig(parseYaml(yaml, 'f.yaml'), 'f.yaml');
}
const configError = (err: unknown) => err instanceof ConfigError;
const bytesOf = fc.constantFrom(...TEXTS.map((t) => utf8.encode(t)));

test('fuzz config: the examples load', () => {
  assert.ok(TEXTS.length > 0);
  for (const t of TEXTS) load(t);
});

test('fuzz config: mutated and spliced example configs end in a ConfigError or load', { timeout: 60_000 }, () => {
  fc.assert(
    fc.property(fc.oneof(mutated(bytesOf), spliced(bytesOf)), (bytes) => {
      expectOnly(() => load(text.decode(bytes)), { expected: configError, maxMs: 5000 });
    }),
    runs(100),
  );
});

/** Values to put in a config field: huge, tiny, non-finite, odd types, deep structures. */
const wild = fc.oneof(
  fc.constantFrom(
    '1e400',
    '-1e400',
    '.inf',
    '.nan',
    '9007199254740993',
    '0x7fffffff',
    '1_000_000',
    '!!binary aGVsbG8=',
    '~',
    '""',
    "'x'",
    '[]',
    '{}',
    '0o777',
    '1e-400',
    '-0',
  ),
  fc.integer({ min: 1, max: 1500 }).map((d) => '['.repeat(d) + ']'.repeat(d)),
  fc.integer({ min: 1, max: 1500 }).map((d) => `${'{a: '.repeat(d)}1${'}'.repeat(d)}`),
  fc.string({ maxLength: 20 }).map((s) => JSON.stringify(s)),
);
const FIELDS = [
  'model.input',
  'model.layers',
  'data.batchSize',
  'data.trainLimit',
  'train.epochs',
  'train.devices',
  'train.seed',
  'optimizer',
  'train.strategy',
  '__proto__',
  'constructor',
];

test('fuzz config: forged fields (huge numbers, deep nesting, odd types) end in a ConfigError or load', {
  timeout: 60_000,
}, () => {
  const forged = fc.tuple(fc.constantFrom(...TEXTS), fc.constantFrom(...FIELDS), wild).map(([base, field, value]) => {
    const [section, key] = field.split('.');
    return key ? `${base}\n${section}:\n  ${key}: ${value}\n` : `${base}\n${section}: ${value}\n`;
  });
  fc.assert(
    fc.property(forged, (yaml) => {
      expectOnly(() => load(yaml), { expected: configError, maxMs: 5000 });
    }),
    runs(250),
  );
});

test('fuzz config: deep block nesting, alias bombs and random text end in a ConfigError', { timeout: 60_000 }, () => {
  const deep = fc
    .tuple(fc.integer({ min: 1, max: 600 }), fc.constantFrom('- ', 'a: ', '? '))
    .map(([d, s]) => Array.from({ length: d }, (_, i) => ' '.repeat(i) + s).join('\n'));
  const bomb = fc.integer({ min: 2, max: 6 }).map((levels) => {
    const lines = ['a0: &a0 [x, x, x, x, x, x, x, x, x, x]'];
    for (let i = 1; i < levels; i++)
      lines.push(
        `a${i}: &a${i} [${Array(10)
          .fill(`*a${i - 1}`)
          .join(', ')}]`,
      );
    return `${lines.join('\n')}\nmodel: { input: [4], layers: [dense: { units: 2 }] }\n`;
  });
  fc.assert(
    fc.property(
      fc.oneof(deep, bomb, fc.string({ maxLength: 200 }), fc.string({ unit: 'binary', maxLength: 200 })),
      (yaml) => {
        expectOnly(() => load(yaml), { expected: configError, maxMs: 5000 });
      },
    ),
    runs(60),
  );
});

test('regression: an alias bomb is a ConfigError, not a ReferenceError from the yaml library', () => {
  const bomb =
    'a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n';
  assert.throws(
    () => load(bomb),
    (e: Error) => e instanceof ConfigError && /aliases .* expand too much/.test(e.message),
  );
});

test('regression: deep nesting is refused before the yaml library recurses (it could abort the process)', () => {
  // repeated, so optimised parser code recurses deeper: in one process this used to end in V8's fatal
  // "RegExpCompiler Allocation failed" instead of an exception
  for (let k = 0; k < 4; k++) {
    for (const indicator of ['- ', 'a: ', '? ']) {
      const yaml = Array.from({ length: 1500 }, (_, i) => ' '.repeat(i) + indicator).join('\n');
      assert.throws(() => load(yaml), /f\.yaml:\d+:1: YAML nested too deeply/);
    }
    assert.throws(
      () => load('['.repeat(50_000)),
      /f\.yaml:1:65: YAML nested too deeply \(more than 64 open brackets\)/,
    );
  }
});
