import type { StallReport } from '../../comm/stallInspector.ts';
import type { StageTimeline } from '../../parallel/pipeline/timeline.ts';
import { addErrorCounts, type ErrorCounts } from '../../nn/loss.ts';
import { errorRate } from '../../ctc/errorRates.ts';

/**
 * Everything a run reports, as it happens; the CLI renders them, the metrics file stores them.
 * Every `epoch` (and `bestEpoch`) is 0-based; what the CLI prints for people adds one ("epoch 1/3").
 */
export type TrainEvent =
  | {
      type: 'start';
      runDir: string;
      dataSource: string;
      backend: string;
      /** devices in the whole job, over `processes` processes */
      devices: number;
      processes: number;
      strategy: string;
      parameters: number;
      trainSamples: number;
      testSamples: number;
      /** samples of the validation split (absent: none) */
      validationSamples?: number;
      epochs: number;
      stepsPerEpoch: number;
      globalBatch: number;
    }
  | {
      type: 'step';
      rank: number;
      epoch: number;
      step: number;
      stepInEpoch: number;
      stepsPerEpoch: number;
      /** unix ms when the device finished the step (set by device threads, which send steps in batches) */
      time?: number;
      loss: number;
      accuracy: number;
      lr: number;
      samples: number;
      /** forward/backward; waiting for a turn or pulling weights before it is in syncMs */
      computeMs: number;
      /** everything the strategy did outside compute: collectives, pushes, pulls, local optimizer step */
      syncMs: number;
      /** of syncMs, time blocked waiting for other devices */
      idleMs: number;
      /** bytes this device moved in collectives during the step */
      bytes: number;
      /** activation bytes the model held for backward at the step's peak (one micro-batch's worth) */
      activationBytes?: number;
      staleness?: number;
      dropped?: number;
      /** the update was skipped: a NaN/Inf loss or gradient (on every device alike in lockstep strategies) */
      skipped?: boolean;
      /** steps this device skipped so far in the run (present once there is one) */
      badSteps?: number;
      /** the global L2 norm of the applied gradient before clipping (only with train.clipGradNorm) */
      gradNorm?: number;
    }
  | {
      type: 'rankEpoch';
      rank: number;
      epoch: number;
      lossSum: number;
      correct: number;
      samples: number;
      seconds: number;
      computeMs: number;
      syncMs: number;
      idleMs: number;
      bytes: number;
      /** the most activation bytes held in any step of the epoch */
      peakActivationBytes?: number;
      /** steps skipped in the epoch (NaN/Inf) */
      badSteps?: number;
      /** transcription (loss ctc): the training batches' greedy transcripts' edit counts (training mode) */
      errors?: ErrorCounts;
    }
  | {
      type: 'epoch';
      epoch: number;
      loss: number;
      accuracy: number;
      samples: number;
      seconds: number;
      samplesPerSecond: number;
      /** the most steps any one device skipped in the epoch (NaN/Inf; lockstep devices skip the same steps) */
      badSteps?: number;
      /** transcription: character and word error rates of the training batches' greedy transcripts (counts summed over devices) */
      cer?: number;
      wer?: number;
    }
  /**
   * an evaluation after epoch `epoch`, `step` steps into the run: of the validation split (val…) or,
   * without one, of the test set every evalEvery epochs; of the test set once at the end (test…)
   */
  | {
      type: 'eval';
      epoch: number;
      step: number;
      testLoss?: number;
      valLoss?: number;
      /** classification: accuracy; multi-label: per-label accuracy; regression: NaN (does not apply); transcription: exact transcripts */
      testAccuracy?: number;
      valAccuracy?: number;
      /** regression: mean absolute error over every output */
      testMae?: number;
      valMae?: number;
      /** multi-label: fraction of samples with every label right */
      testExactMatch?: number;
      valExactMatch?: number;
      /** transcription (loss ctc): greedy decoding's character and word error rates */
      testCER?: number;
      testWER?: number;
      valCER?: number;
      valWER?: number;
    }
  /** train.best's metric improved: RUN_DIR/model-best.safetensors now holds the model of this evaluation */
  | { type: 'best'; epoch: number; step: number; metric: string; value: number; path: string }
  /** early stopping's verdict on an evaluation: `wait` evaluations without improvement of `patience`; `stop`: the run stops here */
  | {
      type: 'earlyStopping';
      epoch: number;
      step: number;
      metric: string;
      value: number;
      best: number;
      bestEpoch: number;
      wait: number;
      patience: number;
      stop: boolean;
    }
  /** the run stopped early after `step` steps, its last in epoch `epoch` (0-based, as every epoch here): `metric` last improved after epoch `bestEpoch` */
  | {
      type: 'earlyStopped';
      step: number;
      epoch: number;
      metric: string;
      best: number;
      bestEpoch: number;
      patience: number;
    }
  /** a model file (RUN_DIR/model.safetensors) or, with `step`, a complete checkpoint set */
  | { type: 'checkpoint'; epoch: number; path: string; step?: number }
  /** the run continues from checkpoint set `checkpoint` at global step `step`, saved on `fromDevices` devices */
  | { type: 'resume'; step: number; epoch: number; fromDevices: number; devices: number; checkpoint: string }
  /** the run was stopped gracefully (a signal; TrainOptions.signal) after `step` steps, its last in epoch `epoch` (0-based, as every epoch here) */
  | { type: 'stopped'; step: number; epoch: number; signal: string }
  | ({ type: 'stall' } & StallReport)
  /** a pipeline stage's ops in a sampled step (parallel/pipeline/timeline.ts); `time` as a step's */
  | ({ type: 'pipelineTimeline'; rank: number; time?: number } & StageTimeline)
  /** a remote parameter server's work over the run (process 0): pushes handled, the median seconds of one (check and optimizer step) */
  | { type: 'serverWork'; pushes: number; medianPushSeconds: number }
  /** a device died and the strategy went on without it (async, asynchronous EASGD); rank: its device index */
  | { type: 'deviceLost'; rank: number; step: number; reason: string }
  | {
      type: 'end';
      seconds: number;
      samplesPerSecond: number;
      testAccuracy: number;
      testLoss: number;
      /** the last evaluation of the validation split (absent: none) */
      valAccuracy?: number;
      valLoss?: number;
      /** transcription: the last test evaluation's error rates */
      testCER?: number;
      testWER?: number;
      /** peak resident memory of the whole process (all devices' threads) */
      maxRssBytes: number;
      /** devices that died while the run went on (absent: none) */
      devicesLost?: number;
    };

/** A receiver of a run's events (TrainOptions.onEvent). */
export type EventSink = (event: TrainEvent) => void;

/**
 * Combines the devices' per-epoch summaries into one 'epoch' event once every device has reported
 * that epoch (devices firstRank … firstRank + devices − 1; one lost since, see 'deviceLost', is
 * not waited for); passes every other event through.
 */
export function epochAggregator(devices: number, emit: EventSink, firstRank = 0): EventSink {
  const pending = new Map<number, Extract<TrainEvent, { type: 'rankEpoch' }>[]>();
  const lost = new Set<number>();
  const complete = (list: Extract<TrainEvent, { type: 'rankEpoch' }>[]) =>
    list.length + [...lost].filter((r) => !list.some((e) => e.rank === r)).length >= devices;
  const summarise = (epoch: number, list: Extract<TrainEvent, { type: 'rankEpoch' }>[]) => {
    pending.delete(epoch);
    const samples = list.reduce((n, e) => n + e.samples, 0);
    const seconds = Math.max(...list.map((e) => e.seconds));
    emit({
      type: 'epoch',
      epoch,
      samples,
      seconds,
      samplesPerSecond: samples / seconds,
      loss: list.reduce((n, e) => n + e.lossSum, 0) / Math.max(samples, 1),
      accuracy: list.reduce((n, e) => n + e.correct, 0) / Math.max(samples, 1),
      ...badStepsOf(list),
      ...errorRatesOf(list),
    });
  };
  return (event) => {
    emit(event);
    if (event.type === 'deviceLost' && event.rank >= firstRank && event.rank < firstRank + devices) {
      lost.add(event.rank);
      for (const [epoch, list] of [...pending]) if (complete(list)) summarise(epoch, list);
      return;
    }
    if (event.type !== 'rankEpoch') return;
    const list = pending.get(event.epoch) ?? [];
    list.push(event);
    pending.set(event.epoch, list);
    if (complete(list)) summarise(event.epoch, list);
  };
}

/** CER and WER of the devices' summed counts, when they report them. */
function errorRatesOf(list: { errors?: ErrorCounts }[]): { cer?: number; wer?: number } {
  const sum = list.reduce<ErrorCounts | undefined>((a, e) => addErrorCounts(a, e.errors), undefined);
  return sum
    ? {
        cer: errorRate({ errors: sum.charErrors, length: sum.chars }),
        wer: errorRate({ errors: sum.wordErrors, length: sum.words }),
      }
    : {};
}

function badStepsOf(list: { badSteps?: number }[]): { badSteps?: number } {
  const most = Math.max(0, ...list.map((e) => e.badSteps ?? 0));
  return most > 0 ? { badSteps: most } : {};
}
