/**
 * Activations on the GPU (ElementwiseKernels.activationForward / activationBackward), every kind
 * the CPU backends have, elementwise in float32. The piecewise kinds (relu, clippedRelu,
 * leakyRelu, linear) give the CPU backends' bits; tanh, sigmoid and gelu agree to a few units in
 * the last place of their transcendental functions.
 */
import { activationParam, type ActivationKind } from '../activation.ts';
import { ACTIVATION_FIELDS, backwardShader, forwardShader } from './activationShaders.ts';
import { bindArrays, cachedShader, linearGroups } from './arrayBindings.ts';
import type { GpuArray } from './gpuArray.ts';
import type { GpuContext } from './gpuContext.ts';

const KINDS: readonly ActivationKind[] = ['relu', 'clippedRelu', 'tanh', 'sigmoid', 'linear', 'gelu', 'leakyRelu'];

function checkKind(fn: string, kind: ActivationKind): void {
  if (!KINDS.includes(kind)) throw new Error(`${fn}: unknown activation '${String(kind)}'`);
}

const bits = new Float32Array(1);
const bitsInt = new Int32Array(bits.buffer);

/** The float32 next to float32 `f`, upwards or downwards. */
function nextFloat32(f: number, up: boolean): number {
  if (f === 0) return up ? 2 ** -149 : -(2 ** -149);
  bits[0] = f;
  bitsInt[0]! += f > 0 === up ? 1 : -1;
  return bits[0]!;
}

/**
 * The kind's parameter as float32, and the float32 bounds that make float32 comparisons with the
 * float64 cap exact: v > cap ⇔ v > capAbove, v < cap ⇔ v < capBelow.
 */
function capFields(kind: ActivationKind, cap: number | undefined): [number, number, number] {
  const c = activationParam(kind, cap);
  const f = Math.fround(c);
  if (!Number.isFinite(f)) return [f, f, f];
  return [f, f > c ? nextFloat32(f, false) : f, f < c ? nextFloat32(f, true) : f];
}

function dispatch(
  ctx: GpuContext,
  name: string,
  shader: () => string,
  uses: Parameters<typeof bindArrays>[0],
  n: number,
  fields: [number, number, number],
): void {
  const bound = bindArrays(uses, ACTIVATION_FIELDS);
  bound.params.u32(n).f32(fields[0]).f32(fields[1]).f32(fields[2]);
  ctx.dispatch({
    shader: cachedShader(name, bound, shader),
    arrays: bound.arrays,
    params: bound.params,
    groups: linearGroups(n),
  });
}

/**
 * Records y = f(x) over x's length (y may be x). `cap` is clippedRelu's ceiling or leakyRelu's
 * slope (their defaults without it); gelu is the exact (erf) form.
 */
export function activationForward(ctx: GpuContext, kind: ActivationKind, x: GpuArray, y: GpuArray, cap?: number): void {
  checkKind('activationForward', kind);
  const n = x.length;
  if (y.length < n) throw new RangeError(`activationForward: output has ${y.length} values, input ${n}`);
  if (n === 0 || (kind === 'linear' && x.buffer === y.buffer && x.offset === y.offset)) return;
  const uses = [
    { name: 'x', array: x },
    { name: 'y', array: y, write: true },
  ];
  dispatch(ctx, `activationForward.${kind}`, () => forwardShader(kind), uses, n, capFields(kind, cap));
}

/**
 * Records dx = dy·f'(·) over y's length from the forward OUTPUT y — for gelu, `y` is the forward
 * INPUT x (backwardReadsInput); dx may be dy.
 */
export function activationBackward(
  ctx: GpuContext,
  kind: ActivationKind,
  y: GpuArray,
  dy: GpuArray,
  dx: GpuArray,
  cap?: number,
): void {
  checkKind('activationBackward', kind);
  const n = y.length;
  if (dy.length < n || dx.length < n)
    throw new RangeError(`activationBackward: y has ${n} values, dy ${dy.length}, dx ${dx.length}`);
  if (n === 0 || (kind === 'linear' && dy.buffer === dx.buffer && dy.offset === dx.offset)) return;
  const uses = [
    { name: 'y', array: y },
    { name: 'dy', array: dy },
    { name: 'dx', array: dx, write: true },
  ];
  dispatch(ctx, `activationBackward.${kind}`, () => backwardShader(kind), uses, n, capFields(kind, cap));
}
