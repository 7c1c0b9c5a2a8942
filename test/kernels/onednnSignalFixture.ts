// Child side of onednn-signals.test.ts: oneDNN products in a loop (the recurrent step's padded-pack
// sgemm, an aliased gemm, a matmul primitive) while the parent sends SIGUSR2; prints what it did, then exits when its stdin closes.
import { tryBackend } from '../../src/kernels/index.ts';

const seconds = Number(process.argv[2] ?? 3);
const b = await tryBackend('onednn');
if (!b) throw new Error('no onednn backend in the child');
let signals = 0;
process.on('SIGUSR2', () => {
  signals++;
});
const N = 32,
  H = 512;
const W = b.alloc(4 * H * H).map((_, i) => Math.sin(i)),
  h = b.alloc(N * H).fill(0.5),
  C = b.alloc(800 * 4 * H);
const A = b.alloc(800 * 512).fill(0.1);
const P = b.packB(true, H, 4 * H, W);
console.log('ready');
let passes = 0;
const t0 = performance.now();
while (performance.now() - t0 < seconds * 1000) {
  for (let t = 0; t < 10; t++) b.gemmPacked(false, N, 4 * H, H, 1, h, P, 1, C, 0, t * N * 4 * H);
  b.gemm(false, false, 800, 512, 512, 1, A, W, 0, C); // B's rows 512 floats apart: padded, sgemm
  b.gemm(false, true, 100, 4 * H, 512, 1, A, W, 0, C); // the matmul primitive
  passes++;
  if (passes % 20 === 0) await new Promise((resolve) => setImmediate(resolve)); // the handler runs
}
console.log(JSON.stringify({ passes, signals }));
// exit once the parent has stopped sending (it closes stdin): a signal during exit would find no handler
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
