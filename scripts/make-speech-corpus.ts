/**
 * Synthesises a speech corpus with espeak-ng (and sox to resample): utterances of 1–5 words (the ten
 * digits and 51 other short words, or with --vocabulary digits the digits only) in 8 English accents × 60
 * speakers (espeak-ng variants), at random rates and pitches, trimmed, with white noise at 15–40 dB SNR;
 * mono 16-bit WAVs at 16 kHz (or --rate) and DeepSpeech
 * manifests train.csv / dev.csv / test.csv, split by speaker (src/speech/corpusPlan.ts: the test and dev
 * speakers never occur in training). Deterministic from the seed for given espeak-ng and sox versions.
 * Then loads the result with paratrain's speech loader to check it, and writes OUT/README.md.
 *
 *   node --import tsx scripts/make-speech-corpus.ts --out DIR [--utterances 20000] [--seed 1]
 *        [--min-words 1] [--max-words 5] [--vocabulary mixed|digits] [--rate 16000] [--encoding pcm16|mulaw]
 *        [--jobs N] [--force]
 *
 * Needs `espeak-ng` and `sox` (Debian: apt-get install espeak-ng sox).
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { BucketBatchSampler } from '../src/data/bucketSampler.ts';
import {
  ACCENTS,
  SPEAKERS,
  VOCABULARIES,
  WORDS,
  planUtterance,
  renderUtterance,
  voicesOf,
  type CorpusOptions,
  type Split,
  type UtterancePlan,
  type Vocabulary,
} from '../src/speech/corpusPlan.ts';
import { gatherSpeechBatch } from '../src/speech/speechBatch.ts';
import { loadSpeechData } from '../src/speech/speechData.ts';
import { speechDatasetFingerprint } from '../src/speech/speechDataset.ts';
import wavefile from 'wavefile';
import { decodeWav, encodeWav16 } from '../src/speech/wav.ts';

function arg(name: string, fallback?: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : fallback;
}
function intArg(name: string, fallback: number, min: number): number {
  const text = arg(name, String(fallback))!;
  const v = Number(text);
  if (!Number.isInteger(v) || v < min) throw new Error(`${name}: expected a whole number ≥ ${min}, got ${text}`);
  return v;
}

const out = arg('--out');
if (!out) throw new Error('--out DIR is required (the corpus directory to create)');
const utterances = intArg('--utterances', 20000, 1);
const seed = intArg('--seed', 1, 0);
const minWords = intArg('--min-words', 1, 1);
const maxWords = intArg('--max-words', 5, minWords);
const jobs = intArg('--jobs', availableParallelism(), 1);
const vocabulary = arg('--vocabulary', 'mixed') as Vocabulary;
if (!VOCABULARIES.includes(vocabulary))
  throw new Error(`--vocabulary: expected one of ${VOCABULARIES.join(', ')}, got ${vocabulary}`);
// the WAVs' sample rate: 8000 halves the files (telephone band), enough for the digits
const RATE = intArg('--rate', 16000, 8000);
// µ-law (G.711, 8 bits a sample) halves the files again, as telephone audio is stored
const encoding = arg('--encoding', 'pcm16')!;
if (encoding !== 'pcm16' && encoding !== 'mulaw')
  throw new Error(`--encoding: expected pcm16 or mulaw, got ${encoding}`);
const corpus: CorpusOptions = { seed, minWords, maxWords, vocabulary };

/** The WAV file's bytes: 16-bit PCM, or that companded to µ-law. */
function encodeWav(samples: Float32Array): Uint8Array {
  const bytes = encodeWav16(samples, RATE);
  if (encoding === 'pcm16') return bytes;
  const wav = new wavefile.WaveFile(bytes);
  wav.toMuLaw();
  return wav.toBuffer();
}

/** The tool's version line, or a clear error when it is missing. */
function toolVersion(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.error) throw new Error(`${cmd} not found (${r.error.message}); install it, e.g. apt-get install espeak-ng sox`);
  return `${r.stdout}${r.stderr}`
    .split('\n')
    .find((l) => l.trim() !== '')!
    .trim();
}
// "eSpeak NG text-to-speech: 1.51  Data at: …" → "espeak-ng 1.51"; "sox:      SoX v14.4.2" → "sox 14.4.2"
const espeakVersion = `espeak-ng ${/:\s*([\d.]+)/.exec(toolVersion('espeak-ng', ['--version']))?.[1] ?? '(unknown version)'}`;
const soxVersion = `sox ${/v([\d.]+)/.exec(toolVersion('sox', ['--version']))?.[1] ?? '(unknown version)'}`;

// every speaker of the plan must exist: espeak-ng falls back silently on an unknown variant
const variants = new Set(
  spawnSync('espeak-ng', ['--voices=variant'], { encoding: 'utf8' })
    .stdout.split('\n')
    .map((l) => l.trim().split(/\s+/)[4]?.replace(/^!v\//, '')),
);
for (const s of [...SPEAKERS.train, ...SPEAKERS.dev, ...SPEAKERS.test]) {
  if (s !== '' && !variants.has(s))
    throw new Error(
      `espeak-ng has no variant "${s}" (espeak-ng --voices=variant lists them); this espeak-ng differs from the one the plan was made for`,
    );
}

if (existsSync(out) && readdirSync(out).length > 0 && !process.argv.includes('--force')) {
  throw new Error(`${out} exists and is not empty; choose another --out or pass --force to replace it`);
}
// built in a side directory and renamed into place when complete, so a failed run leaves no half corpus
const work = `${out}.partial-${process.pid}`;
rmSync(work, { recursive: true, force: true });
mkdirSync(join(work, 'wavs'), { recursive: true });
process.on('exit', (code) => {
  if (code !== 0) rmSync(work, { recursive: true, force: true });
});

/** Runs a command with stdin, resolving with its stdout. */
function run(cmd: string, args: string[], input?: Uint8Array): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [],
      errs: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => chunks.push(c));
    child.stderr.on('data', (c: Buffer) => errs.push(c));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0
        ? resolve(Buffer.concat(chunks))
        : reject(new Error(`${cmd} ${args.join(' ')}: exit ${code}: ${Buffer.concat(errs).toString().trim()}`)),
    );
    child.stdin.end(input);
  });
}

/** Synthesises, resamples (sox's high-quality rate), renders and writes one utterance; returns its manifest row. */
async function make(
  plan: UtterancePlan,
): Promise<{ plan: UtterancePlan; name: string; size: number; seconds: number }> {
  const text = plan.words.join(' ');
  const speech = await run('espeak-ng', [
    '-v',
    plan.voice,
    '-s',
    String(plan.rate),
    '-p',
    String(plan.pitch),
    '--stdout',
    text,
  ]);
  const resampled = await run(
    'sox',
    ['-t', 'wav', '-', '-t', 'wav', '-e', 'floating-point', '-b', '32', '-', 'rate', '-v', String(RATE)],
    speech,
  );
  const audio = decodeWav(resampled, `utterance ${plan.index} (${plan.voice}: "${text}")`);
  const samples = renderUtterance(audio.samples, RATE, plan, seed);
  const name = `wavs/${String(plan.index).padStart(6, '0')}.wav`;
  const bytes = encodeWav(samples);
  writeFileSync(join(work, name), bytes);
  return { plan, name, size: bytes.length, seconds: samples.length / RATE };
}

const started = Date.now();
const rows: Awaited<ReturnType<typeof make>>[] = new Array(utterances);
let next = 0,
  done = 0;
await Promise.all(
  Array.from({ length: Math.min(jobs, utterances) }, async () => {
    while (next < utterances) {
      const i = next++;
      rows[i] = await make(planUtterance(i, corpus));
      if (++done % 500 === 0)
        console.log(`${done} of ${utterances} utterances (${((Date.now() - started) / 1000).toFixed(0)} s)`);
    }
  }),
);

const csvField = (s: string): string => (/[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);
const splits: Split[] = ['train', 'dev', 'test'];
for (const split of splits) {
  const lines = rows
    .filter((r) => r.plan.split === split)
    .map((r) => `${r.name},${r.size},${csvField(r.plan.words.join(' '))}`);
  writeFileSync(
    join(work, `${split}.csv`),
    `wav_filename,wav_filesize,transcript\n${lines.join('\n')}${lines.length ? '\n' : ''}`,
  );
}
writeFileSync(
  join(work, 'utterances.csv'),
  `wav_filename,split,voice,rate,pitch,snr_db,peak,seconds,transcript\n${rows
    .map((r) =>
      [
        r.name,
        r.plan.split,
        r.plan.voice,
        r.plan.rate,
        r.plan.pitch,
        r.plan.snrDb,
        r.plan.peak,
        r.seconds.toFixed(3),
        csvField(r.plan.words.join(' ')),
      ].join(','),
    )
    .join('\n')}\n`,
);

// check: the loader reads it all, and show what bucketing saves
const data = await loadSpeechData(work, { cache: false, features: { sampleRate: RATE } });
const summary = splits.map((split) => {
  const rs = rows.filter((r) => r.plan.split === split);
  const seconds = rs.reduce((a, r) => a + r.seconds, 0);
  return { split, count: rs.length, seconds, voices: new Set(rs.map((r) => r.plan.voice)).size };
});
const lengths = data.train.frames;
/** Extra frames a batch order pads with: Σ (batch size × its longest) / Σ frames − 1, from gathered batches. */
const padding = (order: Int32Array, b: number): number => {
  let padded = 0,
    frames = 0;
  for (let s = 0; s < order.length; s += b) {
    const batch = gatherSpeechBatch(data.train, order.subarray(s, s + b));
    padded += batch.count * batch.maxFrames;
    frames += batch.lengths.reduce((a, l) => a + l, 0);
  }
  return padded / frames - 1;
};
const batch = Math.min(32, lengths.length);
const bucketed = new BucketBatchSampler({
  lengths,
  batchSize: batch,
  worldSize: 1,
  rank: 0,
  seed,
  shuffle: true,
  dropLast: false,
}).permutation(0);
const fileOrder = Int32Array.from({ length: lengths.length }, (_, i) => i);
const bytes = readdirSync(join(work, 'wavs')).reduce((a, f) => a + statSync(join(work, 'wavs', f)).size, 0);
const command = `node --import tsx scripts/make-speech-corpus.ts --out ${out} --utterances ${utterances} --seed ${seed} --min-words ${minWords} --max-words ${maxWords}${vocabulary === 'mixed' ? '' : ` --vocabulary ${vocabulary}`}${RATE === 16000 ? '' : ` --rate ${RATE}`}${encoding === 'pcm16' ? '' : ` --encoding ${encoding}`}`;
const kHz = `${RATE / 1000} kHz`;
const vocabularyLine =
  vocabulary === 'digits'
    ? 'the digits zero … nine only'
    : `the digits zero … nine (half the words) and ${WORDS.length} short common
  words (src/speech/corpusPlan.ts lists them; two have apostrophes, "don't" and "it's")`;

writeFileSync(
  join(work, 'README.md'),
  `# Synthetic speech corpus (espeak-ng)

Made by paratrain's \`scripts/make-speech-corpus.ts\`:

    ${command}

with ${espeakVersion} and ${soxVersion}. The same command with the same tool versions
makes the same files (every random choice is keyed by the seed and the utterance's index, so a corpus of N
utterances is the first N of a larger one with the same seed). The full corpus, 20 000 utterances of 1–5 words
(about 6 hours of audio, 0.7 GB), is the script with its defaults: \`node --import tsx scripts/make-speech-corpus.ts --out DIR\`.

## What is in it

| split | utterances | audio | voices (accent × speaker) | manifest |
| --- | ---: | ---: | ---: | --- |
${summary.map((s) => `| ${s.split} | ${s.count} | ${(s.seconds / 60).toFixed(1)} min | ${s.voices} of ${voicesOf(s.split).length} | \`${s.split}.csv\` |`).join('\n')}

- ${utterances} utterances of ${minWords}–${maxWords} words: ${vocabularyLine}. Transcripts use the
  default alphabet (space, a–z, apostrophe).
- Voices: ${ACCENTS.length} espeak-ng English accents (${ACCENTS.join(', ')}) × speakers, i.e. espeak-ng variants
  (\`-v accent+variant\`). **Split by speaker**: the ${SPEAKERS.test.length} test speakers (${SPEAKERS.test.join(', ')}) and the
  ${SPEAKERS.dev.length} dev speakers (${SPEAKERS.dev.join(', ')}) never occur in training (${SPEAKERS.train.length} speakers, one of them
  the accents' own default voice); the accents are shared.
- Each utterance: espeak-ng at a rate of 130–230 words per minute (\`-s\`) and pitch 25–75 (\`-p\`); resampled from
  22 050 Hz to ${kHz} by \`sox … rate -v ${RATE}\`; silence trimmed to 20 ms around the speech; scaled to a peak of
  0.3–0.9; 20–100 ms of silence added before and after; white Gaussian noise at 15–40 dB below the speech's RMS
  level over the whole file.
- Files: \`wavs/NNNNNN.wav\` (${kHz}, mono, ${encoding === 'pcm16' ? '16-bit PCM' : '8-bit µ-law'}; ${(bytes / 1e6).toFixed(1)} MB in all), DeepSpeech manifests
  \`train.csv\`, \`dev.csv\`, \`test.csv\` (\`wav_filename,wav_filesize,transcript\`, paths relative to this folder),
  and \`utterances.csv\` with every utterance's split, voice, rate, pitch, SNR, peak and duration.
- With paratrain's default features (26 MFCC, 32 ms / 20 ms) at ${kHz} the training set has ${data.train.frameOffsets[data.train.count]} frames;
  batches of ${batch} in file order pad ${(100 * padding(fileOrder, batch)).toFixed(0)}% extra frames, length-bucketed ones ${(100 * padding(bucketed, batch)).toFixed(0)}%.
  Training set fingerprint: ${speechDatasetFingerprint(data.train)['first utterances']}.

Use it with \`data: { dataset: speech, dir: ${out}${RATE === 16000 ? '' : `, features: { sampleRate: ${RATE} }`} }\`.
`,
);
rmSync(out, { recursive: true, force: true });
renameSync(work, out);
console.log(
  `wrote ${utterances} utterances to ${out} in ${((Date.now() - started) / 1000).toFixed(0)} s: ${summary.map((s) => `${s.split} ${s.count}`).join(', ')}; ${(bytes / 1e6).toFixed(1)} MB of WAV`,
);
