import cliProgress from 'cli-progress';
import type { TrainEvent } from '../runtime/events/events.ts';
import { findStragglers } from '../report/stragglers.ts';

const pct = (x: number, digits = 2) => (Number.isFinite(x) ? `${(100 * x).toFixed(digits)}%` : '—');

/** A watched metric's value: accuracies as percentages, losses as numbers. */
const formatMetric = (metric: string, value: number) => (metric.endsWith('Accuracy') ? pct(value) : value.toFixed(4));
/** `, test CER 12.30%, WER 30.00%` for a speech model's error rates (nothing otherwise). */
const rates = (what: string, cer: number | undefined, wer: number | undefined) =>
  cer === undefined ? '' : `, ${what}CER ${pct(cer)}, WER ${pct(wer ?? NaN)}`;

/** `1m05s`, `42s`, `1h03m`. */
export function formatEta(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '—';
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** Steps kept per device for its live compute / communication / idle shares. */
const WINDOW = 20;

interface DeviceWindow {
  steps: { computeMs: number; commMs: number; idleMs: number; samples: number }[];
  stepInEpoch: number;
}

export interface DeviceShare {
  rank: number;
  compute: number;
  comm: number;
  idle: number;
  /** compute milliseconds per sample */
  msPerSample: number;
  straggler: boolean;
}

/** Shares of each device's time and the straggler flags (the rule is in report/stragglers.ts). */
export function deviceShares(
  devices: { rank: number; computeMs: number; commMs: number; idleMs: number; samples: number }[],
): DeviceShare[] {
  const perSample = devices.map((d) => (d.samples > 0 ? d.computeMs / d.samples : NaN));
  const flags = findStragglers(perSample);
  return devices.map((d, i) => {
    const total = d.computeMs + d.commMs + d.idleMs;
    return {
      rank: d.rank,
      compute: total > 0 ? d.computeMs / total : NaN,
      comm: total > 0 ? d.commMs / total : NaN,
      idle: total > 0 ? d.idleMs / total : NaN,
      msPerSample: perSample[i]!,
      straggler: flags[i]!,
    };
  });
}

/** `device 1  compute 71%  comm 4%  idle 25%  2.10 ms/sample  ⚠ straggler` */
export function formatDeviceShare(d: DeviceShare): string {
  const p = (x: number) => pct(x, 0).padStart(4);
  return (
    `device ${d.rank}  compute ${p(d.compute)}  comm ${p(d.comm)}  idle ${p(d.idle)}  ` +
    `${Number.isFinite(d.msPerSample) ? d.msPerSample.toFixed(2) : '—'} ms/sample${d.straggler ? '  ⚠ straggler' : ''}`
  );
}

/**
 * Renders training events. On a terminal: a live bar for the whole run (epoch, step, loss, accuracy,
 * samples/s, ETA) and, with several devices, a line per device with its compute / communication /
 * idle share over its last steps and a straggler flag. Otherwise (a pipe, a log file, CI) plain
 * lines: a progress line every 10 s, and per epoch a summary plus a line per device.
 */
export class ProgressView {
  private multibar: cliProgress.MultiBar | null = null;
  private mainBar: cliProgress.SingleBar | null = null;
  private deviceBars: cliProgress.SingleBar[] = [];
  private readonly tty: boolean;
  private samples = 0;
  private started = 0;
  private firstStepAt = 0;
  private lastLine = 0;
  private lastRender = 0;
  private loss = 0;
  private accuracy = 0;
  private devices = 1;
  private processSuffix = '';
  private epochs = 1;
  private stepsPerEpoch = 1;
  private windows: DeviceWindow[] = [];
  private rankEpochs = new Map<number, Extract<TrainEvent, { type: 'rankEpoch' }>[]>();

  /** `prefix` starts every plain line (e.g. the strategy, when `compare` runs several). */
  constructor(
    private readonly out: NodeJS.WritableStream & { isTTY?: boolean } = process.stderr,
    private readonly quiet = false,
    private readonly prefix = '',
  ) {
    this.tty = Boolean(out.isTTY) && !quiet;
  }

  handle = (e: TrainEvent): void => {
    switch (e.type) {
      case 'start':
        // with several processes this one shows (and its epoch lines summarise) its own devices
        this.devices = e.devices / e.processes;
        this.processSuffix = e.processes > 1 ? ' (this process)' : '';
        this.epochs = e.epochs;
        this.stepsPerEpoch = e.stepsPerEpoch;
        this.windows = Array.from({ length: this.devices }, () => ({ steps: [], stepInEpoch: -1 }));
        this.line(
          `run ${e.runDir}: ${e.parameters.toLocaleString('en-US')} parameters, backend ${e.backend}, ` +
            `${e.devices} device(s)${e.processes > 1 ? ` in ${e.processes} processes` : ''}, strategy ${e.strategy}, global batch ${e.globalBatch}`,
        );
        this.started = performance.now();
        this.lastLine = this.started; // the first progress line 10 s into the run
        break;
      case 'step':
        this.onStep(e);
        break;
      case 'rankEpoch': {
        const list = this.rankEpochs.get(e.epoch) ?? [];
        list.push(e);
        this.rankEpochs.set(e.epoch, list);
        break;
      }
      case 'epoch': {
        this.line(
          `epoch ${e.epoch + 1}/${this.epochs}: loss ${e.loss.toFixed(4)}, train accuracy ${pct(e.accuracy)}${rates('train ', e.cer, e.wer)}, ` +
            `${e.samplesPerSecond.toFixed(0)} samples/s${this.processSuffix}, ${e.seconds.toFixed(1)} s`,
        );
        const ranks = (this.rankEpochs.get(e.epoch) ?? []).sort((a, b) => a.rank - b.rank);
        this.rankEpochs.delete(e.epoch);
        // on a terminal the device lines are live; elsewhere each epoch ends with them
        if (!this.tty && ranks.length > 1) {
          const shares = deviceShares(
            ranks.map((r) => ({
              rank: r.rank,
              computeMs: r.computeMs,
              commMs: Math.max(0, r.syncMs - r.idleMs),
              idleMs: r.idleMs,
              samples: r.samples,
            })),
          );
          for (const d of shares) this.line(`  ${formatDeviceShare(d)}`);
        }
        break;
      }
      case 'eval': {
        const parts: string[] = [];
        if (e.valLoss !== undefined)
          parts.push(
            `validation loss ${e.valLoss.toFixed(4)}, validation accuracy ${pct(e.valAccuracy ?? NaN)}${rates('validation ', e.valCER, e.valWER)}`,
          );
        if (e.testLoss !== undefined)
          parts.push(
            `test loss ${e.testLoss.toFixed(4)}, test accuracy ${pct(e.testAccuracy ?? NaN)}${rates('test ', e.testCER, e.testWER)}`,
          );
        this.line(`epoch ${e.epoch + 1}/${this.epochs}: ${parts.join('; ')}`);
        break;
      }
      case 'best':
        this.line(`best ${e.metric} so far (${formatMetric(e.metric, e.value)}): ${e.path}`);
        break;
      case 'earlyStopping':
        if (e.wait > 0)
          this.line(
            `early stopping: ${e.metric} has not improved on ${formatMetric(e.metric, e.best)} (epoch ${e.bestEpoch + 1}) for ${e.wait} of ${e.patience} evaluations${e.stop ? '; stopping' : ''}`,
          );
        break;
      case 'earlyStopped':
        this.line(
          `stopped early at step ${e.step} (epoch ${e.epoch + 1}): ${e.metric} last improved in epoch ${e.bestEpoch + 1}`,
        );
        break;
      case 'checkpoint':
        this.line(`checkpoint: ${e.path}`);
        break;
      case 'end':
        this.stopBar();
        this.line(
          `done in ${e.seconds.toFixed(1)} s, ${e.samplesPerSecond.toFixed(0)} samples/s, test accuracy ${pct(e.testAccuracy)}${rates('test ', e.testCER, e.testWER)}`,
        );
        break;
    }
  };

  private onStep(e: Extract<TrainEvent, { type: 'step' }>): void {
    this.samples += e.samples;
    if (this.firstStepAt === 0) this.firstStepAt = performance.now() - (e.computeMs + e.syncMs);
    const w = this.windows[e.rank];
    if (w) {
      w.steps.push({
        computeMs: e.computeMs,
        commMs: Math.max(0, e.syncMs - e.idleMs),
        idleMs: e.idleMs,
        samples: e.samples,
      });
      if (w.steps.length > WINDOW) w.steps.shift();
      w.stepInEpoch = e.stepInEpoch;
    }
    if (e.rank !== 0) {
      if (this.tty && this.multibar && performance.now() - this.lastRender > 100) this.renderDevices();
      return; // every device's samples count; the bar follows device 0
    }
    // exponential moving averages: a readable trend rather than per-batch noise
    const k = e.step === 0 ? 1 : 0.05;
    this.loss += k * (e.loss - this.loss);
    this.accuracy += k * (e.accuracy - this.accuracy);
    const now = performance.now();
    const rate = this.samples / ((now - this.firstStepAt) / 1000);
    const done = e.epoch * e.stepsPerEpoch + e.stepInEpoch + 1;
    const total = this.epochs * e.stepsPerEpoch;
    // ETA from the pace since the first step (evaluations and checkpoints are not counted)
    const eta = formatEta((((now - this.firstStepAt) / 1000) * (total - done)) / Math.max(done, 1));
    const payload = {
      epoch: `${e.epoch + 1}/${this.epochs}`,
      step: `${e.stepInEpoch + 1}/${e.stepsPerEpoch}`,
      loss: this.loss.toFixed(4),
      acc: pct(this.accuracy),
      rate: rate.toFixed(0),
      remaining: eta,
    };
    if (this.tty) {
      if (!this.multibar) this.startBars(total);
      this.mainBar!.update(done, payload);
      this.renderDevices();
    } else if (!this.quiet && now - this.lastLine > 10_000) {
      this.lastLine = now;
      this.line(
        `epoch ${payload.epoch} step ${payload.step} loss ${payload.loss} acc ${payload.acc} ${payload.rate} samples/s ETA ${eta}`,
      );
    }
  }

  private startBars(total: number): void {
    this.multibar = new cliProgress.MultiBar(
      {
        stream: this.out as NodeJS.WriteStream,
        hideCursor: true,
        clearOnComplete: true,
        autopadding: true,
        forceRedraw: false,
        fps: 10,
        format: `${this.prefix}epoch {epoch} step {step} [{bar}] loss {loss} | acc {acc} | {rate} samples/s | ETA {remaining}`,
      },
      cliProgress.Presets.shades_classic,
    );
    this.mainBar = this.multibar.create(total, 0, {
      epoch: '1',
      step: '0',
      loss: '—',
      acc: '—',
      rate: '0',
      remaining: '—',
    });
    if (this.devices > 1) {
      this.deviceBars = this.windows.map(() =>
        this.multibar!.create(
          this.stepsPerEpoch,
          0,
          { text: '' },
          {
            format: `${this.prefix}  [{bar}] {text}`,
            barsize: 16,
          },
        ),
      );
    }
  }

  /** Per-device lines: shares over each device's last WINDOW steps, stragglers flagged. */
  private renderDevices(): void {
    this.lastRender = performance.now();
    if (this.deviceBars.length === 0) return;
    const sums = this.windows.map((w, rank) =>
      w.steps.reduce(
        (a, s) => ({
          rank,
          computeMs: a.computeMs + s.computeMs,
          commMs: a.commMs + s.commMs,
          idleMs: a.idleMs + s.idleMs,
          samples: a.samples + s.samples,
        }),
        { rank, computeMs: 0, commMs: 0, idleMs: 0, samples: 0 },
      ),
    );
    deviceShares(sums).forEach((d, i) => {
      this.deviceBars[i]?.update(Math.max(0, this.windows[i]!.stepInEpoch + 1), { text: formatDeviceShare(d) });
    });
  }

  stopBar(): void {
    this.multibar?.stop();
    this.multibar = null;
    this.mainBar = null;
    this.deviceBars = [];
  }

  private line(text: string): void {
    if (this.quiet) return;
    if (this.multibar) {
      // printed above the bars
      this.multibar.log(`${this.prefix}${text}\n`);
      this.multibar.update();
    } else {
      this.out.write(`${this.prefix}${text}\n`);
    }
  }
}
