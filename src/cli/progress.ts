import cliProgress from 'cli-progress';
import type { TrainEvent } from '../runtime/events.ts';

const pct = (x: number) => `${(100 * x).toFixed(2)}%`;

/** Renders training events: a live bar on a terminal, one plain line per epoch (and every N steps) otherwise. */
export class ProgressView {
  private bar: cliProgress.SingleBar | null = null;
  private readonly tty: boolean;
  private samples = 0;
  private started = 0;
  private lastLine = 0;
  private loss = 0;
  private accuracy = 0;

  constructor(private readonly out: NodeJS.WriteStream = process.stderr, private readonly quiet = false) {
    this.tty = Boolean(out.isTTY) && !quiet;
  }

  handle = (e: TrainEvent): void => {
    switch (e.type) {
      case 'start':
        this.line(`run ${e.runDir}: ${e.parameters.toLocaleString('en-US')} parameters, backend ${e.backend}, ` +
          `${e.devices} device(s), strategy ${e.strategy}, global batch ${e.globalBatch}`);
        this.line(`data: ${e.dataSource}`);
        this.started = performance.now();
        break;
      case 'step': {
        this.samples += e.samples;
        if (e.rank !== 0) break;  // every device's samples count; the bar follows device 0
        // exponential moving averages: a readable trend rather than per-batch noise
        const k = e.stepInEpoch === 0 ? 1 : 0.05;
        this.loss += k * (e.loss - this.loss);
        this.accuracy += k * (e.accuracy - this.accuracy);
        const rate = this.samples / ((performance.now() - this.started) / 1000);
        const payload = { epoch: `${e.epoch + 1}`, loss: this.loss.toFixed(4), acc: pct(this.accuracy), rate: rate.toFixed(0) };
        if (this.tty) {
          if (!this.bar || e.stepInEpoch === 0) this.newBar(e.stepsPerEpoch, payload);
          this.bar!.update(e.stepInEpoch + 1, payload);
        } else if (!this.quiet && performance.now() - this.lastLine > 10_000) {
          this.lastLine = performance.now();
          this.line(`epoch ${payload.epoch} step ${e.stepInEpoch + 1}/${e.stepsPerEpoch} loss ${payload.loss} acc ${payload.acc} ${payload.rate} samples/s`);
        }
        break;
      }
      case 'epoch':
        this.stopBar();
        this.line(`epoch ${e.epoch + 1}: loss ${e.loss.toFixed(4)}, train accuracy ${pct(e.accuracy)}, ` +
          `${e.samplesPerSecond.toFixed(0)} samples/s, ${e.seconds.toFixed(1)} s`);
        break;
      case 'eval':
        this.line(`epoch ${e.epoch + 1}: test loss ${e.testLoss.toFixed(4)}, test accuracy ${pct(e.testAccuracy)}`);
        break;
      case 'checkpoint':
        this.line(`checkpoint: ${e.path}`);
        break;
      case 'end':
        this.stopBar();
        this.line(`done in ${e.seconds.toFixed(1)} s, ${e.samplesPerSecond.toFixed(0)} samples/s, test accuracy ${pct(e.testAccuracy)}`);
        break;
    }
  };

  private newBar(total: number, payload: object): void {
    this.stopBar();
    this.bar = new cliProgress.SingleBar({
      stream: this.out,
      format: 'epoch {epoch} [{bar}] {value}/{total} | loss {loss} | acc {acc} | {rate} samples/s | ETA {eta_formatted}',
      hideCursor: true, clearOnComplete: true, etaBuffer: 50,
    }, cliProgress.Presets.shades_classic);
    this.bar.start(total, 0, payload);
  }

  stopBar(): void {
    this.bar?.stop();
    this.bar = null;
  }

  private line(text: string): void {
    if (!this.quiet) this.out.write(text + '\n');
  }
}
