/**
 * Reading a run directory's metrics.jsonl into typed events, with errors that name the file.
 *
 * A metrics file normally holds one run: a 'start' event, then steps, epochs, evaluations and an
 * 'end'. A run killed early has no 'end' (it is reported as unfinished). A resumed run appends a
 * segment (a 'start' and a 'resume' event) per resume: the segments are read as one run. Should a
 * file hold several runs one after another, the last one is used.
 */
import { realpathSync, statSync, type Stats } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { METRICS_FILE, readMetrics, type MetricEvent } from '../runtime/events/metrics.ts';
import { readRunSettings, type RunSettings } from './settings.ts';
import { describeSegment, resumeEventOf, segmentRanges, type RunSegment } from './segments.ts';
import { parseStageTimeline } from './pipelineTimeline.ts';
import type { StageTimeline } from '../parallel/pipeline/timeline.ts';

export interface StartInfo {
  time: number;
  dataSource: string;
  backend: string;
  devices: number;
  /** processes of the job; the metrics hold process 0's devices (devices / processes of them) */
  processes: number;
  strategy: string;
  parameters: number;
  trainSamples: number;
  testSamples: number;
  epochs: number;
  stepsPerEpoch: number;
  globalBatch: number;
}
export interface StepInfo {
  time: number;
  rank: number;
  epoch: number;
  step: number;
  loss: number;
  accuracy: number;
  samples: number;
  computeMs: number;
  syncMs: number;
  idleMs: number;
  bytes: number;
  staleness?: number;
  dropped?: number;
  /** the update was skipped (NaN/Inf) */
  skipped?: boolean;
  /** the learning rate of the step */
  lr?: number;
}
/** An evaluation: of the test set (test…) and/or of the validation split (val…); NaN where not evaluated. */
export interface EvalInfo {
  time: number;
  epoch: number;
  step: number;
  testLoss: number;
  testAccuracy: number;
  valLoss: number;
  valAccuracy: number;
  /** a speech model's error rates, on the test set and the validation set (absent: not recorded) */
  testCER?: number;
  testWER?: number;
  valCER?: number;
  valWER?: number;
}
/** A wait in a collective longer than train.stallWarningSeconds: who waited, how long, in what, for whom. */
export interface StallInfo {
  time: number;
  rank: number;
  seconds: number;
  waitingIn: string;
  missing: number[];
}
export interface EpochInfo {
  time: number;
  epoch: number;
  loss: number;
  accuracy: number;
  samples: number;
  seconds: number;
  samplesPerSecond: number;
}
export interface EndInfo {
  time: number;
  seconds: number;
  samplesPerSecond: number;
  testAccuracy: number;
  testLoss: number;
  maxRssBytes?: number;
}

/** One run, as read from its directory. */
export interface RunData {
  /** the directory as given */
  dir: string;
  /** its name (of the real directory, so `runs/latest` shows the run's own name) */
  name: string;
  metricsPath: string;
  start: StartInfo;
  steps: StepInfo[];
  evals: EvalInfo[];
  epochs: EpochInfo[];
  end: EndInfo | null;
  /** devices that died while the run went on (async, asynchronous EASGD) */
  lost?: { rank: number; step: number; reason: string }[];
  stalls: StallInfo[];
  /** each start of the run, oldest first: one, or more when it was resumed (the steps above are of all of them) */
  segments: RunSegment[];
  /** the last improvement of train.best's metric (model-best.safetensors), epoch 0-based */
  best?: { metric: string; value: number; epoch: number; step: number };
  /** train.earlyStopping stopped the run after `step` steps, its last in epoch `epoch` (0-based) */
  earlyStopped?: { step: number; epoch: number; metric: string };
  /** a pipelined run's sampled steps, each stage's ops (absent: not pipelined) */
  pipeline?: StageTimeline[];
  /** config.yaml and command.txt of the run directory (null: not there, e.g. a run of an older version) */
  settings: RunSettings | null;
}

/** Reads `<dir>/metrics.jsonl`. Throws one-line errors naming the directory or file. */
export function loadRun(dir: string): RunData {
  let st: Stats;
  try {
    st = statSync(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw new Error(`run directory ${dir} does not exist`);
    throw new Error(`cannot read run directory ${dir}: ${(e as Error).message}`);
  }
  if (!st.isDirectory())
    throw new Error(`${dir} is not a run directory (expected a directory holding ${METRICS_FILE})`);
  const metricsPath = join(dir, METRICS_FILE);
  try {
    statSync(metricsPath);
  } catch {
    throw new Error(`run directory ${dir} has no ${METRICS_FILE}; is it a paratrain run directory?`);
  }
  const all = readMetrics(metricsPath);
  return { ...parseRun(all, { dir, metricsPath, name: basename(safeRealpath(dir)) }), settings: readRunSettings(dir) };
}

function safeRealpath(dir: string): string {
  try {
    return realpathSync(dir);
  } catch {
    return resolve(dir);
  }
}

/**
 * The run's events as one run, from the segments of a resumed run (segments.ts): each resume
 * continues the history before it, whose steps, evaluations and epochs before the resume point
 * come first (the steps it ran past the checkpoint were redone); the start event is the last one.
 */
function joinSegments(segments: readonly MetricEvent[][]): MetricEvent[] {
  let history: MetricEvent[] = [];
  for (const events of segments) {
    const resume = resumeEventOf(events);
    const at = resume ? (resume.step as number) : 0,
      epoch = typeof resume?.epoch === 'number' ? resume.epoch : 0;
    const kept = history.filter((e) =>
      e.type === 'step' || e.type === 'pipelineTimeline'
        ? (e.step as number) < at
        : e.type === 'eval' || e.type === 'best'
          ? (e.step as number) <= at
          : e.type === 'stall'
            ? true
            : e.type === 'epoch' || e.type === 'rankEpoch'
              ? (e.epoch as number) < epoch
              : false,
    );
    history = [...kept, ...events.slice(1)];
  }
  return [segments.at(-1)![0]!, ...history];
}

/** Typed view of already-read events (exported for tests). */
export function parseRun(all: MetricEvent[], where: { dir: string; metricsPath: string; name: string }): RunData {
  const file = where.metricsPath;
  const ranges = segmentRanges(all);
  if (ranges.length === 0)
    throw new Error(`metrics file ${file} has no 'start' event; it is empty or not written by paratrain train`);
  const segmentEvents = ranges.map((r) => all.slice(r.from, r.to));
  const events = joinSegments(segmentEvents);

  const count: Record<string, number> = {};
  const num = (e: MetricEvent, field: string, fallback?: number): number => {
    const v = e[field];
    if (typeof v === 'number') return v;
    if (v === undefined && fallback !== undefined) return fallback;
    const n = count[e.type] ?? 0;
    throw new Error(
      `metrics file ${file}: ${e.type} event #${n + 1} has no numeric '${field}' (got ${JSON.stringify(v)})`,
    );
  };
  const str = (e: MetricEvent, field: string, fallback: string): string =>
    typeof e[field] === 'string' ? (e[field] as string) : fallback;

  const s = events[0]!;
  const start: StartInfo = {
    time: num(s, 'time'),
    dataSource: str(s, 'dataSource', '?'),
    backend: str(s, 'backend', '?'),
    devices: num(s, 'devices', 1),
    processes: num(s, 'processes', 1),
    strategy: str(s, 'strategy', '?'),
    parameters: num(s, 'parameters', NaN),
    trainSamples: num(s, 'trainSamples', NaN),
    testSamples: num(s, 'testSamples', NaN),
    epochs: num(s, 'epochs', NaN),
    stepsPerEpoch: num(s, 'stepsPerEpoch', NaN),
    globalBatch: num(s, 'globalBatch', NaN),
  };
  const run: RunData = {
    dir: where.dir,
    name: where.name,
    metricsPath: file,
    start,
    steps: [],
    evals: [],
    epochs: [],
    end: null,
    stalls: [],
    segments: segmentEvents.map((events, k) => describeSegment(events, segmentEvents[k - 1] ?? null)),
    settings: null,
  };
  for (const e of events.slice(1)) {
    switch (e.type) {
      case 'step': {
        const step: StepInfo = {
          time: num(e, 'time'),
          rank: num(e, 'rank'),
          epoch: num(e, 'epoch', 0),
          step: num(e, 'step'),
          loss: num(e, 'loss'),
          accuracy: num(e, 'accuracy', NaN),
          samples: num(e, 'samples', 0),
          computeMs: num(e, 'computeMs', 0),
          syncMs: num(e, 'syncMs', 0),
          idleMs: num(e, 'idleMs', 0),
          bytes: num(e, 'bytes', 0),
        };
        if (typeof e.staleness === 'number') step.staleness = e.staleness;
        if (typeof e.dropped === 'number') step.dropped = e.dropped;
        if (e.skipped === true) step.skipped = true;
        if (typeof e.lr === 'number') step.lr = e.lr;
        run.steps.push(step);
        break;
      }
      case 'eval':
        addEval(run.evals, {
          time: num(e, 'time'),
          epoch: num(e, 'epoch', 0),
          step: num(e, 'step', NaN),
          testLoss: num(e, 'testLoss', NaN),
          testAccuracy: num(e, 'testAccuracy', NaN),
          valLoss: num(e, 'valLoss', NaN),
          valAccuracy: num(e, 'valAccuracy', NaN),
          ...Object.fromEntries(
            (['testCER', 'testWER', 'valCER', 'valWER'] as const)
              .filter((k) => typeof e[k] === 'number')
              .map((k) => [k, e[k]]),
          ),
        });
        break;
      case 'best':
        run.best = {
          metric: str(e, 'metric', '?'),
          value: num(e, 'value', NaN),
          epoch: num(e, 'epoch', 0),
          step: num(e, 'step', NaN),
        };
        break;
      case 'earlyStopped':
        run.earlyStopped = { step: num(e, 'step', NaN), epoch: num(e, 'epoch', NaN), metric: str(e, 'metric', '?') };
        break;
      case 'stall':
        run.stalls.push({
          time: num(e, 'time'),
          rank: num(e, 'rank', -1),
          seconds: num(e, 'seconds', NaN),
          waitingIn: str(e, 'waitingIn', '?'),
          missing: Array.isArray(e.missing)
            ? (e.missing as unknown[]).filter((r): r is number => typeof r === 'number')
            : [],
        });
        break;
      case 'epoch':
        run.epochs.push({
          time: num(e, 'time'),
          epoch: num(e, 'epoch', 0),
          loss: num(e, 'loss', NaN),
          accuracy: num(e, 'accuracy', NaN),
          samples: num(e, 'samples', 0),
          seconds: num(e, 'seconds', NaN),
          samplesPerSecond: num(e, 'samplesPerSecond', NaN),
        });
        break;
      case 'deviceLost':
        (run.lost ??= []).push({
          rank: num(e, 'rank'),
          step: num(e, 'step', NaN),
          reason: typeof e.reason === 'string' ? e.reason : '',
        });
        break;
      case 'pipelineTimeline': {
        const t = parseStageTimeline(e);
        if (t) (run.pipeline ??= []).push(t);
        break;
      }
      case 'end':
        run.end = {
          time: num(e, 'time'),
          seconds: num(e, 'seconds', NaN),
          samplesPerSecond: num(e, 'samplesPerSecond', NaN),
          testAccuracy: num(e, 'testAccuracy', NaN),
          testLoss: num(e, 'testLoss', NaN),
          maxRssBytes: typeof e.maxRssBytes === 'number' ? e.maxRssBytes : undefined,
        };
        break;
      default:
        break; // rankEpoch, checkpoint and event types a later version adds: not needed here
    }
    count[e.type] = (count[e.type] ?? 0) + 1;
  }
  return run;
}

/**
 * Adds an evaluation; one at the step of the last (a resumed run evaluating again the epoch its
 * checkpoint set was taken before, or the final test after the last validation) merges into it.
 */
function addEval(evals: EvalInfo[], e: EvalInfo): void {
  const last = evals.at(-1);
  if (!last || last.step !== e.step) {
    evals.push(e);
    return;
  }
  for (const k of ['testLoss', 'testAccuracy', 'valLoss', 'valAccuracy'] as const)
    if (Number.isFinite(e[k])) last[k] = e[k];
  for (const k of ['testCER', 'testWER', 'valCER', 'valWER'] as const) if (e[k] !== undefined) last[k] = e[k];
  last.time = e.time;
}

/**
 * One short label per run, e.g. `async ×2`: the strategy and the number of devices, plus the
 * directory's name when it says something more (not just the strategy again) or when two runs would
 * otherwise look alike (then with its parent folder, and finally a number, until the labels differ).
 */
export function runLabels(runs: readonly RunData[]): string[] {
  const base = runs.map((r) => (r.start.devices > 1 ? `${r.start.strategy} ×${r.start.devices}` : r.start.strategy));
  const dup = (labels: string[], i: number) => labels.filter((l) => l === labels[i]).length > 1;
  let labels = runs.map((r, i) => (r.name === r.start.strategy && !dup(base, i) ? base[i]! : `${base[i]} (${r.name})`));
  labels = labels.map((l, i) =>
    dup(labels, i) ? `${base[i]} (${basename(dirname(realDir(runs[i]!)))}/${runs[i]!.name})` : l,
  );
  return labels.map((l, i) => (dup(labels, i) ? `${l} #${i + 1}` : l));
}

function realDir(run: RunData): string {
  return safeRealpath(run.dir);
}
