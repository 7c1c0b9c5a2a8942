/**
 * What ranks must agree on besides the config hash (comm/tcp/agreement.ts): the one-line message
 * names both ranks and only the fields that differ; forged agreement lists in a registration end
 * in FrameError, never a TypeError (fast-check, fixed seed).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { disagreement, parseAgreements, type Agreement } from '../../src/comm/tcp/agreement.ts';
import { FrameError } from '../../src/comm/tcp/frame.ts';
import { runs } from '../fuzz/helpers.ts';

const data = (samples: string, source: string, first = 'sha256:aaaa'): Agreement => ({
  what: 'training data',
  source,
  fix: 'every process must read the same dataset',
  fields: { samples, 'sample shape': '28×28×1', classes: '10', 'first samples': first },
});

test('a disagreement names both ranks, only the differing fields, both sources and the fix', () => {
  const msg = disagreement([data('96', '/a')], [data('60', '/b', 'sha256:bbbb')], 'process 0', 'process 1');
  assert.equal(
    msg,
    "process 1's training data differs from process 0's: samples 60 vs 96, first samples sha256:bbbb vs sha256:aaaa " +
      '(from /b vs /a); every process must read the same dataset',
  );
  assert.equal(
    disagreement([data('96', '/a')], [data('96', '/elsewhere')], 'process 0', 'process 1'),
    undefined,
    'the source is shown, not compared',
  );
  assert.match(
    disagreement([data('96', '/a')], [], 'process 0', 'process 1')!,
    /process 1 did not say what its training data is/,
  );
  assert.match(
    disagreement([], [data('96', '/a')], 'process 0', 'process 1')!,
    /process 0 did not say what its training data is/,
  );
});

test('forged agreement lists end in FrameError or parse', () => {
  assert.deepEqual(parseAgreements(undefined), []);
  fc.assert(
    fc.property(fc.anything({ maxDepth: 3 }), (v) => {
      try {
        const parsed = parseAgreements(v);
        for (const a of parsed) assert.equal(typeof a.what, 'string');
      } catch (err) {
        if (!(err instanceof FrameError)) throw err;
      }
    }),
    runs(2000),
  );
});
