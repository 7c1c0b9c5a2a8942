/**
 * The speech front end's speed: utterances per second from 8 kHz WAV files to MFCC features — read
 * the file, decode, resample 8 → 16 kHz, MFCC with the speech defaults (DEFAULT_FEATURE_OPTIONS) —
 * for paratrain on one thread, torchaudio on one thread (bench/speech_features.py, where python3 can
 * import torchaudio), and paratrain on every core (its feature worker pool), in one run on the same
 * files.
 *
 *   npm run bench -- speech-features [--utterances 3000] [--threads N] [--keep]
 *
 * The files are made in a temporary folder from data/speech-mini (16 kHz): each resampled to 8 kHz
 * with paratrain's resampler and written as 16-bit PCM, the copies past the first 300 each at another
 * gain. `--keep` leaves the folder (its path is printed).
 *
 * paratrain's side runs on worker threads of its feature pool, one for the one-thread figure, each
 * pool started and warmed up before it is timed (starting a worker under tsx costs about a second,
 * which loading a dataset pays once). Not on this main thread: under tsx, loading a CommonJS package
 * (wavefile) detaches an ArrayBuffer, which invalidates V8's ArrayBufferDetaching protector for the
 * thread, and its typed-array loops then run about a quarter slower than in the compiled CLI; the
 * workers' threads are not affected.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FeatureJob } from '../src/speech/featureJob.ts';
import { frameGeometry, resolveFeatureOptions, type FeatureOptions } from '../src/speech/featureOptions.ts';
import { FeaturePool } from '../src/speech/featureWorkers.ts';
import { resample } from '../src/speech/resample.ts';
import { encodeWav16, readWav } from '../src/speech/wav.ts';
import { flag } from './args.ts';
import { peakLine } from './peak.ts';

const SOURCE = fileURLToPath(new URL('../data/speech-mini/wavs/', import.meta.url));
const SCRIPT = fileURLToPath(new URL('./speech_features.py', import.meta.url));
const RATE = 8000;
/** utterances run once untimed first, on each side */
const WARMUP = 200;

export async function main(args: string[]): Promise<void> {
  const count = Number(flag(args, 'utterances') ?? 3000);
  const threads = Number(flag(args, 'threads') ?? availableParallelism());
  if (!Number.isInteger(count) || count < 1) throw new Error('--utterances: a whole number ≥ 1');
  if (!Number.isInteger(threads) || threads < 1) throw new Error('--threads: a whole number ≥ 1');
  const options = resolveFeatureOptions();
  console.log(`CPU: ${cpuModel()}; load average ${loadavg()[0]!.toFixed(2)} at the start`);
  console.log(peakLine());
  const dir = mkdtempSync(join(tmpdir(), 'paratrain-speech-bench-'));
  try {
    const { files, seconds } = makeWavs(dir, count);
    const jobs: FeatureJob[] = files.map((path) => ({ path, name: path }));
    console.log(
      `${count} utterances of ${RATE / 1000} kHz 16-bit mono WAV, ${(seconds / count).toFixed(2)} s each on average (${(seconds / 60).toFixed(1)} min), in ${dir}`,
    );
    console.log(`per utterance: read, decode, resample ${RATE} → ${options.sampleRate} Hz, ${describe(options)}\n`);

    // one thread: a pool of one worker (see the header for why not the main thread)
    const single = await timedPool(options, 1, jobs);
    const one = count / single.seconds;
    const frames = single.features.reduce((a, f) => a + f.length, 0) / frameGeometry(options).featureSize;
    console.log(
      `paratrain, 1 thread:   ${rate(one)}  (${rate(count / single.cpuSeconds)} per CPU-second; ${(seconds / single.seconds).toFixed(0)}× real time)`,
    );

    const torch = torchaudioRun(options, files, dir);
    if (typeof torch === 'string') console.log(`torchaudio, 1 thread:  not measured: ${torch}`);
    else {
      const perSecond = torch.utterances / torch.seconds;
      console.log(
        `torchaudio ${torch.torchaudio} (torch ${torch.torch}), 1 thread: ${rate(perSecond)}  (${rate(torch.utterances / torch.cpuSeconds)} per CPU-second)`,
      );
      const cpuRatio = torch.cpuSeconds / single.cpuSeconds;
      console.log(
        `  paratrain / torchaudio on one thread: ${(one / perSecond).toFixed(2)}× (wall time), ${cpuRatio.toFixed(2)}× (CPU time; steadier on a busy machine)`,
      );
      if (torch.frames !== frames)
        console.log(`  note: the frame counts differ (paratrain ${frames}, torchaudio ${torch.frames})`);
      else console.log(`  the same ${frames} frames on both sides`);
    }

    if (threads > 1) {
      const parallel = await timedPool(options, threads, jobs);
      const many = count / parallel.seconds;
      console.log(
        `paratrain, ${threads} threads (feature worker pool): ${rate(many)}  (${(many / one).toFixed(2)}× one thread)`,
      );
      const same = parallel.features.every(
        (f, i) => f.length === single.features[i]!.length && f.every((v, k) => v === single.features[i]![k]),
      );
      if (!same) throw new Error(`${threads} threads gave other features than one`);
    }
    console.log(`\nload average ${loadavg()[0]!.toFixed(2)} at the end (${cpus().length} logical CPUs)`);
  } finally {
    if (args.includes('--keep')) console.log(`kept ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

/** Every job's features on a pool of `threads` workers, started and warmed up first; the timed pass's seconds. */
async function timedPool(
  options: FeatureOptions,
  threads: number,
  jobs: FeatureJob[],
): Promise<{ features: Float32Array[]; seconds: number; cpuSeconds: number }> {
  const pool = new FeaturePool(options, threads);
  try {
    await pool.compute(jobs.slice(0, WARMUP * threads));
    const cpu = process.cpuUsage(),
      start = performance.now();
    const features = await pool.compute(jobs);
    const seconds = (performance.now() - start) / 1000;
    return { features, seconds, cpuSeconds: cpuSeconds(process.cpuUsage(cpu)) };
  } finally {
    await pool.close();
  }
}

/** Writes `count` 8 kHz WAV files made from the shipped 16 kHz corpus; returns them and their total duration. */
function makeWavs(dir: string, count: number): { files: string[]; seconds: number } {
  const sources = readdirSync(SOURCE)
    .filter((f) => f.endsWith('.wav'))
    .sort()
    .map((f) => resample(readWav(join(SOURCE, f), 16000).samples, 16000, RATE));
  const files: string[] = [];
  let samples = 0;
  for (let k = 0; k < count; k++) {
    const base = sources[k % sources.length]!;
    const gain = 1 - 0.05 * (Math.floor(k / sources.length) % 10);
    const path = join(dir, `${String(k).padStart(6, '0')}.wav`);
    writeFileSync(
      path,
      encodeWav16(
        base.map((v) => v * gain),
        RATE,
      ),
    );
    files.push(path);
    samples += base.length;
  }
  return { files, seconds: samples / RATE };
}

interface TorchResult {
  utterances: number;
  seconds: number;
  cpuSeconds: number;
  frames: number;
  torch: string;
  torchaudio: string;
}

/** torchaudio's run of the same files, or why it could not run. */
function torchaudioRun(options: FeatureOptions, files: string[], dir: string): TorchResult | string {
  const python = ['/usr/bin/python3', 'python3'].find(
    (p) => spawnSync(p, ['-c', 'import torchaudio'], { encoding: 'utf8' }).status === 0,
  );
  if (!python)
    return 'python3 cannot import torchaudio; install it with `apt-get install python3-torchaudio` (Debian) or `pip install torch torchaudio`';
  const list = join(dir, 'files.txt');
  writeFileSync(list, `${files.join('\n')}\n`);
  const r = spawnSync(python, [SCRIPT, JSON.stringify(options), list, String(WARMUP)], {
    encoding: 'utf8',
    env: { ...process.env, OMP_NUM_THREADS: '1', MKL_NUM_THREADS: '1' },
    timeout: 600_000,
  });
  if (r.status !== 0) return `${SCRIPT} failed: ${r.stderr.trim().split('\n').slice(-3).join(' | ')}`;
  return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as TorchResult;
}

function describe(o: FeatureOptions): string {
  const g = frameGeometry(o);
  const what =
    o.type === 'mfcc' ? `${o.coefficients} MFCC from ${o.melFilters} mel filters` : `${o.melFilters} log-mel`;
  return `${what}, ${o.windowMs} ms ${o.window} window (${g.windowSize} samples, FFT ${g.fftSize}) every ${o.stepMs} ms (the speech defaults)`;
}

const rate = (perSecond: number) => `${perSecond.toFixed(0).padStart(5)} utterances/s`;
const cpuSeconds = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1e6;

/** The CPU's model name and widest vectors, from /proc/cpuinfo where there is one. */
function cpuModel(): string {
  let info = '';
  try {
    info = readFileSync('/proc/cpuinfo', 'utf8');
  } catch {
    /* not Linux */
  }
  const name = /^model name\s*:\s*(.*)$/m.exec(info)?.[1]?.trim() ?? cpus()[0]?.model ?? 'unknown';
  const isa = /\bavx512f\b/.test(info) ? ', AVX-512' : /\bavx2\b/.test(info) ? ', AVX2' : '';
  return `${name} (${cpus().length} logical CPUs${isa})`;
}
