/** Shared by the multi-process tests: a tiny config, reading a checkpoint's weights, comparing them. */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { cliArgs, REPO, runCli, SUBSET } from '../cli/helpers.ts';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { encodeIdx, readIdxFile } from '../../src/data/idx.ts';
import { randomPort } from './testPorts.ts';
import type { ConfigOverrides, TrainResult } from '../../src/index.ts';

/** The shipped subset cut to its first `train` training images (the test set unchanged), written raw into dir. */
export function cutSubset(dir: string, train: number): void {
  for (const [prefix, keep] of [
    ['train', train],
    ['t10k', Infinity],
  ] as const) {
    const images = readIdxFile(join(SUBSET, `${prefix}-images-idx3-ubyte.gz`));
    const labels = readIdxFile(join(SUBSET, `${prefix}-labels-idx1-ubyte.gz`));
    const [count, rows, cols] = images.dims as [number, number, number];
    const n = Math.min(keep, count);
    writeFileSync(
      join(dir, `${prefix}-images-idx3-ubyte`),
      encodeIdx([n, rows, cols], images.data.subarray(0, n * rows * cols)),
    );
    writeFileSync(join(dir, `${prefix}-labels-idx1-ubyte`), encodeIdx([n], labels.data.subarray(0, n)));
  }
}

/** All layer tensors of a checkpoint, in name order, as one array. */
export function weights(file: string): Float32Array {
  const { tensors } = readCheckpoint(file);
  const parts = [...tensors.keys()]
    .filter((n) => n.startsWith('layers.'))
    .sort()
    .map((n) => tensors.get(n)!.data);
  const all = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  return all;
}

/** Within 1e-4 of the largest reference weight: float32 sums in a different order. */
export function assertClose(a: Float32Array, b: Float32Array, what: string): void {
  assert.equal(a.length, b.length);
  const scale = b.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
  assert.ok(worst <= 1e-4 * scale, `${what}: largest difference ${worst} (scale ${scale})`);
}

const CONVNET = `
    - conv2d: { filters: 4, kernelSize: 3, strides: 2, activation: relu }
    - maxPool2d: { poolSize: 2 }
    - flatten: {}
    - dense: { units: 16, activation: relu }
    - dropout: { rate: 0.3 }
    - dense: { units: 10 }`;

/** The same with its dense layers model-parallel ("one weird trick"; uneven shards on 4 devices). */
export const TRICK_LAYERS = `
    - conv2d: { filters: 4, kernelSize: 3, strides: 2, activation: relu }
    - maxPool2d: { poolSize: 2 }
    - flatten: {}
    - dense: { units: 18, activation: relu, parallel: model }
    - dropout: { rate: 0.3, masks: per-sample }
    - dense: { units: 10, parallel: model }`;

/** A small convnet with dropout on 96 samples of the shipped subset, js backend; `extra` adds train fields. */
export function tinyJobConfig(dir: string, extra = '', layers = CONVNET): string {
  const file = join(dir, 'tiny.yaml');
  writeFileSync(
    file,
    `model:
  input: [28, 28, 1]
  layers:${layers}
optimizer: { sgd: { lr: 0.05, momentum: 0.9 } }
data: { dir: ${SUBSET}, batchSize: 8, trainLimit: 96, testLimit: 100 }
train: { epochs: 1, seed: 3, evalEvery: 0, backend: js${extra} }
`,
  );
  return file;
}

/** A job's base port, unused by any concurrent test (testPorts.ts). */
export { randomPort };

export const SECRET = 'paratrain-test-secret-0123456789abcdef';

/** Runs a command from the repository root; resolves with its exit code and stdout + stderr interleaved. */
export function runCommand(
  cmd: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; timeoutMs: number },
): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: REPO, env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      out += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

/**
 * A job run in this process through the library, as each `paratrain train` process runs it (its
 * flags are these ConfigOverrides): with `processes` > 1, every process's train() call is made here,
 * the processes talking over loopback TCP as separate ones do. The reference of the tests that start
 * the same job as separate processes, without their start-ups (2–3 s of CPU each under tsx).
 * Resolves with process 0's result.
 */
export async function trainHere(
  configPath: string,
  out: string,
  o: ConfigOverrides & { processes?: number } = {},
): Promise<TrainResult> {
  // the library's train (src/index.ts) applies the overrides as the CLI's flags do
  const { train, loadConfig } = await import('../../src/index.ts');
  const { processes = 1, ...overrides } = o;
  const config = loadConfig(configPath);
  if (processes === 1) return train(config, { out, ...overrides });
  process.env.PARATRAIN_SECRET ??= SECRET;
  const masterPort = randomPort();
  const results = await Promise.all(
    Array.from({ length: processes }, (_, rank) =>
      train(config, {
        out,
        ...overrides,
        processes: { rank, worldSize: processes, masterAddr: '127.0.0.1', masterPort },
      }),
    ),
  );
  return results[0]!;
}

/** `paratrain launch --nproc-per-node P -- train CONFIG --devices L --out OUT`. */
export function launchTrain(config: string, processes: number, threads: number, out: string) {
  return runCli(
    [
      'launch',
      '--nproc-per-node',
      String(processes),
      '--master-port',
      String(randomPort()),
      '--',
      'train',
      config,
      '--devices',
      String(threads),
      '--out',
      out,
      '--quiet',
    ],
    { timeoutMs: 120_000 },
  );
}

/** mpirun -np 2 of the CLI with `args`; with `rank1Args`, process 1 runs those instead (MPMD: `-np 1 A : -np 1 B`). */
export function mpirunCli(
  args: string[],
  env: Record<string, string> = {},
  rank1Args?: string[],
): Promise<{ code: number | null; out: string }> {
  const asRoot = process.getuid?.() === 0 ? ['--allow-run-as-root'] : [];
  const vars = Object.keys(env).flatMap((k) => ['-x', k]);
  const node = [process.execPath, ...cliArgs()];
  const programs = rank1Args
    ? ['-np', '1', ...node, ...args, ':', '-np', '1', ...node, ...rank1Args]
    : ['-np', '2', ...node, ...args];
  return runCommand(
    'mpirun',
    [
      ...asRoot,
      '--oversubscribe',
      '--bind-to',
      'none',
      '-x',
      'PARATRAIN_SECRET',
      '-x',
      'MASTER_PORT',
      ...vars,
      ...programs,
    ],
    {
      env: {
        ...process.env,
        PARATRAIN_SECRET: SECRET,
        MASTER_PORT: String(randomPort()),
        PARATRAIN_OFFLINE: '1',
        ...env,
      },
      timeoutMs: 120_000,
    },
  );
}
