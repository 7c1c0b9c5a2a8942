/**
 * The Backend's LSTM and GRU cell steps (src/kernels/recurrentKernels.ts) on the GPU: one thread
 * per (sample, unit) of step t, on the time-major run buffers the js kernels use
 * (src/kernels/js/recurrent.ts), in float32 where js computes in float64. `lengths` is an i32
 * GpuArray (the bits of an Int32Array uploaded as floats); a sample with lengths[n] ≤ t is padding
 * at step t. The recurrent products between the steps are packedGemm.ts's.
 */
import type { ArrayUse } from './arrayBindings.ts';
import { bindArrays, cachedShader, linearGroups, linearMain } from './arrayBindings.ts';
import { checkLengths, type GpuArray } from './gpuArray.ts';
import { ACTIVATION_FUNCTIONS } from './activationShaders.ts';
import type { GpuContext } from './gpuContext.ts';

/**
 * σ and tanh as the activation kernels compute them, to a few ulp: WGSL's tanh is loose near 0
 * (2% off at 1e-6 on SwiftShader), its exp 1e-6 relative at −30, and a clamp of NaN may give ±15,
 * where the CPU backends propagate NaN.
 */
const ACTIVATIONS = ACTIVATION_FUNCTIONS;

/** Thread i is unit j of sample n; `prev` indexes block t of a state buffer [(T+1)·N, H], `cur` block t + 1. */
const STEP = /* wgsl */ `
  let n = i / p.H;
  let j = i % p.H;
  let prev = p.t * p.N * p.H + i;
  let cur = prev + p.N * p.H;
  let padded = i32(p.t) >= ld_lengths(n);`;

const LSTM_FORWARD =
  ACTIVATIONS +
  linearMain(
    'p.N * p.H',
    /* wgsl */ `${STEP}
  if (padded) {
    st_h(cur, 0.0);
    st_c(cur, 0.0);
    return;
  }
  let gb = (p.t * p.N + n) * 4u * p.H + j;
  let ig = sigmoidOf(ld_gates(gb));
  let f = sigmoidOf(ld_gates(gb + p.H));
  let g = tanhOf(ld_gates(gb + 2u * p.H));
  let o = sigmoidOf(ld_gates(gb + 3u * p.H));
  st_gates(gb, ig);
  st_gates(gb + p.H, f);
  st_gates(gb + 2u * p.H, g);
  st_gates(gb + 3u * p.H, o);
  let cv = f * ld_c(prev) + ig * g;
  st_c(cur, cv);
  st_h(cur, o * tanhOf(cv));`,
  );

const LSTM_BACKWARD =
  ACTIVATIONS +
  linearMain(
    'p.N * p.H',
    /* wgsl */ `${STEP}
  let zb = (p.t * p.N + n) * 4u * p.H + j;
  if (padded) {
    for (var q = 0u; q < 4u; q++) { st_dz(zb + q * p.H, 0.0); }
    st_dc(i, 0.0);
    return;
  }
  let ig = ld_gates(zb);
  let f = ld_gates(zb + p.H);
  let g = ld_gates(zb + 2u * p.H);
  let o = ld_gates(zb + 3u * p.H);
  let dhv = ld_dh(cur);
  let tc = tanhOf(ld_c(cur));
  let dcv = ld_dc(i) + dhv * o * (1.0 - tc * tc);
  st_dz(zb, dcv * g * ig * (1.0 - ig));
  st_dz(zb + p.H, dcv * ld_c(prev) * f * (1.0 - f));
  st_dz(zb + 2u * p.H, dcv * ig * (1.0 - g * g));
  st_dz(zb + 3u * p.H, dhv * tc * o * (1.0 - o));
  st_dc(i, dcv * f);`,
  );

const GRU_FORWARD =
  ACTIVATIONS +
  linearMain(
    'p.N * p.H',
    /* wgsl */ `${STEP}
  if (padded) {
    st_h(cur, 0.0);
    return;
  }
  let gb = (p.t * p.N + n) * 3u * p.H + j;
  let rb = n * 3u * p.H + j;
  let r = sigmoidOf(ld_gates(gb) + ld_rec(rb) + ld_bhh(j));
  let z = sigmoidOf(ld_gates(gb + p.H) + ld_rec(rb + p.H) + ld_bhh(p.H + j));
  let hnv = ld_rec(rb + 2u * p.H) + ld_bhh(2u * p.H + j);
  let nv = tanhOf(ld_gates(gb + 2u * p.H) + r * hnv);
  st_gates(gb, r);
  st_gates(gb + p.H, z);
  st_gates(gb + 2u * p.H, nv);
  st_hn(prev, hnv);
  st_h(cur, (1.0 - z) * nv + z * ld_h(prev));`,
  );

const GRU_BACKWARD = linearMain(
  'p.N * p.H',
  /* wgsl */ `${STEP}
  let zb = (p.t * p.N + n) * 3u * p.H + j;
  if (padded) {
    for (var q = 0u; q < 3u; q++) {
      st_dzx(zb + q * p.H, 0.0);
      st_dzh(zb + q * p.H, 0.0);
    }
    return;
  }
  let r = ld_gates(zb);
  let z = ld_gates(zb + p.H);
  let nv = ld_gates(zb + 2u * p.H);
  let dhv = ld_dh(cur);
  let dan = dhv * (1.0 - z) * (1.0 - nv * nv);
  let dar = dan * ld_hn(prev) * r * (1.0 - r);
  let daz = dhv * (ld_h(prev) - nv) * z * (1.0 - z);
  st_dzx(zb, dar);
  st_dzx(zb + p.H, daz);
  st_dzx(zb + 2u * p.H, dan);
  st_dzh(zb, dar);
  st_dzh(zb + p.H, daz);
  st_dzh(zb + 2u * p.H, dan * r);
  st_dh(prev, ld_dh(prev) + dhv * z);`,
);

/** Sizes a step of a run needs: T ≥ t + 1 steps of N samples and H units, G gates. */
function checkStep(what: string, t: number, N: number, H: number, arrays: [string, GpuArray, number][]): void {
  checkLengths(what, `step ${t} of ${N} samples × ${H} units`, arrays);
}

function step(ctx: GpuContext, name: string, body: string, uses: ArrayUse[], t: number, N: number, H: number): void {
  if (N * H === 0) return;
  const bound = bindArrays(uses, 't: u32, N: u32, H: u32');
  const shader = cachedShader(name, bound, () => body);
  bound.params.u32(t).u32(N).u32(H);
  ctx.dispatch({ shader, arrays: bound.arrays, params: bound.params, groups: linearGroups(N * H) });
}

/** Records an LSTM forward step: gates block t (pre-activations) → i, f, g, o; c, h block t + 1 = c', h'. */
export function lstmCellForward(
  ctx: GpuContext,
  t: number,
  N: number,
  H: number,
  gates: GpuArray,
  c: GpuArray,
  h: GpuArray,
  lengths: GpuArray,
): void {
  const states = (t + 2) * N * H;
  checkStep('lstmCellForward', t, N, H, [
    ['gates', gates, (t + 1) * N * 4 * H],
    ['c', c, states],
    ['h', h, states],
    ['lengths', lengths, N],
  ]);
  const uses: ArrayUse[] = [
    { name: 'gates', array: gates, write: true },
    { name: 'c', array: c, write: true },
    { name: 'h', array: h, write: true },
    { name: 'lengths', array: lengths, int: true },
  ];
  step(ctx, 'lstmCellForward', LSTM_FORWARD, uses, t, N, H);
}

/** Records an LSTM backward step: dz block t = dL/dz from dh block t + 1 and dc; dc becomes dL/dc of step t. */
export function lstmCellBackward(
  ctx: GpuContext,
  t: number,
  N: number,
  H: number,
  gates: GpuArray,
  c: GpuArray,
  dh: GpuArray,
  dc: GpuArray,
  dz: GpuArray,
  lengths: GpuArray,
): void {
  const states = (t + 2) * N * H;
  checkStep('lstmCellBackward', t, N, H, [
    ['gates', gates, (t + 1) * N * 4 * H],
    ['c', c, states],
    ['dh', dh, states],
    ['dc', dc, N * H],
    ['dz', dz, (t + 1) * N * 4 * H],
    ['lengths', lengths, N],
  ]);
  const uses: ArrayUse[] = [
    { name: 'gates', array: gates },
    { name: 'c', array: c },
    { name: 'dh', array: dh },
    { name: 'dc', array: dc, write: true },
    { name: 'dz', array: dz, write: true },
    { name: 'lengths', array: lengths, int: true },
  ];
  step(ctx, 'lstmCellBackward', LSTM_BACKWARD, uses, t, N, H);
}

/**
 * Records a GRU forward step: gates block t (input projection with b_ih) → r, z, n, with `rec`
 * [N, 3H] = W_hh·h and `bhh`; hn block t = W_hn·h + b_hn; h block t + 1 the new state.
 */
export function gruCellForward(
  ctx: GpuContext,
  t: number,
  N: number,
  H: number,
  gates: GpuArray,
  rec: GpuArray,
  bhh: GpuArray,
  hn: GpuArray,
  h: GpuArray,
  lengths: GpuArray,
): void {
  checkStep('gruCellForward', t, N, H, [
    ['gates', gates, (t + 1) * N * 3 * H],
    ['rec', rec, N * 3 * H],
    ['bhh', bhh, 3 * H],
    ['hn', hn, (t + 1) * N * H],
    ['h', h, (t + 2) * N * H],
    ['lengths', lengths, N],
  ]);
  const uses: ArrayUse[] = [
    { name: 'gates', array: gates, write: true },
    { name: 'rec', array: rec },
    { name: 'bhh', array: bhh },
    { name: 'hn', array: hn, write: true },
    { name: 'h', array: h, write: true },
    { name: 'lengths', array: lengths, int: true },
  ];
  step(ctx, 'gruCellForward', GRU_FORWARD, uses, t, N, H);
}

/** Records a GRU backward step: dzx, dzh block t from dh block t + 1; dh block t += z⊙dh'. */
export function gruCellBackward(
  ctx: GpuContext,
  t: number,
  N: number,
  H: number,
  gates: GpuArray,
  hn: GpuArray,
  h: GpuArray,
  dh: GpuArray,
  dzx: GpuArray,
  dzh: GpuArray,
  lengths: GpuArray,
): void {
  const blocks = (t + 1) * N * 3 * H;
  checkStep('gruCellBackward', t, N, H, [
    ['gates', gates, blocks],
    ['hn', hn, (t + 1) * N * H],
    ['h', h, (t + 1) * N * H],
    ['dh', dh, (t + 2) * N * H],
    ['dzx', dzx, blocks],
    ['dzh', dzh, blocks],
    ['lengths', lengths, N],
  ]);
  const uses: ArrayUse[] = [
    { name: 'gates', array: gates },
    { name: 'hn', array: hn },
    { name: 'h', array: h },
    { name: 'dh', array: dh, write: true },
    { name: 'dzx', array: dzx, write: true },
    { name: 'dzh', array: dzh, write: true },
    { name: 'lengths', array: lengths, int: true },
  ];
  step(ctx, 'gruCellBackward', GRU_BACKWARD, uses, t, N, H);
}
