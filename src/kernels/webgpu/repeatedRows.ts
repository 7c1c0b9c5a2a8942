/**
 * Backend.copyRows on the GPU where `add` meets a destination row more than once (an embedding's
 * backward: every position of a token adds into that token's row). elementwise.ts writes all rows
 * at once, so it refuses repeats; here the host groups the rows by destination and one thread per
 * (destination, column) adds its sources in the order given, the js backend's sum and its bits.
 */
import { bindArrays, cachedShader, linearGroups, linearMain } from './arrayBindings.ts';
import { checkRowBounds, copyRows } from './elementwise.ts';
import type { GpuArray } from './gpuArray.ts';
import type { GpuContext } from './gpuContext.ts';
import { uploadInts } from './hostInts.ts';

/** ints: [U + 1 group ends | U destination starts | count source starts in group order] */
const ADD_GROUPED = /* wgsl */ `
  let u = i / p.width;
  let j = i % p.width;
  let t = u32(ld_ints(p.groups + 1u + u)) + j;
  var acc = ld_to(t);
  for (var k = ld_ints(u); k < ld_ints(u + 1u); k++) {
    let f = ld_ints(2u * p.groups + 1u + u32(k));
    if (f >= 0) { acc = acc + ld_from(u32(f) + j); }
  }
  st_to(t, acc);`;

/** Whether some destination start appears twice among the first `count`. */
function repeats(toStarts: Int32Array, count: number): boolean {
  const seen = new Set<number>();
  for (let i = 0; i < count; i++) {
    if (seen.has(toStarts[i]!)) return true;
    seen.add(toStarts[i]!);
  }
  return false;
}

/**
 * Records copyRows (ElementwiseKernels.copyRows): elementwise.ts's kernel, or, where `add` repeats a
 * destination row, the grouped sum. Rows are bounds-checked; distinct destinations must not overlap.
 */
export function copyRowsRepeating(
  ctx: GpuContext,
  from: GpuArray,
  fromStarts: Int32Array,
  to: GpuArray,
  toStarts: Int32Array,
  count: number,
  width: number,
  add: boolean,
): void {
  // (too few starts: elementwise.ts refuses them)
  if (!add || toStarts.length < count || !repeats(toStarts, count)) {
    copyRows(ctx, from, fromStarts, to, toStarts, count, width, add);
    return;
  }
  checkRowBounds(from, fromStarts, to, toStarts, count, width);
  // rows by destination, in their order within each destination (a stable sort)
  const order = Array.from({ length: count }, (_, r) => r).sort((a, b) => toStarts[a]! - toStarts[b]! || a - b);
  const ends: number[] = [0],
    dests: number[] = [];
  for (const [k, r] of order.entries()) {
    const t = toStarts[r]!;
    const last = dests[dests.length - 1];
    if (last !== t) {
      if (last !== undefined && t - last < width)
        throw new RangeError(`copyRows: destination rows at ${last} and ${t} overlap (width ${width})`);
      if (k > 0) ends.push(k);
      dests.push(t);
    }
  }
  ends.push(count);
  if (width === 0) return;
  const groups = dests.length;
  const ints = Int32Array.from([...ends, ...dests, ...order.map((r) => fromStarts[r]!)]);
  const bound = bindArrays(
    [
      { name: 'from', array: from },
      { name: 'ints', array: uploadInts(ctx, ints), int: true },
      { name: 'to', array: to, write: true },
    ],
    'n: u32, groups: u32, width: u32',
  );
  bound.params
    .u32(groups * width)
    .u32(groups)
    .u32(width);
  ctx.dispatch({
    shader: cachedShader('copyRowsGrouped', bound, () => linearMain('p.n', ADD_GROUPED)),
    arrays: bound.arrays,
    params: bound.params,
    groups: linearGroups(groups * width),
  });
}
