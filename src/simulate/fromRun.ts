/**
 * `--from RUN_DIR`: what a real run measured, read from its metrics.jsonl (and, for a job of several
 * processes, the other processes' metrics.process-<P>.jsonl): the per-step compute time
 * of its devices (forward + backward, the step events' computeMs), the work of its strategy's
 * server calls (syncMs − idleMs: pulls and pushes without the waits), its step time and, for the
 * parameter-server strategies, the staleness of every applied gradient. The simulator spreads the
 * compute over layers by their FLOPs and can replay its variation as stragglers (`--stragglers run`).
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { loadRun, parseRun, type StepInfo } from '../report/runData.ts';
import { readMetrics } from '../runtime/events/metrics.ts';
import { splitByFlops, type ModelCosts } from './layerCosts.ts';

/** What a run's metrics.jsonl tells the simulator. */
export interface RunMeasurements {
  dir: string;
  strategy: string;
  devices: number;
  processes: number;
  /** samples per device per step in the run */
  perDeviceBatch: number;
  /** compute seconds of each step of each device (after the warm-up steps) */
  compute: number[];
  /** the same steps' strategy time outside compute minus the waits (pull/push/collective work) */
  syncWork: number[];
  /** the same steps' whole time (compute + sync), seconds */
  step: number[];
  /** the same steps' bytes moved by the device */
  bytes: number[];
  /** each device's steps after its warm-up, whole time (seconds), in rank order: all of them, whether or not the others were still training */
  perDevice: number[][];
  /** staleness of each applied gradient (parameter-server strategies), after the warm-up */
  staleness: number[];
  /** a remote parameter server's median work per push, seconds (its 'serverWork' event; undefined: none) */
  serverPushSeconds?: number;
  /**
   * The whole run per device, for a trace-driven replay: when each device started (seconds after
   * the first, from the step events' times less the step's duration) and each step's compute, in order
   */
  trace: { start: number[]; compute: number[][]; staleness: number[] };
}

/** The median (the mean of the middle two for an even count); NaN when empty. */
export const median = (xs: readonly number[]): number => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** The mean; NaN when empty. */
export const mean = (xs: readonly number[]): number => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);

/** Steps of each device left out at the start: caches, JIT and first allocations. */
export function warmupSteps(stepsPerDevice: number): number {
  return Math.min(5, Math.floor(stepsPerDevice / 5));
}

/** Reads RUN_DIR's metrics; errors name the directory and what is missing. */
export function readRunMeasurements(dir: string): RunMeasurements {
  const run = loadRun(dir);
  const byRank = new Map<number, typeof run.steps>();
  for (const s of [...run.steps, ...otherProcessSteps(dir)]) {
    if (s.skipped || s.samples === 0) continue;
    const list = byRank.get(s.rank) ?? [];
    list.push(s);
    byRank.set(s.rank, list);
  }
  if (!byRank.size)
    throw new Error(`--from ${dir}: the run recorded no training steps; run it for at least a few steps`);
  const out: RunMeasurements = {
    dir,
    strategy: run.start.strategy,
    devices: run.start.devices,
    processes: run.start.processes,
    perDeviceBatch: 0,
    compute: [],
    syncWork: [],
    step: [],
    bytes: [],
    perDevice: [],
    staleness: [],
    trace: traceOf([...byRank.entries()].sort((a, b) => a[0] - b[0]).map((e) => e[1])),
  };
  // steady state: after each device's warm-up, and only while every device was training (devices
  // of a short run start and end at different moments; alone, a device sees no staleness)
  const ranks = [...byRank.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([, steps]) => steps.slice(warmupSteps(steps.length)));
  const from = Math.max(...ranks.map((s) => s[0]?.time ?? Infinity)),
    to = Math.min(...ranks.map((s) => s[s.length - 1]?.time ?? -Infinity));
  const window = ranks.map((steps) => steps.filter((s) => s.time >= from && s.time <= to));
  const together = window.every((s) => s.length >= 3);
  let samples = 0,
    count = 0;
  for (const [k, steps] of ranks.entries()) {
    const kept = together ? window[k]! : steps;
    out.perDevice.push(steps.map((s) => (s.computeMs + s.syncMs) / 1000));
    for (const s of kept) {
      out.compute.push(s.computeMs / 1000);
      out.syncWork.push(Math.max(0, s.syncMs - s.idleMs) / 1000);
      out.step.push((s.computeMs + s.syncMs) / 1000);
      out.bytes.push(s.bytes);
      if (s.staleness !== undefined && s.dropped !== 1) out.staleness.push(s.staleness);
      samples += s.samples;
      count++;
    }
  }
  if (!count)
    throw new Error(`--from ${dir}: too few steps to measure after the warm-up; run it for at least 10 steps`);
  const work = readMetrics(run.metricsPath)
    .filter((e) => e.type === 'serverWork')
    .pop();
  if (work && typeof work.medianPushSeconds === 'number' && Number.isFinite(work.medianPushSeconds))
    out.serverPushSeconds = work.medianPushSeconds;
  out.perDeviceBatch = samples / count;
  return out;
}

/** The step events processes other than 0 wrote (runtime/events/processMetrics.ts), every one of them. */
export function otherProcessSteps(dir: string): StepInfo[] {
  const files = readdirSync(dir)
    .filter((f) => /^metrics\.process-\d+\.jsonl$/.test(f))
    .sort();
  return files.flatMap((f) => {
    const metricsPath = join(dir, f);
    return parseRun(readMetrics(metricsPath), { dir, metricsPath, name: f }).steps;
  });
}

function traceOf(
  ranks: { time: number; computeMs: number; syncMs: number; staleness?: number; dropped?: number }[][],
): RunMeasurements['trace'] {
  const begun = ranks.map((steps) => steps[0]!.time - steps[0]!.computeMs - steps[0]!.syncMs);
  const first = Math.min(...begun);
  return {
    start: begun.map((t) => (t - first) / 1000),
    compute: ranks.map((steps) => steps.map((s) => s.computeMs / 1000)),
    staleness: ranks.flatMap((steps) =>
      steps.flatMap((s) => (s.staleness !== undefined && s.dropped !== 1 ? [s.staleness] : [])),
    ),
  };
}

/**
 * `structure`'s layers with their times taken from the run: its median compute per sample spread
 * over the layers by FLOPs (t(b) = perSample·b; a run measures one batch size).
 */
export function costsFromRun(structure: ModelCosts, run: RunMeasurements): ModelCosts {
  const perSample = median(run.compute) / run.perDeviceBatch;
  const shares = splitByFlops(structure.layers, perSample);
  return {
    ...structure,
    layers: structure.layers.map((l, i) => ({
      ...l,
      forward: { fixed: 0, perSample: shares[i]!.forward },
      backward: { fixed: 0, perSample: shares[i]!.backward },
    })),
    source: `compute from the run ${run.dir} (${run.strategy}, ${run.devices} devices: median ${(median(run.compute) * 1000).toFixed(1)} ms per step at ${+run.perDeviceBatch.toFixed(1)} samples), spread over layers by FLOPs`,
  };
}
