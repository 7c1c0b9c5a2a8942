import { philox4x32 } from '../../tensor/rng.ts';

const TO_UNIT = 1 / 4294967296;

/**
 * Inverted dropout over n elements: draw i is number counter + i of the Philox4x32-10 stream keyed
 * (k0, k1) (src/tensor/rng.ts: CounterRng.at), mask[i] = scale where draw < keep, else 0, and
 * y[i] = x[i]·mask[i] (the product in float64, rounded once). The wasm kernel
 * (assembly/dropout.ts) draws the same numbers: the same masks.
 */
export function dropoutForward(
  k0: number,
  k1: number,
  counter: number,
  n: number,
  keep: number,
  scale: number,
  x: Float32Array,
  mask: Float32Array,
  y: Float32Array,
): void {
  const block = new Uint32Array(4);
  let blockIndex = -1;
  for (let j = 0; j < n; j++) {
    const i = counter + j,
      b = Math.floor(i / 4);
    if (b !== blockIndex) {
      philox4x32(b >>> 0, Math.floor(b / 4294967296) >>> 0, 0, 0, k0, k1, block);
      blockIndex = b;
    }
    const m = block[i & 3]! * TO_UNIT < keep ? scale : 0;
    mask[j] = m;
    y[j] = x[j]! * m;
  }
}

/** dx = dy·mask elementwise (dx overwritten; may be dy). */
export function dropoutBackward(dy: Float32Array, mask: Float32Array, dx: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) dx[i] = dy[i]! * mask[i]!;
}
