/**
 * Jobs of several processes over loopback TCP, started by `paratrain launch` (or by hand with the
 * torchrun environment): each must equal the same job on worker threads in one process (run in this
 * process through the library, trainHere: as `paratrain train --devices N` runs it).
 *   - sync, 2 processes × 1 device = sync on 2 threads (the parameter server in process 0)
 *   - model-parallel dense layers ("one weird trick"), 2 processes × 2 devices = the trick on 4 threads
 *   - hybrid, 2 processes × 2 devices = 4 threads, with a parallel spatialSplit (tiles on different
 *     devices) and channel-split convolutions in one model-parallel section, then data-parallel
 *     layers with dropout (their gradients all-reduced hierarchically: within each process, then
 *     across)
 * (Hybrid on 2 processes × 1 device = hybrid on 2 threads is checked where mpirun (mpirun.test.ts)
 * and the cluster examples (comm/cluster-env.test.ts) start the processes.)
 * Tolerance: 1e-4 relative to the largest weight (float32 sums in a different order).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { runCli, stderrLines, tmpDir } from '../cli/helpers.ts';
import { otherProcessSteps, readRunMeasurements } from '../../src/simulate/fromRun.ts';
import { assertClose, randomPort, SECRET, tinyJobConfig, trainHere, TRICK_LAYERS, weights } from './jobHelpers.ts';

const config = tinyJobConfig,
  port = randomPort;

async function compare(strategy: string, processes: number, threads: number, layers?: string): Promise<void> {
  const dir = tmpDir();
  const cfg = config(dir, '', layers);
  const [multi] = await Promise.all([
    runCli(
      [
        'launch',
        '--nproc-per-node',
        String(processes),
        '--master-port',
        String(port()),
        '--',
        'train',
        cfg,
        '--devices',
        String(threads),
        '--strategy',
        strategy,
        '--out',
        join(dir, 'multi'),
        '--quiet',
      ],
      { timeoutMs: 120_000 },
    ),
    trainHere(cfg, join(dir, 'single'), { devices: processes * threads, strategy }),
  ]);
  assert.equal(multi.code, 0, multi.stderr);
  assert.match(
    multi.stdout,
    /\[process 1\] \{"rank":1/,
    'process 1 reports with its prefix (one numbering: deviceNames.ts)',
  );
  assertClose(
    weights(join(dir, 'multi', 'model.safetensors')),
    weights(join(dir, 'single', 'model.safetensors')),
    `${strategy} on ${processes}×${threads}`,
  );
}

test('"one weird trick" on 2 processes × 2 devices equals the trick on 4 threads', { timeout: 180_000 }, () =>
  compare('hybrid', 2, 2, TRICK_LAYERS),
);

// channel-split convs (pooling between them) after a parallel spatialSplit (tiles on different devices):
// both kinds of model-parallel convolution in one section, each crossing the processes; after it, a
// data-parallel part whose weights hybrid all-reduces hierarchically (2 devices in each process) and
// whose dropout masks (per device, by default) follow the job's device numbering
const CONV_SECTION_LAYERS = `
    - spatialSplit:
        tiles: [2, 2]
        parallel: model
        layers:
          - conv2d: { filters: 4, kernelSize: 3, strides: 2, padding: same, activation: relu }
          - maxPool2d: { poolSize: 2 }
    - conv2d: { filters: 5, kernelSize: 3, padding: same, activation: relu, parallel: model }
    - maxPool2d: { poolSize: 2 }
    - conv2d: { filters: 6, kernelSize: 3, padding: same, parallel: model }
    - flatten: {}
    - dense: { units: 16, activation: relu }
    - dropout: { rate: 0.3 }
    - dense: { units: 10 }`;
test(
  'hybrid (hierarchical) with a parallel spatialSplit and channel-split convs on 2 processes × 2 devices equals 4 threads',
  { timeout: 180_000 },
  () => compare('hybrid', 2, 2, CONV_SECTION_LAYERS),
);
test(
  'sync on 2 processes × 1 device (parameter server in process 0) equals sync on 2 threads',
  { timeout: 180_000 },
  () => compare('sync', 2, 1),
);

test('async, easgd (async), bsp and bmuf train across 2 processes × 2 devices', { timeout: 300_000 }, async () => {
  const dir = tmpDir();
  const cfg = config(dir);
  for (const strategy of ['async', 'bsp', 'bmuf']) {
    const r = await runCli(
      [
        'launch',
        '--nproc-per-node',
        '2',
        '--master-port',
        String(port()),
        '--',
        'train',
        cfg,
        '--devices',
        '2',
        '--strategy',
        strategy,
        '--out',
        join(dir, strategy),
        '--quiet',
      ],
      { timeoutMs: 120_000 },
    );
    assert.equal(r.code, 0, `${strategy}: ${r.stderr}`);
    const result = JSON.parse(r.stdout.split('\n').find((l) => l.startsWith('{"runDir"'))!);
    assert.ok(result.testAccuracy > 0, strategy);
    // process 1 records its own devices' steps beside process 0's metrics.jsonl (runtime/events/processMetrics.ts)
    const other = otherProcessSteps(join(dir, strategy));
    assert.deepEqual([...new Set(other.map((s) => s.rank))].sort(), [2, 3], `${strategy}: process 1's devices' steps`);
    assert.deepEqual(
      [...new Set(readRunMeasurements(join(dir, strategy)).trace.start.map((_, d) => d))],
      [0, 1, 2, 3],
      `${strategy}: every device measured`,
    );
  }
  const easgd = config(tmpDir(), ', strategy: { easgd: { alpha: 0.1, period: 2, mode: async } }');
  const r = await runCli(
    [
      'launch',
      '--nproc-per-node',
      '2',
      '--master-port',
      String(port()),
      '--',
      'train',
      easgd,
      '--devices',
      '2',
      '--out',
      join(dir, 'easgd'),
      '--quiet',
    ],
    { timeoutMs: 120_000 },
  );
  assert.equal(r.code, 0, r.stderr);
});

test('a device failing in process 1 stops the whole job, naming the device', { timeout: 120_000 }, async () => {
  const dir = tmpDir();
  const cfg = config(dir);
  const env = (rank: number, p: number) => ({
    RANK: String(rank),
    WORLD_SIZE: '2',
    MASTER_ADDR: '127.0.0.1',
    MASTER_PORT: String(p),
    PARATRAIN_SECRET: SECRET,
    ...(rank === 1 ? { PARATRAIN_FAIL_AT: '3:2' } : {}),
  });
  const p = port();
  const [r0, r1] = await Promise.all(
    [0, 1].map((rank) =>
      runCli(['train', cfg, '--devices', '2', '--out', join(dir, 'run'), '--quiet'], {
        env: env(rank, p),
        timeoutMs: 60_000,
      }),
    ),
  );
  assert.equal(r1!.code, 1);
  assert.match(stderrLines(r1!).join('\n'), /^paratrain: device 3 \(process 1\) failed: injected failure at step 2/m);
  assert.equal(r0!.code, 1);
  assert.match(
    stderrLines(r0!).join('\n'),
    /^paratrain: device 3 \(process 1\) failed: injected failure at step 2/m,
    'process 0 reports the root cause',
  );
});

test('processes whose configurations differ are refused at rendezvous, naming the rank', {
  timeout: 120_000,
}, async () => {
  const dir = tmpDir();
  const cfg = config(dir);
  const p = port();
  const env = (rank: number) => ({
    RANK: String(rank),
    WORLD_SIZE: '2',
    MASTER_ADDR: '127.0.0.1',
    MASTER_PORT: String(p),
    PARATRAIN_SECRET: SECRET,
  });
  const [r0, r1] = await Promise.all([
    runCli(['train', cfg, '--out', join(dir, 'run'), '--quiet'], { env: env(0), timeoutMs: 60_000 }),
    runCli(['train', cfg, '--lr', '0.5', '--quiet'], { env: env(1), timeoutMs: 60_000 }),
  ]);
  assert.equal(r0!.code, 1);
  assert.equal(r1!.code, 1);
  assert.match(stderrLines(r0!).join('\n') + stderrLines(r1!).join('\n'), /rank 1.*configuration/i);
});

test('launch refuses a multi-host job without a shared secret', async () => {
  const r = await runCli(['launch', '--nnodes', '2', '--nproc-per-node', '1', '--', 'train', 'x.yaml'], {
    env: { PARATRAIN_SECRET: '', PARATRAIN_SECRET_FILE: '' },
  });
  assert.equal(r.code, 1);
  assert.match(
    stderrLines(r).join('\n'),
    /^paratrain: launch: a job on several hosts needs a shared secret: set PARATRAIN_SECRET/,
  );
});
