/**
 * Softmax cross-entropy on the GPU (ElementwiseKernels.softmaxCrossEntropy): one workgroup per row
 * finds the row's maximum and Σ exp(z − max) by tree reductions, writes the row's gradient and loss;
 * the rows' losses are then summed (reductions.ts) into a one-element array.
 */
import { bindArrays, cachedShader, linearMain } from './arrayBindings.ts';
import type { GpuArray } from './gpuArray.ts';
import { gpuView } from './gpuArray.ts';
import type { GpuContext } from './gpuContext.ts';
import { uploadInts } from './hostInts.ts';
import { partialCount, sumInto } from './reductions.ts';
import { scratchArray } from './scratch.ts';

const WORKGROUP = 64;

const SHADER = /* wgsl */ `
var<workgroup> red: array<f32, ${WORKGROUP}>;
var<workgroup> first: array<u32, ${WORKGROUP}>;

@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(local_invocation_index) l: u32, @builtin(workgroup_id) wg: vec3u,
        @builtin(num_workgroups) groups: vec3u) {
  for (var r = wg.x; r < p.rows; r += groups.x) {
    let base = r * p.classes;
    // the maximum as the CPU backends find it: from −Inf (from Params: WGSL has no −Inf
    // constant), NaN never replaces it
    var m = p.negInf;
    for (var i = l; i < p.classes; i += ${WORKGROUP}u) {
      let v = ld_logits(base + i);
      m = select(m, v, v > m);
    }
    red[l] = m;
    workgroupBarrier();
    for (var half = ${WORKGROUP / 2}u; half > 0u; half >>= 1u) {
      if (l < half) { red[l] = select(red[l], red[l + half], red[l + half] > red[l]); }
      workgroupBarrier();
    }
    let mx = red[0];
    workgroupBarrier();
    // the first class holding the maximum, as countCorrect finds it (ties: the lowest index)
    var at = p.classes;
    for (var i = l; i < p.classes; i += ${WORKGROUP}u) {
      if (ld_logits(base + i) == mx) { at = min(at, i); }
    }
    first[l] = at;
    workgroupBarrier();
    for (var half = ${WORKGROUP / 2}u; half > 0u; half >>= 1u) {
      if (l < half) { first[l] = min(first[l], first[l + half]); }
      workgroupBarrier();
    }
    let argmax = first[0];
    var s = 0.0;
    for (var i = l; i < p.classes; i += ${WORKGROUP}u) { s += exp(ld_logits(base + i) - mx); }
    red[l] = s;
    workgroupBarrier();
    for (var half = ${WORKGROUP / 2}u; half > 0u; half >>= 1u) {
      if (l < half) { red[l] += red[l + half]; }
      workgroupBarrier();
    }
    let sum = red[0];
    let label = u32(ld_labels(r));
    let zLabel = ld_logits(base + label) - mx;
    // every thread has read the logits before any overwrites them (dlogits may be logits)
    storageBarrier();
    workgroupBarrier();
    let inv = p.gradScale / sum;
    for (var i = l; i < p.classes; i += ${WORKGROUP}u) {
      let grad = exp(ld_logits(base + i) - mx) * inv;
      // (p − 1)·scale for the label's class, not p·scale − scale after rounding p·scale
      st_dlogits(base + i, select(grad, (exp(zLabel) / sum - 1.0) * p.gradScale, i == label));
    }
    if (l == 0u) {
      st_loss(r, log(sum) - zLabel);
      st_right(r, select(0.0, 1.0, argmax == label));
    }
  }
}`;

const ADD_TWO = linearMain('2u', '  st_sums(i, ld_sums(i) + ld_step(i));');

/**
 * Records softmax cross-entropy over `rows` rows of `classes` logits: dlogits = (softmax − onehot)·
 * gradScale (dlogits may be logits), and ADDS the rows' loss sum to sums[0] and the rows whose
 * first maximum is the label to sums[1] — the numbers the CPU backends return, kept on the device
 * until the step's one read. The labels come from the host and are checked there, as the CPU
 * backends check them, before anything is recorded.
 */
export function softmaxCrossEntropy(
  ctx: GpuContext,
  logits: GpuArray,
  labels: Int32Array,
  rows: number,
  classes: number,
  dlogits: GpuArray,
  gradScale: number,
  sums: GpuArray,
): void {
  for (let r = 0; r < rows; r++) {
    const label = labels[r]!;
    if (!(label >= 0 && label < classes)) {
      throw new Error(`softmaxCrossEntropy: row ${r} has label ${label}, expected a class in 0..${classes - 1}`);
    }
  }
  const n = rows * classes;
  if (logits.length < n || dlogits.length < n)
    throw new RangeError(
      `softmaxCrossEntropy: ${rows}×${classes} logits, but logits has ${logits.length} and dlogits ${dlogits.length}`,
    );
  if (sums.length < 2) throw new RangeError('softmaxCrossEntropy: sums must hold two values (loss, correct)');
  if (rows === 0) return;
  const partials = partialCount(rows);
  // [row losses | rows right | this call's two sums | the partials of one sum]
  const scratch = scratchArray(ctx, 2 * rows + 2 + partials);
  const rowLoss = gpuView(scratch, 0, rows),
    rowRight = gpuView(scratch, rows, rows),
    step = gpuView(scratch, 2 * rows, 2),
    part = gpuView(scratch, 2 * rows + 2, partials);
  const bound = bindArrays(
    [
      { name: 'logits', array: logits },
      { name: 'labels', array: uploadInts(ctx, labels.subarray(0, rows)), int: true },
      { name: 'dlogits', array: dlogits, write: true },
      { name: 'loss', array: rowLoss, write: true },
      { name: 'right', array: rowRight, write: true },
    ],
    'rows: u32, classes: u32, gradScale: f32, negInf: f32',
  );
  const shader = cachedShader('softmaxCrossEntropy', bound, () => SHADER);
  bound.params.u32(rows).u32(classes).f32(gradScale).f32(-Infinity);
  ctx.dispatch({ shader, arrays: bound.arrays, params: bound.params, groups: [Math.min(rows, 65535)] });
  sumInto(ctx, [rowLoss], gpuView(step, 0, 1), false, part);
  sumInto(ctx, [rowRight], gpuView(step, 1, 1), false, part);
  const add = bindArrays(
    [
      { name: 'step', array: step },
      { name: 'sums', array: gpuView(sums, 0, 2), write: true },
    ],
    'n: u32',
  );
  add.params.u32(2);
  ctx.dispatch({
    shader: cachedShader('addTwo', add, () => ADD_TWO),
    arrays: add.arrays,
    params: add.params,
    groups: [1],
  });
}
