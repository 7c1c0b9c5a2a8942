/**
 * LSTM (or, with --gru, GRU) forward+backward at DeepSpeech-like shapes, per backend, against the
 * backend's own sgemm in the same run and PyTorch's nn.LSTM / nn.GRU (one thread) in the same run.
 *
 *   npm run bench -- lstm [--gru] [--quick] [--backends wasm,native,webgpu] [--frames T] [--reps R] [--rounds 5] [--no-torch] [--uni|--bi] [--calls] [--steps]
 *
 * `--calls` adds, per backend and direction, the ms per pass in each Backend method and outside them.
 * onednn runs each direction as one oneDNN primitive where it offers one (AVX-512), whatever
 * PARATRAIN_ONEDNN_RNN says; `--steps` adds a row "NAME steps" for each backend that runs
 * whole directions in one call (Backend.recurrentSequenceForward), with that call hidden, so the
 * layer steps through its products and cells on the same backend.
 *
 * Shape: batch N = 32, T = 100 frames, F = 494 inputs (DeepSpeech's 26 MFCC × 19-frame context), H = 512
 * units; `--quick` runs T = 25 (the per-step gemms keep their shape; only the all-frames gemms shrink).
 * The js backend is left out unless named in --backends (it then runs T = 10, N = 8).
 * `webgpu` (registered, so in the default list) runs where a GPU adapter opens, its adapter printed
 * (or why not: bench/webgpuColumn.ts); on a software adapter (SwiftShader) at N = 8, T = 2 with one
 * repetition in the first round, a smoke test. Its times are wall time, each pass (and each three back-to-back sgemms,
 * and each step-gemm sequence) ended by a 4-byte read: its kernels run at that read.
 *
 * GFLOPS count the gemms only, per direction, with G gates (LSTM 4, GRU 3): forward = input
 * projection 2·N·T·F·GH + recurrent 2·N·T·H·GH; backward does the same products twice more (dW_ih
 * and dX; dW_hh and dh), so forward+backward = 3 × forward = 6G·N·T·H·(F + H). The gate nonlinearities, copies and bias sums
 * are not counted (they are what the recurrence costs beyond its gemms). "of peak" is that figure
 * as a share of the machine's measured one-core FMA peak (bench/peak.ts), PyTorch's row too: where
 * PyTorch's BLAS uses the widest vectors it runs near the peak's reach and the ratio to it shrinks.
 *
 * Time is CPU time of this process (process.cpuUsage, user + system) per pass, the median of the
 * repetitions, and for PyTorch time.process_time(): the machine is shared, and CPU time is less
 * disturbed by other processes than wall time (cache sharing still is). The sgemm reference is the
 * LSTM's own largest product, the input projection [N·T, F] × [F, 4H] (transB, as the layer calls
 * it), timed interleaved with the LSTM passes (three samples per pass) so both see the same load:
 * "LSTM/sgemm" is the ratio of the two GFLOPS.
 *
 * The backends and PyTorch take turns for `--rounds` rounds (default 5): a cell is the median over
 * the rounds, and "ours / PyTorch" the median of the rounds' own ratios, so a change of the shared
 * machine's speed between a backend's passes and PyTorch's does not land in one ratio only. Each
 * side times the same number of passes a round (--reps, after a warm-up), PyTorch too.
 */
import { filled } from './filled.ts';
import { cpus, loadavg } from 'node:os';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { Tensor } from '../src/tensor/tensor.ts';
import type { Backend } from '../src/kernels/backend.ts';
import { registeredBackends, tryBackend } from '../src/kernels/index.ts';
import { Recurrent } from '../src/nn/recurrent.ts';
import { Sequential } from '../src/nn/model.ts';
import type { ForwardContext } from '../src/nn/layer.ts';
import { flag, median } from './args.ts';
import { runPython, torchPython } from './torch.ts';
import { ofPeak, peakLine } from './peak.ts';
import { timeCalls } from './backendCalls.ts';
import { figure, finished, openWebGpuColumn, wallSecondsPerCall } from './webgpuColumn.ts';
import type { WebGpuBackend } from '../src/kernels/webgpu/index.ts';

interface Shape {
  N: number;
  T: number;
  F: number;
  H: number;
}
type CellKind = 'lstm' | 'gru';
const GATES: Record<CellKind, number> = { lstm: 4, gru: 3 };

const CTX: ForwardContext = { training: true, seed: 1, step: 0, sampleOffset: 0 };

/** Seconds of CPU time this process spends in fn (user + system). */
function cpuSeconds(fn: () => void): number {
  const t0 = process.cpuUsage();
  fn();
  const d = process.cpuUsage(t0);
  return (d.user + d.system) / 1e6;
}

/** Gemm FLOPs of one LSTM (or GRU) forward+backward (see the header). */
export function lstmFlops(s: Shape, directions: number, cell: CellKind = 'lstm'): number {
  return directions * 6 * GATES[cell] * s.N * s.T * s.H * (s.F + s.H);
}

/** The CPU's model name (lscpu's), for the record. */
function cpuModel(): string {
  try {
    const info = readFileSync('/proc/cpuinfo', 'utf8');
    const name = /^model name\s*:\s*(.*)$/m.exec(info)?.[1];
    const family = /^cpu family\s*:\s*(\d+)$/m.exec(info)?.[1],
      model = /^model\s*:\s*(\d+)$/m.exec(info)?.[1];
    const avx512 = /\bavx512f\b/.test(info) ? ', AVX-512' : /\bavx2\b/.test(info) ? ', AVX2' : '';
    if (name) return `${name} (family ${family}, model ${model}${avx512})`;
  } catch {
    /* not Linux */
  }
  return cpus()[0]?.model ?? 'unknown';
}

/** CPU seconds per pass, of the reference sgemm and of the steps' products; MB the layer keeps for backward. */
interface Result {
  lstmSec: number;
  gemmSec: number;
  stepSec: number;
  keptMB: number;
}

/**
 * Times LSTM (GRU) passes and the reference sgemm interleaved (medians of CPU seconds; on a GPU of
 * wall seconds up to a read), and the recurrent step's product as the layer runs it: [N, H] ·
 * packed W_hhᵀ [H, GH], T of them.
 */
async function timeBackend(b: Backend, cell: CellKind, s: Shape, directions: number, reps: number): Promise<Result> {
  const { N, T, F, H } = s,
    GH = GATES[cell] * H;
  const layer = new Recurrent(b, `bench ${cell}`, [T, F], cell, H, directions === 2 ? { bidirectional: 'concat' } : {});
  const model = new Sequential(b, [layer], [T, F]);
  model.initialize(1);
  b.device?.fromHost([model.params, model.state]);
  const x = new Tensor([N, T, F], filled(b, N * T * F, 3));
  const dy = new Tensor([N, T, layer.outputShape[1]!], filled(b, N * T * layer.outputShape[1]!, 4));
  const pass = (): void => {
    layer.forward(x, CTX);
    layer.backward(dy, true);
  };
  const A = filled(b, N * T * F, 5),
    B = filled(b, GH * F, 6),
    C = b.alloc(N * T * GH);
  const gemm = (): void => b.gemm(false, true, N * T, GH, F, 1, A, B, 0, C);
  const P = b.packB(true, H, GH, filled(b, GH * H, 7)),
    h = filled(b, N * H, 8);
  const steps = (): void => {
    for (let t = 0; t < T; t++) b.gemmPacked(false, N, GH, H, 1, h, P, 1, C, 0, t * N * GH);
  };
  pass();
  gemm();
  steps(); // warm-up (V8 tiers the wasm up; buffers are allocated; a GPU compiles its pipelines)
  await finished(b, C);
  const lstm: number[] = [],
    ref: number[] = [],
    step: number[] = [];
  for (let r = 0; r < reps; r++) {
    if (b.device) {
      // a GPU's kernels run at the next read: each timed region ends with one (the sgemm's three back to back)
      lstm.push(await wallSecondsPerCall(b, pass, model.grads));
      ref.push(await wallSecondsPerCall(b, gemm, C, 3));
      step.push(await wallSecondsPerCall(b, steps, C));
      continue;
    }
    lstm.push(cpuSeconds(pass));
    // the reference is short: three samples per pass steady its median
    for (let k = 0; k < 3; k++) ref.push(cpuSeconds(gemm));
    step.push(cpuSeconds(steps));
  }
  const keptMB = layer.savedForBackward().reduce((sum, a) => sum + a.byteLength, 0) / 1e6;
  return { lstmSec: median(lstm), gemmSec: median(ref), stepSec: median(step), keptMB };
}

/** Where one backend's pass goes (`--calls`): ms per pass per Backend method, `passes` passes after a warm-up. */
async function callBreakdown(
  b: Backend,
  cell: CellKind,
  s: Shape,
  directions: number,
  passes: number,
): Promise<string[]> {
  const calls = timeCalls(b);
  const { N, T, F, H } = s;
  const layer = new Recurrent(
    calls.backend,
    `bench ${cell}`,
    [T, F],
    cell,
    H,
    directions === 2 ? { bidirectional: 'concat' } : {},
  );
  const model = new Sequential(calls.backend, [layer], [T, F]);
  model.initialize(1);
  b.device?.fromHost([model.params, model.state]);
  const x = new Tensor([N, T, F], filled(b, N * T * F, 3));
  const dy = new Tensor([N, T, layer.outputShape[1]!], filled(b, N * T * layer.outputShape[1]!, 4));
  const pass = (): void => {
    layer.forward(x, CTX);
    layer.backward(dy, true);
  };
  pass();
  await finished(b, model.grads);
  calls.reset();
  const t0 = performance.now();
  for (let p = 0; p < passes; p++) pass();
  await finished(b, model.grads); // a GPU runs the passes here
  return calls.report(passes, performance.now() - t0);
}

const TORCH_LSTM = `
import sys, json, time, torch
torch.set_num_threads(1)
N, T, F, H, bi, reps = (int(v) for v in sys.argv[1:7])
torch.manual_seed(0)
lstm = getattr(torch.nn, sys.argv[7])(F, H, batch_first=True, bidirectional=bool(bi))
x = torch.randn(N, T, F, requires_grad=True)
dy = torch.randn(N, T, H * (2 if bi else 1))
def step():
    lstm.zero_grad(); x.grad = None
    y, _ = lstm(x)
    y.backward(dy)
step()
times = []
for _ in range(reps):
    t0 = time.process_time(); step(); times.append(time.process_time() - t0)
times.sort()
print(json.dumps({"sec": times[len(times) // 2], "threads": torch.get_num_threads(), "version": torch.__version__}))
`;

function torchSeconds(
  cell: CellKind,
  s: Shape,
  directions: number,
  reps: number,
): { sec: number; version: string } | string {
  if (!torchPython()) return 'python3-torch not installed';
  try {
    const args = [...[s.N, s.T, s.F, s.H, directions - 1, reps].map(String), cell.toUpperCase()];
    const out = JSON.parse(runPython(TORCH_LSTM, args)) as { sec: number; version: string };
    return out;
  } catch (err) {
    return (err as Error).message;
  }
}

export async function main(args: string[] = []): Promise<void> {
  // the GPU, where webgpu is one of the backends: released at the end, so the process can exit
  const gpu: { backend: WebGpuBackend | null } = { backend: null };
  try {
    await measure(args, gpu);
  } finally {
    gpu.backend?.release();
  }
}

async function measure(args: string[], gpu: { backend: WebGpuBackend | null }): Promise<void> {
  const quick = args.includes('--quick');
  const reps = Number(flag(args, 'reps') ?? 3);
  const rounds = Number(flag(args, 'rounds') ?? 5);
  const T = Number(flag(args, 'frames') ?? (quick ? 25 : 100));
  const full: Shape = { N: 32, T, F: 494, H: 512 };
  const small: Shape = { N: 8, T: 10, F: 494, H: 512 };
  const names = flag(args, 'backends')?.split(',') ?? registeredBackends().filter((n) => n !== 'js');
  const dirs = args.includes('--uni') ? [1] : args.includes('--bi') ? [2] : [1, 2];
  const cell: CellKind = args.includes('--gru') ? 'gru' : 'lstm',
    G = GATES[cell],
    CELL = cell.toUpperCase();

  console.log(
    `CPU: ${cpuModel()}, ${cpus().length} cores, load average ${loadavg()
      .map((v) => v.toFixed(1))
      .join(' ')}`,
  );
  console.log(peakLine());
  console.log(
    `Node ${process.versions.node}, V8 ${process.versions.v8}; CPU time per pass, median of ${reps} after a warm-up, in each of ${rounds} rounds; a cell is the median over the rounds`,
  );
  console.log(
    `GFLOPS = gemm FLOPs / time, FLOPs of forward+backward = directions · ${6 * G}·N·T·H·(F+H) (${CELL}: ${G} gates)`,
  );
  console.log(
    `sgemm = GFLOPS of the backend's gemm at the input projection's shape [N·T, F]·[F, ${G}H]ᵀ, interleaved with the ${CELL} passes`,
  );
  console.log(
    `${CELL} shape: batch ${full.N}, ${full.T} frames, ${full.F} inputs, ${full.H} units${names.includes('js') ? `; js at ${small.N}×${small.T}` : ''}`,
  );
  console.log('step gemm = GFLOPS of the per-step recurrent product [N, H]·W_hhᵀ with W_hh packed once (gemmPacked)');
  console.log(
    "kept MB = what the layer keeps for backward (inputs, states, and the gates or oneDNN's workspace), all directions\n",
  );
  const rows: string[][] = [
    ['backend', 'dir', 'ms/pass', 'seq/s', 'GFLOPS', 'of peak', 'sgemm', `${CELL}/sgemm`, 'step gemm', 'kept MB'],
  ];
  const backends: { name: string; b: Backend }[] = [];
  // the backends that run a smaller shape, one repetition: js, and a GPU's software adapter (a smoke test, first round only)
  const reduced = new Map<string, Shape>([['js', small]]);
  let smokeTest: string | undefined;
  const shapeOf = (name: string) => reduced.get(name) ?? full;
  for (const name of names) {
    if (name === 'webgpu') {
      // printed its adapter, or why none opened
      gpu.backend = await openWebGpuColumn();
      if (!gpu.backend) continue;
      backends.push({ name, b: gpu.backend });
      if (gpu.backend.gpu.description.software) {
        // SwiftShader runs js's shape's pass in about a minute on a busy 2-core machine
        const smoke: Shape = { ...small, T: 2 };
        reduced.set(name, smoke);
        smokeTest = name;
        console.log(`webgpu: batch ${smoke.N}, ${smoke.T} frames, one repetition, in the first round only`);
      }
      continue;
    }
    const b = await tryBackend(name).catch((err: Error) => {
      console.log(`${name}: ${err.message}`);
      return null;
    });
    if (!b) {
      console.log(`${name}: not available here (skipped)`);
      continue;
    }
    const about = describe(b, cell);
    if (about) console.log(`${name}: ${about}`);
    (b as Backend & { setSequenceCells?: (cells: CellKind[]) => void }).setSequenceCells?.(['lstm', 'gru']);
    backends.push({ name, b });
    if (args.includes('--steps') && b.recurrentSequenceWorkspace) {
      // the same backend with its whole-direction call hidden: the layer steps
      backends.push({
        name: `${name} steps`,
        b: Object.assign(Object.create(b) as Backend, { recurrentSequenceWorkspace: undefined }),
      });
    }
  }
  // rounds: every backend, then PyTorch, in turn, so a change of load hits them alike
  const results = new Map<string, Result[]>(),
    torchSec = new Map<number, number[]>();
  let torchVersion = '',
    torchMissing = args.includes('--no-torch') ? 'skipped (--no-torch)' : '';
  for (let r = 0; r < rounds; r++) {
    for (const { name, b } of backends) {
      if (r > 0 && name === smokeTest) continue;
      for (const d of dirs) {
        const key = `${name}/${d}`;
        results.set(key, [
          ...(results.get(key) ?? []),
          await timeBackend(b, cell, shapeOf(name), d, reduced.has(name) ? 1 : reps),
        ]);
      }
    }
    for (const d of torchMissing ? [] : dirs) {
      const t = torchSeconds(cell, full, d, reps);
      if (typeof t === 'string') {
        torchMissing = t;
        break;
      }
      torchVersion = t.version;
      torchSec.set(d, [...(torchSec.get(d) ?? []), t.sec]);
    }
  }
  if (gpu.backend)
    console.log(
      'webgpu: wall time per pass, each ended by a 4-byte read (its kernels run at that read); no share of the CPU peak',
    );
  for (const { name, b } of backends) {
    const s = shapeOf(name);
    for (const d of dirs) {
      const rs = results.get(`${name}/${d}`)!;
      const lstmSec = median(rs.map((x) => x.lstmSec)),
        gemmSec = median(rs.map((x) => x.gemmSec)),
        stepSec = median(rs.map((x) => x.stepSec));
      const gflops = lstmFlops(s, d, cell) / lstmSec / 1e9;
      const ref = (2 * s.N * s.T * G * s.H * s.F) / gemmSec / 1e9;
      rows.push([
        name,
        d === 2 ? 'bi' : 'uni',
        (lstmSec * 1e3).toFixed(0),
        (s.N / lstmSec).toFixed(1),
        figure(gflops),
        b.device ? '' : ofPeak(gflops), // the peak is the CPU's
        figure(ref),
        `${((100 * gflops) / ref).toFixed(0)}%`,
        figure((2 * s.T * s.N * s.H * G * s.H) / stepSec / 1e9),
        rs[0]!.keptMB.toFixed(0),
      ]);
    }
  }
  if (torchMissing) console.log(`PyTorch: ${torchMissing}`);
  for (const [d, secs] of torchSec) {
    const sec = median(secs);
    rows.push([
      `torch ${torchVersion}, 1 thread`,
      d === 2 ? 'bi' : 'uni',
      (sec * 1e3).toFixed(0),
      (full.N / sec).toFixed(1),
      (lstmFlops(full, d, cell) / sec / 1e9).toFixed(1),
      ofPeak(lstmFlops(full, d, cell) / sec / 1e9),
      '',
      '',
      '',
      '',
    ]);
  }
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  for (const [i, r] of rows.entries()) {
    console.log(r.map((cell, c) => (c < 2 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  '));
    if (i === 0) console.log('-'.repeat(widths.reduce((a, w) => a + w + 2, -2)));
  }
  if (args.includes('--calls')) {
    for (const { name, b } of backends) {
      for (const d of dirs) {
        console.log(`\n${name} ${d === 2 ? 'bi' : 'uni'}: where a pass goes (--calls)`);
        for (const line of await callBreakdown(b, cell, shapeOf(name), d, 3)) console.log(line);
      }
    }
  }
  // each round's own ratio (PyTorch's time over ours, minutes apart at most), then their median
  for (const d of dirs) {
    const torch = torchSec.get(d);
    if (!torch || torch.length < rounds) continue;
    for (const { name } of backends) {
      if (reduced.has(name)) continue;
      const ratios = results.get(`${name}/${d}`)!.map((x, r) => torch[r]! / x.lstmSec);
      console.log(
        `${name} / PyTorch (${d === 2 ? 'bi' : 'uni'}): ${median(ratios).toFixed(2)}×  (rounds: ${ratios.map((v) => v.toFixed(2)).join(' · ')})`,
      );
    }
  }
}

/** The backend's build, where it has something to say. */
function describe(b: Backend, cell: CellKind): string {
  const info = b as Backend & {
    relaxed?: boolean;
    blas?: { config: string };
    base?: string;
    packedKernel?: string | null;
    onednn?: { version: string; isa: string };
  };
  if (info.onednn) {
    // native/onednn/packed.c: the primitive's packed layout with AVX-512, padded rows and dnnl_sgemm without
    const steps = info.onednn.isa.includes('avx512')
      ? "oneDNN's matmul primitive per step on W_hh reordered once per pass into its layout"
      : 'dnnl_sgemm per step on W_hh copied once per pass into rows 16 floats longer (no cache-set aliasing)';
    const primitive = cell === 'lstm' ? "oneDNN's LSTM primitive" : "oneDNN's linear-before-reset GRU primitive";
    const cells =
      cell === 'lstm'
        ? "the addon's AVX2 + FMA cells where the CPU has both (native/onednn/cells.c), else the base's"
        : "the base's cells";
    const layer = info.onednn.isa.includes('avx512')
      ? `the ${cell.toUpperCase()} runs each direction as ${primitive} (native/onednn/rnn.c); `
      : `the ${cell.toUpperCase()} steps: ${cells}; `;
    return `oneDNN ${info.onednn.version}, ISA ${info.onednn.isa}; ${layer}step gemm (the column): ${steps}`;
  }
  if (info.blas) {
    const steps = info.packedKernel
      ? `native/recurrent.c's ${info.packedKernel} kernel on W_hh packed once`
      : 'cblas_sgemm per step';
    return `${info.blas.config}; step gemm: ${steps}; cells from ${info.base}`;
  }
  if (info.relaxed !== undefined) return info.relaxed ? 'relaxed SIMD (fused multiply-add)' : 'SIMD128';
  return '';
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await main(process.argv.slice(2));
}
