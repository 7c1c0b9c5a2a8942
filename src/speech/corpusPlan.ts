/**
 * The plan of the synthetic speech corpus that scripts/make-speech-corpus.ts renders with espeak-ng:
 * what each utterance says, in which voice, how fast, at what pitch, with how much noise. A pure
 * function of (seed, utterance index) through the Philox generator, so a corpus of N utterances is the
 * first N of any larger one made with the same seed.
 *
 * A voice is an espeak-ng variant (the speaker: formants, pitch range, breathiness) speaking with one of
 * the English accents. Variants are split into train, dev and test sets by a fixed list: the test
 * (and dev) speakers never occur in training; accents are shared, as dialects are in real test sets.
 */
import { CounterRng } from '../tensor/rng.ts';

export const DIGITS = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine'] as const;

/** Short common words besides the digits (all in the default alphabet; two with an apostrophe). */
export const WORDS = [
  'yes',
  'no',
  'up',
  'down',
  'left',
  'right',
  'on',
  'off',
  'stop',
  'go',
  'start',
  'open',
  'close',
  'back',
  'next',
  'play',
  'call',
  'help',
  'home',
  'read',
  'water',
  'fire',
  'light',
  'red',
  'green',
  'blue',
  'black',
  'white',
  'big',
  'small',
  'hot',
  'cold',
  'good',
  'new',
  'old',
  'fast',
  'slow',
  'cat',
  'dog',
  'bird',
  'tree',
  'house',
  'car',
  'book',
  'day',
  'night',
  'time',
  'and',
  'the',
  "don't",
  "it's",
] as const;

/** espeak-ng's English voices (accents). */
export const ACCENTS = [
  'en',
  'en-us',
  'en-gb-scotland',
  'en-gb-x-gbclan',
  'en-gb-x-rp',
  'en-gb-x-gbcwmd',
  'en-029',
  'en-us-nyc',
] as const;

/** Speakers (espeak-ng variants, exact file names; '' is the accent's own default voice) per split. */
export const SPEAKERS = {
  train: [
    '',
    'm1',
    'm2',
    'm3',
    'm4',
    'm7',
    'm8',
    'f1',
    'f3',
    'f5',
    'klatt',
    'klatt4',
    'adam',
    'Alex',
    'Andrea',
    'Andy',
    'aunty',
    'belinda',
    'boris',
    'caleb',
    'ed',
    'edward',
    'Gene',
    'gustave',
    'Henrique',
    'Hugo',
    'iven',
    'Jacky',
    'john',
    'Lee',
    'max',
    'Michael',
    'Mike',
    'paul',
    'pedro',
    'rob',
    'robert',
    'steph',
    'victor',
    'zac',
    'anika',
    'norbert',
    'shelby',
    'grandma',
    'sandro',
    'Marco',
  ],
  dev: ['m6', 'f2', 'klatt2', 'Alicia', 'david', 'quincy'],
  test: ['m5', 'f4', 'klatt3', 'Annie', 'benjamin', 'linda', 'travis', 'grandpa'],
} as const;

export type Split = keyof typeof SPEAKERS;

export interface UtterancePlan {
  index: number;
  split: Split;
  /** espeak-ng's -v argument: accent, or accent+variant */
  voice: string;
  /** -s, words per minute (espeak-ng's default is 175) */
  rate: number;
  /** -p, 0 … 99 (default 50) */
  pitch: number;
  words: string[];
  /** white noise this many dB below the speech's RMS level */
  snrDb: number;
  /** the speech's peak after scaling, in (0, 1) */
  peak: number;
  /** silence (noise only) before and after the trimmed speech, seconds */
  leadSeconds: number;
  tailSeconds: number;
}

export interface CorpusOptions {
  seed: number;
  /** words per utterance: minWords … maxWords (default 1 … 5) */
  minWords?: number;
  maxWords?: number;
  /** `mixed` (default): half the words digits, half the other words; `digits`: the ten digits only */
  vocabulary?: Vocabulary;
}

export const VOCABULARIES = ['mixed', 'digits'] as const;
export type Vocabulary = (typeof VOCABULARIES)[number];

const PLAN_STREAM = 0x5bee;

/** Every (accent, speaker) pair of a split, in a fixed order. */
export function voicesOf(split: Split): string[] {
  return SPEAKERS[split].flatMap((s) => ACCENTS.map((a) => (s === '' ? a : `${a}+${s}`)));
}

/** The plan of utterance `index`. */
export function planUtterance(index: number, options: CorpusOptions): UtterancePlan {
  const { seed, minWords = 1, maxWords = 5, vocabulary = 'mixed' } = options;
  const rng = new CounterRng(seed, index, PLAN_STREAM);
  const uniform = (lo: number, hi: number): number => lo + (hi - lo) * rng.next();
  // a voice drawn uniformly from all pairs: each split's share is its share of the speakers
  const all = SPEAKERS.train.length + SPEAKERS.dev.length + SPEAKERS.test.length;
  const speakerIndex = rng.int(all);
  const split: Split =
    speakerIndex < SPEAKERS.train.length
      ? 'train'
      : speakerIndex < SPEAKERS.train.length + SPEAKERS.dev.length
        ? 'dev'
        : 'test';
  const speakers = SPEAKERS[split];
  const speaker =
    speakers[
      speakerIndex -
        (split === 'train' ? 0 : split === 'dev' ? SPEAKERS.train.length : SPEAKERS.train.length + SPEAKERS.dev.length)
    ]!;
  const accent = ACCENTS[rng.int(ACCENTS.length)]!;
  const count = minWords + rng.int(maxWords - minWords + 1);
  const words: string[] = [];
  // half the words are digits: digit strings are the corpus's core
  for (let w = 0; w < count; w++)
    words.push(
      vocabulary === 'digits' || rng.next() < 0.5 ? DIGITS[rng.int(DIGITS.length)]! : WORDS[rng.int(WORDS.length)]!,
    );
  return {
    index,
    split,
    voice: speaker === '' ? accent : `${accent}+${speaker}`,
    rate: Math.round(uniform(130, 230)),
    pitch: Math.round(uniform(25, 75)),
    words,
    snrDb: Math.round(uniform(15, 40) * 10) / 10,
    peak: Math.round(uniform(0.3, 0.9) * 100) / 100,
    leadSeconds: Math.round(uniform(0.02, 0.1) * 1000) / 1000,
    tailSeconds: Math.round(uniform(0.02, 0.1) * 1000) / 1000,
  };
}

const NOISE_STREAM = 0x401e;

/**
 * The finished utterance from synthesised speech (mono, at `rate`): leading and trailing silence trimmed
 * (to 20 ms around the first and last sample above 1% of the peak), scaled to the plan's peak, padded
 * with the plan's silences, then white Gaussian noise at the plan's SNR (relative to the speech's RMS)
 * added everywhere, keyed by (seed, index) so it repeats. Clipped to [−1, 1).
 */
export function renderUtterance(speech: Float32Array, rate: number, plan: UtterancePlan, seed: number): Float32Array {
  let peak = 0;
  for (const v of speech) peak = Math.max(peak, Math.abs(v));
  if (peak === 0)
    throw new Error(
      `utterance ${plan.index} ("${plan.words.join(' ')}", voice ${plan.voice}): the synthesiser produced silence`,
    );
  let first = 0,
    last = speech.length - 1;
  while (Math.abs(speech[first]!) < 0.01 * peak) first++;
  while (Math.abs(speech[last]!) < 0.01 * peak) last--;
  const gain = plan.peak / peak;
  // the speech's level, measured between the first and last audible samples
  let energy = 0;
  for (let i = first; i <= last; i++) energy += (speech[i]! * gain) ** 2;
  const noiseRms = Math.sqrt(energy / (last - first + 1)) * 10 ** (-plan.snrDb / 20);
  const margin = Math.round(0.02 * rate);
  first = Math.max(0, first - margin);
  last = Math.min(speech.length - 1, last + margin);
  const lead = Math.round(plan.leadSeconds * rate),
    tail = Math.round(plan.tailSeconds * rate);
  const out = new Float32Array(lead + (last - first + 1) + tail);
  for (let i = first; i <= last; i++) out[lead + i - first] = speech[i]! * gain;
  const rng = new CounterRng(seed, plan.index, NOISE_STREAM);
  for (let i = 0; i < out.length; i++)
    out[i] = Math.max(-1, Math.min(32767 / 32768, out[i]! + noiseRms * rng.normal()));
  return out;
}
