/**
 * Multi-head self-attention forward + backward per backend, as GFLOPS and a share of the machine's
 * measured one-core FMA peak (bench/peak.ts, printed first with the CPU):
 *
 *   npm run bench -- attention [--backends js,wasm,native,onednn,webgpu] [--shapes 256x384x6x4,64x128x4x32]
 *                              [--rounds 3] [--reps 3] [--no-causal] [--pieces wasm,native,onednn|none]
 *
 * Two timings per backend and shape: the `attention` layer's own forward and backward
 * (src/nn/attention.ts: input projection, the heads' split, the four kernels, the join, output
 * projection; backward with dL/dx), and the four kernels alone (Backend.attentionWeights,
 * attentionApply, attentionApplyBackward, attentionWeightsBackward, in a layer's order).
 *
 * FLOPs of one forward + backward, N samples of T frames, width D, H heads of dh = D/H each:
 *   projections: 2·N·T·D·4D · 3 = 24·N·T·D² (Q | K | V 3D wide and the output D wide; forward once,
 *     backward twice: dW and dX);
 *   scores and products: 6 · 2·N·H·T·T·dh = 12·N·T²·D (forward S = Q·Kᵀ and O = P·V; backward
 *     dV = Pᵀ·dO, dP = dO·Vᵀ, dQ = dS·K, dK = dSᵀ·Q).
 * The kernels multiply the whole T×T square, causal or not (the mask is applied in the softmax
 * rows), so the main figures count the full square; with a causal mask the "causal ½" figures count
 * only the T(T+1)/2 scores a query sees, 6·N·T·(T+1)·D. Softmax, biases and copies count nothing.
 * The layer's figure counts projections + scores and products; the kernels' the latter alone.
 *
 * Shapes `TxDxHEADSxN`: by default T 256, D 384, 6 heads at batch 4 (a GPT block's attention, one
 * pass tens of ms on one core) and T 64, D 128, 4 heads at batch 32 (examples/shakespeare-char.yaml's
 * blocks). js runs a quarter of the batch (at least 1). Causal, as a language model's blocks are.
 *
 * Timing: one thread, the process's CPU time per pass; `--reps` passes a round after a warm-up, the
 * backends taking turns in `--rounds` rounds (the order rotating), so a slow spell of a shared
 * machine falls on all of them; a figure is the median over rounds of each round's median. `webgpu`
 * (where an adapter opens, bench/webgpuColumn.ts) counts wall time per pass up to a read of its
 * last output: its calls run at that read. On a software adapter it is a smoke test: the smallest
 * shape at batch 1, one pass in the first round only.
 *
 * Then each CPU backend in --pieces (default: all but js; `none`: skip) splits a layer pass into its
 * pieces (bench/attentionPieces.ts): the projections' gemms, the per-head products, the softmax
 * rows, the heads' split and join (copyRows), the biases and the layer's own JavaScript; onednn,
 * whose four kernels run whole in its addon (products and rows in one call), by kernel.
 */
import { filled } from './filled.ts';
import { cpus, loadavg } from 'node:os';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import type { Backend } from '../src/kernels/backend.ts';
import { jsBackend } from '../src/kernels/js/index.ts';
import { createWasmBackend } from '../src/kernels/wasm/index.ts';
import { createNativeBackend, nativeUnavailableReason } from '../src/kernels/native/index.ts';
import { createOneDnnBackend, onednnUnavailableReason } from '../src/kernels/onednn/index.ts';
import type { WebGpuBackend } from '../src/kernels/webgpu/index.ts';
import { Tensor } from '../src/tensor/tensor.ts';
import { Attention } from '../src/nn/attention.ts';
import { Sequential } from '../src/nn/model.ts';
import type { ForwardContext } from '../src/nn/layer.ts';
import type { AttentionGeometry } from '../src/kernels/attentionKernels.ts';
import { flag, median } from './args.ts';
import { ofPeak, peakLine } from './peak.ts';
import { figure, finished, openWebGpuColumn, wallSecondsPerCall } from './webgpuColumn.ts';
import { printPieces } from './attentionPieces.ts';

interface AttentionShape {
  T: number;
  D: number;
  heads: number;
  N: number;
}

const DEFAULT_SHAPES = '256x384x6x4,64x128x4x32';
const BACKENDS = ['js', 'wasm', 'native', 'onednn', 'webgpu'];
const TRAINING: ForwardContext = { training: true, seed: 1, step: 0, sampleOffset: 0 };

/** FLOPs of one forward + backward at batch N (see the header): projections, and the scores and products counted two ways. */
function attentionFlops(s: AttentionShape, N: number): { projections: number; square: number; half: number } {
  const { T, D } = s;
  return { projections: 24 * N * T * D * D, square: 12 * N * T * T * D, half: 6 * N * T * (T + 1) * D };
}

/** `--shapes`: TxDxHEADSxN, comma-separated; a clear error naming what is wrong. */
function parseShapes(text: string): AttentionShape[] {
  return text.split(',').map((one) => {
    const parts = one.trim().split('x').map(Number);
    if (parts.length !== 4 || !parts.every((v) => Number.isInteger(v) && v > 0))
      throw new Error(`--shapes: "${one}" is not TxDxHEADSxN in positive whole numbers; e.g. ${DEFAULT_SHAPES}`);
    const [T, D, heads, N] = parts as [number, number, number, number];
    if (D % heads !== 0) throw new Error(`--shapes: "${one}": ${heads} heads do not divide D = ${D}`);
    return { T, D, heads, N };
  });
}

/** A backend as a column: its label, and the batch it runs (js: a quarter; a software GPU: a smoke test). */
interface Contender {
  label: string;
  b: Backend;
  batch(s: AttentionShape): number;
  smoke?: boolean;
}

/** A pass and the array it writes last (read back to end a GPU's timed pass). */
interface Pass {
  run(): void;
  output: Float32Array;
}

/** The attention layer's forward + backward (dL/dx too) at batch N, on `b`, with initialised weights. */
function layerPass(b: Backend, s: AttentionShape, N: number, causal: boolean): Pass {
  const layer = new Attention(b, 'bench attention', [s.T, s.D], { heads: s.heads, causal, dropout: 0 }, 0);
  const model = new Sequential(b, [layer], [s.T, s.D]);
  model.initialize(1);
  b.device?.fromHost([model.params, model.state]);
  const x = new Tensor([N, s.T, s.D], filled(b, N * s.T * s.D, 3));
  const dy = new Tensor([N, s.T, s.D], filled(b, N * s.T * s.D, 4));
  return {
    run() {
      layer.forward(x, TRAINING);
      layer.backward(dy, true);
    },
    output: model.grads,
  };
}

/** The four kernels alone, as the layer calls them, on head-major arrays of batch N. */
function kernelPass(b: Backend, s: AttentionShape, N: number, causal: boolean): Pass {
  const g: AttentionGeometry = { N, heads: s.heads, T: s.T, headDim: s.D / s.heads, causal };
  const size = N * s.T * s.D,
    scores = N * s.heads * s.T * s.T;
  const [q, k, v, dout] = [1, 2, 3, 4].map((seed) => filled(b, size, seed)) as [
    Float32Array,
    Float32Array,
    Float32Array,
    Float32Array,
  ];
  const probs = b.alloc(scores),
    dprobs = b.alloc(scores);
  const [out, dq, dk, dv] = [0, 1, 2, 3].map(() => b.alloc(size)) as [
    Float32Array,
    Float32Array,
    Float32Array,
    Float32Array,
  ];
  return {
    run() {
      b.attentionWeights(q, k, null, g, probs);
      b.attentionApply(probs, v, g, out);
      b.attentionApplyBackward(probs, v, dout, g, dprobs, dv);
      b.attentionWeightsBackward(q, k, probs, dprobs, g, dq, dk);
    },
    output: dk,
  };
}

/** Seconds of one pass: CPU time on a CPU backend, wall time up to a read of its output on a GPU. */
async function seconds(b: Backend, p: Pass): Promise<number> {
  if (b.device) return wallSecondsPerCall(b, p.run, p.output);
  const t0 = process.cpuUsage();
  p.run();
  const d = process.cpuUsage(t0);
  return (d.user + d.system) / 1e6;
}

/** Runs `p` for at least `ms` milliseconds and once at least (V8 tiers the wasm up, buffers and primitives are made). */
async function warmUp(b: Backend, p: Pass, ms: number): Promise<void> {
  const t0 = performance.now();
  do p.run();
  while (performance.now() - t0 < ms);
  await finished(b, p.output);
}

/** The CPU's model name, family and model, and its widest vectors, for the record. */
function cpuLine(): string {
  let model = cpus()[0]?.model ?? 'unknown';
  try {
    const info = readFileSync('/proc/cpuinfo', 'utf8');
    const field = (name: string) => new RegExp(`^${name}\\s*:\\s*(.*)$`, 'm').exec(info)?.[1];
    const isa = /\bavx512f\b/.test(info) ? ', AVX-512' : /\bavx2\b/.test(info) ? ', AVX2' : '';
    model = `${field('model name') ?? model} (family ${field('cpu family')}, model ${field('model')}${isa})`;
  } catch {
    /* not Linux: the name os.cpus() gives */
  }
  const load = loadavg()
    .map((v) => v.toFixed(1))
    .join(' ');
  return `CPU: ${model}, ${cpus().length} cores, load average ${load}`;
}

/** The backends named in --backends that open here, each announced (or why not) as the other benches do. */
async function openBackends(names: string[], gpu: { backend: WebGpuBackend | null }): Promise<Contender[]> {
  const all = (s: AttentionShape) => s.N;
  const out: Contender[] = [];
  for (const name of names) {
    if (name === 'js') out.push({ label: 'js', b: jsBackend, batch: (s) => Math.max(1, Math.floor(s.N / 4)) });
    else if (name === 'wasm') {
      const b = await createWasmBackend();
      if (b) out.push({ label: b.relaxed ? 'wasm relaxed' : 'wasm simd128', b, batch: all });
      else console.log('wasm: unavailable (npm run build:wasm)');
    } else if (name === 'native') {
      const b = await createNativeBackend();
      if (!b) console.log(`native: unavailable: ${nativeUnavailableReason()}`);
      else {
        console.log(`native: ${b.blas.config} (${b.blas.parallel} build, ${b.blas.threads} thread), softmax rows JS`);
        out.push({ label: 'native', b, batch: all });
      }
    } else if (name === 'onednn') {
      const b = await createOneDnnBackend();
      if (!b) console.log(`onednn: unavailable: ${onednnUnavailableReason()}`);
      else {
        const o = b.onednn;
        console.log(
          `onednn: oneDNN ${o.version}, ISA ${o.isa} (${o.runtime} runtime, ${o.threads} thread), attention in the addon: batched matmul primitives, softmax rows in C`,
        );
        out.push({ label: 'onednn', b, batch: all });
      }
    } else if (name === 'webgpu') {
      gpu.backend = await openWebGpuColumn();
      if (gpu.backend) {
        const smoke = gpu.backend.gpu.description.software;
        out.push({ label: 'webgpu', b: gpu.backend, batch: smoke ? () => 1 : all, smoke });
      }
    }
  }
  return out;
}

/** Median over rounds of each round's median seconds, of the layer's pass and of the kernels' pass. */
interface Timing {
  layer: number;
  kernels: number;
}

/** One shape: every contender's passes, interleaved in rounds; null for a contender that skips it. */
async function timeShape(
  contenders: Contender[],
  s: AttentionShape,
  causal: boolean,
  rounds: number,
  reps: number,
  smokeShape: AttentionShape,
): Promise<(Timing | null)[]> {
  const runs = contenders.map((c) =>
    c.smoke && s !== smokeShape
      ? null
      : {
          c,
          layer: layerPass(c.b, s, c.batch(s), causal),
          kernels: kernelPass(c.b, s, c.batch(s), causal),
          times: { layer: [] as number[], kernels: [] as number[] },
        },
  );
  for (let r = 0; r < rounds; r++) {
    for (let j = 0; j < runs.length; j++) {
      const run = runs[(j + r) % runs.length];
      if (!run || (run.c.smoke && r > 0)) continue;
      const n = run.c.smoke ? 1 : reps;
      for (const part of ['layer', 'kernels'] as const) {
        if (r === 0) await warmUp(run.c.b, run[part], run.c.smoke ? 0 : 150);
        const t: number[] = [];
        for (let i = 0; i < n; i++) t.push(await seconds(run.c.b, run[part]));
        run.times[part].push(median(t));
      }
    }
  }
  return runs.map((run) => run && { layer: median(run.times.layer), kernels: median(run.times.kernels) });
}

/** A GFLOPS cell: the rate and, on a CPU backend, its share of the peak. */
function rate(flops: number, sec: number, b: Backend): string {
  const g = flops / sec / 1e9;
  return `${figure(g)}${b.device ? '' : ` ${ofPeak(g).padStart(4)}`}`;
}

function printTable(rows: string[][]): void {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  for (const [i, r] of rows.entries()) {
    console.log(r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  '));
    if (i === 0) console.log('-'.repeat(widths.reduce((a, w) => a + w + 2, -2)));
  }
}

interface Options {
  shapes: AttentionShape[];
  backends: string[];
  rounds: number;
  reps: number;
  causal: boolean;
  /** the backends whose pass is split into pieces; null: every CPU backend but js */
  pieces: string[] | null;
}

/** The command line, each bad value refused naming its flag. */
function parseOptions(args: string[]): Options {
  const count = (name: string, fallback: number): number => {
    const v = flag(args, name);
    if (v === undefined) return fallback;
    if (!/^[1-9]\d*$/.test(v)) throw new Error(`--${name}: "${v}" is not a whole number ≥ 1`);
    return Number(v);
  };
  const backends = (flag(args, 'backends') ?? BACKENDS.join(',')).split(',');
  const stranger = backends.find((b) => !BACKENDS.includes(b));
  if (stranger !== undefined)
    throw new Error(`--backends: unknown backend "${stranger}"; choose among ${BACKENDS.join(', ')}`);
  const pieces = flag(args, 'pieces')?.split(',') ?? null;
  const known = [...BACKENDS.filter((b) => b !== 'webgpu'), 'none'];
  const unknown = pieces?.find((p) => !known.includes(p));
  if (unknown !== undefined)
    throw new Error(`--pieces: unknown backend "${unknown}"; choose among ${known.join(', ')} (webgpu has no pieces)`);
  return {
    shapes: parseShapes(flag(args, 'shapes') ?? DEFAULT_SHAPES),
    backends,
    rounds: count('rounds', 3),
    reps: count('reps', 3),
    causal: !args.includes('--no-causal'),
    pieces,
  };
}

export async function main(args: string[] = []): Promise<void> {
  const options = parseOptions(args);
  const gpu: { backend: WebGpuBackend | null } = { backend: null };
  try {
    await measure(options, gpu);
  } finally {
    gpu.backend?.release(); // so the process can exit
  }
}

/** The line above a shape's table: its geometry and FLOPs a pass at its batch. */
function shapeLine(s: AttentionShape, causal: boolean): string {
  const f = attentionFlops(s, s.N),
    gf = (v: number) => (v / 1e9).toFixed(2);
  const products = `${gf(f.square)}${causal ? ` full, ${gf(f.half)} causal ½` : ''}`;
  return (
    `\nT ${s.T}, D ${s.D}, ${s.heads} heads of ${s.D / s.heads}, ${causal ? 'causal' : 'not causal'}, batch ${s.N}: ` +
    `${gf(f.projections + f.square)} GFLOP a pass (projections ${gf(f.projections)}, scores and products ${products})`
  );
}

/** One shape's table: a row per backend that ran it. */
function shapeTable(
  contenders: Contender[],
  timings: (Timing | null)[],
  s: AttentionShape,
  causal: boolean,
): string[][] {
  const half = (label: string) => (causal ? [label] : []);
  const rows = [
    ['backend', 'batch', 'layer ms', 'GFLOPS', ...half('causal ½'), 'kernels ms', 'GFLOPS', ...half('causal ½')],
  ];
  for (const [i, c] of contenders.entries()) {
    const t = timings[i];
    if (!t) continue;
    const n = c.batch(s),
      f = attentionFlops(s, n);
    rows.push([
      c.label,
      String(n),
      (t.layer * 1e3).toFixed(1),
      rate(f.projections + f.square, t.layer, c.b),
      ...(causal ? [rate(f.projections + f.half, t.layer, c.b)] : []),
      (t.kernels * 1e3).toFixed(1),
      rate(f.square, t.kernels, c.b),
      ...(causal ? [rate(f.half, t.kernels, c.b)] : []),
    ]);
  }
  return rows;
}

async function measure(o: Options, gpu: { backend: WebGpuBackend | null }): Promise<void> {
  console.log(cpuLine());
  console.log(peakLine());
  console.log(
    `Node ${process.versions.node}, V8 ${process.versions.v8}; one thread, CPU time per pass, median of ${o.reps} after a warm-up in each of ${o.rounds} rounds (the backends interleaved), a figure the median over the rounds`,
  );
  const contenders = await openBackends(o.backends, gpu);
  const smokeShape = o.shapes.reduce((a, s) =>
    attentionFlops(s, 1).projections < attentionFlops(a, 1).projections ? s : a,
  );
  if (contenders.some((c) => c.smoke))
    console.log(
      `webgpu: a smoke test at T ${smokeShape.T}, D ${smokeShape.D}, batch 1, one pass in the first round only`,
    );
  if (gpu.backend)
    console.log(
      'webgpu: wall time per pass, each ended by a read of its output (its kernels run at that read); no share of the CPU peak',
    );
  console.log(
    `GFLOPS (% of the widest-vector FMA peak): layer = projections + scores and products, kernels = scores and products alone, the T×T square counted full${o.causal ? ' and causal ½' : ''} (header of bench/attention.ts)`,
  );
  for (const s of o.shapes) {
    console.log(shapeLine(s, o.causal));
    printTable(
      shapeTable(contenders, await timeShape(contenders, s, o.causal, o.rounds, o.reps, smokeShape), s, o.causal),
    );
  }
  // the pieces: every CPU backend but js (slow, and its gemm is the reference) unless --pieces names them
  for (const c of contenders) {
    const name = c.label.split(' ')[0]!;
    if (c.b.device || (o.pieces ? !o.pieces.includes(name) : name === 'js')) continue;
    for (const s of o.shapes)
      printPieces(c.label, c.b, s, c.batch(s), (v) => layerPass(v, s, c.batch(s), o.causal), c.b.name === 'onednn');
  }
  console.log(`\nload average ${loadavg()[0]!.toFixed(1)} at the end`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await main(process.argv.slice(2));
}
