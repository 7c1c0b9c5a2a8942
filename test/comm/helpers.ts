/** Spawning TypeScript worker threads for the shm tests, the inputs every test derives, and assembling a .wat file. */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { createShmWorld, type ShmWorld, type ShmWorldOptions } from '../../src/comm/shm/index.ts';
import { bundledModule } from '../../src/runtime/job/spawnWorker.ts';

const tsxApi = import.meta.resolve('tsx/esm/api');

/**
 * A worker running a TypeScript module. tsx's `--import` hooks do not reach worker threads on
 * Node 20, so the worker loads the module's bundle (made once per process, spawnWorker.ts) or,
 * where there is none, a tiny eval bootstrap registers tsx inside the worker and imports the module.
 */
export function spawnTsWorker(entry: URL, workerData: unknown): Worker {
  const bundle = bundledModule(entry.href);
  const code = bundle
    ? `process.setSourceMapsEnabled(true); import(${JSON.stringify(bundle)})`
    : `import(${JSON.stringify(tsxApi)}).then((m) => { m.register(); return import(${JSON.stringify(entry.href)}); })`;
  return new Worker(code, { eval: true, workerData });
}

export const workerUrl = new URL('./shmWorker.ts', import.meta.url);

export interface RankResult {
  rank: number;
  ok: boolean;
  failures: string[];
  /** scenario-specific values */
  data: Record<string, unknown>;
  error?: { name: string; message: string; failedRank?: number; missing?: number[] };
  /** ms from entering the blocking call to its rejection (abort tests) */
  elapsedMs?: number;
}

/**
 * Runs `scenario` on `size` worker ranks of a fresh world and collects each rank's result
 * message. `during(world, workers)` runs on the main thread while the ranks work.
 */
export async function runWorld(
  size: number,
  scenario: string,
  params: Record<string, unknown> = {},
  opts: {
    world?: ShmWorldOptions;
    during?: (world: ShmWorld, workers: Worker[]) => Promise<void> | void;
    watch?: boolean;
    shared?: SharedArrayBuffer;
  } = {},
): Promise<{ world: ShmWorld; results: RankResult[] }> {
  const world = createShmWorld(size, opts.world);
  const shared = opts.shared ?? new SharedArrayBuffer(64);
  const workers: Worker[] = [];
  const ranks = Array.from(
    { length: size },
    (_, rank) =>
      new Promise<RankResult>((resolve, reject) => {
        const w = spawnTsWorker(workerUrl, { init: world.rankInit(rank), scenario, params, shared });
        workers.push(w);
        if (opts.watch !== false) world.watch(w, rank);
        let result: RankResult | undefined;
        w.on('message', (m: RankResult) => {
          result = m;
        });
        w.on('error', (err) => {
          if (!params.expectCrash) reject(err);
        });
        w.on('exit', (code) => {
          if (result) resolve(result);
          else if (params.expectCrash) resolve({ rank, ok: false, failures: [], data: { crashed: true, code } });
          else reject(new Error(`rank ${rank} exited with code ${code} without a result`));
        });
      }),
  );
  const during = Promise.resolve().then(() => opts.during?.(world, workers));
  const [results] = await Promise.all([Promise.all(ranks), during]);
  return { world, results };
}

/** Deterministic inputs in [-1, 1): rank `rank`'s buffer for test `seed`. */
export function inputFor(n: number, rank: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = (Math.imul(seed + 1, 0x9e3779b1) ^ Math.imul(rank + 7, 0x85ebca6b)) >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    out[i] = (s / 4294967296) * 2 - 1;
  }
  return out;
}

/** Serial float32 sum over ranks in rank order (the result every transport must reproduce). */
export function serialSum(inputs: Float32Array[]): Float32Array {
  const acc = new Float32Array(inputs[0]!.length);
  acc.set(inputs[0]!);
  for (let r = 1; r < inputs.length; r++) {
    const x = inputs[r]!;
    for (let i = 0; i < acc.length; i++) acc[i] = acc[i]! + x[i]!;
  }
  return acc;
}

/** Index of the first element whose bits differ, or -1. */
export function firstBitDiff(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) return Math.min(a.length, b.length);
  const ua = new Uint32Array(a.buffer, a.byteOffset, a.length),
    ub = new Uint32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < ua.length; i++) if (ua[i] !== ub[i]) return i;
  return -1;
}

/** FNV-1a over the bits of a Float32Array. */
export function hashBits(a: Float32Array): number {
  const u = new Uint32Array(a.buffer, a.byteOffset, a.length);
  let h = 0x811c9dc5;
  for (let i = 0; i < u.length; i++) h = Math.imul(h ^ u[i]!, 0x01000193);
  return h >>> 0;
}

/**
 * binaryen's text → binary of a .wat file (SIMD and threads enabled, validated), base64. In a plain node child:
 * under tsx, importing binaryen's 13 MB index.js costs over 30 s of CPU; without it, about 2.
 */
export function assembleWat(wat: URL): string {
  const script = `import binaryen from 'binaryen';
import { readFileSync } from 'node:fs';
const mod = binaryen.parseText(readFileSync(process.argv[1], 'utf8'));
mod.setFeatures(binaryen.Features.SIMD128 | binaryen.Features.Atomics);
if (!mod.validate()) throw new Error('binaryen: the module does not validate');
process.stdout.write(Buffer.from(mod.emitBinary()).toString('base64'));`;
  return execFileSync(process.execPath, ['--input-type=module', '-e', script, fileURLToPath(wat)], {
    cwd: fileURLToPath(new URL('../..', import.meta.url)),
    encoding: 'utf8',
    env: { ...process.env, NODE_OPTIONS: '' },
  });
}
