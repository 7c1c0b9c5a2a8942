import { createOneDnnBackend } from '../src/kernels/onednn/index.ts';
import { createWasmBackend } from '../src/kernels/wasm/index.ts';
const g = { N: 64, H: 26, W: 26, C: 32, KH: 2, KW: 2, strideH: 2, strideW: 2, padTop: 0, padLeft: 0, OH: 13, OW: 13 };
for (const b of [await createOneDnnBackend(), await createWasmBackend()]) {
  const x = b!.alloc(64 * 26 * 26 * 32), y = b!.alloc(64 * 13 * 13 * 32), am = b!.allocInt32(64 * 13 * 13 * 32), dx = b!.alloc(64*26*26*32);
  for (let i = 0; i < x.length; i++) x[i] = Math.sin(i);
  const time = (fn: () => void) => { for (let i = 0; i < 20; i++) fn(); const ts = []; for (let r = 0; r < 50; r++) { const t = performance.now(); fn(); ts.push(performance.now() - t); } ts.sort((a, c) => a - c); return ts[25]!.toFixed(3); };
  console.log(b!.name, 'maxPoolForward ms', time(() => b!.maxPoolForward(x, y, am, g)), 'backward ms', time(() => b!.maxPoolBackward(y, am, dx, g)),
    'relu fwd', time(() => b!.activationForward('relu', x, x)));
  if ('stats' in b!) console.log(JSON.stringify((b as any).stats().maxPoolForward), JSON.stringify((b as any).stats().maxPoolBackward));
}
