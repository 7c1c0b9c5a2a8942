/**
 * Where a CPU backend's attention pass goes (bench/attention.ts, `--pieces`): the layer runs on a
 * view of the backend whose gemm, biasAdd, biasGrad, copyRows and four attention kernels are timed
 * in the process's CPU time (a shared machine's other processes do not land in it; a timer costs
 * about 0.4 µs, counted in its piece), the kernels rebuilt from src/kernels/js/attention.ts over the
 * backend's own gemm with a timer around each per-head product — every CPU backend's attention is
 * those kernels over its gemm, so the pass is the one the backend runs. A kernel's time less its
 * products is its softmax rows (forward) or dS rows (backward); the pass's time less every timed
 * call is the layer's own JavaScript (views, buffers, the heads' row starts). A backend with kernels
 * of its own (`ownKernels`: onednn's run in its addon, products and rows in one call) has each of the
 * four kernels timed whole instead, its GFLOPS counting the products it computes.
 */
import type { AttentionKernels } from '../src/kernels/attentionKernels.ts';
import type { Backend } from '../src/kernels/backend.ts';
import { attentionKernels } from '../src/kernels/js/attention.ts';
import { ofPeak } from './peak.ts';

/** CPU milliseconds this process has run (user + system, microsecond resolution). */
function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e3;
}

/** The shape, as bench/attention.ts gives it. */
interface Shape {
  T: number;
  D: number;
  heads: number;
}

const KERNELS = ['attentionWeights', 'attentionApply', 'attentionApplyBackward', 'attentionWeightsBackward'] as const;
const TIMED = ['gemm', 'biasAdd', 'biasGrad', 'copyRows', ...KERNELS] as const;
type Timed = (typeof TIMED)[number];

/** What each kernel computes, for a backend's own kernels timed whole. */
const OWN: Record<(typeof KERNELS)[number], { products: number; what: string }> = {
  attentionWeights: { products: 1, what: 'S = Q·Kᵀ/√dh, softmax rows' },
  attentionApply: { products: 1, what: 'O = P·V' },
  attentionApplyBackward: { products: 2, what: 'dV = Pᵀ·dO, dP = dO·Vᵀ' },
  attentionWeightsBackward: { products: 2, what: 'dS rows, dQ = dS·K/√dh, dK = dSᵀ·Q/√dh' },
};

/** The per-head products by kernel and transposes, as js/attention.ts issues them. */
const PRODUCTS: Record<string, string> = {
  'attentionWeights NT': 'S = Q·Kᵀ/√dh',
  'attentionApply NN': 'O = P·V',
  'attentionApplyBackward TN': 'dV = Pᵀ·dO',
  'attentionApplyBackward NT': 'dP = dO·Vᵀ',
  'attentionWeightsBackward NN': 'dQ = dS·K/√dh',
  'attentionWeightsBackward TN': 'dK = dSᵀ·Q/√dh',
};

interface Spent {
  ms: number;
  calls: number;
  flops: number;
  /** the last call's product shape, M×K·K×N */
  shape: string;
}

class Tally {
  readonly by = new Map<string, Spent>();
  add(key: string, ms: number, flops = 0, shape = ''): void {
    const e = this.by.get(key) ?? { ms: 0, calls: 0, flops: 0, shape };
    e.ms += ms;
    e.calls++;
    e.flops += flops;
    this.by.set(key, e);
  }
  ms(key: string): number {
    return this.by.get(key)?.ms ?? 0;
  }
  sum(keys: (key: string) => boolean): number {
    return [...this.by].filter(([k]) => keys(k)).reduce((a, [, e]) => a + e.ms, 0);
  }
  clear(): void {
    this.by.clear();
  }
}

/** The layer's projection gemms by what they compute (rows = N·T), else by shape. */
function projectionName(tA: boolean, tB: boolean, M: number, N: number, K: number, rows: number, D: number): string {
  if (!tA && tB && M === rows && K === D) return N === 3 * D ? 'Q | K | V = X·W_inᵀ' : 'Y = H·W_outᵀ';
  if (tA && !tB && K === rows) return M === 3 * D ? 'dW_in += dQKVᵀ·X' : 'dW_out += dYᵀ·H';
  if (!tA && !tB && M === rows) return K === 3 * D ? 'dX = dQKV·W_in' : 'dH = dY·W_out';
  return `${tA ? 'T' : 'N'}${tB ? 'T' : 'N'} ${M}×${K}·${K}×${N}`;
}

/**
 * `b` with the layer's calls timed into `calls` (projections by name into `projections`), and its
 * attention kernels rebuilt over b.gemm with each per-head product timed into `products`.
 */
function timedView(
  b: Backend,
  s: Shape,
  N: number,
  calls: Tally,
  projections: Tally,
  products: Tally,
  ownKernels: boolean,
): Backend {
  let kernel = '';
  const inner: AttentionKernels = attentionKernels((tA, tB, M, n, K, alpha, A, B, beta, C) => {
    const t0 = cpuMs();
    b.gemm(tA, tB, M, n, K, alpha, A, B, beta, C);
    products.add(`${kernel} ${tA ? 'T' : 'N'}${tB ? 'T' : 'N'}`, cpuMs() - t0, 2 * M * n * K, `${M}×${K}·${K}×${n}`);
  });
  const view = Object.create(b) as Backend & Record<Timed, (...args: unknown[]) => unknown>;
  for (const name of TIMED) {
    const js = !ownKernels && (KERNELS as readonly string[]).includes(name);
    const f = (js ? inner[name as keyof AttentionKernels] : b[name]) as (...args: unknown[]) => unknown;
    view[name] = (...args: unknown[]) => {
      kernel = name;
      const t0 = cpuMs();
      try {
        return f.apply(b, args);
      } finally {
        const ms = cpuMs() - t0;
        if (name === 'gemm') {
          const [tA, tB, M, n, K] = args as [boolean, boolean, number, number, number];
          calls.add(name, ms, 2 * M * n * K);
          projections.add(projectionName(tA, tB, M, n, K, N * s.T, s.D), ms, 2 * M * n * K, `${M}×${K}·${K}×${n}`);
        } else if (name === 'copyRows') {
          const [, , , , count, width] = args as [unknown, unknown, unknown, unknown, number, number];
          calls.add(name, ms, 8 * count * width); // bytes read and written, in `flops`
        } else if (ownKernels && name in OWN) {
          const flops = OWN[name as keyof typeof OWN].products * 2 * N * s.heads * s.T * s.T * (s.D / s.heads);
          calls.add(name, ms, flops);
          products.add(name, ms, flops);
        } else calls.add(name, ms);
      }
    };
  }
  return view;
}

/** The rows of the js kernels over a backend's gemm: each per-head product, then the softmax and dS rows (a kernel less its products). */
function pushJsKernels(
  rows: string[][],
  products: Tally,
  calls: Tally,
  s: Shape,
  N: number,
  passes: number,
  passMs: number,
  productMs: number,
  productFlops: number,
): void {
  const per = (ms: number) => ms / passes;
  rows.push(
    row(`per-head products (6 × N·heads = ${6 * N * s.heads} gemms)`, per(productMs), passMs, per(productFlops)),
  );
  for (const [key, e] of products.by)
    rows.push(
      row(`  ${PRODUCTS[key] ?? key}`, per(e.ms), passMs, per(e.flops), `${e.shape}, ${e.calls / passes} a pass`),
    );
  const rest = (kernel: string) => calls.ms(kernel) - products.sum((k) => k.startsWith(`${kernel} `));
  const scores = N * s.heads * s.T * s.T;
  const nsPerScore = (ms: number) => `${((per(ms) * 1e6) / scores).toFixed(2)} ns a score`;
  rows.push(
    row(
      'softmax rows (attentionWeights less its products)',
      per(rest('attentionWeights')),
      passMs,
      0,
      nsPerScore(rest('attentionWeights')),
    ),
  );
  rows.push(
    row(
      'dS rows (attentionWeightsBackward less its products)',
      per(rest('attentionWeightsBackward')),
      passMs,
      0,
      nsPerScore(rest('attentionWeightsBackward')),
    ),
  );
  const applyRest = rest('attentionApply') + rest('attentionApplyBackward');
  rows.push(row('attentionApply and its backward less their products', per(applyRest), passMs, 0, 'views and checks'));
}

/** A row of the pieces table: what, ms per pass, its share of the pass, GFLOPS and share of the peak, a note. */
function row(what: string, ms: number, passMs: number, flops: number, note = ''): string[] {
  const g = flops > 0 ? flops / (ms / 1e3) / 1e9 : 0;
  return [what, ms.toFixed(2), `${((100 * ms) / passMs).toFixed(0)}%`, g ? g.toFixed(1) : '', g ? ofPeak(g) : '', note];
}

/**
 * Prints where `passes` layer passes of `b` at batch N go, after a warm-up, per pass. `layerOn`
 * builds the layer's pass on a backend (bench/attention.ts's layerPass at this shape).
 */
export function printPieces(
  label: string,
  b: Backend,
  s: Shape,
  N: number,
  layerOn: (b: Backend) => { run(): void },
  ownKernels = false,
  passes = 5,
): void {
  const calls = new Tally(),
    projections = new Tally(),
    products = new Tally();
  const pass = layerOn(timedView(b, s, N, calls, projections, products, ownKernels));
  pass.run();
  pass.run(); // warm-up: buffers, primitives, V8's tiers
  for (const t of [calls, projections, products]) t.clear();
  const t0 = cpuMs();
  for (let p = 0; p < passes; p++) pass.run();
  const per = (ms: number) => ms / passes,
    passMs = per(cpuMs() - t0);
  const dh = s.D / s.heads;
  console.log(
    `\n${label}, T ${s.T}, D ${s.D}, ${s.heads} heads, batch ${N}: where a layer pass goes (CPU ms per pass, mean of ${passes} after a warm-up; products count the full T×T square)`,
  );
  const rows: string[][] = [['piece', 'ms', 'share', 'GFLOPS', 'of peak', '']];
  const gemm = calls.by.get('gemm');
  rows.push(
    row(`projections (${gemm ? gemm.calls / passes : 0} gemms)`, per(calls.ms('gemm')), passMs, per(gemm?.flops ?? 0)),
  );
  for (const [name, e] of projections.by)
    rows.push(row(`  ${name}`, per(e.ms), passMs, per(e.flops), `${e.shape}, ${e.calls / passes} a pass`));
  const productMs = products.sum(() => true),
    productFlops = [...products.by.values()].reduce((a, e) => a + e.flops, 0);
  if (ownKernels) {
    rows.push(
      row(
        "the four attention kernels (the backend's own: products and rows)",
        per(productMs),
        passMs,
        per(productFlops),
      ),
    );
    for (const [key, e] of products.by)
      rows.push(row(`  ${key}`, per(e.ms), passMs, per(e.flops), OWN[key as keyof typeof OWN]?.what ?? ''));
  } else pushJsKernels(rows, products, calls, s, N, passes, passMs, productMs, productFlops);
  const copy = calls.by.get('copyRows');
  const gbs = copy
    ? `${(copy.flops / (copy.ms / 1e3) / 1e9).toFixed(1)} GB/s read + written, ${copy.calls / passes} calls`
    : '';
  rows.push(row(`heads' split and join (copyRows, ${dh} floats a row)`, per(calls.ms('copyRows')), passMs, 0, gbs));
  rows.push(row('biases (biasAdd, biasGrad)', per(calls.ms('biasAdd') + calls.ms('biasGrad')), passMs, 0));
  const timed = calls.sum(() => true);
  rows.push(row("the layer's own JavaScript (outside these calls)", passMs - per(timed), passMs, 0));
  const fl = 24 * N * s.T * s.D * s.D + 12 * N * s.T * s.T * s.D;
  rows.push(row('the pass', passMs, passMs, fl));
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  for (const [i, r] of rows.entries()) {
    console.log(
      r
        .map((cell, c) => (c === 0 || c === r.length - 1 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!)))
        .join('  ')
        .trimEnd(),
    );
    if (i === 0) console.log('-'.repeat(widths.reduce((a, w) => a + w + 2, -2)));
  }
}
