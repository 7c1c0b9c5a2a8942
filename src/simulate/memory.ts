/**
 * Memory per device, in bytes: what a replica's flat buffers hold as paratrain allocates them —
 * fp32 weights and gradients (the whole flat buffer on every device), non-trained state
 * (BatchNorm's statistics), the optimizer's state for the parameters the device steps, and the
 * buffers a strategy keeps of its own (gradient compression's residuals and packed chunks).
 * Activations are left out: they depend on the batch and the schedule, not on the strategy's
 * update (docs/simulator.md).
 *
 * Unsharded Adam: 4Ψ + 4Ψ + 8Ψ = 16Ψ. ZeRO stage 1 and 2 as implemented (sharding/shardedHybrid.ts):
 * 4Ψ + 4Ψ + 8Ψ/N — stage 2 keeps the whole gradient buffer backward writes into, so it holds what
 * stage 1 holds; the slice a device owns is its ShardLayout's, the largest over the ranks.
 */
import { ShardLayout } from '../parallel/sharding/shardLayout.ts';
import type { FlatRange } from '../optim/optimizer.ts';

/** One device's buffers, in floats. */
export interface DeviceBuffers {
  /** the flat weight (= gradient) buffer */
  paramFloats: number;
  /** non-trained state (BatchNorm statistics) */
  stateFloats: number;
  /** optimizer state floats per stepped parameter */
  optimizerSlots: number;
  /** the parameters this device steps (default: all of them) */
  ownedFloats?: number;
  /** the strategy's own buffers */
  strategyFloats?: number;
}

/** Bytes of one device's buffers: weights, gradients, state, optimizer state, the strategy's. */
export function deviceMemoryBytes(b: DeviceBuffers): number {
  const owned = b.ownedFloats ?? b.paramFloats;
  return 4 * (2 * b.paramFloats + b.stateFloats + b.optimizerSlots * owned + (b.strategyFloats ?? 0));
}

/**
 * The most floats any of G devices owns when the buffer of `size` floats is cut into `pieces`
 * (stage 1: the whole buffer; stage 2: hybrid's gradient buckets), each split as ShardLayout splits it.
 */
export function largestOwnedFloats(size: number, pieces: readonly FlatRange[], G: number): number {
  let most = 0;
  for (let rank = 0; rank < G; rank++) most = Math.max(most, new ShardLayout(size, pieces, G, rank).ownedFloats);
  return most;
}
