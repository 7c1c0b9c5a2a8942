/**
 * Where a 2-device job's scaling goes (docs/results.md, `throughput`): for each set of V8 flags, in
 * rounds taking turns, a 1-device job alone, two unconnected 1-device jobs at once (one process
 * each: the machine's ceiling) and a 2-device job, each in a fresh process with those flags;
 * mnist-small, hybrid, onednn where built, samples/s of rank 0's steps after the warm-up.
 *
 *   node --import tsx scripts/scaling-probe.ts [--rounds 5] [--steps 300] [--warmup 10[,1500…]] [--batch 64]
 *       [--flags "--no-concurrent-recompilation" --flags ""]      (each --flags one set; default: none)
 *       (every set of flags with every warm-up, taking turns in each round)
 *   node --import tsx scripts/scaling-probe.ts --compile-trace 4000 [--every 250]
 *       (a 2-device job under --trace-opt: the milliseconds TurboFan spent compiling, by window of steps)
 *
 * Prints each round and the medians: 1 device's samples/s, 2 apart / 1, 2 devices / 1, 2 devices / 2 apart.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { throughputJobConfig } from '../bench/throughput.ts';
import { train } from '../src/runtime/run/train.ts';

const args = process.argv.slice(2);
const option = (name: string, fallback: string): string => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1]! : fallback;
};
const count = (name: string, fallback: number): number => {
  const v = Number(option(name, String(fallback)));
  if (!(Number.isInteger(v) && v >= 1))
    throw new Error(`--${name}: a whole number ≥ 1, got '${option(name, String(fallback))}'`);
  return v;
};
const self = fileURLToPath(import.meta.url);
const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b),
    m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** Runs a job of `devices` in this process; calls `onStep(step)` once per global step (rank 0's event) and stops after `last`. */
async function job(
  devices: number,
  batch: number,
  last: number,
  onStep: (step: number, time: number) => void,
): Promise<void> {
  const config = throughputJobConfig(devices, batch, last + 1);
  const out = mkdtempSync(join(tmpdir(), 'paratrain-scaling-'));
  const stop = new AbortController();
  try {
    await train(config, {
      out: join(out, 'run'),
      signal: stop.signal,
      onEvent: (e) => {
        if (e.type !== 'step' || e.rank !== 0 || e.step > last) return;
        onStep(e.step, e.time ?? Date.now());
        if (e.step === last) stop.abort();
      },
    });
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

/** A child's part: one job's samples/s over steps [warmup, warmup + steps], as JSON. */
async function one(devices: number, steps: number, warmup: number, batch: number): Promise<void> {
  let t0 = 0,
    t1 = 0;
  await job(devices, batch, warmup + steps, (step, time) => {
    if (step === warmup) t0 = time;
    if (step === warmup + steps) t1 = time;
  });
  process.stdout.write(JSON.stringify({ rate: (steps * batch * devices) / ((t1 - t0) / 1000) }));
}

/** A child's part under --trace-opt: a marker line every `every` steps, between V8's own lines. */
async function traced(steps: number, every: number): Promise<void> {
  await job(2, 64, steps, (step) => {
    if (step % every === 0) writeSync(1, `\n#### step ${step}\n`);
  });
}

function child(flags: string[], rest: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [...flags, '--import', 'tsx', self, ...rest],
      { maxBuffer: 256 << 20 },
      (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)),
    );
  });
}

if (args[0] === '--one') {
  await one(Number(args[1]), Number(args[2]), Number(args[3]), Number(args[4]));
} else if (args[0] === '--traced') {
  await traced(Number(args[1]), Number(args[2]));
} else if (args.includes('--compile-trace')) {
  const steps = count('compile-trace', 4000),
    every = count('every', 250);
  const log = await child(['--trace-opt'], ['--traced', String(steps), String(every)]);
  const ms = new Map<number, number>();
  let window = -1; // before step 0: loading, building the model, the first step
  for (const line of log.split('\n')) {
    const mark = /^#### step (\d+)/.exec(line);
    if (mark) window = Number(mark[1]);
    // "[completed compiling … - took 0.010, 55.584, 0.298 ms]": the three phases of one compilation
    const took = /completed compiling .* took ([\d.]+), ([\d.]+), ([\d.]+) ms/.exec(line);
    if (took) ms.set(window, (ms.get(window) ?? 0) + Number(took[1]) + Number(took[2]) + Number(took[3]));
  }
  console.log(
    `a 2-device job of ${steps} steps under --trace-opt: ms of TurboFan compiling (both devices) by window of steps`,
  );
  for (const [from, t] of [...ms].sort((a, b) => a[0] - b[0]))
    console.log(`${from < 0 ? 'start-up' : `steps ${from}–${from + every}`}: ${t.toFixed(0)} ms`);
} else {
  const rounds = count('rounds', 5),
    steps = count('steps', 300),
    batch = count('batch', 64);
  const warmups = option('warmup', '10')
    .split(',')
    .map((w) => {
      const v = Number(w);
      if (!(Number.isInteger(v) && v >= 1))
        throw new Error(`--warmup: whole numbers ≥ 1, comma-separated, got '${option('warmup', '10')}'`);
      return v;
    });
  const flagSets: string[][] = [];
  args.forEach((a, i) => {
    if (a === '--flags') flagSets.push((args[i + 1] ?? '').split(' ').filter(Boolean));
  });
  if (!flagSets.length) flagSets.push([]);
  const sets = flagSets.flatMap((flags) => warmups.map((warmup) => ({ flags, warmup })));
  const label = ({ flags, warmup }: { flags: string[]; warmup: number }) =>
    `[${flags.join(' ') || 'no flags'}; warm-up ${warmup}]`;
  const rate = async (flags: string[], devices: number, warmup: number): Promise<number> =>
    (
      JSON.parse(await child(flags, ['--one', String(devices), String(steps), String(warmup), String(batch)])) as {
        rate: number;
      }
    ).rate;
  const rows = sets.map(() => [] as { one: number; apart: number; job: number }[]);
  console.log(
    `mnist-small, hybrid, per-device batch ${batch}, ${steps} steps after the warm-up; ${rounds} rounds taking turns`,
  );
  for (let r = 0; r < rounds; r++) {
    for (const [i, set] of sets.entries()) {
      const { flags, warmup } = set;
      const alone = await rate(flags, 1, warmup);
      const apart = (await Promise.all([rate(flags, 1, warmup), rate(flags, 1, warmup)])).reduce((a, b) => a + b, 0);
      const two = await rate(flags, 2, warmup);
      rows[i]!.push({ one: alone, apart: apart / alone, job: two / alone });
      console.log(
        `round ${r + 1} ${label(set)}: 1 device ${alone.toFixed(0)} samples/s; 2 apart ${(apart / alone).toFixed(3)}×; 2 devices ${(two / alone).toFixed(3)}×`,
      );
    }
  }
  for (const [i, set] of sets.entries()) {
    const x = rows[i]!;
    console.log(
      `medians ${label(set)}: 1 device ${median(x.map((v) => v.one)).toFixed(0)} samples/s; ` +
        `2 apart ${median(x.map((v) => v.apart)).toFixed(3)}×; 2 devices ${median(x.map((v) => v.job)).toFixed(3)}×; ` +
        `2 devices / 2 apart ${median(x.map((v) => v.job / v.apart)).toFixed(3)}`,
    );
  }
}
