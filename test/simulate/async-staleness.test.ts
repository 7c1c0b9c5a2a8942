/**
 * The simulator's async staleness against a real run: a short 3-device Downpour run on this
 * machine (worker threads, the in-memory parameter server) through train(), then the event
 * simulation replaying that run — each device's measured compute, step by step, from the moment
 * it started (devices start up to a second apart on a busy machine) — with the server's update
 * time and the model's size from the same run. The staleness means must agree within 0.3 updates
 * (15% of the G − 1 = 2 a device sees when the two others push once each during its step): the
 * server-as-a-queue model is what is checked, not the compute. A run whose threads another test
 * on the same two cores held back is measured once more: the model is wrong only if both disagree.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, applyOverrides } from '../../src/config/index.ts';
import { train } from '../../src/runtime/run/train.ts';
import { buildSetup } from '../../src/simulate/setup.ts';
import { simulateServer } from '../../src/simulate/serverSim.ts';
import { StragglerSampler, NO_STRAGGLERS } from '../../src/simulate/stragglers.ts';
import { readRunMeasurements, mean } from '../../src/simulate/fromRun.ts';
import { quantile } from '../../src/simulate/simulate.ts';

const SUBSET = new URL('../../data/fashion-mnist-subset', import.meta.url).pathname;
const TOLERANCE = 0.3;
/** every device sleeps SLOWDOWN − 1 times its compute after computing (paratrain's straggler injection), so the three overlap even when other work holds the cores */
const SLOWDOWN = 16;
const ATTEMPTS = 2;

test("async on 3 devices: the replayed run's mean staleness within 0.3 of the measured", {
  timeout: 240_000,
}, async (t) => {
  let last = '';
  for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
    const { real, sim, note } = await measureAndReplay();
    t.diagnostic(`attempt ${attempt}: ${note}`);
    if (Math.abs(real - sim) <= TOLERANCE) return;
    last = `measured mean staleness ${real.toFixed(3)}, simulated ${sim.toFixed(3)}: differ by more than ${TOLERANCE}`;
  }
  assert.fail(last);
});

/** One 3-device async run through train(), and the simulator's replay of it. */
async function measureAndReplay(): Promise<{ real: number; sim: number; note: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'paratrain-sim-async-'));
  try {
    const base = loadConfig(new URL('../../examples/mlp.yaml', import.meta.url).pathname);
    // 1 epoch of the shipped subset (4,000 images): 42 steps per device of 32 samples
    const config = applyOverrides(base, {
      devices: 3,
      strategy: 'async',
      epochs: 1,
      batchSize: 32,
      dataDir: SUBSET,
      seed: 5,
    });
    config.data.testLimit = 100;
    const run = join(dir, 'run');
    await train(config, {
      out: run,
      slowDevices: new Map([
        [0, SLOWDOWN],
        [1, SLOWDOWN],
        [2, SLOWDOWN],
      ]),
    });
    const measured = readRunMeasurements(run);
    assert.equal(measured.trace.staleness.length, 3 * 42);
    const { setup } = await buildSetup(undefined, { from: run, devices: '3', perHost: 3, strategies: 'async' });
    assert.ok(setup.serverUpdate !== undefined);
    const o = simulateServer(
      {
        devices: 3,
        hosts: 1,
        perHost: 3,
        steps: 0,
        compute: 0,
        paramBytes: setup.costs.paramFloats * 4,
        update: setup.serverUpdate,
        elastic: 0,
        net: { tcp: { link: setup.links[0]! }, shm: setup.shm },
        stragglers: new StragglerSampler(NO_STRAGGLERS, 1),
        trace: measured.trace,
      },
      { kind: 'async', fetchEvery: 1, pushEvery: 1 },
    );
    const real = mean(measured.trace.staleness),
      sim = mean(o.staleness);
    const p95 = (xs: number[]) =>
      quantile(
        [...xs].sort((a, b) => a - b),
        0.95,
      );
    assert.equal(o.staleness.length, 3 * 42);
    const note =
      `staleness mean: measured ${real.toFixed(3)}, simulated ${sim.toFixed(3)}; p95 ${p95(measured.trace.staleness)} and ${p95(o.staleness)}; ` +
      `devices started at ${measured.trace.start.map((s) => s.toFixed(2)).join(', ')} s`;
    return { real, sim, note };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
