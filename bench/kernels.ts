/**
 * Kernel throughput: GFLOPS per kernel and shape for the js backend, the wasm backend (plain
 * SIMD128 and, when this Node can run it, relaxed SIMD with fused multiply-add) and, when their
 * addons are built, the native (OpenBLAS) and onednn backends — onednn twice for the matrix
 * products: its default matmul primitive and oneDNN's dnnl_sgemm entry point (`onednn sgemm`), and
 * twice for the convolutions: as the backend runs them (the addon's own kernels for few input
 * channels, native/onednn/direct.c) and oneDNN's primitives only (`onednn prims`) — and `webgpu`
 * when a GPU adapter opens (bench/webgpuColumn.ts: the adapter printed, or why the column is left
 * out): its calls run at the host's next read, so a cell times batches of back-to-back calls, each
 * batch ended by a 4-byte read of the output, in wall time.
 * The columns of a row take turns in rounds (3, `--rounds N`; 1 with --quick), so that a slow spell
 * of a shared machine hits all of them: each cell is the median over rounds of each round's median
 * of timed repetitions, after a warm-up (which also lets V8 tier the wasm code up), and its fraction
 * of the machine's measured FMA peak (bench/peak.ts, printed first).
 *
 *   node --import tsx bench/kernels.ts [--quick] [--rounds N] [--backends js,wasm,wasm-simd,native,onednn,onednn-sgemm,onednn-prims,webgpu] [--filter gemm]
 *
 * Shapes: square sgemm n = 128…1024; the dense layer of the reference network (64×1600 · 1600×128)
 * and its two backward products; conv2d forward / backward-data / backward-filter of its two conv
 * layers at batch 64. A full run takes about a minute and a half.
 */
import { filled } from './filled.ts';
import { pathToFileURL } from 'node:url';
import type { Backend } from '../src/kernels/backend.ts';
import type { Conv2DGeometry } from '../src/kernels/convKernels.ts';
import { jsBackend } from '../src/kernels/js/index.ts';
import { createWasmBackend } from '../src/kernels/wasm/index.ts';
import { createNativeBackend, nativeUnavailableReason } from '../src/kernels/native/index.ts';
import { createOneDnnBackend, onednnUnavailableReason } from '../src/kernels/onednn/index.ts';
import { ofPeak, peakLine } from './peak.ts';
import { median } from './args.ts';
import { figure, openWebGpuColumn, wallSecondsPerCall } from './webgpuColumn.ts';

/** The timed call and the array it writes (read back to end a GPU's timed batch). */
interface Timed {
  run(): void;
  output: Float32Array;
}

interface Case {
  name: string;
  shape: string;
  flops: number;
  /** Builds the operands in `b`'s memory and returns the timed call. */
  setup(b: Backend): Timed;
}

function gemmCase(name: string, transA: boolean, transB: boolean, M: number, N: number, K: number, beta = 0): Case {
  const t = `${transA ? 'T' : 'N'}${transB ? 'T' : 'N'}`;
  return {
    name,
    shape: `${M}×${K}×${N} ${t}`,
    flops: 2 * M * N * K,
    setup(b) {
      const A = filled(b, M * K, 1),
        B = filled(b, K * N, 2),
        C = b.alloc(M * N);
      return { run: () => b.gemm(transA, transB, M, N, K, 1, A, B, beta, C), output: C };
    },
  };
}

function conv(N: number, H: number, W: number, C: number, K: number, F: number): Conv2DGeometry {
  return { N, H, W, C, KH: K, KW: K, F, strideH: 1, strideW: 1, padTop: 0, padLeft: 0, OH: H - K + 1, OW: W - K + 1 };
}

function convCases(label: string, g: Conv2DGeometry): Case[] {
  const flops = 2 * g.N * g.OH * g.OW * g.F * g.KH * g.KW * g.C;
  const shape = `${label} N${g.N} ${g.H}×${g.W}×${g.C}→${g.OH}×${g.OW}×${g.F} k${g.KH}`;
  const sizes = { x: g.N * g.H * g.W * g.C, w: g.KH * g.KW * g.C * g.F, y: g.N * g.OH * g.OW * g.F };
  return [
    {
      name: 'conv2d fwd',
      shape,
      flops,
      setup(b) {
        const x = filled(b, sizes.x, 1),
          w = filled(b, sizes.w, 2),
          bias = filled(b, g.F, 3),
          y = b.alloc(sizes.y);
        return { run: () => b.conv2dForward(x, w, bias, y, g), output: y };
      },
    },
    {
      name: 'conv2d bwd-data',
      shape,
      flops,
      setup(b) {
        const dy = filled(b, sizes.y, 1),
          w = filled(b, sizes.w, 2),
          dx = b.alloc(sizes.x);
        return { run: () => b.conv2dBackwardData(dy, w, dx, g), output: dx };
      },
    },
    {
      name: 'conv2d bwd-filter',
      shape,
      flops,
      setup(b) {
        const x = filled(b, sizes.x, 1),
          dy = filled(b, sizes.y, 2),
          dw = b.alloc(sizes.w),
          db = b.alloc(g.F);
        return { run: () => b.conv2dBackwardFilter(x, dy, dw, db, g), output: dw };
      },
    },
  ];
}

export const CASES: Case[] = [
  ...[128, 256, 512, 1024].map((n) => gemmCase('sgemm', false, false, n, n, n)),
  gemmCase('dense fwd  Y=X·W', false, false, 64, 128, 1600),
  gemmCase('dense dX=dY·Wᵀ', false, true, 64, 1600, 128),
  gemmCase('dense dW+=Xᵀ·dY', true, false, 1600, 128, 64, 1),
  ...convCases('conv1', conv(64, 28, 28, 1, 3, 32)),
  ...convCases('conv2', conv(64, 13, 13, 32, 3, 64)),
];

/**
 * `gemmOnly` / `convOnly`: the column measures the matrix products / convolutions only, `maxFlops`
 * the cases up to that many flops (other rows print a dash).
 */
interface Column {
  label: string;
  backend: Backend;
  gemmOnly?: boolean;
  convOnly?: boolean;
  maxFlops?: number;
  before?: () => void;
}

/** A software adapter's smoke test stops here: SwiftShader runs sgemm at about 0.1 GFLOPS. */
const SOFTWARE_MAX_FLOPS = 1e8;

/** Width of one result column. */
const CELL = 15;

/** Median seconds per call: warm up ≥ warmMs, then time ≥ minReps calls and ≥ minMs. */
function measure(fn: () => void, warmMs: number, minMs: number, minReps: number): number {
  let t0 = performance.now();
  do fn();
  while (performance.now() - t0 < warmMs);
  const times: number[] = [];
  t0 = performance.now();
  while (times.length < minReps || performance.now() - t0 < minMs) {
    const t = performance.now();
    fn();
    times.push(performance.now() - t);
    if (times.length >= 1000) break;
  }
  times.sort((a, b) => a - b);
  return times[times.length >> 1]! / 1000;
}

/**
 * `measure` for a GPU backend, whose calls are only recorded until the host reads: a sample is the
 * wall time per call of a batch of back-to-back calls ended by a 4-byte read of the output, so it
 * holds finished GPU work, and the batch (grown until it takes ≥ 20 ms, at most 256 calls) keeps
 * the read's round trip small beside it. Warm-up batches first (the pipelines compile at first use).
 */
async function measureGpu(b: Backend, t: Timed, warmMs: number, minMs: number, minBatches: number): Promise<number> {
  const batch = (calls: number) => wallSecondsPerCall(b, t.run, t.output, calls);
  let t0 = performance.now();
  let perCall = await batch(1);
  while (performance.now() - t0 < warmMs) perCall = await batch(1);
  let calls = 1;
  while (calls < 256 && perCall * calls < 0.02) {
    calls *= 2;
    perCall = await batch(calls);
  }
  const times: number[] = [];
  t0 = performance.now();
  while (times.length < minBatches || performance.now() - t0 < minMs) {
    times.push(await batch(calls));
    if (times.length >= 1000) break;
  }
  return median(times);
}

export async function main(args: string[] = []): Promise<void> {
  const quick = args.includes('--quick');
  const pick = (flag: string) => {
    const i = args.indexOf(flag);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const wanted = (pick('--backends') ?? 'js,wasm-simd,wasm,native,onednn,onednn-sgemm,onednn-prims,webgpu').split(',');
  const rounds = Math.max(1, Number(pick('--rounds') ?? (quick ? 1 : 3)));
  console.log(peakLine());

  const columns: Column[] = [];
  if (wanted.includes('js')) columns.push({ label: 'js', backend: jsBackend });
  if (wanted.includes('wasm-simd')) {
    const b = await createWasmBackend({ relaxed: false });
    if (b) columns.push({ label: 'wasm simd128', backend: b });
    else console.log('wasm backend unavailable (run `npm run build:wasm`)');
  }
  if (wanted.includes('wasm')) {
    const b = await createWasmBackend();
    if (b?.relaxed) columns.push({ label: 'wasm relaxed', backend: b });
    else if (b && !wanted.includes('wasm-simd')) columns.push({ label: 'wasm simd128', backend: b });
    else if (b) console.log('relaxed SIMD is not usable on this Node: the wasm backend uses plain SIMD128');
  }
  if (wanted.includes('native')) {
    const b = await createNativeBackend();
    if (b) {
      columns.push({ label: 'native', backend: b });
      console.log(
        `native: ${b.blas.config} (${b.blas.parallel} build, ${b.blas.threads} thread), other kernels from ${b.base}`,
      );
    } else {
      console.log(`native backend unavailable: ${nativeUnavailableReason()}`);
    }
  }

  // One onednn backend for both of its columns: the gemm entry point is a per-thread setting of the addon.
  const onednn = wanted.some((w) => w.startsWith('onednn')) ? await createOneDnnBackend() : null;
  if (onednn) {
    console.log(
      `onednn: oneDNN ${onednn.onednn.version}, ISA ${onednn.onednn.isa} (${onednn.onednn.runtime} runtime, ${onednn.onednn.threads} thread), other kernels from ${onednn.base}`,
    );
    const mode = (gemm: 'matmul' | 'sgemm', direct: boolean) => () => {
      onednn.setGemm(gemm);
      onednn.setDirect(direct);
    };
    if (wanted.includes('onednn')) columns.push({ label: 'onednn', backend: onednn, before: mode('matmul', true) });
    if (wanted.includes('onednn-sgemm'))
      columns.push({ label: 'onednn sgemm', backend: onednn, gemmOnly: true, before: mode('sgemm', true) });
    if (wanted.includes('onednn-prims'))
      columns.push({ label: 'onednn prims', backend: onednn, convOnly: true, before: mode('matmul', false) });
  } else if (wanted.some((w) => w.startsWith('onednn'))) {
    console.log(`onednn backend unavailable: ${onednnUnavailableReason()}`);
  }
  const webgpu = wanted.includes('webgpu') ? await openWebGpuColumn() : null;
  if (webgpu?.gpu.description.software) {
    console.log(
      `webgpu: a smoke test, the cases up to ${SOFTWARE_MAX_FLOPS / 1e6} MFLOP, each cell one timed batch after a warm-up`,
    );
    columns.push({ label: 'webgpu', backend: webgpu, maxFlops: SOFTWARE_MAX_FLOPS });
  } else if (webgpu) columns.push({ label: 'webgpu', backend: webgpu });
  try {
    await measureColumns(columns, pick('--filter'), quick, rounds);
  } finally {
    webgpu?.release();
  }
}

/** Prints the table: every case a row, every column a cell, the columns taking turns in rounds. */
async function measureColumns(
  columns: Column[],
  filter: string | undefined,
  quick: boolean,
  rounds: number,
): Promise<void> {
  const cases = CASES.filter((c) => !filter || `${c.name} ${c.shape}`.includes(filter));
  const nameW = Math.max(...cases.map((c) => c.name.length)),
    shapeW = Math.max(...cases.map((c) => c.shape.length));
  const header = `${'kernel'.padEnd(nameW)}  ${'shape'.padEnd(shapeW)}  ${columns.map((c) => c.label.padStart(CELL)).join('')}`;
  console.log(
    `GFLOPS (% of the widest-vector FMA peak), one thread, the columns interleaved: median over ${rounds} rounds of each round's median (Node ${process.versions.node}, V8 ${process.versions.v8})`,
  );
  if (columns.some((c) => c.backend.device))
    console.log(
      'webgpu: wall time per call of batches of back-to-back calls, each batch ended by a 4-byte read of the output (its calls run at that read); no share of the CPU peak',
    );
  console.log(header);
  console.log('-'.repeat(header.length));
  for (const c of cases) {
    const runs = columns.map((col) => {
      if (
        (col.gemmOnly && !c.name.includes('sgemm') && !c.name.startsWith('dense')) ||
        (col.convOnly && !c.name.startsWith('conv')) ||
        c.flops > (col.maxFlops ?? Number.POSITIVE_INFINITY)
      )
        return null;
      col.before?.();
      return { col, timed: c.setup(col.backend), times: [] as number[] };
    });
    // the columns take turns, round by round (the order rotating), so that a slow spell of a shared
    // machine falls on every column alike; a cell is the median over rounds of each round's median
    for (let r = 0; r < rounds; r++) {
      for (let j = 0; j < runs.length; j++) {
        const run = runs[(j + r) % runs.length];
        if (!run) continue;
        run.col.before?.();
        // js at large sizes is slow: fewer repetitions keep the run short.
        const slow = run.col.label === 'js' && c.flops > 5e8;
        const warm = r > 0 ? 20 : quick || slow ? 50 : 200;
        const minMs = quick || slow ? 100 : Math.max(100, 400 / rounds);
        const smoke = run.col.maxFlops !== undefined;
        run.times.push(
          run.col.backend.device
            ? await measureGpu(run.col.backend, run.timed, smoke ? 0 : warm, smoke ? 0 : minMs, smoke ? 1 : 3)
            : measure(run.timed.run, warm, minMs, slow ? 3 : 5),
        );
      }
    }
    const cells = runs.map((run) => {
      if (!run) return '—'.padStart(CELL);
      const gflops = c.flops / median(run.times) / 1e9;
      const peak = run.col.backend.device ? '' : ofPeak(gflops); // the peak is the CPU's
      return `${figure(gflops)}${peak ? ` ${peak.padStart(4)}` : ''}`.padStart(CELL);
    });
    console.log(`${c.name.padEnd(nameW)}  ${c.shape.padEnd(shapeW)}  ${cells.join('')}`);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await main(process.argv.slice(2));
}
