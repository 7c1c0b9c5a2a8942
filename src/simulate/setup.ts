/**
 * From `paratrain simulate`'s flags to a SimulationSetup: the config (or a run's), the links,
 * stragglers, strategies and device counts, and the model's costs (measured here and cached, or
 * taken from `--from RUN_DIR`). Every flag is checked before the model is timed.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig, type RunConfig } from '../config/index.ts';
import { parseDevices, parseDuration, parseLinks, parseRate } from './units.ts';
import { parseStragglerList } from './stragglers.ts';
import { parseStrategyChoices } from './choices.ts';
import { measureModelCosts, modelStructure } from './profile.ts';
import { costsFromRun, median, readRunMeasurements } from './fromRun.ts';
import { stripMarks } from './trick.ts';
import { onSharedCores, type ModelCosts } from './layerCosts.ts';
import { trickModelOf, type SimulationSetup } from './simulate.ts';
import type { ShmModel } from './costModel.ts';
import { describeWeights } from './weights.ts';
import { codecSeconds, placesOf } from './compressionCost.ts';
import { getBackend } from '../kernels/index.ts';

/** A buffer of the backend's (the replica's flat buffers come from it), allocated once: every timing reuses it. */
async function backendAlloc(name: string): Promise<(n: number) => Float32Array> {
  const b = await getBackend(name);
  let buf: Float32Array | undefined;
  return (n) => (buf?.length === n ? buf : (buf = b.alloc(n)));
}

/** `paratrain simulate`'s flags that shape the simulation. */
export interface SimulateFlags {
  devices?: string;
  link?: string;
  stragglers?: string;
  strategies?: string;
  /** devices per host (threads of one process over shared memory) */
  perHost?: number;
  /** cores of each host (absent: a core for every device): more device threads share them */
  coresPerHost?: number;
  /** shared-memory bandwidth and latency, `16GB/s:5us` */
  shm?: string;
  /** what one process's ring loop handles, `1.4GB/s`, or `none` */
  hostRate?: string;
  /** how the parameter server's own process's devices reach it, `BW:LAT` (default: --shm's latency, the host rate) */
  loopback?: string;
  chunkBytes?: number;
  overlap?: string;
  steps?: number;
  seed?: number;
  /** a per-device batch (instead of the config's) */
  batchSize?: number;
  from?: string;
  backend?: string;
  seqLen?: number;
  remeasure?: boolean;
  log?: (message: string) => void;
}

/** The flags' defaults (the CLI shows the same). */
export const SIM_DEFAULTS = {
  devices: '1,2,4,8,16,32,64',
  link: '10gbit:50us',
  stragglers: 'none',
  perHost: 1,
  shm: '16GB/s:5us',
  hostRate: '1.4GB/s',
  overlap: 'implemented',
  steps: 200,
  seed: 1,
} as const;

/** `16GB/s:5us` → the shared-memory model. */
export function parseShm(text: string, flag = '--shm'): ShmModel {
  const [rate, lat] = text.split(':');
  if (!rate || lat === undefined) throw new Error(`${flag}: '${text}' is not BANDWIDTH:LATENCY; write e.g. 16GB/s:5us`);
  return { beta: parseRate(rate, flag), alpha: parseDuration(lat, flag) };
}

/** The config a simulation reads: CONFIG, or the run's config.yaml with --from. */
export function simulationConfig(
  configPath: string | undefined,
  from: string | undefined,
): { config: RunConfig; path: string } {
  const path = configPath ?? (from ? join(from, 'config.yaml') : undefined);
  if (!path)
    throw new Error(
      "simulate: give a CONFIG (e.g. examples/mnist-small.yaml), or --from RUN_DIR to use that run's config.yaml",
    );
  if (!configPath && !existsSync(path))
    throw new Error(`--from ${from}: the run has no config.yaml; give the CONFIG it was trained with`);
  return { config: loadConfig(path), path };
}

/** Builds the setup (measuring or reading the model's costs last, after every flag is checked). */
export async function buildSetup(
  configPath: string | undefined,
  f: SimulateFlags,
): Promise<{ setup: SimulationSetup; config: RunConfig; configPath: string; notes: string[] }> {
  const { config, path } = simulationConfig(configPath, f.from);
  const devices = parseDevices(f.devices ?? SIM_DEFAULTS.devices);
  const links = parseLinks(f.link ?? SIM_DEFAULTS.link);
  const stragglers = parseStragglerList(f.stragglers ?? SIM_DEFAULTS.stragglers);
  const strategies = parseStrategyChoices(f.strategies, config);
  const perHost = f.perHost ?? SIM_DEFAULTS.perHost;
  if (!Number.isInteger(perHost) || perHost < 1)
    throw new Error(`--per-host: expected a positive integer, got ${perHost}`);
  const cores = f.coresPerHost;
  if (cores !== undefined && !(Number.isInteger(cores) && cores >= 1))
    throw new Error(`--cores-per-host: expected a positive integer, got ${cores}`);
  const shm = parseShm(f.shm ?? SIM_DEFAULTS.shm);
  const hostText = f.hostRate ?? SIM_DEFAULTS.hostRate;
  const hostRate = hostText === 'none' ? undefined : parseRate(hostText, '--host-rate');
  const loopback = f.loopback === undefined ? undefined : { name: 'loopback', ...parseShm(f.loopback, '--loopback') };
  const overlap = f.overlap ?? SIM_DEFAULTS.overlap;
  if (overlap !== 'implemented' && overlap !== 'ideal')
    throw new Error(`--overlap: expected implemented or ideal, got '${overlap}'`);
  const batch =
    f.batchSize !== undefined
      ? { size: f.batchSize, scope: 'perDevice' as const }
      : { size: config.data.batchSize, scope: config.data.batchSizeScope };
  const steps = f.steps ?? SIM_DEFAULTS.steps;
  const notes: string[] = [];
  const run = f.from ? readRunMeasurements(f.from) : null;
  const dataParallel = stripMarks(config.model);
  const backend = f.backend ?? config.train.backend;
  let costs: ModelCosts;
  if (run) {
    costs = costsFromRun(
      await modelStructure({ model: dataParallel, optimizer: config.optimizer, seqLen: f.seqLen, backend }),
      run,
    );
  } else {
    const maxG = devices[devices.length - 1]!;
    const batches =
      batch.scope === 'perDevice'
        ? [batch.size]
        : [...new Set([batch.size, Math.max(1, Math.ceil(batch.size / Math.min(maxG, batch.size)))])];
    costs = await measureModelCosts({
      model: dataParallel,
      optimizer: config.optimizer,
      backend,
      batches,
      seqLen: f.seqLen,
      remeasure: f.remeasure,
      log: f.log,
    });
    // a run's compute already holds the sharing
    if (cores !== undefined) costs = onSharedCores(costs, perHost, cores);
  }
  notes.push(`compute: ${costs.source}`);
  const weights = await describeWeights(dataParallel, config.optimizer, backend);
  const codecs: Record<string, Record<number, number>> = {};
  const compressed = strategies.some((c) => c.kind === 'hybrid' && c.spec.type === 'hybrid' && c.spec.compression);
  // the replica's gradient lives in the backend's buffer: the codec is timed on one
  const alloc = compressed ? await backendAlloc(backend) : undefined;
  for (const c of strategies) {
    if (c.spec.type !== 'hybrid' || !c.spec.compression || c.kind !== 'hybrid') continue;
    const spec = c.spec.compression,
      places = placesOf(costs.paramFloats, weights);
    // oneBit's chunks depend on the devices: timed for each count; powerSGD's products do not
    const per: Record<number, number> = {};
    for (const G of devices.filter((d) => d > 1))
      per[G] =
        spec.type === 'powerSGD' && Object.keys(per).length
          ? Object.values(per)[0]!
          : await codecSeconds(spec, costs.paramFloats, places, G, alloc);
    codecs[c.label] = per;
    const shown = Object.entries(per).map(([G, t]) => `${G} devices ${(t * 1000).toFixed(2)}`);
    if (shown.length)
      notes.push(`${c.label}: the codec and its non-finite checks timed here, ms per step: ${shown.join(', ')}`);
  }
  const setup: SimulationSetup = {
    trickModel: trickModelOf(config),
    costs,
    devices,
    links,
    stragglers,
    strategies,
    batch,
    perHost,
    shm,
    hostRate,
    loopback,
    chunkBytes: f.chunkBytes,
    overlap,
    steps,
    seed: f.seed ?? SIM_DEFAULTS.seed,
    weights,
    codecSeconds: codecs,
  };
  if (run) {
    const m = median(run.compute);
    setup.runFactors = run.compute.map((c) => c / m);
    if (run.serverPushSeconds !== undefined) {
      // a remote server's own measure of a push's work (process 0's 'serverWork' event)
      setup.serverUpdate = run.serverPushSeconds;
      notes.push(`server update from the run: ${(setup.serverUpdate * 1000).toFixed(2)} ms per push (its median)`);
    } else if (run.processes === 1 && ['async', 'sync', 'easgd'].includes(run.strategy) && run.syncWork.length) {
      const pull = shm.alpha + (costs.paramFloats * 4) / shm.beta;
      setup.serverUpdate = Math.max(0, median(run.syncWork) - pull);
      notes.push(`server update from the run: ${(setup.serverUpdate * 1000).toFixed(2)} ms per push`);
    }
  }
  return { setup, config, configPath: path, notes };
}
