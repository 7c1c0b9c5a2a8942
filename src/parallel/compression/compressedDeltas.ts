/**
 * Compression for the averaging strategies (`train.strategy: { bsp | bmuf | diloco: { compression:
 * … } }`): at a synchronisation each device sends its model delta w − s (s: the block's common
 * start) through the codec (codec.ts) instead of its weights, with error feedback — what the
 * compression leaves out of a delta is added to the device's next one — and every replica gets
 * s + the estimate of the mean delta, the same bits everywhere. BatchNorm statistics stay plain.
 *
 * A round whose estimate is not finite (a delta that overflowed: the same bits on every device)
 * starts the error feedback afresh and is averaged uncompressed, as without compression; so is
 * every round before the compression's startStep.
 */
import type { Communicator } from '../../comm/communicator.ts';
import { counter, type ReplicaView, type StrategyState } from '../strategy.ts';
import { allFinite } from '../nonFinite.ts';
import { codecFor, type Codec } from './codec.ts';
import { compressionStartStep, type CompressionSpec } from './spec.ts';

export class CompressedDeltas {
  private codec: Codec | null = null;
  /** this device's scaled delta, then the estimate of the mean */
  private delta = new Float32Array(0);
  /** compressed rounds so far (the same on every device): powerSGD's fresh Q of each is drawn from it */
  private rounds = 0;

  constructor(
    private readonly comm: Communicator,
    private readonly spec: CompressionSpec,
    private readonly seed: number,
  ) {}

  /** Whether a round at global step `step` is compressed (every device must agree: the caller asks with a step they share). */
  compressesAt(step: number): boolean {
    return step >= compressionStartStep(this.spec);
  }

  /** In onStart, after the broadcast: the codec sized on the replica's weights, its buffers registered (the same on every device). */
  async begin(replica: ReplicaView): Promise<void> {
    const n = replica.params.length;
    this.codec = codecFor(this.comm, n, replica.tensors, this.spec, this.seed);
    this.delta = new Float32Array(n);
    for (const b of this.codec.buffers) if (b.length > 0) await this.comm.register?.(b);
  }

  /**
   * params ← start + the estimate of the devices' mean of scale·(params − start): `scale` is 1 for
   * a plain mean, G·weight/Σweight for a weighted one. False (params untouched, the error feedback
   * afresh) when the estimate is not finite: the caller then averages uncompressed.
   */
  async average(params: Float32Array, start: Float32Array, scale: number): Promise<boolean> {
    const codec = this.codec!,
      d = this.delta;
    for (let i = 0; i < d.length; i++) d[i] = scale * (params[i]! - start[i]!);
    await codec.reduce(d, this.rounds++);
    if (!allFinite(d)) {
      codec.reset();
      return false;
    }
    for (let i = 0; i < d.length; i++) params[i] = start[i]! + d[i]!;
    return true;
  }

  save(): StrategyState {
    const own = this.codec!.save();
    return { tensors: own.tensors, counters: { ...own.counters, compressedRounds: this.rounds } };
  }

  restore(state: StrategyState): void {
    this.codec!.restore(state);
    this.rounds = counter(state, 'compressedRounds');
  }
}
