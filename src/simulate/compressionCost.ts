/**
 * hybrid with compressed gradients (`hybrid:compression=oneBit|powerSGD`) as
 * compression/compressedHybrid.ts runs it: after backward (nothing is sent during it) a one-float
 * all-reduce agrees on a NaN/Inf step, the codec compresses and exchanges the whole gradient, the
 * optimizer steps. The message sizes come from paratrain's own codecs built for the model's
 * weight tensors (tensors.ts), never from a formula of their own:
 *
 *   oneBit (oneBit.ts): each device sends rank j its packed chunk j (point to point, G − 1 rounds
 *     of one send and one receive, in pieces of 8,192 floats) and the G packed chunks are
 *     all-gathered; a packed chunk is 2 floats per group segment and ⌈len/32⌉ words of signs.
 *   powerSGD (powerSgd.ts): one all-reduce of the P's (n × r each) with the vectors and the
 *     matrices compression would not shrink, then one of the Q's (m × r each).
 *
 * The codec's arithmetic is timed here by running it on a gradient of the model's shapes with a
 * communicator that moves nothing (codecSeconds): oneBit as rank 0 of G devices runs it (its G
 * chunks quantised, its own chunk rebuilt from G and quantised again, the G gathered chunks
 * rebuilt), on values of random sign as gradients have (its branches on the sign cost what they
 * cost on real gradients); powerSGD's products, which do not depend on G, once.
 */
import type { Communicator } from '../comm/communicator.ts';
import { allFinite } from '../parallel/nonFinite.ts';
import { OneBitExchange } from '../parallel/compression/oneBit.ts';
import { PowerSgd } from '../parallel/compression/powerSgd.ts';
import type { CompressionSpec } from '../parallel/compression/spec.ts';
import { tensorPlaces, type TensorPlace } from '../parallel/compression/tensors.ts';
import {
  allgather,
  allreduce,
  FRAME_HEADER_BYTES,
  streamRate,
  type CollectiveCost,
  type Network,
  type Placement,
} from './costModel.ts';
import type { ModelWeights } from './weights.ts';
import { computeTime, type ModelCosts } from './layerCosts.ts';
import type { LockstepPlan } from './lockstep.ts';

/** oneBit's point-to-point pieces (oneBit.ts PIECE): each fits a shared-memory mailbox. */
export const ONE_BIT_PIECE_FLOATS = 8192;

/** A communicator of G ranks that moves nothing: the codecs' layouts depend only on its size. */
function silentComm(size: number): Communicator {
  const none = async () => {};
  return { size, rank: 0, allreduce: none, allgather: none, send: none, recv: none } as unknown as Communicator;
}

/** The flat gradient's tensors as the codecs see them. */
export function placesOf(paramFloats: number, weights: ModelWeights): TensorPlace[] {
  return tensorPlaces(paramFloats, weights.tensors);
}

/** oneBit on G devices: floats of one packed chunk (every chunk padded to it) and the device's own buffers. */
export function oneBitSizes(
  n: number,
  places: readonly TensorPlace[],
  G: number,
): { chunk: number; bufferFloats: number } {
  const x = new OneBitExchange(silentComm(G), n, places);
  const chunk = x.packedLength / G;
  // residual, server residual, the rebuilt mean, and the outbox, inbox and gathered packed chunks
  return { chunk, bufferFloats: x.residual.length + x.serverResidual.length + n + 3 * x.packedLength };
}

/** powerSGD: floats of its two all-reduces (plain + P's, then Q's). */
export function powerSgdSizes(
  n: number,
  places: readonly TensorPlace[],
  spec: Extract<CompressionSpec, { type: 'powerSGD' }>,
): { first: number; second: number; bufferFloats: number } {
  const p = new PowerSgd(silentComm(1), n, places, { ...spec, seed: 0 });
  const [first, q] = p.collectiveBuffers as [Float32Array, Float32Array];
  return { first: first.length, second: q.length, bufferFloats: p.error.length + first.length + q.length };
}

/**
 * G − 1 rounds in which every device sends one chunk of `floats` and receives one, in pieces
 * (oneBit.ts scatter): a piece's send and the matching receive, then the next piece. Over TCP a
 * piece costs α + its frame on the link; over shared memory a copy into the mailbox and one out
 * (the process's threads sharing its memory bandwidth). Bytes: what send and recv count, the
 * payload each way.
 */
export function pointToPointRounds(floats: number, p: Placement, net: Network): CollectiveCost {
  const G = p.hosts * p.perHost;
  if (G <= 1 || floats <= 0) return { seconds: 0, bytes: 0 };
  const pieces = Math.ceil(floats / ONE_BIT_PIECE_FLOATS);
  const bytes = floats * 4;
  const round =
    p.hosts > 1
      ? pieces * net.tcp.link.alpha + (bytes + pieces * FRAME_HEADER_BYTES) / streamRate(net.tcp)
      : 2 * pieces * net.shm.alpha + (2 * bytes * p.perHost) / net.shm.beta;
  return { seconds: (G - 1) * round, bytes: 2 * (G - 1) * bytes };
}

/** The exchange of one step (the NaN/Inf flag, then the codec's collectives), or why paratrain refuses it. */
export function compressedExchange(
  spec: CompressionSpec,
  n: number,
  places: readonly TensorPlace[],
  p: Placement,
  net: Network,
): { cost: CollectiveCost; bufferFloats: number } | string {
  const flag = allreduce(4, p, net);
  const parts: CollectiveCost[] = [flag];
  let bufferFloats: number;
  if (spec.type === 'oneBit') {
    if (p.hosts > 1 && p.perHost > 1)
      return 'train.strategy.hybrid.compression oneBit sends each device its chunk point to point, and threads of different processes have no direct link; run one device thread per process (--per-host 1), or use compression powerSGD';
    const G = p.hosts * p.perHost;
    const s = oneBitSizes(n, places, G);
    parts.push(pointToPointRounds(s.chunk, p, net), allgather(G * s.chunk * 4, p, net));
    bufferFloats = s.bufferFloats;
  } else {
    const s = powerSgdSizes(n, places, spec);
    parts.push(allreduce(s.first * 4, p, net), allreduce(s.second * 4, p, net));
    bufferFloats = s.bufferFloats;
  }
  return {
    cost: { seconds: parts.reduce((t, c) => t + c.seconds, 0), bytes: parts.reduce((b, c) => b + c.bytes, 0) },
    bufferFloats,
  };
}

/**
 * Seconds of the step's own arithmetic around the exchange on this machine, as compressedHybrid.ts
 * runs it: the non-finite check of the gradient, the codec, the check of the estimate. The codec
 * runs as rank 0 of `devices` (oneBit's chunks depend on them) with a communicator that moves
 * nothing, on a gradient of the model's shapes in the backend's own buffer (`alloc`, where the
 * replica's gradient lives) whose signs are random, as a real gradient's are (a periodic fill lets
 * the CPU predict oneBit's branches on the sign); the median of `reps` after a warm-up.
 */
export async function codecSeconds(
  spec: CompressionSpec,
  n: number,
  places: readonly TensorPlace[],
  devices = 1,
  alloc: (n: number) => Float32Array = (k) => new Float32Array(k),
  reps = 3,
): Promise<number> {
  const grads = alloc(n);
  let seed = 0x9e3779b9;
  const fill = () => {
    // xorshift32: values in (−1e-3, 1e-3), each sign a fair coin
    for (let i = 0; i < n; i++) {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      grads[i] = ((seed >>> 0) / 2 ** 32 - 0.5) * 2e-3;
    }
  };
  const reduce =
    spec.type === 'oneBit'
      ? (
          (x) => () =>
            x.reduce(grads)
        )(new OneBitExchange(silentComm(devices), n, places))
      : (
          (x) => () =>
            x.reduce(grads, 1)
        )(new PowerSgd(silentComm(1), n, places, { ...spec, seed: 1 }));
  const times: number[] = [];
  for (let k = 0; k <= reps; k++) {
    fill();
    const t0 = performance.now();
    if (!allFinite(grads)) throw new Error('codecSeconds: a non-finite test gradient');
    await reduce();
    allFinite(grads);
    if (k > 0) times.push((performance.now() - t0) / 1000);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}

/** One step: compute, then (nothing overlapping backward) the exchange, the codec's arithmetic and the optimizer. */
export function compressedPlan(
  costs: ModelCosts,
  batch: number,
  exchange: CollectiveCost,
  codec: number,
): LockstepPlan {
  const fixed = exchange.seconds + codec + costs.optimizerPerFloat * costs.paramFloats;
  return { compute: computeTime(costs, batch), bytes: exchange.bytes, tail: () => fixed };
}
