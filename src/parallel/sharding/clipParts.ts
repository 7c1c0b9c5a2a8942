/**
 * train.clipGradNorm when each device holds only its parts of the reduced gradient (ZeRO stages 2 and 3):
 * the global norm is the whole gradient's, summed along the fixed tree of optim/treeSquares.ts from
 * every device's nodes of it, so it has the bits one device's pass over the whole gradient has; every
 * part is scaled as a whole gradient would be (optim/clipGradNorm.ts, PyTorch's clip_grad_norm_).
 */
import type { Communicator } from '../../comm/communicator.ts';
import { clipToNorm } from '../../optim/clipGradNorm.ts';
import type { FlatRange } from '../../optim/optimizer.ts';
import { treeValue, windowsOf, type TreeNode } from '../../optim/treeSquares.ts';
import type { GradientPart } from '../strategy.ts';

/**
 * Clips `parts` by the norm of the whole gradient of `length` floats, its tree's nodes gathered
 * from every device by `gather` (collective); frozen ranges of `grads` are zeroed first, as they
 * have no gradient to speak of. Returns the norm before clipping.
 */
export async function clipGradientParts(
  grads: Float32Array,
  frozen: readonly FlatRange[],
  parts: readonly GradientPart[],
  length: number,
  gather: (mine: readonly TreeNode[]) => Promise<TreeNode[]>,
  maxNorm: number,
): Promise<number> {
  for (const f of frozen) grads.fill(0, f.start, Math.min(f.end, grads.length));
  const mine = parts.flatMap((p) => windowsOf(p.values, p.start));
  const norm = Math.sqrt(treeValue(await gather(mine), length));
  clipToNorm(
    parts.map((p) => p.values),
    norm,
    maxNorm,
  );
  return norm;
}

/** Words per node in a gather: its index, its level, its float64 sum's two words. */
const NODE_WORDS = 4;

/** Nodes at most in one device's decomposition of a range of `floats` (two per level). */
export function nodesBound(floats: number): number {
  return 2 * (Math.ceil(Math.log2(floats + 1)) + 1);
}

/**
 * Every device's nodes (collective): each device's list in its slot of one all-gather, as raw
 * words (the count, then per node its index, level and float64 sum), which every transport copies
 * bit for bit. `capacity`: the most nodes any device has, the same on every device.
 */
export async function gatherTreeNodes(
  comm: Communicator,
  nodes: readonly TreeNode[],
  capacity: number,
): Promise<TreeNode[]> {
  if (nodes.length > capacity) throw new Error(`clipGradNorm: ${nodes.length} nodes of the norm, room for ${capacity}`);
  const per = NODE_WORDS * (capacity + 1);
  const buf = new Float32Array(per * comm.size);
  const words = new Int32Array(buf.buffer),
    sums = new Float64Array(buf.buffer);
  const put = (r: number) => {
    const base = r * per;
    words[base] = nodes.length;
    nodes.forEach((n, k) => {
      const at = base + NODE_WORDS * (k + 1);
      words[at] = n.lo;
      words[at + 1] = n.level;
      sums[(at + 2) / 2] = n.sum;
    });
  };
  put(comm.rank);
  await comm.allgather(buf);
  const all: TreeNode[] = [];
  for (let r = 0; r < comm.size; r++) {
    const base = r * per;
    for (let k = 0; k < words[base]!; k++) {
      const at = base + NODE_WORDS * (k + 1);
      all.push({ lo: words[at]!, level: words[at + 1]!, sum: sums[(at + 2) / 2]! });
    }
  }
  return all;
}
