/**
 * Σ x² of a flat gradient, in float64, summed along one fixed binary tree over its indices, so that
 * any split of the buffer gives the same bits: the global norm that train.clipGradNorm clips by is
 * then the same whether one device sums the whole gradient or each device sums its parts (ZeRO
 * stages 2 and 3) and the parts are put together.
 *
 * The tree: the node of size 2^k at `lo` (lo a multiple of 2^k) is the sum of its two halves, a
 * leaf (size 1) is x[lo]², and a node past the buffer's end is 0. A range [a, b) of the buffer
 * splits into its maximal aligned nodes (`windowsOf`), whose sums are summed bottom-up by the same
 * tree (`treeValue`): adding a node computed elsewhere, or a 0 past the end, changes no bit.
 */

/** The 8 squares from x[i] as the tree's node of size 8 sums them: pairs, then pairs of pairs. */
function node8(x: Float32Array, i: number): number {
  const a = x[i]!,
    b = x[i + 1]!,
    c = x[i + 2]!,
    d = x[i + 3]!,
    e = x[i + 4]!,
    f = x[i + 5]!,
    g = x[i + 6]!,
    h = x[i + 7]!;
  return a * a + b * b + (c * c + d * d) + (e * e + f * f + (g * g + h * h));
}

/** The tree's node of size 16 from x[i]: its two halves. */
function leaf16(x: Float32Array, i: number): number {
  return node8(x, i) + node8(x, i + 8);
}

/** Partial sums waiting for their right siblings, one per level at most (reused: no allocation per call). */
const pending = new Float64Array(64);

/**
 * The node of `size` at global index `lo`, every index of which lies in `x` (x[0] is global index
 * `base`). Above 16, its leaves of 16 in order, each completed pair of siblings added at once (a
 * binary counter over the leaves): the tree's sums, in its association, without recursion.
 */
function nodeSum(x: Float32Array, base: number, lo: number, size: number): number {
  if (size < 16) {
    if (size === 1) return x[lo - base]! * x[lo - base]!;
    const half = size / 2;
    return nodeSum(x, base, lo, half) + nodeSum(x, base, lo + half, half);
  }
  const leaves = size / 16;
  let depth = 0;
  for (let t = 0; t < leaves; t++) {
    let v = leaf16(x, lo - base + 16 * t);
    // leaf t closes one subtree per trailing 1 bit of t: add it to the pending left sibling
    for (let c = t; c & 1; c >>>= 1) v = pending[--depth]! + v;
    pending[depth++] = v;
  }
  return pending[0]!;
}

/** A node of the tree: its first index, its size's log2, and its sum. */
export interface TreeNode {
  lo: number;
  level: number;
  sum: number;
}

/** The maximal aligned nodes of [start, start + x.length) with their sums (x[0] is global index `start`). */
export function windowsOf(x: Float32Array, start: number): TreeNode[] {
  const out: TreeNode[] = [];
  const end = start + x.length;
  for (let lo = start; lo < end; ) {
    // the largest power of two that lo is a multiple of (any, at 0) and that fits before the end
    let level = 0;
    while (level < 52 && lo % 2 ** (level + 1) === 0 && lo + 2 ** (level + 1) <= end) level++;
    out.push({ lo, level, sum: nodeSum(x, start, lo, 2 ** level) });
    lo += 2 ** level;
  }
  return out;
}

/** The tree's root over a buffer of `length` floats from nodes that cover [0, length) once. */
export function treeValue(nodes: readonly TreeNode[], length: number): number {
  if (length === 0) return 0;
  const known = new Map<number, number>();
  for (const n of nodes) known.set(n.lo * 64 + n.level, n.sum);
  let top = 0;
  while (2 ** top < length) top++;
  const value = (lo: number, level: number): number => {
    if (lo >= length) return 0;
    const v = known.get(lo * 64 + level);
    if (v !== undefined) return v;
    if (level === 0) throw new Error(`sum of squares: index ${lo} is in no part`);
    return value(lo, level - 1) + value(lo + 2 ** (level - 1), level - 1);
  };
  return value(0, top);
}

/** Σ x² over `x` by the tree (one device's whole gradient). */
export function treeSumOfSquares(x: Float32Array): number {
  return treeValue(windowsOf(x, 0), x.length);
}
