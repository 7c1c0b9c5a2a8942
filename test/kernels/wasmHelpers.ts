import assert from 'node:assert/strict';
import { assertClose } from '../util/close.ts';
import { createWasmBackend, type WasmBackend } from '../../src/kernels/wasm/index.ts';

/** The wasm backend, or a failing assertion that says how to build it. */
export async function wasmBackend(): Promise<WasmBackend> {
  const b = await createWasmBackend();
  assert.ok(
    b,
    'wasm backend unavailable: build/kernels.wasm is missing (run `npm run build:wasm`) or this Node lacks wasm SIMD',
  );
  return b;
}

/**
 * Where test arrays live: all in wasm memory (the copy-free hot path), all in plain JS memory
 * (every argument staged through copies), or alternating argument by argument.
 */
export type Placement = 'wasm' | 'js' | 'mixed';
export const PLACEMENTS: readonly Placement[] = ['wasm', 'js', 'mixed'];

export class Placer {
  private n = 0;
  constructor(
    private readonly b: WasmBackend,
    private readonly where: Placement,
  ) {}

  /** A copy of `a` placed per this placement. */
  f32(a: ArrayLike<number>): Float32Array {
    const inWasm = this.where === 'wasm' || (this.where === 'mixed' && this.n++ % 2 === 0);
    const out = inWasm ? this.b.alloc(a.length) : new Float32Array(a.length);
    out.set(a);
    return out;
  }

  i32(a: ArrayLike<number>): Int32Array {
    const inWasm = this.where === 'wasm' || (this.where === 'mixed' && this.n++ % 2 === 0);
    const out = inWasm ? this.b.allocInt32(a.length) : new Int32Array(a.length);
    out.set(a);
    return out;
  }
}

/** assertClose, except that NaN must meet NaN at the same positions. */
export function assertCloseNaN(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  opts: { rtol?: number; atol?: number; what?: string } = {},
): void {
  const a = Float64Array.from(actual),
    e = Float64Array.from(expected);
  for (let i = 0; i < e.length; i++) {
    if (Number.isNaN(e[i]) || Number.isNaN(a[i])) {
      assert.ok(
        Number.isNaN(e[i]) && Number.isNaN(a[i]),
        `${opts.what ?? 'values'}[${i}]: got ${a[i]}, expected ${e[i]}`,
      );
      a[i] = e[i] = 0;
    }
  }
  assertClose(a, e, opts);
}
