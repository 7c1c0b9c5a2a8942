import type { BufferPool } from './layer.ts';

/**
 * copyRows starts between frames [N, T, parts·D] (each frame's parts side by side, each part its
 * heads side by side: PyTorch's in_proj output q | k | v) and head-major [parts, N, heads, T, headDim]:
 * row r, `headDim` wide, goes from `frames[r]` to `heads[r]` (and back for the reverse copy).
 */
export class HeadRows {
  private key = '';
  private frameStarts: Int32Array = new Int32Array(0);
  private headStarts: Int32Array = new Int32Array(0);

  constructor(
    private readonly pool: BufferPool,
    private readonly name: string,
    private readonly parts: number,
    private readonly heads: number,
    private readonly headDim: number,
  ) {}

  /** The starts for a batch of N samples of T frames (rebuilt only when N or T changes). */
  starts(N: number, T: number): { frames: Int32Array; heads: Int32Array; count: number } {
    const { parts, heads: H, headDim: dh } = this;
    const count = parts * N * H * T;
    if (this.key !== `${N}×${T}`) {
      this.key = `${N}×${T}`;
      this.frameStarts = this.pool.i32(`${this.name}Frames`, count);
      this.headStarts = this.pool.i32(`${this.name}Heads`, count);
      const D = H * dh;
      let r = 0;
      for (let p = 0; p < parts; p++)
        for (let n = 0; n < N; n++)
          for (let h = 0; h < H; h++)
            for (let t = 0; t < T; t++, r++) {
              this.frameStarts[r] = (n * T + t) * parts * D + p * D + h * dh;
              this.headStarts[r] = r * dh;
            }
    }
    return { frames: this.frameStarts, heads: this.headStarts, count };
  }
}
