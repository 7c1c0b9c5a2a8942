import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { charErrors, editDistance, errorRate, ErrorRates, splitWords, wordErrors } from '../../src/ctc/errorRates.ts';

test('edit distance and error rates: hand-computed cases', () => {
  assert.equal(editDistance('kitten', 'sitting'), 3); // k→s, e→i, +g
  assert.equal(editDistance('flaw', 'lawn'), 2); // −f, +n
  assert.equal(editDistance('', 'abc'), 3);
  assert.equal(editDistance('abc', ''), 3);
  assert.equal(editDistance('same', 'same'), 0);
  assert.equal(editDistance(['the', 'cat', 'sat'], ['the', 'sat', 'down']), 2); // −cat, +down
  assert.deepEqual(splitWords('  the\tcat \n sat '), ['the', 'cat', 'sat']);
  assert.deepEqual(splitWords('   '), []);
  // one substitution in 11 characters; one word of two
  assert.deepEqual(charErrors('hello world', 'hello wurld'), { errors: 1, length: 11 });
  assert.deepEqual(wordErrors('hello world', 'hello wurld'), { errors: 1, length: 2 });
  // a code point outside the BMP is one character
  assert.deepEqual(charErrors('a𝄞b', 'ab'), { errors: 1, length: 3 });
  // empty references
  assert.equal(errorRate({ errors: 0, length: 0 }), 0);
  assert.equal(errorRate({ errors: 2, length: 0 }), 1);
  assert.equal(errorRate(wordErrors('one', 'one two three')), 2); // insertions can exceed 100%
});

test('corpus CER/WER sum errors and reference lengths (not a mean of per-utterance rates)', () => {
  const r = new ErrorRates();
  r.add('ab', 'ab'); // 0 of 2 characters, 0 of 1 word
  r.add('abcdefgh', 'abcdefgx'); // 1 of 8 characters, 1 of 1 word
  r.add('', 'zz'); // 2 insertions against nothing, 1 word inserted
  assert.equal(r.cer, 3 / 10);
  assert.equal(r.wer, 2 / 2);
  assert.equal(r.utterances, 3);
  const empty = new ErrorRates();
  assert.equal(empty.cer, 0);
  empty.add('', 'x');
  assert.equal(empty.cer, 1);
});

// Made by test/speech/fixtures/error-rates.py: its own DP, checked against torchaudio's edit_distance.
test('edit distances and corpus rates equal the Python reference', () => {
  const f = JSON.parse(readFileSync(new URL('./fixtures/error-rates.json', import.meta.url), 'utf8')) as {
    pairs: {
      reference: string;
      hypothesis: string;
      charErrors: number;
      chars: number;
      wordErrors: number;
      words: number;
    }[];
    cer: number;
    wer: number;
  };
  const rates = new ErrorRates();
  for (const p of f.pairs) {
    const what = JSON.stringify([p.reference, p.hypothesis]);
    assert.deepEqual(charErrors(p.reference, p.hypothesis), { errors: p.charErrors, length: p.chars }, what);
    assert.deepEqual(wordErrors(p.reference, p.hypothesis), { errors: p.wordErrors, length: p.words }, what);
    rates.add(p.reference, p.hypothesis);
  }
  assert.equal(rates.cer, f.cer);
  assert.equal(rates.wer, f.wer);
});
