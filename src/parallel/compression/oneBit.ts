/**
 * The 1-bit exchange: compressed reduce-scatter then compressed all-gather, as 1-bit Adam's
 * compressed allreduce does it (Tang et al. 2021), with the quantiser of oneBitCodec.ts.
 *
 *   device d:  v ← g + e_d;  send Q(v)'s chunk j to rank j (j ≠ d);  e_d ← v − Q(v)
 *   rank j:    u ← (1/G) Σ_d deQ(chunk j of Q(v_d)) + s_j;  c_j ← Q(u);  s_j ← u − c_j
 *   all:       all-gather the c_j; the gradient applied is deQ(c_0 … c_{G−1}), the same bits everywhere
 *
 * Chunk j is ownedSlice(n, G, j) of the flat gradient. Each device sends and receives G − 1 packed
 * chunks and all-gathers G: about 2(G − 1)/G · n/32 words, against a ring all-reduce's
 * 2(G − 1)/G · n floats. The packed chunks are Float32Arrays whose words are bit patterns (NaN
 * patterns among them): they travel only through send/recv and allgather, which copy bytes
 * (shm: TypedArray.set; tcp: the array's bytes), never through a float's element copy or a sum.
 */
import { ownedSlice, type Communicator } from '../../comm/communicator.ts';
import { chunkSegments, dequantise, groupStarts, packedFloats, quantise, type Segment } from './oneBitCodec.ts';
import type { TensorPlace } from './tensors.ts';

/** Point-to-point messages are cut into pieces this long: each fits a shared-memory mailbox, so a send never waits on a peer that is itself sending. */
const PIECE = 8192;
/** The tag of the exchange's messages. */
const TAG = 0x0b17;

export class OneBitExchange {
  /** e_d: what this device's quantisation left out, added to its next gradient */
  readonly residual: Float32Array;
  /** s_j: what quantising this rank's chunk of the mean left out */
  readonly serverResidual: Float32Array;
  private readonly chunks: { start: number; end: number; segments: Segment[] }[];
  /** floats per packed chunk, the same for every chunk (the longest, the others padded) */
  private readonly width: number;
  private readonly outbox: Float32Array;
  private readonly inbox: Float32Array;
  private readonly gathered: Float32Array;
  private readonly mine: Float32Array;

  constructor(
    private readonly comm: Communicator,
    readonly length: number,
    places: readonly TensorPlace[],
  ) {
    const G = comm.size,
      starts = groupStarts(length, places);
    this.chunks = Array.from({ length: G }, (_, q) => {
      const { start, end } = ownedSlice(length, G, q);
      return { start, end, segments: chunkSegments(starts, start, end) };
    });
    this.width = Math.max(...this.chunks.map((c) => packedFloats(c.end - c.start, c.segments.length)));
    this.residual = new Float32Array(length);
    const own = this.chunks[comm.rank]!;
    this.serverResidual = new Float32Array(own.end - own.start);
    this.mine = new Float32Array(length);
    this.outbox = new Float32Array(G * this.width);
    this.inbox = new Float32Array(G * this.width);
    this.gathered = sharedFloats(G * this.width);
  }

  /** The buffers collectives run on, to register with the transport (in this order on every device). */
  get collectiveBuffers(): Float32Array[] {
    return [this.gathered];
  }

  /** Floats each device's packed gradient takes (G chunks, padded alike). */
  get packedLength(): number {
    return this.gathered.length;
  }

  /** `grads` (this device's gradient) becomes the 1-bit estimate of the mean over the devices. */
  async reduce(grads: Float32Array): Promise<void> {
    const { comm, chunks, width: W, residual: e } = this;
    const G = comm.size,
      me = comm.rank;
    for (let i = 0; i < this.length; i++) e[i] = grads[i]! + e[i]!;
    for (const [q, c] of chunks.entries()) quantise(e, c.start, c.segments, this.outbox, q * W);
    await this.scatter();
    // rank `me` serves its chunk: the devices' packed chunks in rank order, averaged, re-quantised
    const own = chunks[me]!,
      u = this.mine;
    u.fill(0, own.start, own.end);
    for (let d = 0; d < G; d++)
      dequantise(d === me ? this.outbox : this.inbox, d * W, own.start, own.segments, u, true);
    const s = this.serverResidual;
    for (let i = own.start; i < own.end; i++) u[i] = u[i]! / G + s[i - own.start]!;
    quantise(u, own.start, own.segments, this.gathered, me * W);
    s.set(u.subarray(own.start, own.end));
    await comm.allgather(this.gathered);
    for (const [q, c] of chunks.entries()) dequantise(this.gathered, q * W, c.start, c.segments, grads);
  }

  /** Sends chunk q of the outbox to rank q and receives every rank's chunk `me` into the inbox (slot = sender). */
  private async scatter(): Promise<void> {
    const { comm, width: W } = this;
    const G = comm.size,
      me = comm.rank;
    for (let k = 1; k < G; k++) {
      const to = (me + k) % G,
        from = (me - k + G) % G;
      for (let a = 0; a < W; a += PIECE) {
        const b = Math.min(W, a + PIECE);
        try {
          await comm.send(this.outbox.subarray(to * W + a, to * W + b), to, TAG);
        } catch (err) {
          throw linkError(err);
        }
        await comm.recv(this.inbox.subarray(from * W + a, from * W + b), from, TAG);
      }
    }
  }

  /** Back to the state of a fresh run (no residuals). */
  reset(): void {
    this.residual.fill(0);
    this.serverResidual.fill(0);
  }
}

/**
 * Floats on a SharedArrayBuffer: once registered, the shared-memory transport reads peers' copies in
 * place, as it does hybrid's gradients, instead of staging them.
 */
export function sharedFloats(n: number): Float32Array {
  return new Float32Array(new SharedArrayBuffer(4 * Math.max(n, 1)), 0, n);
}

/** A transport that cannot link every pair of devices (threads of different processes) says what to do instead. */
function linkError(err: unknown): unknown {
  if (!(err instanceof Error) || !err.message.includes('no direct link')) return err;
  return new Error(
    `train.strategy's compression oneBit sends each device's chunks to every other device, but ${err.message}; ` +
      'run one device thread per process, or use compression powerSGD, which needs only all-reduces',
  );
}
