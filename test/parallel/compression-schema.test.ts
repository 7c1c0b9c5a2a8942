/** `train.strategy.<hybrid|bsp|bmuf|diloco>.compression` in the config: defaults of a bare name, and errors that name the field and the fix. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig, parseYaml, configToYaml, ConfigError } from '../../src/config/index.ts';

const yamlOf = (strategy: string) =>
  `model:\n  input: [4]\n  layers:\n    - dense: { units: 2 }\ntrain: { strategy: ${strategy} }\n`;

function issuesOf(strategy: string): string[] {
  try {
    parseConfig(parseYaml(yamlOf(strategy), 'f.yaml'), 'f.yaml');
  } catch (e) {
    assert.ok(e instanceof ConfigError, `expected a ConfigError, got ${String(e)}`);
    return e.issues;
  }
  assert.fail('expected the config to be rejected');
}

const strategyOf = (strategy: string) => parseConfig(parseYaml(yamlOf(strategy), 'f.yaml'), 'f.yaml').train.strategy;

test('compression: a bare name takes the defaults; options override them; absent, hybrid sends plain floats', () => {
  assert.deepEqual(strategyOf('{ hybrid: { compression: oneBit } }'), {
    type: 'hybrid',
    bucketBytes: 4 * 1024 * 1024,
    compression: { type: 'oneBit' },
  });
  assert.deepEqual(strategyOf('{ hybrid: { compression: powerSGD } }'), {
    type: 'hybrid',
    bucketBytes: 4 * 1024 * 1024,
    compression: { type: 'powerSGD', rank: 4, startStep: 0, warmStart: true, minCompressionRate: 2 },
  });
  assert.deepEqual(
    (
      strategyOf('{ hybrid: { compression: { powerSGD: { rank: 8, startStep: 100, warmStart: false } } } }') as {
        compression: unknown;
      }
    ).compression,
    { type: 'powerSGD', rank: 8, startStep: 100, warmStart: false, minCompressionRate: 2 },
  );
  assert.equal('compression' in strategyOf('hybrid'), false);
});

test('compression: errors name the field and the fix', () => {
  assert.deepEqual(issuesOf('{ hybrid: { compression: twoBit } }'), [
    "f.yaml: train.strategy.hybrid.compression: unknown compression 'twoBit'; expected one of oneBit, powerSGD",
  ]);
  assert.deepEqual(issuesOf('{ hybrid: { compression: { powerSGD: { rank: 0 } } } }'), [
    'f.yaml: train.strategy.hybrid.compression.powerSGD.rank: expected a positive integer, got 0',
  ]);
  assert.deepEqual(issuesOf('{ hybrid: { compression: { powerSGD: { ranks: 4 } } } }'), [
    "f.yaml: train.strategy.hybrid.compression.powerSGD: unknown option 'ranks' (did you mean 'rank'?); allowed: rank, startStep, warmStart, minCompressionRate",
  ]);
  assert.deepEqual(issuesOf('{ hybrid: { compression: { oneBit: { scale: 2 } } } }'), [
    "f.yaml: train.strategy.hybrid.compression.oneBit: unknown option 'scale'; allowed: startStep, freezeVariance",
  ]);
  assert.deepEqual(issuesOf('{ hybrid: { compression: [oneBit] } }'), [
    `f.yaml: train.strategy.hybrid.compression: expected a compression name or a one-key map such as 'powerSGD: { rank: 4 }', got ["oneBit"]`,
  ]);
  assert.deepEqual(issuesOf('{ hybrid: { compression: oneBit, shard: 1 } }'), [
    'f.yaml: train.strategy.hybrid.compression: compression and shard cannot be combined yet; leave out one of them (shard: 0 or no compression)',
  ]);
});

test('compression: the YAML a run stores reads back as the same strategy', () => {
  for (const c of [
    'oneBit',
    '{ oneBit: { startStep: 3 } }',
    '{ powerSGD: { rank: 2, startStep: 5, warmStart: false } }',
  ]) {
    const config = parseConfig(parseYaml(yamlOf(`{ hybrid: { compression: ${c} } }`), 'f.yaml'), 'f.yaml');
    const back = parseConfig(parseYaml(configToYaml(config), 'g.yaml'), 'g.yaml');
    assert.deepEqual(back.train.strategy, config.train.strategy);
  }
});

test('compression on bsp, bmuf and diloco: the same field, its errors named under the strategy, the YAML read back', () => {
  assert.deepEqual(strategyOf('{ bsp: { period: 2, compression: oneBit } }'), {
    type: 'bsp',
    period: 2,
    compression: { type: 'oneBit' },
  });
  const bmuf = strategyOf('{ bmuf: { compression: { powerSGD: { rank: 2 } } } }') as { compression: unknown };
  assert.deepEqual(bmuf.compression, {
    type: 'powerSGD',
    rank: 2,
    startStep: 0,
    warmStart: true,
    minCompressionRate: 2,
  });
  for (const s of ['bsp', 'bmuf', 'diloco'])
    assert.equal('compression' in strategyOf(s), false, `${s} alone sends floats`);
  assert.deepEqual(issuesOf('{ diloco: { compression: twoBit } }'), [
    "f.yaml: train.strategy.diloco.compression: unknown compression 'twoBit'; expected one of oneBit, powerSGD",
  ]);
  for (const s of [
    '{ bsp: { compression: oneBit } }',
    '{ diloco: { period: 4, compression: { powerSGD: { rank: 3 } } } }',
  ]) {
    const config = parseConfig(parseYaml(yamlOf(s), 'f.yaml'), 'f.yaml');
    const back = parseConfig(parseYaml(configToYaml(config), 'g.yaml'), 'g.yaml');
    assert.deepEqual(back.train.strategy, config.train.strategy);
  }
});
