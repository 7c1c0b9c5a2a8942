/** From a run's events to its summary, the numbers of the terminal table (the charts' series: series.ts). */
import type { RunData, StepInfo } from './runData.ts';
import { findStragglers } from './stragglers.ts';
import { maxOf } from './numbers.ts';

export interface DeviceSummary {
  rank: number;
  steps: number;
  samples: number;
  computeMs: number;
  /** strategy time that was not spent blocked on peers: collectives, pushes, pulls, optimizer */
  commMs: number;
  idleMs: number;
  bytes: number;
  computeMsPerSample: number;
  straggler: boolean;
}

export interface RunSummary {
  strategy: string;
  devices: number;
  finished: boolean;
  /** final test accuracy (NaN when the run never evaluated) */
  testAccuracy: number;
  /** the last validation accuracy (NaN: no validation split) */
  valAccuracy: number;
  /** train.best's last improvement (model-best.safetensors), epoch 0-based; null: none */
  best: { metric: string; value: number; epoch: number } | null;
  /** train.earlyStopping stopped the run in this epoch (0-based, as in metrics.jsonl); null: it did not */
  earlyStoppedEpoch: number | null;
  /** waits longer than train.stallWarningSeconds reported */
  stalls: number;
  /** starts of the run: 1, or more when it was resumed */
  segments: number;
  /** training wall time: the segments' times added up (the gaps between them left out) */
  wallSeconds: number;
  /** from the first start to the last event, the gaps between segments included */
  elapsedSeconds: number;
  /** samples trained over all segments (the steps a resume redid included) */
  samples: number;
  /** samples over the training wall time */
  samplesPerSecond: number;
  /** idle time over compute + strategy time, all devices together */
  idleShare: number;
  /** mean staleness of applied gradients (asynchronous runs), or null */
  meanStaleness: number | null;
  dropped: number;
  /** steps skipped for NaN/Inf: the most any one device skipped (lockstep devices skip the same ones) */
  badSteps: number;
  bytes: number;
  maxRssBytes: number | null;
  /** devices that died while the run went on */
  devicesLost: number;
  perDevice: DeviceSummary[];
}

export function summarize(run: RunData): RunSummary {
  const perDevice = deviceSummaries(run.steps, run.start.devices / run.start.processes);
  const total = (f: (d: DeviceSummary) => number) => perDevice.reduce((n, d) => n + f(d), 0);
  const busy = total((d) => d.computeMs + d.commMs + d.idleMs);
  const stale = run.steps.filter((s) => s.staleness !== undefined);
  const wallSeconds = run.segments.reduce((n, s) => n + s.seconds, 0);
  const samples = run.segments.reduce((n, s) => n + s.samples, 0);
  const lastEval = run.evals.filter((e) => Number.isFinite(e.testAccuracy)).at(-1);
  const lastVal = run.evals.filter((e) => Number.isFinite(e.valAccuracy)).at(-1);
  return {
    strategy: run.start.strategy,
    devices: run.start.devices,
    finished: run.end !== null,
    testAccuracy:
      run.end && Number.isFinite(run.end.testAccuracy) ? run.end.testAccuracy : (lastEval?.testAccuracy ?? NaN),
    valAccuracy: lastVal?.valAccuracy ?? NaN,
    best: run.best ? { metric: run.best.metric, value: run.best.value, epoch: run.best.epoch } : null,
    earlyStoppedEpoch: run.earlyStopped?.epoch ?? null,
    stalls: run.stalls.length,
    segments: run.segments.length,
    wallSeconds,
    elapsedSeconds: (run.segments.at(-1)!.last - run.segments[0]!.start) / 1000,
    samples,
    // one segment that ended: the trainer's own figure (the same samples over the same seconds)
    samplesPerSecond:
      run.segments.length === 1 && run.end && Number.isFinite(run.end.samplesPerSecond)
        ? run.end.samplesPerSecond
        : samples / Math.max(wallSeconds, 1e-9),
    idleShare: busy > 0 ? total((d) => d.idleMs) / busy : 0,
    meanStaleness: stale.length > 0 ? stale.reduce((n, s) => n + s.staleness!, 0) / stale.length : null,
    dropped: run.steps.reduce((n, s) => n + (s.dropped ?? 0), 0),
    badSteps: mostSkipped(run.steps),
    bytes: total((d) => d.bytes),
    maxRssBytes: run.end?.maxRssBytes ?? null,
    devicesLost: run.lost?.length ?? 0,
    perDevice,
  };
}

function deviceSummaries(steps: readonly StepInfo[], devices: number): DeviceSummary[] {
  const ranks = maxOf(
    [devices],
    steps.map((s) => s.rank + 1),
  );
  const out: DeviceSummary[] = Array.from({ length: ranks }, (_, rank) => ({
    rank,
    steps: 0,
    samples: 0,
    computeMs: 0,
    commMs: 0,
    idleMs: 0,
    bytes: 0,
    computeMsPerSample: NaN,
    straggler: false,
  }));
  for (const s of steps) {
    const d = out[s.rank];
    if (!d) continue;
    d.steps++;
    d.samples += s.samples;
    d.computeMs += s.computeMs;
    d.commMs += Math.max(0, s.syncMs - s.idleMs);
    d.idleMs += s.idleMs;
    d.bytes += s.bytes;
  }
  for (const d of out) d.computeMsPerSample = d.samples > 0 ? d.computeMs / d.samples : NaN;
  const flags = findStragglers(out.map((d) => d.computeMsPerSample));
  out.forEach((d, i) => {
    d.straggler = flags[i]!;
  });
  return out;
}

function mostSkipped(steps: readonly StepInfo[]): number {
  const perRank = new Map<number, number>();
  for (const s of steps) if (s.skipped) perRank.set(s.rank, (perRank.get(s.rank) ?? 0) + 1);
  return Math.max(0, ...perRank.values());
}
