/**
 * Memory per device, in bytes: what a replica's flat buffers hold as paratrain allocates them —
 * fp32 weights and gradients (the whole flat buffer on every device), non-trained state
 * (BatchNorm's statistics), the optimizer's state for the parameters the device steps, and the
 * buffers a strategy keeps of its own (gradient compression's residuals and packed chunks).
 * Activations are left out: they depend on the batch and the schedule, not on the strategy's
 * update (docs/simulator.md).
 *
 * Unsharded Adam: 4Ψ + 4Ψ + 8Ψ = 16Ψ. ZeRO as implemented (sharding/shardedHybrid.ts), the slice a
 * device owns being its ShardLayout's, the largest over the ranks: stage 1 4Ψ + 4Ψ + 8Ψ/N; stage 2
 * (sharding/gradientShards.ts) 4Ψ + 12Ψ/N and one unit's gradient workspace, 4L; stage 3
 * (sharding/weightShards.ts) 16Ψ/N and one gathered unit's weights and gradients, 8L.
 */
import { ShardLayout } from '../parallel/sharding/shardLayout.ts';
import type { FlatRange } from '../optim/optimizer.ts';

/** One device's buffers, in floats. */
export interface DeviceBuffers {
  /** the flat weight buffer: whole, or at stage 3 the owned part and one gathered unit */
  paramFloats: number;
  /** the gradient held (default: as the weights): at stages 2 and 3 the owned part and one unit's workspace */
  gradFloats?: number;
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
  const grads = b.gradFloats ?? b.paramFloats;
  return 4 * (b.paramFloats + grads + b.stateFloats + b.optimizerSlots * owned + (b.strategyFloats ?? 0));
}

/**
 * The most floats any of G devices owns when the buffer of `size` floats is cut into `pieces`
 * (stage 1: the whole buffer; stages 2 and 3: hybrid's gradient buckets), each split as ShardLayout splits it.
 */
export function largestOwnedFloats(size: number, pieces: readonly FlatRange[], G: number): number {
  let most = 0;
  for (let rank = 0; rank < G; rank++) most = Math.max(most, new ShardLayout(size, pieces, G, rank).ownedFloats);
  return most;
}
