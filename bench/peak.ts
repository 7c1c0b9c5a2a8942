/**
 * The machine's measured single-core FMA peak (native/onednn/peak/fma_peak.c, built by
 * `npm run build:peak`; `npm ci` builds it where a C compiler is): the widest vectors the CPU has
 * (512-bit with AVX-512, 256-bit with AVX2) and 128-bit ones (what WebAssembly SIMD can use), each
 * 12 independent FMA chains run for about 0.2 s, the fastest of its ~10 µs chunks counting (so
 * other processes on a shared machine do not lower it). Benchmarks print it first and give their
 * figures as fractions of it. With AVX-512, the 256-bit (AVX2) peak is measured too: a Zen 4 runs
 * 512-bit FMAs as two halves and reaches the same peak with 256-bit code, a Zen 5 does not, and
 * that decides how far AVX2-only libraries (Debian's OpenBLAS as PyTorch uses it) can be outrun.
 *
 * coreScaling runs the same loop on G threads at once, each on its own core if the host gives it
 * one, against one thread alone: the host's own scaling of pure arithmetic (no memory, no
 * communication) to G cores, which no G-device job can beat (a VM's cores may share a power budget,
 * clocks or physical cores with other tenants).
 */
import { Worker } from 'node:worker_threads';
import { loadAddon, addonPath, addonUnavailableReason, type AddonSpec } from '../src/platform/addon.ts';

export interface FmaPeak {
  bits: number;
  gflops: number;
  sustainedGflops: number;
  fma: boolean;
}
export interface MachinePeak {
  widest: FmaPeak;
  simd128: FmaPeak /** with AVX-512 only: 256-bit vectors */;
  avx2?: FmaPeak;
}

const SPEC: AddonSpec = {
  file: 'paratrain_peak.node',
  sourceDir: 'native/onednn/peak',
  disableEnv: 'PARATRAIN_PEAK',
  requiredExports: ['fmaPeak'],
  buildCommand: 'npm run build:peak',
  notBuiltReason: 'the FMA probe is not built (npm run build:peak)',
};

let measured: MachinePeak | null | undefined;

/** Measures the peak once per process (≈ 0.4 s, 0.6 with AVX-512), or null when the probe is not built (see peakUnavailableReason). */
export function machinePeak(): MachinePeak | null {
  if (measured !== undefined) return measured;
  const addon = loadAddon<{ fmaPeak(bits: number, seconds: number): FmaPeak }>(SPEC);
  if (!addon) return (measured = null);
  addon.fmaPeak(0, 0.02); // warm-up: wide-vector clocks and the page of code
  const widest = addon.fmaPeak(0, 0.2);
  measured = {
    widest,
    simd128: addon.fmaPeak(128, 0.2),
    ...(widest.bits === 512 ? { avx2: addon.fmaPeak(256, 0.2) } : {}),
  };
  return measured;
}

export function peakUnavailableReason(): string | undefined {
  return addonUnavailableReason(SPEC);
}

/** The widest FMA loop run for `seconds` on `threads` worker threads started together: their summed sustained GFLOPS, and how long all of them were running at once over `seconds`. */
async function fmaTogether(threads: number, seconds: number): Promise<{ gflops: number; overlap: number }> {
  const path = addonPath(SPEC)!;
  const go = new Int32Array(new SharedArrayBuffer(8)); // [ready count, start flag]
  const code = `const { workerData: w, parentPort } = require('node:worker_threads');
    const m = require(w.path); m.fmaPeak(0, 0.02);
    Atomics.add(w.go, 0, 1); Atomics.notify(w.go, 0); Atomics.wait(w.go, 1, 0);
    const start = performance.timeOrigin + performance.now(), gflops = m.fmaPeak(0, w.seconds).sustainedGflops;
    parentPort.postMessage({ gflops, start, end: performance.timeOrigin + performance.now() });`;
  const workers = Array.from(
    { length: threads },
    () => new Worker(code, { eval: true, workerData: { path, go, seconds } }),
  );
  try {
    const results = workers.map(
      (w) =>
        new Promise<{ gflops: number; start: number; end: number }>((resolve, reject) => {
          w.once('message', resolve);
          w.once('error', reject);
        }),
    );
    // start them together, once every one has loaded the probe and warmed up
    while (Atomics.load(go, 0) < threads) await new Promise((r) => setTimeout(r, 1));
    Atomics.store(go, 1, 1);
    Atomics.notify(go, 1);
    const runs = await Promise.all(results);
    const together = Math.min(...runs.map((r) => r.end)) - Math.max(...runs.map((r) => r.start));
    return {
      gflops: runs.reduce((a, r) => a + r.gflops, 0),
      overlap: Math.min(1, Math.max(0, together) / (seconds * 1000)),
    };
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

/**
 * The host's scaling of the widest FMA loop to `cores` threads at once: their summed sustained
 * GFLOPS over one thread's alone, each run `seconds` (one alone first, then all together), and the
 * share of `seconds` in which all of them ran at once (near 1: they did overlap). Null when the
 * probe is not built.
 */
export async function coreScaling(
  cores: number,
  seconds: number,
): Promise<{ one: number; together: number; scaling: number; overlap: number } | null> {
  if (!machinePeak()) return null;
  const one = (await fmaTogether(1, seconds)).gflops,
    { gflops: together, overlap } = await fmaTogether(cores, seconds);
  return { one, together, scaling: together / one, overlap };
}

/** One line for the top of a benchmark's output. */
export function peakLine(): string {
  const p = machinePeak();
  if (!p) return `FMA peak: not measured (${peakUnavailableReason()})`;
  const kind = (f: FmaPeak) => `${f.bits}-bit${f.fma ? ' FMA' : ' mul+add'}`;
  return (
    `FMA peak, one core (measured): ${p.widest.gflops.toFixed(0)} GFLOPS with ${kind(p.widest)}${p.avx2 ? ` (${p.avx2.gflops.toFixed(0)} with 256-bit)` : ''}, ` +
    `${p.simd128.gflops.toFixed(0)} with ${kind(p.simd128)} (WebAssembly SIMD's width)`
  );
}

/** `gflops` as a percentage of the widest-vector peak ('' when it was not measured). */
export function ofPeak(gflops: number): string {
  const p = machinePeak();
  return p ? `${((100 * gflops) / p.widest.gflops).toFixed(0)}%` : '';
}
