import type { Communicator } from '../../comm/communicator.ts';
import { subgroup } from '../../comm/subgroup.ts';
import { rowSplit } from './activationExchange.ts';

/** Tags of the groups' messages on the world communicator, apart from a pipeline's and the strategies'. */
const TENSOR_TAG_BASE = 3 << 24;
const DATA_TAG_BASE = 5 << 24;

/**
 * `train.tensorParallel: g` on a world of W devices (Megatron-LM's tensor × data layout): groups of
 * g consecutive ranks each split the `parallel: model` layers over themselves, for their own
 * samples; the W/g groups are data-parallel. A device's shard is held by the devices of the same
 * place in every group, which average its gradient (`data`); the replicated part is averaged over
 * the whole world by the strategy, as without groups.
 *
 * Each group computes its members' rows of the global batch, so the section's "global batch" is
 * their sum (`groupBatch`): the world splits a batch evenly with the first ranks taking the extra
 * samples, and a group's even split of that sum gives its members the same counts.
 */
export interface TensorGroups {
  /** this device's tensor-parallel group: the model-parallel section's communicator */
  readonly tensor: Communicator;
  /** the devices holding the same shards as this one, one per group */
  readonly data: Communicator;
  /** the samples this device's group computes of a global batch of `globalBatch` (undefined: none given) */
  groupBatch(globalBatch: number | undefined): number | undefined;
}

export function tensorGroups(world: Communicator, size: number): TensorGroups {
  if (!Number.isInteger(size) || size < 2 || world.size % size !== 0)
    throw new Error(
      `train.tensorParallel: groups of ${size} devices do not divide the job's ${world.size}; use a divisor of ${world.size} of at least 2`,
    );
  const { members, holders } = tensorGroupRanks(world.rank, world.size, size);
  return {
    tensor: subgroup(world, members, TENSOR_TAG_BASE),
    data: subgroup(world, holders, DATA_TAG_BASE),
    groupBatch(globalBatch) {
      if (globalBatch === undefined) return undefined;
      const { counts } = rowSplit(globalBatch, world.size);
      return members.reduce((sum, r) => sum + counts[r]!, 0);
    },
  };
}

/** Rank `rank`'s tensor-parallel group (`members`) and the ranks holding its shards (`holders`, one per group). */
export function tensorGroupRanks(
  rank: number,
  devices: number,
  size: number,
): { members: number[]; holders: number[] } {
  const first = rank - (rank % size);
  const place = rank % size;
  return {
    members: Array.from({ length: size }, (_, i) => first + i),
    holders: Array.from({ length: devices / size }, (_, q) => q * size + place),
  };
}

/** The groups of `world` for train.tensorParallel = `size` (null when absent or the whole world: one group). */
export function tensorGroupsOf(world: Communicator, size: number | undefined): TensorGroups | null {
  return size !== undefined && size < world.size ? tensorGroups(world, size) : null;
}
